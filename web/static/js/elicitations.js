// elicitations.js is an elicitation's card: the agent's question as a form
// built from its requested schema (a label per field, from the field's
// title or else its name), or the address it asks the user to open, with
// the buttons Submit, Decline and Cancel.

import { h, token } from './dom.js';

// elicitationCard returns {node, resolve(data)}; answer(body) is called
// with {action, content?} and resolves when the daemon has the answer
// (a 400 names the field the agent's schema refuses).
export function elicitationCard(e, answer) {
  const status = h('p', { class: 'elic-status', role: 'status' });
  const schema = (e.requested_schema && typeof e.requested_schema === 'object') ? e.requested_schema : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const props = (schema.properties && typeof schema.properties === 'object') ? schema.properties : {};
  const fields = e.mode === 'url' ? [] : Object.keys(props).sort().map((name) => field(e.id, name, props[name] || {}, required.has(name)));

  const buttons = [];
  const button = (text, cls, action) => {
    const b = h('button', { type: action === 'accept' ? 'submit' : 'button', class: cls, text,
      onclick: action === 'accept' ? null : () => send({ action }) });
    buttons.push(b);
    return b;
  };
  const form = h('form', { class: 'elic-form', novalidate: true,
    onsubmit: (ev) => {
      ev.preventDefault();
      const content = {};
      for (const f of fields) {
        const v = f.value();
        if (v !== undefined) content[f.name] = v;
      }
      send(e.mode === 'url' ? { action: 'accept' } : { action: 'accept', content });
    } },
    e.mode === 'url'
      ? h('p', {}, 'Open ', h('a', { href: safeURL(e.url), target: '_blank', rel: 'noopener noreferrer', text: e.url || '' }),
        ', then press Submit.')
      : fields.map((f) => f.node),
    h('div', { class: 'elic-actions' },
      button('Submit', 'primary', 'accept'), button('Decline', '', 'decline'), button('Cancel', '', 'cancel')));

  const node = h('div', { class: `elic-card mode-${token(e.mode)}`, role: 'group', 'aria-label': `Question: ${e.message || e.id}` },
    h('strong', { class: 'elic-message', text: e.message || 'The agent asks' }),
    form,
    status);
  if (e.state && e.state !== 'pending') resolve({ action: e.action, decided_by: e.decided_by });

  // send posts an answer, keeping the form usable when it is refused.
  async function send(body) {
    buttons.forEach((b) => { b.disabled = true; });
    status.textContent = '';
    try {
      await answer(body);
    } catch (err) {
      status.textContent = err.message;
      status.setAttribute('role', 'alert');
      if (err.status !== 409) buttons.forEach((b) => { b.disabled = false; });
    }
  }

  // resolve shows the answer and retires the form.
  function resolve(d) {
    buttons.forEach((b) => { b.disabled = true; });
    form.querySelectorAll('input, select').forEach((i) => { i.disabled = true; });
    node.classList.add('decided');
    status.setAttribute('role', 'status');
    const what = { accept: 'Answered', decline: 'Declined', cancel: 'Cancelled' }[d.action] || (d.action || 'Resolved');
    status.textContent = `${what} (by ${d.decided_by || '?'})`;
  }
  return { node, resolve };
}

// field builds one form field: {name, node, value()}; value() is undefined
// for a field left empty (so an optional one is left out).
function field(eid, name, p, required) {
  const id = `elic-${eid}-${name}`.replace(/[^A-Za-z0-9_-]/g, '_');
  const label = (typeof p.title === 'string' && p.title) ? p.title : name;
  const options = enumOf(p);
  let input;
  let value;
  if (p.type === 'boolean') {
    input = h('input', { type: 'checkbox', id, checked: p.default === true });
    value = () => input.checked;
  } else if (p.type === 'array') {
    const items = enumOf(p.items || {});
    input = h('select', { id, multiple: true }, items.map((o) => h('option', { value: o.value, text: o.label })));
    value = () => Array.from(input.selectedOptions).map((o) => o.value);
  } else if (options.length) {
    input = h('select', { id, required }, h('option', { value: '', text: '—' }),
      options.map((o) => h('option', { value: o.value, text: o.label })));
    value = () => (input.value === '' ? undefined : input.value);
  } else if (p.type === 'number' || p.type === 'integer') {
    input = h('input', { type: 'number', id, required, step: p.type === 'integer' ? '1' : 'any' });
    value = () => (input.value === '' ? undefined : Number(input.value));
  } else {
    const type = { email: 'email', uri: 'url', date: 'date' }[p.format] || 'text';
    input = h('input', { type, id, required, autocomplete: 'off' });
    value = () => (input.value === '' ? undefined : input.value);
  }
  const node = h('div', { class: 'elic-field' },
    h('label', { for: id, class: required ? 'required' : null, text: label }),
    typeof p.description === 'string' && p.description ? h('small', { class: 'muted', text: p.description }) : null,
    input);
  return { name, node, value };
}

// enumOf lists a field's choices: enum values, or oneOf/anyOf consts with
// their titles.
function enumOf(p) {
  if (Array.isArray(p.enum)) return p.enum.filter((v) => typeof v === 'string').map((v) => ({ value: v, label: v }));
  const alts = Array.isArray(p.oneOf) ? p.oneOf : (Array.isArray(p.anyOf) ? p.anyOf : []);
  return alts.filter((o) => o && typeof o.const === 'string').map((o) => ({ value: o.const, label: o.title || o.const }));
}

// safeURL lets only http and https addresses become a link.
function safeURL(u) {
  try {
    const url = new URL(u);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : '#';
  } catch {
    return '#';
  }
}

// credentials.js is the Credentials screen (/credentials; docs/api.md,
// Credentials): the credentials the model gateway gives upstream, listed
// by name, kind and last use, set from a form and removed per row. A
// value goes from its field into one PUT and is cleared from the field at
// once: it is never put into the page, and the API never answers with it.
// ?name=NAME prefills the name (the session header links here so).

import { api } from './api.js';
import { h, clear, ago } from './dom.js';

// KINDS are the kinds a credential may be set as ('' lets the daemon tell
// an OAuth token from an API key by its form).
const KINDS = [['', 'detect'], ['api_key', 'API key'], ['oauth_token', 'OAuth token']];

// mount shows the screen in main and returns its unmount.
export function mount(main) {
  document.title = 'Credentials · berth';
  const status = h('p', { class: 'error', role: 'alert' });
  const notice = h('p', { class: 'notice', role: 'status' });
  const body = h('tbody');
  const name = h('input', { id: 'cr-name', name: 'name', required: true, autocomplete: 'off', spellcheck: 'false',
    value: new URLSearchParams(window.location.search).get('name') || '' });
  const value = h('input', { id: 'cr-value', name: 'value', type: 'password', required: true, autocomplete: 'off' });
  const kind = h('select', { id: 'cr-kind', name: 'kind' }, KINDS.map(([v, t]) => h('option', { value: v, text: t })));
  const save = h('button', { type: 'submit', class: 'primary', text: 'Save credential' });
  const field = (id, label, input) => h('div', { class: 'field' }, h('label', { for: id, text: label }), input);

  main.append(
    h('nav', { class: 'crumbs' }, h('a', { href: '/', text: '← Sessions' })),
    h('div', { class: 'bar' }, h('h1', { text: 'Credentials' })),
    h('p', { class: 'muted', text: 'Keys the model gateway sends upstream for the agents; no agent ever holds one. A value is written, never shown again.' }),
    status,
    h('table', { class: 'sessions credentials' },
      h('thead', {}, h('tr', {}, ['Name', 'Kind', 'Last used', ''].map((c) => h('th', { scope: 'col', text: c })))),
      body),
    h('form', { class: 'panel credential-form', 'aria-labelledby': 'cr-title', onsubmit: submit },
      h('h2', { id: 'cr-title', text: 'Set a credential' }),
      field('cr-name', 'Credential name', name),
      field('cr-value', 'Value', value),
      field('cr-kind', 'Kind', kind),
      h('div', { class: 'actions' }, save),
      notice));

  // submit sets the credential; the value leaves the field whatever the
  // answer, so it is never left in the page.
  async function submit(e) {
    e.preventDefault();
    status.textContent = '';
    notice.textContent = '';
    const n = name.value.trim();
    const req = { value: value.value };
    value.value = '';
    if (kind.value) req.kind = kind.value;
    save.disabled = true;
    try {
      const c = await api('PUT', `/v1/credentials/${encodeURIComponent(n)}`, req);
      notice.textContent = `Saved ${c.name}.`;
      await load();
    } catch (err) {
      status.textContent = err.message;
    } finally {
      save.disabled = false;
    }
  }

  // remove deletes the credential named n.
  async function remove(btn, n) {
    btn.disabled = true;
    status.textContent = '';
    notice.textContent = '';
    try {
      await api('DELETE', `/v1/credentials/${encodeURIComponent(n)}`);
      notice.textContent = `Removed ${n}.`;
      await load();
    } catch (err) {
      status.textContent = err.message;
      btn.disabled = false;
    }
  }

  // load lists the credentials.
  async function load() {
    let r;
    try {
      r = await api('GET', '/v1/credentials');
    } catch (err) {
      status.textContent = err.message;
      return;
    }
    const list = r.credentials || [];
    clear(body);
    if (!list.length) body.append(h('tr', {}, h('td', { colspan: 4, class: 'muted', text: 'No credentials set.' })));
    for (const c of list) {
      const cell = (label, ...content) => h('td', { 'data-label': label }, ...content);
      body.append(h('tr', { 'data-name': c.name },
        cell('Name', h('span', { class: 'path', text: c.name })),
        cell('Kind', c.kind),
        cell('Last used', c.last_used_at
          ? h('time', { datetime: c.last_used_at, title: c.last_used_at, text: ago(c.last_used_at) })
          : h('span', { class: 'muted', text: 'never' })),
        cell('', h('button', { type: 'button', class: 'danger', text: 'Remove', 'aria-label': `Remove ${c.name}`,
          onclick: (e) => remove(e.currentTarget, c.name) }))));
    }
  }

  load();
  if (name.value) value.focus(); else name.focus();
  return null;
}

// dom.js builds DOM nodes. Text always goes in as text nodes, never as
// HTML: nothing here parses markup, so no string from the API can become
// an element or a script.

// h creates an element. attrs: "class", "text" (textContent), "on<event>"
// (listeners), anything else via setAttribute; children: nodes or strings
// (as text), null and false skipped, arrays flattened.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

// token makes an agent-chosen word (a kind, a status) safe to use in a
// class name: only [a-z_] passes, anything else is "other", so an agent
// cannot add a class of the page's own (primary, danger…) to a control.
export function token(v) {
  return typeof v === 'string' && /^[a-z_]{1,32}$/.test(v) ? v : 'other';
}

// append adds children (nodes, strings as text, nested arrays) to el.
export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// clear removes every child of el.
export function clear(el) {
  el.replaceChildren();
  return el;
}

// ago says how long ago an RFC 3339 time was, for humans.
export function ago(iso) {
  if (!iso) return '';
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (Number.isNaN(s)) return '';
  if (s < 5) return 'just now';
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

// badge renders a session's badge as a coloured word.
export function badge(word) {
  return h('span', { class: `badge badge-${word || 'unknown'}`, text: word || '?' });
}

// runner returns run(btn, fn), which runs the action fn with btn disabled
// meanwhile: fn's error is shown in status, and after it succeeds done is
// called.
export function runner(status, done) {
  return async (btn, fn) => {
    btn.disabled = true;
    status.textContent = '';
    try {
      await fn();
      done();
    } catch (err) {
      status.textContent = err.message;
    } finally {
      btn.disabled = false;
    }
  };
}

// shown returns what fn resolves to, or undefined when it fails, its
// error then shown in status.
export async function shown(status, fn) {
  try {
    return await fn();
  } catch (err) {
    status.textContent = err.message;
    return undefined;
  }
}

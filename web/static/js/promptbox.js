// promptbox.js is the prompt box: Send (or Enter, as in chat apps;
// Shift+Enter adds a line) queues behind a busy turn (or starts one), Steer
// stages text for the turn in flight, Interrupt cancels it and the queue
// and starts this text. Attached files go with the text as prompt content:
// images as image blocks, other files as embedded resources (the agent
// must take them: the daemon says when it does not). The buttons are
// disabled while the session cannot take a prompt (setState).

import { api, sessionPath } from './api.js';
import { h } from './dom.js';

// HINT is what the box says about its keys.
const HINT = 'Enter sends · Shift+Enter adds a line';

// create builds the box for session id; hooks.onSent runs after a prompt
// is accepted. Its slot takes the agent's controls (session.js).
export function create(id, hooks) {
  const text = h('textarea', { id: 'prompt', name: 'prompt', rows: 2, placeholder: 'Message the agent', 'aria-describedby': 'prompt-hint' });
  const status = h('p', { class: 'muted small', role: 'status' });
  const hint = h('span', { id: 'prompt-hint', class: 'muted small hint', text: HINT });
  // The file input hides behind its label, drawn as a button; the files
  // chosen are named beside it.
  const files = h('input', { id: 'attach', name: 'attach', type: 'file', multiple: true, class: 'visually-hidden' });
  const chosen = h('span', { class: 'muted small chosen' });
  files.addEventListener('change', () => { chosen.textContent = [...files.files].map((f) => f.name).join(', '); });
  // The buttons wait for the session's state (setState).
  const sendBtn = h('button', { type: 'submit', class: 'primary', text: 'Send', disabled: true });
  const steerBtn = h('button', { type: 'button', text: 'Steer', disabled: true, title: 'Deliver this to the turn in flight at its next tool call', onclick: () => send('steer') });
  const interruptBtn = h('button', { type: 'button', class: 'danger', text: 'Interrupt', disabled: true, title: 'Cancel the turn in flight and the queue, then send this', onclick: () => send('interrupt') });
  const slot = h('div', { class: 'composer-controls' });
  const send = async (mode) => {
    if (sendBtn.disabled) return;
    const attached = [...files.files];
    if (!text.value.trim() && attached.length === 0) { status.textContent = 'Type a prompt first.'; return; }
    const sent = text.value;
    try {
      let body = { text: sent, mode };
      if (attached.length > 0) {
        const content = sent.trim() ? [{ type: 'text', text: sent }] : [];
        for (const f of attached) content.push(await blockOf(f));
        body = { content, mode };
      }
      const r = await api('POST', sessionPath(id, '/prompts'), body);
      // What the user typed meanwhile stays.
      if (text.value === sent) text.value = '';
      if (attached.length > 0) {
        files.value = '';
        chosen.textContent = '';
      }
      status.textContent = describe(r);
      hooks.onSent();
    } catch (e) {
      status.textContent = e.message;
    }
  };
  text.addEventListener('keydown', (e) => {
    // An IME's Enter picks a word; it sends nothing (keyCode 229 is the
    // composing key of browsers that end composition first).
    if (e.key !== 'Enter' || e.shiftKey || e.isComposing || e.keyCode === 229) return;
    e.preventDefault();
    send('queue');
  });
  // What a sent prompt became is said until the next one is typed.
  text.addEventListener('input', () => { status.textContent = ''; });
  const element = h('form', { class: 'prompt-box', onsubmit: (e) => { e.preventDefault(); send('queue'); } },
    h('label', { for: 'prompt', class: 'visually-hidden', text: 'Prompt' }),
    h('div', { class: 'composer' }, text, sendBtn),
    h('div', { class: 'composer-bar' },
      h('div', { class: 'attach' }, files, h('label', { for: 'attach', class: 'button', text: 'Attach files' }), chosen),
      slot,
      h('div', { class: 'actions' }, steerBtn, interruptBtn),
      hint),
    status);
  return {
    element,
    slot,
    // setState enables the buttons while session s can take a prompt
    // (starting or active), and says why not otherwise.
    setState(s) {
      const off = !s || !['starting', 'active'].includes(s.state);
      [sendBtn, steerBtn, interruptBtn].forEach((b) => { b.disabled = off; });
      hint.textContent = !s ? 'This session was deleted.' : off ? 'Resume the session to send.' : HINT;
    },
  };
}

// describe says what happened to a sent prompt.
function describe(r) {
  switch (r.status) {
    case 'queued': return `Queued at position ${r.position}.`;
    case 'staged': return 'Staged: delivered at the next tool call.';
    // A prompt that started shows as the conversation's next message.
    case 'started': return r.interrupted_turn_id ? 'Interrupted the turn.' : '';
    default: return r.status || '';
  }
}

// blockOf reads a chosen file into a content block: an image, else an
// embedded resource with its text (UTF-8) or its bytes (base64).
async function blockOf(file) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  if (file.type.startsWith('image/')) return { type: 'image', mime_type: file.type, data: base64(bytes) };
  const block = { type: 'resource', uri: `attachment:///${encodeURIComponent(file.name)}` };
  if (file.type) block.mime_type = file.type;
  try {
    block.text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    block.blob = base64(bytes);
  }
  return block;
}

// base64 encodes bytes, a slice at a time (fromCharCode takes bounded arguments).
function base64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

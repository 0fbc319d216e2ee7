// promptbox.js is the prompt box: Send queues behind a busy turn (or
// starts one), Steer stages text for the turn in flight, Interrupt cancels
// it and the queue and starts this text. Attached files go with the text
// as prompt content: images as image blocks, other files as embedded
// resources (the agent must take them: the daemon says when it does not).

import { api, sessionPath } from './api.js';
import { h } from './dom.js';

// create builds the box for session id; hooks.onSent runs after a prompt
// is accepted.
export function create(id, hooks) {
  const text = h('textarea', { id: 'prompt', name: 'prompt', rows: 3, placeholder: 'Ctrl+Enter sends' });
  const status = h('p', { class: 'muted', role: 'status' });
  const files = h('input', { id: 'attach', name: 'attach', type: 'file', multiple: true });
  const send = async (mode) => {
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
      if (attached.length > 0) files.value = '';
      status.textContent = describe(r);
      hooks.onSent();
    } catch (e) {
      status.textContent = e.message;
    }
  };
  text.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); send('queue'); }
  });
  const element = h('form', { class: 'prompt-box', onsubmit: (e) => { e.preventDefault(); send('queue'); } },
    h('label', { for: 'prompt', text: 'Prompt' }),
    text,
    h('div', { class: 'attach' }, h('label', { for: 'attach', text: 'Attach files' }), files),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', class: 'primary', text: 'Send' }),
      h('button', { type: 'button', text: 'Steer', onclick: () => send('steer') }),
      h('button', { type: 'button', class: 'danger', text: 'Interrupt', onclick: () => send('interrupt') })),
    status);
  return { element };
}

// describe says what happened to a sent prompt.
function describe(r) {
  switch (r.status) {
    case 'queued': return `Queued at position ${r.position}.`;
    case 'staged': return 'Staged: delivered at the next tool call.';
    case 'started': return r.interrupted_turn_id ? 'Interrupted the turn; started.' : 'Started.';
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

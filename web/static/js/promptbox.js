// promptbox.js is the prompt box: Send queues behind a busy turn (or
// starts one), Steer stages text for the turn in flight, Interrupt cancels
// it and the queue and starts this text.

import { api, sessionPath } from './api.js';
import { h } from './dom.js';

// create builds the box for session id; hooks.onSent runs after a prompt
// is accepted.
export function create(id, hooks) {
  const text = h('textarea', { id: 'prompt', name: 'prompt', rows: 3, placeholder: 'Ctrl+Enter sends' });
  const status = h('p', { class: 'muted', role: 'status' });
  const send = async (mode) => {
    if (!text.value.trim()) { status.textContent = 'Type a prompt first.'; return; }
    const sent = text.value;
    try {
      const r = await api('POST', sessionPath(id, '/prompts'), { text: sent, mode });
      // What the user typed meanwhile stays.
      if (text.value === sent) text.value = '';
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

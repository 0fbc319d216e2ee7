// queue.js is a session's pending queue, each entry with a Drop button.

import { api, sessionPath } from './api.js';
import { h, shown } from './dom.js';

// create builds the queue panel of session id.
export function create(id) {
  const list = h('ol', { class: 'queue' });
  const status = h('p', { class: 'error', role: 'alert' });
  const empty = h('p', { class: 'muted', text: 'Nothing queued.' });
  const element = h('section', { class: 'panel', 'aria-labelledby': 'queue-title' },
    h('h2', { id: 'queue-title', text: 'Queue' }), list, empty, status);

  // refresh fetches the queue and shows its pending entries.
  async function refresh() {
    const r = await shown(status, () => api('GET', sessionPath(id, '/queue')));
    if (!r) return;
    status.textContent = '';
    const entries = (r.entries || []).filter((e) => e.state === 'pending' || e.state === 'staged');
    list.replaceChildren(...entries.map((e) => h('li', { 'data-entry': e.id },
      h('span', { class: 'tag', text: e.kind || 'queue' }), ' ',
      h('span', { class: 'q-text', text: e.text }), ' ',
      h('button', { type: 'button', text: 'Drop', title: 'Drop this queued prompt', onclick: async () => {
        await shown(status, () => api('DELETE', sessionPath(id, `/queue/${encodeURIComponent(e.id)}`)));
        refresh();
      } }))));
    empty.hidden = entries.length > 0;
  }
  return { element, refresh };
}

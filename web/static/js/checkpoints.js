// checkpoints.js is a session's checkpoints (docs/api.md, "Checkpoints, rewind
// and fork"): the workspace as it was before each turn, newest first, each with
// Rewind (restore the workspace to it, asked twice: it removes work) and Fork
// (a new session from it, opened once made).

import { api, sessionPath } from './api.js';
import { h, shown } from './dom.js';

// BYTES formats sizes.
const BYTES = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });

// size is a byte count for humans.
function size(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${BYTES.format(n / 1024)} KiB`;
  return `${BYTES.format(n / 1024 / 1024)} MiB`;
}

// firstLine is the first line of a prompt, cut at 40 characters.
function firstLine(text) {
  const line = text.split('\n')[0];
  return line.length > 40 ? `${line.slice(0, 40)}…` : line;
}

// create builds the checkpoints panel of session id; hooks.promptOf(turnId)
// is the prompt of a turn the page has shown, so a checkpoint is found by
// what was asked.
export function create(id, hooks = {}) {
  const list = h('ol', { class: 'checkpoints', reversed: true });
  const status = h('p', { class: 'error', role: 'alert' });
  const done = h('p', { class: 'muted', role: 'status' });
  const empty = h('p', { class: 'muted', text: 'No checkpoints yet: one is taken before each turn.' });
  const element = h('section', { class: 'panel', 'aria-labelledby': 'checkpoints-title' },
    h('h2', { id: 'checkpoints-title', text: 'Checkpoints' }), list, empty, done, status);

  // act runs one action, showing its error.
  async function act(fn) {
    status.textContent = '';
    await shown(status, fn);
  }

  // item is one checkpoint's row; n is its turn's number (1 = first).
  function item(c, n) {
    const rewind = h('button', { type: 'button', text: 'Rewind', 'aria-label': `Rewind to before turn ${n}`,
      title: 'Restore the workspace to how it was before this turn' });
    rewind.addEventListener('click', () => {
      if (rewind.dataset.confirm !== 'yes') {
        rewind.dataset.confirm = 'yes';
        rewind.textContent = 'Confirm rewind';
        rewind.setAttribute('aria-label', `Confirm rewind to before turn ${n}`);
        return;
      }
      act(async () => {
        await api('POST', sessionPath(id, '/rewind'), { checkpoint_id: c.id });
        done.textContent = `Workspace rewound to before turn ${n}.`;
        refresh();
      });
    });
    const fork = h('button', { type: 'button', text: 'Fork', 'aria-label': `Fork from before turn ${n}`,
      title: 'Start a new session from the workspace and conversation before this turn',
      onclick: () => act(async () => {
        const s = await api('POST', sessionPath(id, '/fork'), { checkpoint_id: c.id });
        window.location.assign(`/sessions/${encodeURIComponent(s.id)}`);
      }) });
    const skipped = c.skipped_total ? `, ${c.skipped_total} skipped` : '';
    const why = (c.skipped || []).map((s) => `${s.path} (${s.reason})`).join('\n');
    const prompt = h('span', { class: 'ck-prompt' });
    name(prompt, c.turn_id);
    return h('li', { 'data-checkpoint': c.id },
      h('div', { class: 'ck-what' }, h('strong', { text: `Before turn ${n}` }), prompt),
      h('div', { class: 'ck-actions' },
        h('span', { class: 'muted small', title: why || null, text: `${c.files} ${c.files === 1 ? 'file' : 'files'}, ${size(c.bytes)}${skipped}` }),
        rewind, fork));
  }

  // name shows in span the prompt of turn, when the page knows it.
  function name(span, turn) {
    const prompt = hooks.promptOf ? hooks.promptOf(turn) : '';
    span.dataset.turn = turn;
    span.title = prompt;
    span.textContent = prompt ? ` “${firstLine(prompt)}”` : '';
  }

  // named shows the prompts the page has learnt since the list was drawn,
  // leaving the rows (and a rewind being confirmed) as they are.
  function named() {
    list.querySelectorAll('.ck-prompt').forEach((span) => name(span, span.dataset.turn));
  }

  // refresh fetches the checkpoints and lists them, newest first.
  async function refresh() {
    const r = await shown(status, () => api('GET', sessionPath(id, '/checkpoints')));
    if (!r) return;
    const all = r.checkpoints || [];
    list.replaceChildren(...all.map((c, i) => item(c, i + 1)).reverse());
    empty.hidden = all.length > 0;
  }
  return { element, refresh, named };
}

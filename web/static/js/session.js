// session.js is a session's screen (/sessions/{id}): its header and
// actions, the live transcript (the log replayed in pages, then followed
// with the session's SSE stream from the last seq shown), the prompt box,
// the pending queue and the exec console.
//
// The agent's controls (mode/model/config pickers, commands: controls.js)
// mount under the prompt box; checkpoints, with rewind and fork, are a side
// panel (checkpoints.js); a fork's page starts with where it came from and
// the conversation it carries (fork.js). The transcript reads as a
// conversation; `Show details` adds the machinery (times, raw JSON,
// checkpoints, turn ends, starts).

import { api, sessionPath } from './api.js';
import { h } from './dom.js';
import { follow } from './livestream.js';
import { Transcript } from './transcript.js';
import * as header from './header.js';
import * as promptbox from './promptbox.js';
import * as queue from './queue.js';
import * as execConsole from './exec.js';
import * as agentControls from './controls.js';
import * as conversation from './conversation.js';
import * as checkpoints from './checkpoints.js';
import * as forkOrigin from './fork.js';

// PAGE is how many events one replay request asks for (the API's max).
const PAGE = 1000;
// PARALLEL is how many replay pages are in flight at once.
const PARALLEL = 6;
// SLICE is how long (ms) replay renders before it lets the browser paint
// and handle input.
const SLICE = 50;

// STREAM_TYPES are the event types the screen listens for on the stream
// (EventSource hands named events only to listeners of that name): every
// type of the log (eventkind.go; web/eventkinds_test.go checks the list).
const STREAM_TYPES = ['session_created', 'session_started', 'session_stopped', 'turn_started', 'conversation_cleared',
  'agent_message', 'agent_thought', 'user_message', 'tool_call', 'tool_call_update', 'plan', 'usage', 'mode_update',
  'config_update', 'commands_update', 'turn_ended', 'prompt_queued', 'prompt_canceled', 'prompt_steered',
  'permission_requested', 'permission_resolved', 'elicitation_requested', 'elicitation_resolved', 'file_read',
  'file_written', 'file_refused', 'terminal_started', 'terminal_exited', 'model_call', 'budget_exceeded', 'network_denied', 'exec',
  'agent_fetch', 'runtime_warning', 'runtime_recovered',
  'agent_stderr', 'child_started', 'child_stopped', 'checkpoint_created', 'workspace_rewound', 'checkpoint_pruned',
  'acp_unknown'];

// REFRESH_ON are the event types after which the header and queue are
// fetched again (state, badge, queue, permissions and spend change with
// them).
const REFRESH_ON = new Set(['session_started', 'session_stopped', 'turn_started', 'turn_ended', 'prompt_queued',
  'prompt_canceled', 'prompt_steered', 'permission_requested', 'permission_resolved', 'mode_update', 'config_update',
  'commands_update', 'acp_unknown', 'conversation_cleared',
  'runtime_warning', 'elicitation_requested', 'elicitation_resolved', 'budget_exceeded', 'model_call']);

// CHECKPOINT_ON are the event types after which the checkpoints are
// fetched again.
const CHECKPOINT_ON = new Set(['checkpoint_created', 'workspace_rewound', 'checkpoint_pruned']);

// mount shows session id in main and returns its unmount.
export function mount(main, id) {
  const log = h('section', { class: 'transcript', role: 'log', 'aria-label': 'Transcript' });
  const loading = h('p', { class: 'muted', role: 'status', text: 'Loading the transcript…' });
  const head = header.create(id, { onChange: refresh });
  const conv = conversation.create(id, { onChange: refresh });
  head.slot.append(conv.element);
  const q = queue.create(id);
  const box = promptbox.create(id, { onSent: refresh });
  const ex = execConsole.create(id);
  const ctl = agentControls.create(id, { onChange: refresh, prompt: box.element.querySelector('textarea') });
  box.slot.append(ctl.element);
  const cps = checkpoints.create(id, { promptOf: (turn) => t.promptOf(turn) });
  const t = new Transcript(log, {
    decide: (p, optionId) => api('POST', sessionPath(id, `/permissions/${encodeURIComponent(p.id)}`), { option_id: optionId }),
    answer: (q, body) => api('POST', sessionPath(id, `/elicitations/${encodeURIComponent(q.id)}`), body),
    usage: (d) => head.setUsage(d),
  });
  const carried = h('div', { class: 'carried-slot' });
  const root = h('div', { class: 'session' });
  const details = h('input', { type: 'checkbox', id: 'show-details', onchange: () => root.classList.toggle('show-details', details.checked) });
  root.append(
    head.element,
    h('div', { class: 'session-body' },
      h('div', { class: 'session-main' },
        h('div', { class: 'transcript-bar' }, details, h('label', { for: 'show-details', text: 'Show details' })),
        carried, log, loading, box.element),
      h('aside', { class: 'session-side' }, q.element, cps.element, ex.element)));
  main.append(root);

  // show shows session s in every part that depends on it.
  function show(s) {
    head.update(s);
    ctl.update(s);
    conv.update(s);
    box.setState(s);
    ex.setState(s);
  }

  let stopFollowing = () => {};
  let closed = false;
  let pending = [];
  let flushTimer = null;
  let refreshTimer = null;

  // refresh fetches the session and its queue again, a moment after the
  // last call (events come in bursts).
  function refresh() {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(() => {
      load();
      q.refresh();
    }, 100);
  }

  // load fetches the session and shows it (a 401 opens the sign-in).
  async function load() {
    try {
      show(await api('GET', sessionPath(id)));
    } catch (e) {
      if (e.status === 404) {
        // Deleted elsewhere: nothing here acts on it any more.
        head.gone();
        box.setState(null);
        ex.setState(null);
      }
      // An unreachable daemon is said by the stream's state.
      if (e.status !== 0) head.error(e);
    }
  }

  // take queues streamed events and renders them in one batch.
  function take(ev) {
    pending.push(ev);
    if (REFRESH_ON.has(ev.type)) refresh();
    if (CHECKPOINT_ON.has(ev.type)) cps.refresh();
    if (flushTimer) return;
    flushTimer = setTimeout(() => {
      flushTimer = null;
      const batch = pending;
      pending = [];
      const stick = nearBottom();
      t.add(batch, stick);
      if (stick) scrollToEnd();
    }, 16);
  }

  (async () => {
    let s;
    try {
      s = await api('GET', sessionPath(id));
    } catch (e) {
      loading.textContent = e.status === 404 ? 'No such session.' : e.message;
      return;
    }
    show(s);
    q.refresh();
    cps.refresh();
    if (s.forked_from) {
      const fork = forkOrigin.create(s);
      carried.append(fork.element);
      fork.load();
    }
    await replay(id, s.last_seq, t, () => closed);
    loading.remove();
    // The checkpoints name their turns' prompts, known now.
    cps.named();
    scrollToEnd();
    if (closed) return;
    const on = Object.fromEntries(STREAM_TYPES.map((type) => [type, take]));
    stopFollowing = follow(() => `${sessionPath(id, '/events/stream')}?after=${t.lastSeq}`, on,
      (open) => head.setLive(open), load);
  })();

  return () => {
    closed = true;
    stopFollowing();
    clearTimeout(flushTimer);
    clearTimeout(refreshTimer);
  };
}

// replay records the log up to lastSeq in pages fetched a few at a time,
// yielding to the browser every SLICE ms so a long log never freezes it,
// then paints the newest entries once.
async function replay(id, lastSeq, t, isClosed) {
  const starts = [];
  for (let after = 0; after < lastSeq; after += PAGE) starts.push(after);
  const fetchPage = (after) => api('GET', `${sessionPath(id, '/events')}?after=${after}&limit=${PAGE}`);
  const inflight = starts.slice(0, PARALLEL).map(fetchPage);
  let sliceStart = performance.now();
  for (let i = 0; i < starts.length; i++) {
    if (isClosed()) return;
    if (i + PARALLEL < starts.length) inflight.push(fetchPage(starts[i + PARALLEL]));
    let page;
    try {
      page = await inflight[i];
    } catch {
      // The stream replays from the last seq shown: nothing is lost.
      break;
    }
    t.add(page.events || [], true, false);
    // A page ends early once its events' data reach the server's bound in
    // bytes: what it left before the next page is fetched now, in order.
    const until = i + 1 < starts.length ? starts[i + 1] : lastSeq;
    let cut = false;
    while (t.lastSeq < until && !isClosed()) {
      let gap;
      try {
        gap = await fetchPage(t.lastSeq);
      } catch {
        // As above: the stream replays the rest.
        cut = true;
        break;
      }
      if (!gap.events || gap.events.length === 0) break;
      t.add(gap.events, true, false);
    }
    if (cut) break;
    if (performance.now() - sliceStart > SLICE) {
      await new Promise((r) => setTimeout(r, 0));
      sliceStart = performance.now();
    }
  }
  t.add([]);
}

// nearBottom reports whether the page is scrolled to (about) its end.
function nearBottom() {
  const el = document.scrollingElement;
  return el.scrollHeight - el.scrollTop - el.clientHeight < 120;
}

// scrollToEnd scrolls to the newest entry.
function scrollToEnd() {
  const el = document.scrollingElement;
  el.scrollTop = el.scrollHeight;
}

// transcript.js turns a session's events into its transcript, in order and
// once each: an event whose seq is not past the last one shown is dropped,
// so a replayed page, a reconnected stream and a restarted daemon can
// overlap freely. Consecutive chunks (agent text, thoughts, stderr) join
// one block; tool calls are cards that their updates change in place.
// add() takes a batch and touches the page once for it.
//
// It reads as a conversation: the machinery (MACHINE: checkpoints, turn
// ends, starts, usage…) is drawn as entries of class "machine", which the
// stylesheet shows only under an ancestor of class "show-details" (the
// session page's `Show details`), as it does each entry's time and raw
// JSON button.

import { h, token } from './dom.js';
import * as markdown from './markdown.js';
import * as diff from './diff.js';
import { permissionCard } from './permissions.js';
import { elicitationCard } from './elicitations.js';

// MACHINE are the event types drawn only with the details shown: how the
// session runs rather than what was said (a turn that ended otherwise than
// end_turn is said: see isMachine).
const MACHINE = new Set(['session_created', 'session_started', 'turn_ended', 'usage', 'model_call', 'commands_update',
  'checkpoint_created', 'checkpoint_pruned', 'file_read', 'file_written', 'terminal_started', 'terminal_exited',
  'exec', 'agent_stderr', 'acp_unknown', 'permission_resolved', 'elicitation_resolved']);

// QUEUE are the event types about prompts waiting for a later turn: like
// the machinery, they do not cut the agent's answer in flight in two.
const QUEUE = new Set(['prompt_queued', 'prompt_canceled']);

// DROPPED says why a queued prompt was dropped, by its reason ('' for the
// user's own Drop).
const DROPPED = { user: '', interrupted: ' (interrupted)', replaced: ' (replaced by a newer steer)',
  turn_cancelled: ' (its turn was cancelled)', cleared: ' (conversation cleared)' };

// isMachine reports whether ev is drawn only with the details shown.
function isMachine(ev) {
  if (ev.type === 'turn_ended') return (ev.data || {}).stop_reason === 'end_turn';
  return MACHINE.has(ev.type);
}

// WINDOW is how many entries stay on the page while it follows the end:
// older ones are kept, detached, until "Show earlier events" brings them
// back, so a log of any length costs the browser the same to lay out.
const WINDOW = 400;

// rawOf maps each entry's raw-JSON button to the events it shows.
const rawOf = new WeakMap();

// Transcript renders events into el. hooks: decide(perm, optionId) for
// permission buttons, usage(data) for the latest usage.
//
// Each entry is kept as its events plus a build() that makes its node from
// them; a node is built only when the entry is on the page, and built again
// when a later event changes it (a chunk, a tool call update, a decision).
// So replaying a long log costs little more than reading it.
export class Transcript {
  constructor(el, hooks = {}) {
    this.el = el;
    this.hooks = hooks;
    this.lastSeq = 0;
    this.count = 0;
    // open is the agent's message or thought block that chunks of its
    // turn join; stderr the stderr block.
    this.open = null;
    this.stderr = null;
    // queued maps an entry_id to its prompt's words, for the line that
    // says it was dropped.
    this.queued = new Map();
    // prompts maps a turn_id to its prompt's text (promptOf).
    this.prompts = new Map();
    this.entries = [];
    this.first = 0;
    this.tools = new Map();
    this.perms = new Map();
    this.elics = new Map();
    this.changed = new Set();
    this.earlier = h('button', { type: 'button', class: 'earlier', hidden: true, onclick: () => this.showEarlier() });
    this.list = h('div', { class: 'entries' });
    el.append(this.earlier, this.list);
    el.addEventListener('click', (e) => {
      const btn = e.target.closest('.raw-toggle');
      if (btn) toggleRaw(btn);
    });
  }

  // add renders the events of a batch that are new, in seq order. With
  // trim (the reader is at the end), only the newest WINDOW entries stay
  // on the page. Without paint the entries are only recorded (a replay
  // paints once, at its end).
  add(events, trim = true, paint = true) {
    const start = this.entries.length;
    for (const ev of events) {
      if (!(ev.seq > this.lastSeq)) continue;
      this.lastSeq = ev.seq;
      this.count++;
      this.one(ev);
    }
    if (trim && this.entries.length - this.first > WINDOW) {
      const keep = this.entries.length - WINDOW;
      for (let i = this.first; i < Math.min(keep, start); i++) {
        const e = this.entries[i];
        if (e.node) e.node.remove();
      }
      this.first = keep;
    }
    // Changed entries on the page are built again; off it, they will be
    // when they come back.
    for (const e of this.changed) {
      if (e.node && e.node.isConnected) this.render(e);
      else e.node = null;
    }
    this.changed.clear();
    if (paint) {
      // The entries of the window not on the page yet follow those that are.
      const frag = document.createDocumentFragment();
      for (let i = this.first; i < this.entries.length; i++) {
        const e = this.entries[i];
        if (!(e.node && e.node.isConnected)) frag.append(e.node || this.render(e));
      }
      this.list.append(frag);
      this.showEarlierButton();
      // Shown for tests and the curious: count == last-seq means no hole.
      this.el.dataset.lastSeq = String(this.lastSeq);
      this.el.dataset.count = String(this.count);
    }
  }

  // render (re)builds entry e's node, in place when it is on the page.
  render(e) {
    const node = e.build();
    if (e.node) e.node.replaceWith(node);
    e.node = node;
    return node;
  }

  // entry records a new entry starting with ev; build(events) makes its
  // node from the entry's events.
  entry(ev, build) {
    const e = { type: ev.type, turn: ev.turn_id, events: [ev], node: null, machine: isMachine(ev) };
    e.build = () => build(e);
    this.entries.push(e);
    return e;
  }

  // one records one event. The agent's chunks join the block of their
  // turn open until something the conversation shows comes between them:
  // machinery and queue lines, drawn after the block, do not close it.
  one(ev) {
    const d = ev.data || {};
    if (ev.type === 'agent_stderr') {
      this.stderr = this.join(this.stderr, ev);
      return;
    }
    // An update of a tool call already drawn changes its card in place.
    const quiet = isMachine(ev) || QUEUE.has(ev.type) ||
      (ev.type === 'tool_call_update' && this.tools.has(`${ev.turn_id}/${d.tool_call_id}`));
    if (!quiet) this.stderr = null;
    if (ev.type === 'agent_message' || ev.type === 'agent_thought') {
      this.open = this.join(this.open, ev);
      return;
    }
    if (!quiet) this.open = null;
    switch (ev.type) {
      case 'turn_started':
        this.prompts.set(ev.turn_id, d.text || '');
        this.entry(ev, (e) => frame(e, d.source && d.source !== 'user' ? `You (${d.source})` : 'You', 'prompt',
          h('div', {}, h('div', { class: 'user-text', text: d.text || '' }), attachments(d.content))));
        break;
      case 'prompt_steered':
        // The steer's words go into the turn in flight: the user speaking.
        this.entry(ev, (e) => frame(e, 'You (steer)', 'prompt',
          h('div', {}, h('div', { class: 'user-text', text: d.text || '' }), attachments(d.content))));
        break;
      case 'prompt_queued': {
        const words = promptWords(d);
        this.queued.set(d.entry_id, words);
        this.note(ev, `${d.kind === 'steer' ? 'Steer staged' : 'Queued'}: ${words}`, 'queue');
        break;
      }
      case 'prompt_canceled':
        this.note(ev, `Dropped: ${this.queued.get(d.entry_id) || d.entry_id}${DROPPED[d.reason] ?? ` (${d.reason})`}`, 'queue');
        break;
      case 'conversation_cleared':
        this.note(ev, `Conversation cleared: the agent starts afresh (was ${d.old_acp_session_id || '?'})`);
        break;
      case 'turn_ended':
        this.note(ev, `Turn ended: ${d.stop_reason}${d.error ? ` (${d.error.code || ''} ${d.error.message || ''})` : ''}`,
          d.stop_reason === 'end_turn' ? '' : 'warn');
        break;
      case 'tool_call':
        this.tools.set(`${ev.turn_id}/${d.tool_call_id}`, this.entry(ev, toolEntry));
        break;
      case 'tool_call_update': {
        const e = this.tools.get(`${ev.turn_id}/${d.tool_call_id}`);
        if (e) {
          e.events.push(ev);
          this.changed.add(e);
        } else {
          this.note(ev, `Tool call ${d.tool_call_id}: ${d.status || 'update'}`);
        }
        break;
      }
      case 'plan':
        this.entry(ev, (e) => frame(e, 'Plan', 'plan', h('ol', { class: 'plan' }, (d.entries || []).map((p) =>
          h('li', { class: `plan-${token(p.status)}` }, h('span', { class: 'tag', text: p.status || '' }), ' ', p.content || '')))));
        break;
      case 'usage':
        this.note(ev, `Usage: ${usageText(d)}`);
        if (this.hooks.usage) this.hooks.usage(d);
        break;
      case 'permission_requested': {
        const p = d.permission || {};
        this.ask(ev, this.perms, p.id, 'Permission', 'permission', () => permissionCard(p, (opt) => this.hooks.decide(p, opt)));
        break;
      }
      case 'permission_resolved':
        this.resolved(ev, this.perms, d.permission_id, d, `Permission ${d.permission_id}: ${d.option_id || 'no option'} (by ${d.decided_by})`);
        break;
      case 'elicitation_requested': {
        const q = d.elicitation || {};
        this.ask(ev, this.elics, q.id, 'Question', 'elicitation', () => elicitationCard(q, (body) => this.hooks.answer(q, body)));
        break;
      }
      case 'elicitation_resolved':
        this.resolved(ev, this.elics, d.elicitation_id, d, `Question ${d.elicitation_id}: ${d.action} (by ${d.decided_by})`);
        break;
      case 'runtime_warning':
        this.note(ev, `Warning: ${d.reason || ''}`, 'warn');
        break;
      case 'agent_fetch':
        this.note(ev, fetchNote(d), d.phase === 'failed' ? 'warn' : '');
        break;
      case 'budget_exceeded':
        this.note(ev, `Budget reached: ${d.limit} ${d.max} (spent ${d.spent}); further model calls are refused`, 'warn');
        break;
      case 'session_stopped':
        this.note(ev, `Session stopped${stoppedWhy(d.stop_reason) ? ` (${stoppedWhy(d.stop_reason)})` : ''}${d.failure ? ` — ${d.failure.kind}: ${d.failure.message}` : ''}`,
          d.failure ? 'warn' : '');
        break;
      case 'file_refused':
      case 'network_denied':
        this.note(ev, summary(ev), 'warn');
        break;
      default:
        this.note(ev, summary(ev));
    }
  }

  // join adds chunk ev to block when it continues it (same type, same
  // turn), else starts a block; it returns the block.
  join(block, ev) {
    if (block && block.type === ev.type && block.turn === ev.turn_id) {
      block.events.push(ev);
      this.changed.add(block);
      return block;
    }
    return this.entry(ev, textEntry);
  }

  // ask records an agent's request (a permission, a question) as the card
  // card() makes, titled title, and keeps its entry in asks under id for
  // its resolution.
  ask(ev, asks, id, title, kind, card) {
    asks.set(id, this.entry(ev, (en) => {
      const c = card();
      if (en.resolution) c.resolve(en.resolution);
      return frame(en, title, kind, c.node);
    }));
  }

  // resolved gives the request id of asks its resolution d, which its card
  // shows when next painted, and notes it as text.
  resolved(ev, asks, id, d, text) {
    const e = asks.get(id);
    if (e) {
      e.resolution = d;
      this.changed.add(e);
    }
    this.note(ev, text);
  }

  // note records a one-line event.
  note(ev, text, cls = '') {
    this.entry(ev, (e) => frame(e, null, `note ${cls}`, h('span', { text })));
  }

  // promptOf is the text of turn's prompt ('' for a turn not shown).
  promptOf(turn) {
    return this.prompts.get(turn) || '';
  }

  // showEarlier puts the previous WINDOW entries back on the page above
  // the ones shown, keeping what the reader sees in place.
  showEarlier() {
    const from = Math.max(0, this.first - WINDOW);
    const frag = document.createDocumentFragment();
    for (let i = from; i < this.first; i++) {
      const e = this.entries[i];
      frag.append(e.node || this.render(e));
    }
    const scroller = document.scrollingElement;
    const before = scroller.scrollHeight;
    this.list.prepend(frag);
    scroller.scrollTop += scroller.scrollHeight - before;
    this.first = from;
    this.showEarlierButton();
  }

  // showEarlierButton shows how many entries are off the page, if any.
  showEarlierButton() {
    this.earlier.hidden = this.first === 0;
    this.earlier.textContent = `Show earlier events (${this.first} entries hidden)`;
  }
}

// textEntry builds an entry of joined chunks: agent text and thoughts as
// Markdown, stderr lines as they are.
function textEntry(e) {
  // A thought is its fold alone: "Thought" is the fold's own label.
  const label = { agent_message: 'Agent', agent_stderr: 'stderr' }[e.type] || null;
  let body;
  if (e.type === 'agent_stderr') {
    body = h('pre', { class: 'stderr', text: e.events.map((x) => x.data.line).join('\n') });
  } else {
    const md = h('div', { class: 'md' }, markdown.render(e.events.map((x) => x.data.text || '').join('')));
    body = e.type === 'agent_thought' ? h('details', { class: 'thought' }, h('summary', { text: 'Thought' }), md) : md;
  }
  return frame(e, label, e.type.replace('_', '-'), body);
}

// toolEntry builds a tool call card from the call and its updates so far:
// the latest status and content, and any terminal output.
function toolEntry(e) {
  const d = e.events[0].data;
  let status = d.status || '';
  let content = [];
  const outputs = [];
  for (const u of e.events.slice(1)) {
    if (u.data.status) status = u.data.status;
    if (Array.isArray(u.data.content) && u.data.content.length) content = u.data.content;
    const out = u.data.raw && u.data.raw.rawOutput && u.data.raw.rawOutput.output;
    if (typeof out === 'string') outputs.push(out);
  }
  return frame(e, 'Tool call', 'tool', [
    h('div', { class: 'tool-head' }, h('span', { class: 'tag kind', text: d.kind || 'other' }), ' ',
      h('strong', { text: d.title || d.tool_call_id }), ' ', h('span', { class: `tag status-${token(status)}`, text: status })),
    h('div', { class: 'tool-content' }, content.map(toolContent), outputs.map((o) => h('pre', { class: 'terminal', text: o })))]);
}

// frame is an entry's node: a head with its label, time and a button that
// shows the raw JSON of its events (both shown with the details), then its
// body.
function frame(e, label, cls, body) {
  const ev = e.events[0];
  const btn = h('button', { type: 'button', class: 'raw-toggle', 'aria-expanded': 'false', title: 'Raw JSON', text: '{ }',
    'aria-label': `Raw JSON of event ${ev.seq}` });
  rawOf.set(btn, e.events);
  return h('article', { class: `ev ${cls}${e.machine ? ' machine' : ''}`, 'data-seq': ev.seq, 'data-type': ev.type },
    h('div', { class: 'ev-head' },
      label ? h('span', { class: 'who', text: label }) : null,
      body && !label ? body : null,
      h('time', { datetime: ev.time, title: ev.time, text: clock(ev.time) }),
      btn),
    label ? body : null);
}

// toggleRaw shows or hides the raw JSON of the events of btn's entry.
function toggleRaw(btn) {
  const entry = btn.closest('.ev');
  let raw = entry.querySelector(':scope > pre.raw');
  if (!raw) {
    raw = h('pre', { class: 'raw', hidden: true });
    entry.append(raw);
  }
  const show = raw.hidden;
  if (show) raw.textContent = rawOf.get(btn).map((e) => JSON.stringify(e, null, 2)).join('\n');
  raw.hidden = !show;
  // A one-line note opened on its JSON takes the transcript's width.
  entry.classList.toggle('raw-open', show);
  btn.setAttribute('aria-expanded', String(show));
}

// toolContent renders one ACP tool call content item.
function toolContent(c) {
  if (c.type === 'diff') return diff.render(c);
  if (c.type === 'terminal') return h('div', { class: 'muted small', text: `terminal ${c.terminalId || ''}` });
  if (c.type === 'content' && c.content && c.content.type === 'text') return h('div', { class: 'md' }, markdown.render(c.content.text || ''));
  return h('pre', { class: 'raw-content', text: JSON.stringify(c, null, 2) });
}

// STOPPED words why a session stopped, by its stop_reason ('' for a
// user's Stop).
const STOPPED = { user_requested: '', idle_timeout: 'idle', ttl_expired: 'its time ran out', agent_exited: 'the agent exited',
  agent_crashed: 'the agent crashed', startup_failed: 'the agent did not start', daemon_shutdown: 'the daemon shut down',
  daemon_crashed: 'the daemon stopped', parent_stopped: 'its parent stopped', stall_timeout: 'stalled', node_lost: 'its node was lost' };

// stoppedWhy says in words why a session stopped ('' for a user's Stop).
export function stoppedWhy(reason) {
  return STOPPED[reason] ?? (reason || '').replaceAll('_', ' ');
}

// usageText says what a usage event counts.
export function usageText(d) {
  let s = `${d.used ?? '?'} / ${d.size ?? '?'} tokens`;
  if (d.cost && d.cost.amount !== undefined) s += ` · ${d.cost.amount} ${d.cost.currency || ''}`;
  return s;
}

// fetchNote is the line of an agent_fetch event: the agent's package being
// downloaded before its first start.
function fetchNote(d) {
  const secs = `${Math.round((d.elapsed_ms || 0) / 1000)} s`;
  if (d.phase === 'started') return `Fetching the agent's package ${d.package} before its first start…`;
  if (d.phase === 'fetching') return `Still fetching ${d.package} (${secs})…`;
  if (d.phase === 'done') return `Fetched ${d.package} in ${secs}`;
  return `Could not fetch ${d.package}: ${d.error || 'failed'}`;
}

// summary is the one-line text of an event without a block of its own.
function summary(ev) {
  const d = ev.data || {};
  switch (ev.type) {
    case 'session_created': return `Session created (${d.agent}, ${d.sandbox ? d.sandbox.provider : ''})`;
    case 'session_started': return `Agent started${d.resumed_by ? ` (resumed by ${d.resumed_by})` : ''}`;
    case 'file_refused': return `Refused to let the agent ${d.op || 'use'} ${d.path}${d.reason ? `: ${d.reason}` : ''}`;
    case 'network_denied': return `Refused the agent's connection to ${d.host}${d.port ? `:${d.port}` : ''}`;
    case 'file_read': return `Read ${d.path} (${d.bytes} bytes)`;
    case 'file_written': return `Wrote ${d.path} (${d.bytes} bytes)`;
    case 'terminal_started': return `Terminal: ${d.command}`;
    case 'terminal_exited': return `Terminal exited ${d.exit_code}: ${d.command}`;
    case 'exec': return `exec ${Array.isArray(d.command) ? d.command.join(' ') : d.command} → ${d.exit_code}`;
    case 'runtime_recovered': return 'Runtime recovered';
    case 'child_started': return `Child started: ${d.name || d.child_id} (${d.agent})`;
    case 'child_stopped': return `Child stopped: ${d.child_id} (${d.stop_reason})`;
    case 'mode_update': return `Mode: ${d.current ?? (d.raw && d.raw.currentModeId) ?? '?'}${d.source && d.source !== 'agent' ? ` (set by ${d.source})` : ''}`;
    case 'config_update': return `Config: ${Object.entries(d.changed || {}).map(([k, v]) => `${k}=${v}`).join(' ') || 'options changed'}${d.source && d.source !== 'agent' ? ` (set by ${d.source})` : ''}`;
    case 'commands_update': return `Commands: ${(d.commands || (d.raw && d.raw.availableCommands) || []).map((c) => `/${c.name}`).join(' ')}`;
    case 'checkpoint_created': return `Checkpoint ${d.id} (${d.files} ${d.files === 1 ? 'file' : 'files'}${d.skipped ? `, ${d.skipped} skipped` : ''})`;
    case 'workspace_rewound': return `Workspace rewound to ${d.checkpoint_id} (${d.written} written, ${d.removed} removed)`;
    case 'checkpoint_pruned': return `Checkpoint ${d.checkpoint_id} pruned${d.session_id && d.session_id !== ev.session_id ? ` (of ${d.session_id})` : ''}: the tree's checkpoints were over their limit`;
    default: return ev.type.replaceAll('_', ' ');
  }
}

// TIME formats times of day (one formatter: making one per call costs more
// than the rest of an event's rendering).
const TIME = new Intl.DateTimeFormat(undefined, { hour: 'numeric', minute: '2-digit', second: '2-digit' });

// clock is the time of day of an RFC 3339 time.
function clock(iso) {
  const t = new Date(iso);
  return Number.isNaN(t.getTime()) ? '' : TIME.format(t);
}

// PROMPT_WORDS is how much of a queued prompt its line quotes.
const PROMPT_WORDS = 200;

// promptWords is a queued prompt's text, quoted and cut at PROMPT_WORDS
// characters, or what it attaches when it has no text.
function promptWords(d) {
  const text = (d.text || '').trim();
  if (!text) {
    const n = (d.content || []).filter((b) => b.type !== 'text').length;
    return n ? `${n} ${n === 1 ? 'attachment' : 'attachments'}` : '(empty)';
  }
  return `“${text.length > PROMPT_WORDS ? `${text.slice(0, PROMPT_WORDS)}…` : text}”`;
}

// attachments lists a prompt's non-text blocks (images, files, resources)
// as text: names and sizes only, nothing of their content is rendered.
function attachments(content) {
  const items = (content || []).filter((b) => b.type !== 'text').map((b) => {
    const what = b.path ? `file ${b.path}` : b.type === 'image' || b.type === 'audio' ? `${b.type} ${b.mime_type}` : `${b.type} ${b.uri}`;
    return h('li', { text: b.bytes ? `${what} (${b.bytes} bytes)` : what });
  });
  return items.length ? h('ul', { class: 'attachments', 'aria-label': 'Attachments' }, ...items) : null;
}

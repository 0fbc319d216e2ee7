// transcript.js turns a session's events into its transcript, in order and
// once each: an event whose seq is not past the last one shown is dropped,
// so a replayed page, a reconnected stream and a restarted daemon can
// overlap freely. Consecutive chunks (agent text, thoughts, stderr) join
// one block; tool calls are cards that their updates change in place.
// add() takes a batch and touches the page once for it.

import { h } from './dom.js';
import * as markdown from './markdown.js';
import * as diff from './diff.js';
import { permissionCard } from './permissions.js';

// MERGED are the event types whose consecutive events form one block.
const MERGED = new Set(['agent_message', 'agent_thought', 'agent_stderr']);

// WINDOW is how many entries stay on the page while it follows the end:
// older ones are kept, detached, until "Show earlier events" brings them
// back, so a log of any length costs the browser the same to lay out.
const WINDOW = 400;

// rawOf maps each entry's raw-JSON button to the events it shows.
const rawOf = new WeakMap();

// Transcript renders events into el. hooks: decide(perm, optionId) for
// permission buttons, usage(data) for the latest usage.
export class Transcript {
  constructor(el, hooks = {}) {
    this.el = el;
    this.hooks = hooks;
    this.nodes = [];
    this.first = 0;
    this.earlier = h('button', { type: 'button', class: 'earlier', hidden: true, onclick: () => this.showEarlier() });
    this.list = h('div', { class: 'entries' });
    el.append(this.earlier, this.list);
    el.addEventListener('click', (e) => {
      const btn = e.target.closest('.raw-toggle');
      if (btn) toggleRaw(btn);
    });
    this.lastSeq = 0;
    this.count = 0;
    this.open = null;
    this.tools = new Map();
    this.perms = new Map();
    this.dirty = new Set();
    this.out = null;
  }

  // add renders the events of a batch that are new, in seq order. With
  // trim (the reader is at the end), only the newest WINDOW entries stay
  // on the page.
  add(events, trim = true) {
    this.out = document.createDocumentFragment();
    for (const ev of events) {
      if (!(ev.seq > this.lastSeq)) continue;
      this.lastSeq = ev.seq;
      this.count++;
      this.one(ev);
    }
    for (const b of this.dirty) b.draw();
    this.dirty.clear();
    this.list.append(this.out);
    this.out = null;
    if (trim && this.nodes.length - this.first > WINDOW) {
      const keep = this.nodes.length - WINDOW;
      for (let i = this.first; i < keep; i++) this.nodes[i].remove();
      this.first = keep;
    }
    this.showEarlierButton();
    // Shown for tests and the curious: count == last-seq means no hole.
    this.el.dataset.lastSeq = String(this.lastSeq);
    this.el.dataset.count = String(this.count);
  }

  // one renders one event.
  one(ev) {
    const d = ev.data || {};
    if (MERGED.has(ev.type)) {
      if (this.open && this.open.type === ev.type && this.open.turn === ev.turn_id) {
        this.open.events.push(ev);
      } else {
        this.open = this.textBlock(ev);
      }
      this.dirty.add(this.open);
      return;
    }
    this.open = null;
    switch (ev.type) {
      case 'turn_started':
        this.block(ev, d.source && d.source !== 'user' ? `You (${d.source})` : 'You', 'prompt',
          h('div', { class: 'user-text', text: d.text || '' }));
        break;
      case 'turn_ended':
        this.note(ev, `Turn ended: ${d.stop_reason}${d.error ? ` (${d.error.code || ''} ${d.error.message || ''})` : ''}`,
          d.stop_reason === 'end_turn' ? '' : 'warn');
        break;
      case 'tool_call':
        this.toolCall(ev);
        break;
      case 'tool_call_update':
        this.toolUpdate(ev);
        break;
      case 'plan':
        this.block(ev, 'Plan', 'plan', h('ol', { class: 'plan' }, (d.entries || []).map((e) =>
          h('li', { class: `plan-${e.status}` }, h('span', { class: 'tag', text: e.status || '' }), ' ', e.content || ''))));
        break;
      case 'usage':
        this.note(ev, `Usage: ${usageText(d)}`);
        if (this.hooks.usage) this.hooks.usage(d);
        break;
      case 'permission_requested':
        this.permission(ev);
        break;
      case 'permission_resolved': {
        const card = this.perms.get(d.permission_id);
        if (card) card.resolve(d);
        this.note(ev, `Permission ${d.permission_id}: ${d.option_id || 'no option'} (by ${d.decided_by})`);
        break;
      }
      case 'runtime_warning':
        this.note(ev, `Warning: ${d.reason || ''}`, 'warn');
        break;
      case 'session_stopped':
        this.note(ev, `Session stopped: ${d.stop_reason || ''}${d.failure ? ` — ${d.failure.kind}: ${d.failure.message}` : ''}`,
          d.failure ? 'warn' : '');
        break;
      default:
        this.note(ev, summary(ev));
    }
  }

  // textBlock starts a block of joined chunks of ev's type.
  textBlock(ev) {
    const label = { agent_message: 'Agent', agent_thought: 'Thought', agent_stderr: 'stderr' }[ev.type];
    const b = { type: ev.type, turn: ev.turn_id, events: [ev] };
    const body = ev.type === 'agent_thought' ? h('details', { class: 'thought' }, h('summary', { text: 'Thought' }), h('div'))
      : ev.type === 'agent_stderr' ? h('pre', { class: 'stderr' }) : h('div', { class: 'md' });
    b.node = this.block(ev, label, ev.type.replace('_', '-'), body, b.events);
    b.draw = () => {
      if (ev.type === 'agent_stderr') {
        body.textContent = b.events.map((e) => e.data.line).join('\n');
        return;
      }
      const text = b.events.map((e) => e.data.text || '').join('');
      const target = ev.type === 'agent_thought' ? body.lastChild : body;
      target.replaceChildren(markdown.render(text));
    };
    return b;
  }

  // toolCall renders a tool call card, kept by its id for its updates.
  toolCall(ev) {
    const d = ev.data;
    const status = h('span', { class: `tag status-${d.status}`, text: d.status || '' });
    const content = h('div', { class: 'tool-content' });
    const events = [ev];
    this.block(ev, 'Tool call', 'tool', [
      h('div', { class: 'tool-head' }, h('span', { class: 'tag kind', text: d.kind || 'other' }), ' ',
        h('strong', { text: d.title || d.tool_call_id }), ' ', status),
      content], events);
    this.tools.set(`${ev.turn_id}/${d.tool_call_id}`, { status, content, events });
  }

  // toolUpdate changes a tool call card's status and content.
  toolUpdate(ev) {
    const d = ev.data;
    const card = this.tools.get(`${ev.turn_id}/${d.tool_call_id}`);
    if (!card) {
      this.note(ev, `Tool call ${d.tool_call_id}: ${d.status || 'update'}`);
      return;
    }
    card.events.push(ev);
    if (d.status) {
      card.status.textContent = d.status;
      card.status.className = `tag status-${d.status}`;
    }
    if (Array.isArray(d.content) && d.content.length) card.content.replaceChildren(...d.content.map(toolContent));
    const output = d.raw && d.raw.rawOutput && d.raw.rawOutput.output;
    if (typeof output === 'string') card.content.append(h('pre', { class: 'terminal', text: output }));
  }

  // permission renders a permission request as a card with its options.
  permission(ev) {
    const p = ev.data.permission || {};
    const card = permissionCard(p, (opt) => this.hooks.decide(p, opt));
    this.perms.set(p.id, card);
    this.block(ev, 'Permission', 'permission', card.node);
  }

  // note renders a one-line event.
  note(ev, text, cls = '') {
    this.block(ev, null, `note ${cls}`, h('span', { text }));
  }

  // showEarlier puts the previous WINDOW detached entries back on the
  // page above the ones shown, keeping what the reader sees in place.
  showEarlier() {
    const from = Math.max(0, this.first - WINDOW);
    const frag = document.createDocumentFragment();
    frag.append(...this.nodes.slice(from, this.first));
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

  // block appends one transcript entry with a button showing the raw JSON
  // of its events.
  block(ev, label, cls, body, events = [ev]) {
    const btn = h('button', { type: 'button', class: 'raw-toggle', 'aria-expanded': 'false', title: 'Raw JSON', text: '{ }',
      'aria-label': `Raw JSON of event ${ev.seq}` });
    rawOf.set(btn, events);
    const node = h('article', { class: `ev ${cls}`, 'data-seq': ev.seq, 'data-type': ev.type },
      h('div', { class: 'ev-head' },
        label ? h('span', { class: 'who', text: label }) : null,
        body && !label ? body : null,
        h('time', { datetime: ev.time, title: ev.time, text: clock(ev.time) }),
        btn),
      label ? body : null);
    this.out.append(node);
    this.nodes.push(node);
    return node;
  }
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
  btn.setAttribute('aria-expanded', String(show));
}

// toolContent renders one ACP tool call content item.
function toolContent(c) {
  if (c.type === 'diff') return diff.render(c);
  if (c.type === 'terminal') return h('div', { class: 'muted small', text: `terminal ${c.terminalId || ''}` });
  if (c.type === 'content' && c.content && c.content.type === 'text') return h('div', { class: 'md' }, markdown.render(c.content.text || ''));
  return h('pre', { class: 'raw-content', text: JSON.stringify(c, null, 2) });
}

// usageText says what a usage event counts.
export function usageText(d) {
  let s = `${d.used ?? '?'} / ${d.size ?? '?'} tokens`;
  if (d.cost && d.cost.amount !== undefined) s += ` · ${d.cost.amount} ${d.cost.currency || ''}`;
  return s;
}

// summary is the one-line text of an event without a block of its own.
function summary(ev) {
  const d = ev.data || {};
  switch (ev.type) {
    case 'session_created': return `Session created (${d.agent}, ${d.sandbox ? d.sandbox.provider : ''})`;
    case 'session_started': return `Agent started${d.resumed_by ? ` (resumed by ${d.resumed_by})` : ''}`;
    case 'prompt_queued': return `Prompt queued (${d.entry_id})`;
    case 'prompt_canceled': return `Queued prompt dropped (${d.entry_id})`;
    case 'prompt_steered': return `Steer delivered (${d.entry_id})`;
    case 'file_read': return `Read ${d.path} (${d.bytes} bytes)`;
    case 'file_written': return `Wrote ${d.path} (${d.bytes} bytes)`;
    case 'terminal_started': return `Terminal: ${d.command}`;
    case 'terminal_exited': return `Terminal exited ${d.exit_code}: ${d.command}`;
    case 'exec': return `exec ${Array.isArray(d.command) ? d.command.join(' ') : d.command} → ${d.exit_code}`;
    case 'runtime_recovered': return 'Runtime recovered';
    case 'child_started': return `Child started: ${d.name || d.child_id} (${d.agent})`;
    case 'child_stopped': return `Child stopped: ${d.child_id} (${d.stop_reason})`;
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

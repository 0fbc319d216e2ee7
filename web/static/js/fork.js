// fork.js is where a fork's page says it came from (docs/api.md,
// "Checkpoints, rewind and fork"): "Forked from PARENT before turn N", and
// the conversation it carries — the parent's transcript up to the fork
// point, read from the parent's log, drawn read-only above the fork's own
// and marked as the parent's. The fork's own log starts afresh.

import { api, sessionPath } from './api.js';
import { h } from './dom.js';
import { Transcript } from './transcript.js';

// PAGE is how many of the parent's events one request asks for.
const PAGE = 1000;

// create builds the part for fork s (a Session with forked_from); load()
// fills it.
export function create(s) {
  const from = s.forked_from;
  const origin = h('p', { class: 'fork-origin' });
  const log = h('div', { class: 'transcript', role: 'log' });
  const status = h('p', { class: 'muted small', role: 'status', text: 'Loading the conversation it carries…' });
  const element = h('section', { class: 'carried', 'aria-label': 'Where this session came from' }, origin, status, log);
  const parentLink = (name) => h('a', { href: `/sessions/${encodeURIComponent(from.session_id)}`, text: name });
  origin.append('Forked from ', parentLink(from.session_id));

  // load reads the parent and its log up to the fork point.
  async function load() {
    let parent;
    try {
      parent = await api('GET', sessionPath(from.session_id));
    } catch (e) {
      status.textContent = e.status === 404 ? 'The parent session was deleted: the conversation it carried is gone with it.' : e.message;
      return;
    }
    const name = parent.name || parent.id;
    let cut;
    try {
      cut = await carried(from);
    } catch (e) {
      status.textContent = e.message;
      return;
    }
    origin.replaceChildren('Forked from ', parentLink(name),
      cut ? ` before turn ${cut.turns + 1}${cut.prompt ? ` (“${short(cut.prompt)}”)` : ''}` : '');
    if (!cut) {
      status.textContent = 'The checkpoint it was forked from is no longer in the parent\'s log.';
      return;
    }
    if (cut.events.length === 0 || cut.turns === 0) {
      status.textContent = 'It carries no conversation: it was forked before the parent\'s first turn.';
      return;
    }
    status.textContent = `The conversation it carries, from ${name}:`;
    log.setAttribute('aria-label', `Conversation from ${name}`);
    // The parent's questions were answered there: nothing here answers them.
    const refuse = () => Promise.reject(new Error(`This is ${name}'s conversation: answer on its page.`));
    const t = new Transcript(log, { decide: refuse, answer: refuse });
    t.add(cut.events, true, false);
    t.add([]);
  }
  return { element, load };
}

// carried reads the parent's log until the checkpoint the fork was made
// from: it resolves to {events, turns, prompt} — the events before that
// checkpoint's turn, how many turns they hold and the cut turn's prompt —
// or null when the log does not name the checkpoint.
async function carried(from) {
  const events = [];
  const firstOf = new Map();
  let turn = '';
  let cutSeq = 0;
  let after = 0;
  for (;;) {
    const page = await api('GET', `${sessionPath(from.session_id, '/events')}?after=${after}&limit=${PAGE}`);
    const got = page.events || [];
    for (const ev of got) {
      events.push(ev);
      if (ev.turn_id && !firstOf.has(ev.turn_id)) firstOf.set(ev.turn_id, ev);
      if (ev.type === 'checkpoint_created' && ev.data && ev.data.id === from.checkpoint_id) {
        turn = ev.data.turn_id || ev.turn_id;
        cutSeq = ev.seq;
      }
    }
    if (turn || got.length === 0) break;
    after = got[got.length - 1].seq;
  }
  if (!turn) return null;
  // The cut is the first event of the checkpoint's turn.
  if (firstOf.has(turn)) cutSeq = Math.min(cutSeq, firstOf.get(turn).seq);
  const kept = events.filter((ev) => ev.seq < cutSeq);
  const turns = kept.filter((ev) => ev.type === 'turn_started').length;
  const start = events.find((ev) => ev.type === 'turn_started' && ev.turn_id === turn);
  return { events: kept, turns, prompt: start ? start.data.text || '' : '' };
}

// short is the first line of text, cut at 60 characters.
function short(text) {
  const line = text.split('\n')[0];
  return line.length > 60 ? `${line.slice(0, 60)}…` : line;
}

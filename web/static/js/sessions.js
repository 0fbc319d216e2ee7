// sessions.js is the sessions screen: one page of the list at a time (the
// API's cursor pages it, so ten thousand sessions cost what fifty do),
// filters kept in the address, children under their parent, each one's
// spend, and rows kept live by the daemon-wide stream (/v1/events/stream).

import { api, query } from './api.js';
import { h, clear, ago, badge } from './dom.js';
import { follow } from './livestream.js';
import * as newSession from './newsession.js';
import { spendCell } from './spend.js';

// PAGE is how many sessions one page shows.
const PAGE = 50;

// STATES are the values of the state filter.
const STATES = ['starting', 'active', 'stopping', 'stopped'];

// mount shows the list in main and returns its unmount.
export function mount(main) {
  const params = new URLSearchParams(window.location.search);
  const filters = { state: params.get('state') || '', agent: params.get('agent') || '', label: params.get('label') || '' };
  const cursors = [''];
  let sessions = [];
  let nextCursor = '';
  let pollTimer = null;
  // loads numbers the lists asked for: only the newest one is drawn.
  let loads = 0;
  // replay holds the live changes seen while a list is being asked for:
  // the list may predate them, so they are applied again on top of it.
  let replay = null;

  const status = h('p', { class: 'error', role: 'alert' });
  const body = h('tbody');
  const prev = h('button', { type: 'button', text: 'Previous page', onclick: () => { cursors.pop(); load(); } });
  const next = h('button', { type: 'button', text: 'Next page', onclick: () => { cursors.push(nextCursor); load(); } });
  const pageNo = h('span', { class: 'muted' });
  const form = newSession.create();

  const stateSel = h('select', { id: 'f-state', onchange: () => setFilter('state', stateSel.value) },
    h('option', { value: '', text: 'any' }), STATES.map((s) => h('option', { value: s, text: s })));
  stateSel.value = filters.state;
  const agentSel = h('select', { id: 'f-agent', onchange: () => setFilter('agent', agentSel.value) },
    h('option', { value: '', text: 'any' }));
  const labelIn = h('input', { id: 'f-label', type: 'search', placeholder: 'key=value', value: filters.label });
  labelIn.addEventListener('change', () => setFilter('label', labelIn.value.trim()));

  main.append(
    h('div', { class: 'bar' },
      h('h1', { text: 'Sessions' }),
      h('button', { type: 'button', class: 'primary', text: 'New session', onclick: () => form.open() })),
    h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter sessions', onsubmit: (e) => e.preventDefault() },
      h('label', { for: 'f-state', text: 'Filter by state' }), stateSel,
      h('label', { for: 'f-agent', text: 'Filter by agent' }), agentSel,
      h('label', { for: 'f-label', text: 'Filter by label' }), labelIn),
    status,
    h('table', { class: 'sessions' },
      h('thead', {}, h('tr', {}, ['Name', 'Agent', 'State', 'Badge', 'Workspace', 'Last activity', 'Pending permissions', 'Spend']
        .map((c) => h('th', { scope: 'col', text: c })))),
      body),
    h('nav', { class: 'pager', 'aria-label': 'Pages' }, prev, pageNo, next),
    form.element);

  api('GET', '/v1/agents').then((r) => {
    for (const a of r.agents || []) agentSel.append(h('option', { value: a.name, text: a.name }));
    agentSel.value = filters.agent;
    form.setAgents(r.agents || []);
  }).catch(() => {});

  // setFilter changes one filter, records it in the address and reloads
  // from the first page.
  function setFilter(k, v) {
    filters[k] = v;
    const q = query(filters);
    window.history.replaceState(null, '', `/${q}`);
    cursors.splice(1);
    load();
  }

  // load fetches the current page.
  async function load() {
    const mine = ++loads;
    if (!replay) replay = [];
    try {
      const r = await api('GET', `/v1/sessions${query({ ...filters, limit: PAGE, cursor: cursors[cursors.length - 1] })}`);
      if (mine !== loads) return;
      sessions = r.sessions || [];
      nextCursor = r.next_cursor || '';
      status.textContent = '';
      // Every change is the session whole, so applying them in order
      // again leaves each row as new as the newest seen.
      for (const [fn, s] of replay) fn(s);
      draw();
    } catch (e) {
      if (mine !== loads) return;
      status.textContent = e.message;
    }
    replay = null;
  }

  // live applies a change to the page now and keeps it for a list in
  // flight to apply again.
  const live = (fn) => (ev) => {
    const s = sessionOf(ev);
    if (replay) replay.push([fn, s]);
    if (fn(s)) redraw();
  };

  // created, updated and deleted apply one change to the page and report
  // whether it shows.
  function created(s) {
    if (cursors.length !== 1 || !matches(s) || sessions.some((x) => x.id === s.id)) return false;
    sessions.unshift(s);
    if (sessions.length > PAGE) sessions.pop();
    return true;
  }
  function updated(s) {
    const i = sessions.findIndex((x) => x.id === s.id);
    if (i < 0) return false;
    sessions[i] = s;
    return true;
  }
  function deleted(s) {
    const n = sessions.length;
    sessions = sessions.filter((x) => x.id !== s.id);
    return sessions.length !== n;
  }

  // matches reports whether s passes the filters (for live additions).
  function matches(s) {
    if (filters.state && s.state !== filters.state) return false;
    if (filters.agent && s.agent !== filters.agent) return false;
    if (filters.label) {
      const [k, v] = filters.label.split('=');
      if (!s.labels || s.labels[k] !== v) return false;
    }
    return true;
  }

  let drawPending = false;
  // redraw coalesces bursts of live changes into one draw per frame.
  function redraw() {
    if (drawPending) return;
    drawPending = true;
    requestAnimationFrame(() => { drawPending = false; draw(); });
  }

  // draw renders the page: each session, then its children under it.
  function draw() {
    clear(body);
    const ids = new Set(sessions.map((s) => s.id));
    const kids = new Map();
    for (const s of sessions) {
      if (s.parent_id && ids.has(s.parent_id)) {
        if (!kids.has(s.parent_id)) kids.set(s.parent_id, []);
        kids.get(s.parent_id).push(s);
      }
    }
    const frag = document.createDocumentFragment();
    const walk = (s, depth) => {
      frag.append(row(s, depth));
      for (const c of kids.get(s.id) || []) walk(c, depth + 1);
    };
    for (const s of sessions) if (!(s.parent_id && ids.has(s.parent_id))) walk(s, 0);
    if (!sessions.length) frag.append(h('tr', {}, h('td', { colspan: 8, class: 'muted', text: 'No sessions.' })));
    body.append(frag);
    prev.disabled = cursors.length < 2;
    next.disabled = !nextCursor;
    pageNo.textContent = `page ${cursors.length}`;
  }

  const stopFollowing = follow(() => '/v1/events/stream', {
    session_created: live(created),
    session_updated: live(updated),
    session_deleted: live(deleted),
    resync: () => load(),
  }, (open, fresh) => {
    // A new connection may have missed changes: list again. While the
    // stream is down (or the daemon has none), poll instead.
    clearInterval(pollTimer);
    if (open && fresh) load();
    if (!open) pollTimer = setInterval(load, 3000);
  }, () => api('GET', '/v1/sessions?limit=1'));

  load();
  return () => { stopFollowing(); clearInterval(pollTimer); };
}

// sessionOf returns the Session JSON of a daemon-wide stream event.
function sessionOf(ev) {
  return ev && ev.data && ev.data.id ? ev.data : ev;
}

// row renders one session as a table row.
function row(s, depth) {
  const name = s.name || s.id;
  const cell = (label, ...content) => h('td', { 'data-label': label }, ...content);
  const tr = h('tr', { 'data-id': s.id, class: depth ? `child depth-${Math.min(depth, 3)}` : '' },
    cell('Name', depth ? h('span', { class: 'muted', 'aria-hidden': 'true', text: '↳ ' }) : null,
      h('a', { href: `/sessions/${encodeURIComponent(s.id)}`, text: name }),
      s.name ? h('div', { class: 'muted small', text: s.id }) : null),
    cell('Agent', s.agent),
    cell('State', s.state),
    cell('Badge', badge(s.badge)),
    cell('Workspace', h('span', { class: 'path', title: s.workspace, text: s.workspace })),
    cell('Last activity', h('time', { datetime: s.last_activity_at, title: s.last_activity_at, text: ago(s.last_activity_at) })),
    cell('Pending permissions', s.pending_permissions ? h('strong', { class: 'pending', text: String(s.pending_permissions) }) : '0'),
    cell('Spend', spendCell(s)));
  return tr;
}

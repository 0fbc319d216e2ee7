// header.js is the top of a session's screen, one or two lines: its name,
// badge, agent and spend, where it stands when it takes no input (stopped,
// deleted) or the page has lost its stream, the credential its agent
// lacks, and the session actions (Cancel turn, Stop or Resume, Snapshot,
// Delete); the rest (ids, workspace, sandbox, usage…) is behind
// "Session details" (docs/api.md, Web UI).

import { api, sessionPath } from './api.js';
import { h, badge, ago, runner } from './dom.js';
import { usageText, stoppedWhy } from './transcript.js';
import { spendText, budgetLeft } from './spend.js';

// create builds the header for session id; hooks.onChange is called after
// an action changed the session. It is one or two lines: name, badge,
// agent, spend and where the session stands, then the actions; the rest
// is behind "Session details".
export function create(id, hooks) {
  const title = h('h1', { text: id });
  const convTitle = h('span', { class: 'conv-title muted' });
  const facts = h('dl', { class: 'facts' });
  const badgeSlot = h('span');
  const agent = h('span', { class: 'head-agent muted' });
  // live says where the session stands when it cannot take input, or that
  // the page lost its stream of a live session (data-stream: open, down).
  const live = h('span', { class: 'live', role: 'status' });
  const usage = h('p', { class: 'usage muted' });
  const spend = h('span', { class: 'spend' });
  // missing names the credential the agent's model calls lack, with a
  // link to the screen that sets it (docs/api.md, The model gateway).
  const missing = h('p', { class: 'missing-credential', role: 'status' });
  const status = h('p', { class: 'error', role: 'alert' });
  const notice = h('p', { class: 'notice', role: 'status' });
  // tools is where the conversation's controls (Clear) go.
  const tools = h('div', { class: 'head-slot' });
  let session = null;
  let streamOpen = null;
  let gone = false;

  const run = runner(status, () => hooks.onChange());
  const act = (label, fn, cls = '') => h('button', { type: 'button', class: cls, text: label,
    onclick: (e) => run(e.currentTarget, fn) });
  const cancel = act('Cancel turn', () => api('POST', sessionPath(id, '/cancel')));
  const stop = act('Stop', () => api('POST', sessionPath(id, '/stop')));
  const resume = act('Resume', () => api('POST', sessionPath(id, '/resume')), 'primary');
  resume.hidden = true;
  const snapshot = act('Snapshot', async () => {
    const snap = await api('POST', sessionPath(id, '/snapshots'));
    notice.textContent = `Snapshot ${snap.id} (${snap.size_bytes} bytes)`;
  });
  const confirmBox = h('div', { class: 'confirm', hidden: true },
    h('span', { text: 'Delete this session, its log and its managed workspace?' }),
    act('Delete for good', async () => {
      await api('DELETE', sessionPath(id));
      window.location.assign('/');
    }, 'danger'),
    h('button', { type: 'button', text: 'Keep', onclick: () => { confirmBox.hidden = true; } }));
  const del = h('button', { type: 'button', class: 'danger', text: 'Delete', onclick: () => { confirmBox.hidden = false; } });

  const element = h('header', { class: 'session-head' },
    h('div', { class: 'head-line' },
      h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '/', text: '← Sessions' })),
      title, convTitle, badgeSlot, agent, spend, live),
    missing,
    h('div', { class: 'head-tools' },
      h('div', { class: 'actions', role: 'toolbar', 'aria-label': 'Session actions' }, cancel, stop, resume, snapshot, del),
      tools,
      h('details', { class: 'session-details' }, h('summary', { text: 'Session details' }), facts, usage)),
    confirmBox, notice, status);

  // showLive says where the session stands: stopped (and whether Resume
  // brings it back), deleted, or live with its stream down.
  function showLive() {
    let text = '';
    if (gone) text = 'Deleted';
    else if (session && session.state === 'stopped') {
      const why = stoppedWhy(session.stop_reason);
      text = `${session.badge === 'failed' ? 'Failed' : 'Stopped'}${why ? ` (${why})` : ''}${session.resumable ? ' — Resume to continue' : ''}`;
    } else if (session && session.state === 'stopping') text = 'Stopping…';
    else if (streamOpen === false) text = '○ reconnecting…';
    live.textContent = text;
    live.className = `live${text && !gone && session && session.state !== 'stopped' ? ' muted' : ''}`;
    if (streamOpen !== null) live.dataset.stream = streamOpen ? 'open' : 'down';
  }

  return {
    element,
    // slot is where the conversation's controls mount (session.js).
    slot: tools,
    // update shows session s.
    update(s) {
      session = s;
      title.textContent = s.name || s.id;
      convTitle.textContent = s.title || '';
      convTitle.title = s.title || '';
      document.title = `${s.name || s.id} · berth`;
      badgeSlot.replaceChildren(badge(s.badge));
      agent.textContent = s.agent;
      const fact = (k, v) => h('div', {}, h('dt', { text: k }), h('dd', {}, v));
      const link = (sid, text) => h('a', { href: `/sessions/${encodeURIComponent(sid)}`, text });
      facts.replaceChildren(...[
        fact('ID', s.id),
        fact('Agent', s.agent),
        fact('State', `${s.state}${s.stop_reason ? ` (${s.stop_reason})` : ''}`),
        fact('Workspace', h('span', { class: 'path', text: s.workspace })),
        s.worktree ? fact('Worktree', h('span', { class: 'path', text: `${s.worktree.repo} · ${s.worktree.branch} (from ${s.worktree.base})` })) : null,
        s.mounts && s.mounts.length ? fact('Mounts', s.mounts.join(', ')) : null,
        fact('Sandbox', `${s.sandbox.provider}${s.sandbox.network ? ', network' : ''}`),
        fact('Permission mode', s.permission_mode),
        fact('Turns', String(s.turns || 0)),
        fact('Pending permissions', String(s.pending_permissions)),
        fact('Pending questions', String(s.pending_elicitations || 0)),
        fact('Last activity', ago(s.last_activity_at)),
        s.parent_id ? fact('Parent', link(s.parent_id, s.parent_id)) : null,
        s.forked_from ? fact('Forked from', [link(s.forked_from.session_id, s.forked_from.session_id), ` at ${s.forked_from.checkpoint_id}`]) : null,
        s.failure ? fact('Failure', `${s.failure.kind}: ${s.failure.message}`) : null,
      ].filter(Boolean));
      const text = spendText(s);
      spend.replaceChildren(...(text ? [h('span', { class: 'muted', text: 'Spend: ' }), text] : []));
      spend.className = budgetLeft(s) === 'over budget' ? 'spend over' : 'spend';
      const need = s.auth && s.auth.missing;
      missing.replaceChildren(...(need ? [
        `This agent needs the credential ${need}. `,
        h('a', { href: `/credentials?name=${encodeURIComponent(need)}`, text: `Set ${need}` }),
      ] : []));
      const busy = ['running', 'waiting', 'hung'].includes(s.badge);
      cancel.disabled = !busy;
      // Stop and Resume take turns in one place.
      stop.disabled = s.state === 'stopped';
      stop.hidden = s.state === 'stopped';
      resume.disabled = !(s.state === 'stopped' && s.resumable);
      resume.hidden = s.state !== 'stopped';
      showLive();
    },
    setUsage(d) { usage.textContent = `Usage: ${usageText(d)}`; },
    setLive(open) {
      streamOpen = open;
      showLive();
    },
    // gone shows that the session was deleted: nothing acts on it.
    gone() {
      gone = true;
      [cancel, stop, resume, snapshot, del].forEach((b) => { b.disabled = true; });
      showLive();
    },
    error(e) { status.textContent = e.message; },
  };
}

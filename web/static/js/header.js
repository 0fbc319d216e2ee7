// header.js is the top of a session's screen: who and what it is, its
// live state and badge, usage and spend, the credential its agent lacks,
// and the session actions (Cancel turn, Stop, Resume, Snapshot, Delete).

import { api, sessionPath } from './api.js';
import { h, badge, ago, runner } from './dom.js';
import { usageText } from './transcript.js';
import { spendText, budgetLeft } from './spend.js';

// create builds the header for session id; hooks.onChange is called after
// an action changed the session.
export function create(id, hooks) {
  const title = h('h1', { text: id });
  const facts = h('dl', { class: 'facts' });
  const badgeSlot = h('span');
  const live = h('span', { class: 'live muted', role: 'status' });
  const usage = h('span', { class: 'usage muted' });
  const spend = h('p', { class: 'spend' });
  // missing names the credential the agent's model calls lack, with a
  // link to the screen that sets it (docs/api.md, The model gateway).
  const missing = h('p', { class: 'missing-credential', role: 'status' });
  const status = h('p', { class: 'error', role: 'alert' });
  const notice = h('p', { class: 'notice', role: 'status' });
  // controls is where agent controls (mode, model, config, commands) go.
  const controls = h('div', { class: 'controls' });

  const run = runner(status, () => hooks.onChange());
  const act = (label, fn, cls = '') => h('button', { type: 'button', class: cls, text: label,
    onclick: (e) => run(e.currentTarget, fn) });
  const cancel = act('Cancel turn', () => api('POST', sessionPath(id, '/cancel')));
  const stop = act('Stop', () => api('POST', sessionPath(id, '/stop')));
  const resume = act('Resume', () => api('POST', sessionPath(id, '/resume')));
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
    h('nav', { class: 'crumbs' }, h('a', { href: '/', text: '← Sessions' })),
    h('div', { class: 'bar' }, title, badgeSlot, live),
    missing,
    facts,
    spend,
    usage,
    controls,
    h('div', { class: 'actions', role: 'toolbar', 'aria-label': 'Session actions' }, cancel, stop, resume, snapshot, del),
    confirmBox, notice, status);

  return {
    element,
    // slot is where the agent's controls mount (session.js).
    slot: controls,
    // update shows session s.
    update(s) {
      title.textContent = s.name || s.id;
      document.title = `${s.name || s.id} · berth`;
      badgeSlot.replaceChildren(badge(s.badge));
      const fact = (k, v) => h('div', {}, h('dt', { text: k }), h('dd', {}, v));
      facts.replaceChildren(...[
        s.name ? fact('ID', s.id) : null,
        fact('Agent', s.agent),
        fact('State', `${s.state}${s.stop_reason ? ` (${s.stop_reason})` : ''}`),
        fact('Workspace', h('span', { class: 'path', text: s.workspace })),
        s.worktree ? fact('Worktree', h('span', { class: 'path', text: `${s.worktree.repo} · ${s.worktree.branch} (from ${s.worktree.base})` })) : null,
        s.mounts && s.mounts.length ? fact('Mounts', s.mounts.join(', ')) : null,
        fact('Sandbox', `${s.sandbox.provider}${s.sandbox.network ? ', network' : ''}`),
        fact('Permission mode', s.permission_mode),
        fact('Pending permissions', String(s.pending_permissions)),
        fact('Pending questions', String(s.pending_elicitations || 0)),
        fact('Last activity', ago(s.last_activity_at)),
        s.parent_id ? fact('Parent', h('a', { href: `/sessions/${encodeURIComponent(s.parent_id)}`, text: s.parent_id })) : null,
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
      stop.disabled = s.state === 'stopped';
      resume.disabled = !(s.state === 'stopped' && s.resumable);
    },
    setUsage(d) { usage.textContent = `Usage: ${usageText(d)}`; },
    setLive(open) { live.textContent = open ? '● live' : '○ reconnecting…'; },
    error(e) { status.textContent = e.message; },
  };
}

// conversation.js is the session's conversation controls: Clear (a new
// agent conversation, after a confirmation) and, while the agent needs
// authentication (badge needs_auth), one button per auth method it offers.

import { api, sessionPath } from './api.js';
import { h, runner } from './dom.js';

// create builds the controls for session id; hooks.onChange is called
// after an action changed the session.
export function create(id, hooks) {
  const status = h('p', { class: 'error', role: 'alert' });
  const run = runner(status, () => hooks.onChange());
  let busy = false;
  const doClear = h('button', { type: 'button', class: 'danger', text: 'Clear conversation',
    onclick: (e) => run(e.currentTarget, async () => {
      await api('POST', sessionPath(id, `/clear${busy ? '?cancel=true' : ''}`));
      confirmBox.hidden = true;
    }) });
  const confirmText = h('span');
  const confirmBox = h('div', { class: 'confirm', hidden: true }, confirmText, doClear,
    h('button', { type: 'button', text: 'Keep conversation', onclick: () => { confirmBox.hidden = true; } }));
  const clear = h('button', { type: 'button', text: 'Clear', onclick: () => {
    confirmText.textContent = busy
      ? 'Cancel the turn in flight, drop pending prompts and start a new conversation with the agent?'
      : 'Drop pending prompts and start a new conversation with the agent? The workspace and the log stay.';
    confirmBox.hidden = false;
  } });
  const auth = h('div', { class: 'auth', role: 'group', 'aria-label': 'Authenticate the agent', hidden: true });

  return {
    element: h('div', { class: 'conversation' },
      h('div', { class: 'actions', role: 'toolbar', 'aria-label': 'Conversation' }, clear), confirmBox, auth, status),
    // update shows session s.
    update(s) {
      busy = ['running', 'waiting', 'hung'].includes(s.badge);
      clear.disabled = s.state !== 'active';
      const methods = Array.isArray(s.acp?.auth_methods) ? s.acp.auth_methods.filter((m) => m && typeof m.id === 'string') : [];
      auth.hidden = s.badge !== 'needs_auth' || methods.length === 0;
      if (auth.hidden) {
        auth.replaceChildren();
        return;
      }
      auth.replaceChildren(h('span', { text: 'The agent needs you to sign in:' }),
        ...methods.map((m) => h('button', { type: 'button', text: `Authenticate: ${m.name || m.id}`,
          title: m.description || m.id,
          onclick: (e) => run(e.currentTarget, () => api('POST', sessionPath(id, '/authenticate'), { method_id: m.id })) })));
    },
  };
}

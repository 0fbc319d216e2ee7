// permissions.js is a permission request's card: what the agent wants to
// do and one button per option, named as the agent names it.

import { h, token } from './dom.js';

// permissionCard returns {node, resolve(data)}; decide(optionId) is called
// when a button is pressed and resolves when the decision is stored.
export function permissionCard(p, decide) {
  const tc = p.tool_call || {};
  const status = h('p', { class: 'perm-status', role: 'status' });
  const buttons = (p.options || []).map((o) => h('button', {
    type: 'button', class: `perm-option kind-${token(o.kind)}`, text: o.name, 'data-option': o.id,
    onclick: async () => {
      buttons.forEach((b) => { b.disabled = true; });
      try {
        await decide(o.id);
      } catch (e) {
        status.textContent = e.message;
        if (e.status !== 409) buttons.forEach((b) => { b.disabled = false; });
      }
    },
  }));
  const node = h('div', { class: 'perm-card', role: 'group', 'aria-label': `Permission: ${tc.title || p.id}` },
    h('div', {}, h('span', { class: 'tag kind', text: tc.kind || 'other' }), ' ', h('strong', { text: tc.title || 'The agent asks' })),
    h('div', { class: 'perm-options' }, buttons),
    status);
  if (p.state && p.state !== 'pending') resolve({ option_id: p.option_id, decided_by: p.decided_by });

  // resolve shows the decision and retires the buttons.
  function resolve(d) {
    buttons.forEach((b) => { b.disabled = true; });
    node.classList.add('decided');
    const chosen = (p.options || []).find((o) => o.id === d.option_id);
    status.textContent = `Decided: ${chosen ? chosen.name : d.option_id || 'none'} (by ${d.decided_by || '?'})`;
  }
  return { node, resolve };
}

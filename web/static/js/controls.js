// controls.js is the agent's controls on a session's screen (docs/api.md,
// "Agent controls" and "Web UI"), under the Prompt box as chat apps have
// them: pickers for its mode, model and config options, which PATCH the
// session, and the slash commands it offers, which put "/name " in the
// Prompt box. Everything the agent names goes in as text.

import { api, sessionPath } from './api.js';
import { h } from './dom.js';

// create builds the controls of session id. hooks.onChange runs after a
// change was applied; hooks.prompt is the Prompt box's textarea.
export function create(id, hooks) {
  const pickers = h('div', { class: 'pickers' });
  const commands = h('ul', { class: 'commands', 'aria-label': 'Commands' });
  const commandsBox = h('div', { class: 'commands-box', hidden: true },
    h('span', { class: 'muted', text: 'Commands: ' }), commands);
  const status = h('p', { class: 'error', role: 'alert' });
  const element = h('section', { class: 'agent-controls', 'aria-label': 'Agent controls' }, pickers, commandsBox, status);
  // shown is the JSON of what the pickers show, so an update that changes
  // nothing leaves a picker the user is looking at alone.
  let shown = '';

  // patch sends one change; the picker goes back to the session's value
  // when it is refused.
  async function patch(body, revert) {
    status.textContent = '';
    try {
      await api('PATCH', sessionPath(id), body);
      hooks.onChange();
    } catch (e) {
      status.textContent = e.message;
      revert();
    }
  }

  // picker is a labelled <select> of values [{value, name}] at current.
  function picker(key, label, values, current, disabled, onPick) {
    const sel = h('select', { id: `ctl-${key}`, name: key, disabled },
      values.map((v) => h('option', { value: v.value, text: v.name || v.value })));
    sel.value = current;
    sel.addEventListener('change', () => onPick(sel.value, () => { sel.value = current; }));
    return h('div', { class: 'picker' }, h('label', { for: `ctl-${key}`, text: label }), sel);
  }

  return {
    element,
    // update shows what session s's agent offers.
    update(s) {
      const acp = s.acp || {};
      const key = JSON.stringify([s.state, acp.modes, acp.models, acp.config_options]);
      if (key !== shown) {
        shown = key;
        const off = s.state !== 'active';
        const list = [];
        if (acp.modes && acp.modes.available.length) {
          list.push(picker('mode', 'Mode', acp.modes.available.map((m) => ({ value: m.id, name: m.name })),
            acp.modes.current, off, (v, revert) => patch({ mode: v }, revert)));
        }
        if (acp.models && acp.models.available.length) {
          list.push(picker('model', 'Model', acp.models.available.map((m) => ({ value: m.id, name: m.name })),
            acp.models.current, off, (v, revert) => patch({ model: v }, revert)));
        }
        (acp.config_options || []).forEach((o, i) => {
          // The mode and model options have their own pickers above.
          if ((o.category === 'model' && acp.models) || (o.category === 'mode' && acp.modes)) return;
          if (o.type === 'select') {
            list.push(picker(`config-${i}`, o.name || o.id, o.options || [], o.current, off,
              (v, revert) => patch({ config: { [o.id]: v } }, revert)));
          } else if (o.type === 'boolean') {
            const box = h('input', { type: 'checkbox', id: `ctl-config-${i}`, disabled: off });
            box.checked = o.current === true;
            box.addEventListener('change', () => patch({ config: { [o.id]: box.checked } }, () => { box.checked = o.current === true; }));
            list.push(h('div', { class: 'picker' }, box, h('label', { for: `ctl-config-${i}`, text: o.name || o.id })));
          }
        });
        pickers.replaceChildren(...list);
      }
      const cmds = acp.commands || [];
      commandsBox.hidden = cmds.length === 0;
      commands.replaceChildren(...cmds.map((c) => h('li', {},
        h('button', { type: 'button', class: 'command', title: c.description || '', text: `/${c.name}`, onclick: () => {
          hooks.prompt.value = `/${c.name} `;
          hooks.prompt.focus();
        } }))));
    },
  };
}

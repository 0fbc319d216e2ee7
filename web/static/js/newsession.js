// newsession.js is the New session form (POST /v1/sessions): agent from
// the catalog with what each still needs (install, credential, download),
// workspace, sandbox, permission mode, network and a first prompt. On
// success the browser opens the session.

import { api } from './api.js';
import { h } from './dom.js';
import { create as worktreeFields } from './worktreefields.js';

const SANDBOXES = [['', 'default (auto)'], ['bwrap', 'bwrap'], ['docker', 'docker'], ['host', 'host (no isolation)']];
const MODES = ['approve-reads', 'ask', 'approve-all', 'deny-all'];

// create builds the form in a dialog; it returns {element, open, setAgents}.
export function create() {
  const field = (id, label, input, hint) => h('div', { class: 'field' },
    h('label', { for: id, text: label }), input, hint ? h('small', { class: 'muted', text: hint }) : null);
  const agent = h('select', { id: 'ns-agent', name: 'agent', required: true });
  const name = h('input', { id: 'ns-name', name: 'name', autocomplete: 'off' });
  const workspace = h('input', { id: 'ns-workspace', name: 'workspace', placeholder: 'managed by berth', autocomplete: 'off' });
  const sandbox = h('select', { id: 'ns-sandbox', name: 'sandbox' }, SANDBOXES.map(([v, t]) => h('option', { value: v, text: t })));
  const mode = h('select', { id: 'ns-mode', name: 'permission_mode' }, MODES.map((m) => h('option', { value: m, text: m })));
  const network = h('input', { id: 'ns-network', name: 'network', type: 'checkbox' });
  const labels = h('input', { id: 'ns-labels', name: 'labels', placeholder: 'team=web, ticket=42', autocomplete: 'off' });
  const prompt = h('textarea', { id: 'ns-prompt', name: 'prompt', rows: 3 });
  const status = h('p', { class: 'error', role: 'alert' });
  const createBtn = h('button', { type: 'submit', class: 'primary', text: 'Create' });
  const worktree = worktreeFields(field);

  const dialog = h('dialog', { class: 'new-session', 'aria-labelledby': 'ns-title' },
    h('form', { method: 'dialog', onsubmit: submit },
      h('h2', { id: 'ns-title', text: 'New session' }),
      field('ns-agent', 'Agent', agent),
      field('ns-name', 'Name', name),
      field('ns-workspace', 'Workspace', workspace, 'An existing directory on the daemon\'s host; empty for a new managed one.'),
      ...worktree.elements,
      field('ns-sandbox', 'Sandbox', sandbox),
      field('ns-mode', 'Permission mode', mode),
      h('div', { class: 'field check' }, network, h('label', { for: 'ns-network', text: 'Network' })),
      field('ns-labels', 'Labels', labels),
      field('ns-prompt', 'First prompt', prompt),
      status,
      h('div', { class: 'actions' },
        h('button', { type: 'button', text: 'Close', onclick: () => dialog.close() }),
        createBtn)));

  // submit creates the session and opens its page.
  async function submit(e) {
    e.preventDefault();
    status.textContent = '';
    const body = { agent: agent.value, permission_mode: mode.value };
    if (name.value.trim()) body.name = name.value.trim();
    if (workspace.value.trim()) body.workspace = workspace.value.trim();
    if (sandbox.value) body.sandbox = sandbox.value;
    if (network.checked) body.network = true;
    if (prompt.value.trim()) body.prompt = prompt.value;
    const lab = parseLabels(labels.value);
    if (lab === null) { status.textContent = 'Labels are key=value pairs separated by commas.'; return; }
    if (Object.keys(lab).length) body.labels = lab;
    const wtError = worktree.fill(body);
    if (wtError) { status.textContent = wtError; return; }
    createBtn.disabled = true;
    try {
      const s = await api('POST', '/v1/sessions', body);
      window.location.assign(`/sessions/${encodeURIComponent(s.id)}`);
    } catch (err) {
      status.textContent = err.message;
    } finally {
      createBtn.disabled = false;
    }
  }

  return {
    element: dialog,
    open: () => dialog.showModal(),
    setAgents(agents) {
      agent.replaceChildren(...agents.map((a) => h('option', {
        value: a.name,
        text: `${a.name}${agentNote(a)}`,
        title: a.description || '',
      })));
      agent.value = defaultAgent(agents);
    },
  };
}

// agentNote says what an agent lacks before its first session works: not
// installed, else a credential not set and a download at its first start.
function agentNote(a) {
  if (!a.available) return ' (not installed)';
  const notes = [];
  if (a.credential && !a.credential_set) notes.push(`needs credential ${a.credential}`);
  if (a.fetch) notes.push('downloads on first use');
  return notes.map((n) => ` — ${n}`).join('');
}

// defaultAgent is the agent the form starts with: an available one whose
// credential is set (a real model, ready; one already downloaded first),
// else demo, else the first available one.
function defaultAgent(agents) {
  const ready = agents.filter((a) => a.available && a.credential && a.credential_set);
  const pick = ready.find((a) => !a.fetch) || ready[0];
  if (pick) return pick.name;
  if (agents.some((a) => a.name === 'demo')) return 'demo';
  const first = agents.find((a) => a.available);
  return first ? first.name : '';
}

// parseLabels reads "k=v, k2=v2" into an object; null when malformed.
function parseLabels(text) {
  const out = {};
  for (const part of text.split(',').map((p) => p.trim()).filter(Boolean)) {
    const i = part.indexOf('=');
    if (i <= 0) return null;
    out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

// exec.js is the exec console: a command run with sh -c in the session's
// sandbox and workspace (POST …/exec), its exit code and output. Run is
// disabled while the session is not active (setState).

import { api, sessionPath } from './api.js';
import { h } from './dom.js';

// create builds the console of session id.
export function create(id) {
  const cmd = h('input', { id: 'exec-cmd', name: 'command', autocomplete: 'off', placeholder: 'ls -la' });
  const out = h('pre', { class: 'terminal', role: 'status', 'aria-label': 'Exec output' });
  const run = h('button', { type: 'submit', text: 'Run', disabled: true });
  // off is set while the session cannot run a command (and until its
  // state is known).
  let off = true;
  const element = h('section', { class: 'panel', 'aria-labelledby': 'exec-title' },
    h('h2', { id: 'exec-title', text: 'Exec console' }),
    h('form', { class: 'exec', onsubmit: async (e) => {
      e.preventDefault();
      if (!cmd.value.trim() || off) return;
      run.disabled = true;
      out.textContent = `$ ${cmd.value}\n…`;
      try {
        const r = await api('POST', sessionPath(id, '/exec'), { command: ['sh', '-c', cmd.value] });
        out.textContent = `$ ${cmd.value}\n${r.stdout}${r.stderr}` +
          `[exit ${r.exit_code}${r.timed_out ? ', timed out' : ''}, ${r.duration_ms} ms]`;
      } catch (err) {
        out.textContent = `$ ${cmd.value}\n${err.message}`;
      } finally {
        run.disabled = off;
      }
    } }, h('label', { for: 'exec-cmd', text: 'Command' }), cmd, run),
    out);
  return {
    element,
    // setState enables Run while session s is active.
    setState(s) {
      off = !s || s.state !== 'active';
      run.disabled = off;
    },
  };
}

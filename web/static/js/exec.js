// exec.js is the exec console: a command run with sh -c in the session's
// sandbox and workspace (POST …/exec), its exit code and output.

import { api, sessionPath } from './api.js';
import { h } from './dom.js';

// create builds the console of session id.
export function create(id) {
  const cmd = h('input', { id: 'exec-cmd', name: 'command', autocomplete: 'off', placeholder: 'ls -la' });
  const out = h('pre', { class: 'terminal', role: 'status', 'aria-label': 'Exec output' });
  const run = h('button', { type: 'submit', text: 'Run' });
  const element = h('section', { class: 'panel', 'aria-labelledby': 'exec-title' },
    h('h2', { id: 'exec-title', text: 'Exec console' }),
    h('form', { class: 'exec', onsubmit: async (e) => {
      e.preventDefault();
      if (!cmd.value.trim()) return;
      run.disabled = true;
      out.textContent = `$ ${cmd.value}\n…`;
      try {
        const r = await api('POST', sessionPath(id, '/exec'), { command: ['sh', '-c', cmd.value] });
        out.textContent = `$ ${cmd.value}\n${r.stdout}${r.stderr}` +
          `[exit ${r.exit_code}${r.timed_out ? ', timed out' : ''}, ${r.duration_ms} ms]`;
      } catch (err) {
        out.textContent = `$ ${cmd.value}\n${err.message}`;
      } finally {
        run.disabled = false;
      }
    } }, h('label', { for: 'exec-cmd', text: 'Command' }), cmd, run),
    out);
  return { element };
}

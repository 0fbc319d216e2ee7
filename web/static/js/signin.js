// signin.js is the sign-in screen (docs/api.md, "Sign-in and browser safety"):
// a token typed into the form, or the one-time code of a /login#code=… address,
// is exchanged for the daemon's HttpOnly cookie. The token lives only in the
// form field: it is never stored and never put in a URL.

import { api } from './api.js';
import { h } from './dom.js';

// mount shows the form; once signed in the browser goes to opts.then.
export function mount(main, opts = {}) {
  const then = opts.then && opts.then !== '/login' ? opts.then : '/';
  const status = h('p', { class: 'error', role: 'alert' });
  const token = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'current-password', required: true });
  const form = h('form', { class: 'signin', onsubmit: (e) => { e.preventDefault(); signIn({ token: token.value }); } },
    h('h1', { text: 'Sign in to berth' }),
    h('p', { class: 'muted', text: 'Paste the daemon\'s token (berth ui prints a one-time sign-in address instead).' }),
    h('label', { for: 'token', text: 'Token' }), token,
    h('button', { type: 'submit', class: 'primary', text: 'Sign in' }),
    status);
  main.append(form);

  // signIn posts body to /v1/login and leaves for `then` when it works.
  async function signIn(body) {
    status.textContent = '';
    try {
      await api('POST', '/v1/login', body, { quiet401: true });
      token.value = '';
      window.location.assign(then);
    } catch (e) {
      status.textContent = e.status === 401 ? 'That did not work: check the token, or ask for a new sign-in address.' : e.message;
    }
  }

  const code = new URLSearchParams(window.location.hash.slice(1)).get('code');
  if (code) {
    // The code is single-use: take it out of the address (and history) first.
    window.history.replaceState(null, '', window.location.pathname + window.location.search);
    signIn({ code });
  } else {
    token.focus();
  }
  return null;
}

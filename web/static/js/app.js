// app.js starts the screen the address names: /sessions/{id} a session,
// /credentials the credentials, /login the sign-in, anything else the
// sessions list. Each screen is a module with mount(main) → unmount; a 401
// from any call swaps in the sign-in screen, which comes back here once
// signed in.

import { api, UNAUTHENTICATED } from './api.js';
import { h } from './dom.js';
import * as sessions from './sessions.js';
import * as session from './session.js';
import * as signin from './signin.js';
import * as credentials from './credentials.js';

const main = document.getElementById('main');
const nav = document.getElementById('topnav');
let unmount = null;

// show replaces the current screen with screen.mount(main, ...args). The
// top bar's links need a sign-in: the sign-in screen shows none.
function show(screen, ...args) {
  if (unmount) unmount();
  main.replaceChildren();
  nav.hidden = screen === signin;
  unmount = screen.mount(main, ...args) || null;
}

// start picks the screen from the address.
function start() {
  const path = window.location.pathname;
  const m = path.match(/^\/sessions\/([^/]+)$/);
  if (path === '/login') show(signin, { then: '/' });
  else if (path === '/credentials') show(credentials);
  else if (m) show(session, decodeURIComponent(m[1]));
  else show(sessions);
}

let signingIn = false;
window.addEventListener(UNAUTHENTICATED, () => {
  if (signingIn) return;
  signingIn = true;
  show(signin, { then: window.location.pathname + window.location.search });
});

// The top bar's Credentials opens that screen (credentials.js).
nav.append(h('a', { href: '/credentials', text: 'Credentials' }), ' ');

// The top bar's Sign out ends this browser's sign-in on the daemon (the
// cookie is host-scoped: other services on 127.0.0.1 also receive it, so a
// sign-in should not outlive its use).
nav.append(h('button', {
  type: 'button', class: 'link', text: 'Sign out',
  onclick: async () => {
    try { await api('POST', '/v1/logout', undefined, { quiet401: true }); } catch { /* signed out anyway */ }
    window.location.assign('/');
  },
}));

start();

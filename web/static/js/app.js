// app.js starts the screen the address names: /sessions/{id} a session,
// /login the sign-in, anything else the sessions list. Each screen is a
// module with mount(main) → unmount; a 401 from any call swaps in the
// sign-in screen, which comes back here once signed in.

import { UNAUTHENTICATED } from './api.js';
import * as sessions from './sessions.js';
import * as session from './session.js';
import * as signin from './signin.js';

const main = document.getElementById('main');
let unmount = null;

// show replaces the current screen with screen.mount(main, ...args).
function show(screen, ...args) {
  if (unmount) unmount();
  main.replaceChildren();
  unmount = screen.mount(main, ...args) || null;
}

// start picks the screen from the address.
function start() {
  const path = window.location.pathname;
  const m = path.match(/^\/sessions\/([^/]+)$/);
  if (path === '/login') show(signin, { then: '/' });
  else if (m) show(session, decodeURIComponent(m[1]));
  else show(sessions);
}

let signingIn = false;
window.addEventListener(UNAUTHENTICATED, () => {
  if (signingIn) return;
  signingIn = true;
  show(signin, { then: window.location.pathname + window.location.search });
});

start();

// api.js is the one way the UI talks to the daemon: same-origin fetches
// with the sign-in cookie, JSON bodies labelled as JSON (the daemon refuses
// anything else), and a 401 turned into the sign-in screen.

// APIError is a failed call, with the API's error code and message.
export class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// UNAUTHENTICATED is the window event sent when the daemon wants a sign-in.
export const UNAUTHENTICATED = 'berth:unauthenticated';

// api sends one request; body (when given) is sent as JSON. It resolves to
// the decoded answer (null for an empty one) and rejects with an APIError.
// opts.quiet401 keeps a 401 from opening the sign-in screen.
export async function api(method, path, body, opts = {}) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new APIError(0, 'unavailable', 'the daemon cannot be reached');
  }
  if (res.status === 401 && !opts.quiet401) {
    window.dispatchEvent(new CustomEvent(UNAUTHENTICATED));
  }
  if (res.status === 204) return null;
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON: a proxy's page */ }
  if (!res.ok) {
    const err = (data && data.error) || {};
    throw new APIError(res.status, err.code || 'unknown', err.message || `${res.status} ${res.statusText}`);
  }
  return data;
}

// sessionPath is the API path of a session (and a sub-path).
export function sessionPath(id, sub = '') {
  return `/v1/sessions/${encodeURIComponent(id)}${sub}`;
}

// query builds "?k=v&…" from the non-empty values of params.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (Array.isArray(v)) v.filter(Boolean).forEach((x) => q.append(k, x));
    else if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

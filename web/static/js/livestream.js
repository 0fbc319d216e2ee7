// livestream.js follows an SSE stream with EventSource, which resends
// Last-Event-ID by itself when it reconnects. When the browser gives up on
// a stream (an error status, a daemon that came back with a new one), it
// is opened again after a pause from a URL the caller builds, so the
// caller can resume from what it has.

// follow opens url() and calls on[type](parsedData, messageEvent) for each
// event type named in on. It returns a close function. onState(open, fresh)
// is told when the stream opens and when it drops; fresh is true on the
// first open of a new connection (no Last-Event-ID: the caller may have
// missed events and should catch up).
//
// EventSource hides the status of a refused stream, so when it gives up,
// probe() (an ordinary API call) runs first: a 401 there opens the sign-in
// screen (the sign-in ended: a logout, its expiry, a new token; a restart
// keeps it).
export function follow(url, on, onState = () => {}, probe = () => {}) {
  let es = null;
  let timer = null;
  let closed = false;
  let failures = 0;

  const open = () => {
    if (closed) return;
    const source = new EventSource(url(), { withCredentials: true });
    es = source;
    let opened = false;
    source.onopen = () => {
      failures = 0;
      onState(true, !opened);
      opened = true;
    };
    source.onerror = () => {
      onState(false, false);
      if (source.readyState === EventSource.CLOSED) reopenLater();
    };
    for (const [type, fn] of Object.entries(on)) {
      source.addEventListener(type, (msg) => {
        let data;
        try { data = JSON.parse(msg.data); } catch { return; }
        fn(data, msg);
      });
    }
  };
  const reopenLater = () => {
    es.close();
    Promise.resolve().then(probe).catch(() => {});
    failures++;
    clearTimeout(timer);
    timer = setTimeout(open, Math.min(5000, 500 * failures));
  };
  open();
  return () => {
    closed = true;
    clearTimeout(timer);
    if (es) es.close();
  };
}

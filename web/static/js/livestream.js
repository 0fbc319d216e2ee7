// livestream.js follows an SSE stream with EventSource, which resends
// Last-Event-ID by itself when it reconnects. When the browser gives up on
// a stream (an error status, a daemon that came back with a new one), it
// is opened again after a pause from a URL the caller builds, so the
// caller can resume from what it has.

// follow opens url() and calls on[type](parsedData, messageEvent) for each
// event type named in on. It returns a close function. onState(open) is
// told when the stream opens and when it drops.
export function follow(url, on, onState = () => {}) {
  let es = null;
  let timer = null;
  let closed = false;
  let failures = 0;

  const open = () => {
    if (closed) return;
    es = new EventSource(url(), { withCredentials: true });
    es.onopen = () => { failures = 0; onState(true); };
    es.onerror = () => {
      onState(false);
      if (es.readyState === EventSource.CLOSED) reopenLater();
    };
    for (const [type, fn] of Object.entries(on)) {
      es.addEventListener(type, (msg) => {
        let data;
        try { data = JSON.parse(msg.data); } catch { return; }
        fn(data, msg);
      });
    }
  };
  const reopenLater = () => {
    es.close();
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

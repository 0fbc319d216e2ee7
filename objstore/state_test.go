package objstore

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// rewritingStore is an S3 endpoint of one object that is rewritten after
// each of its first rewrites HEADs, before the GET of that read: what a
// node writing a session's state.json again does to a reader. A GET for
// an ETag the object no longer has is refused as S3 refuses it (412).
type rewritingStore struct {
	mu       sync.Mutex
	version  int
	rewrites int
	gets     int
}

func (s *rewritingStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	body := fmt.Sprintf(`{"v":2,"session_id":"ses_r","seq":%d}`, s.version)
	etag := fmt.Sprintf(`"etag-%d"`, s.version)
	if !strings.HasSuffix(r.URL.Path, "/"+StateKey("ses_r")) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Last-Modified", "Sun, 29 Nov 2026 12:00:00 GMT")
	w.Header().Set("Content-Type", "application/octet-stream")
	switch r.Method {
	case http.MethodHead:
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(http.StatusOK)
		if s.rewrites > 0 {
			s.rewrites--
			s.version++
		}
	case http.MethodGet:
		s.gets++
		if m := r.Header.Get("If-Match"); m != "" && m != etag {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusPreconditionFailed)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message><RequestId>1</RequestId></Error>`)
			return
		}
		w.Header().Set("ETag", etag)
		fmt.Fprint(w, body)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// A state.json rewritten while it is read is read again, whole, and the
// reader gets the newer one; past rereads rewrites in a row the read
// fails, saying so.
func TestReadStateRereadsARewrittenState(t *testing.T) {
	ctx := testenv.Context(t)
	for _, tc := range []struct {
		rewrites int
		seq      int64
		fails    bool
	}{{0, 0, false}, {2, 2, false}, {rereads, rereads, false}, {rereads + 1, 0, true}} {
		store := &rewritingStore{rewrites: tc.rewrites}
		srv := httptest.NewServer(store)
		c, err := Open(Config{URL: "s3://bkt/pfx?endpoint=" + srv.URL + "&region=us-east-1",
			Environ: []string{"AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s"}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := ReadState(ctx, c, "ses_r")
		srv.Close()
		switch {
		case tc.fails && (!rewritten(err) || !berth.IsCode(err, berth.EUnavailable)):
			t.Errorf("%d rewrites: %+v, %v; want the store's refusal", tc.rewrites, st, err)
		case !tc.fails && (err != nil || st.Seq != tc.seq):
			t.Errorf("%d rewrites: %+v, %v; want seq %d", tc.rewrites, st, err, tc.seq)
		}
		if want := min(tc.rewrites, rereads) + 1; store.gets != want {
			t.Errorf("%d rewrites: %d reads, want %d", tc.rewrites, store.gets, want)
		}
	}
}

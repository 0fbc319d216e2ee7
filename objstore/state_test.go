package objstore

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth/internal/testenv"
)

// rewritingStore is an S3 endpoint of one object that is rewritten after
// every request it answers: what a node writing a session's state.json
// again and again does to a reader. A GET for an ETag the object no
// longer has is refused as S3 refuses it (412).
type rewritingStore struct {
	mu       sync.Mutex
	version  int
	requests int
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
	s.requests++
	defer func() { s.version++ }()
	w.Header().Set("Last-Modified", "Sun, 29 Nov 2026 12:00:00 GMT")
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", etag)
	switch r.Method {
	case http.MethodHead:
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(http.StatusOK)
	case http.MethodGet:
		if m := r.Header.Get("If-Match"); m != "" && m != etag {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusPreconditionFailed)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message><RequestId>1</RequestId></Error>`)
			return
		}
		fmt.Fprint(w, body)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// A state.json rewritten after every request is read whole, as the
// version the one request saw: a read is one GET, never a HEAD and a GET
// that may see two versions.
func TestReadStateReadsARewrittenStateInOneRequest(t *testing.T) {
	ctx := testenv.Context(t)
	store := &rewritingStore{version: 7}
	srv := httptest.NewServer(store)
	defer srv.Close()
	c := openFake(t, srv.URL, "&region=us-east-1")
	for want := int64(7); want < 10; want++ {
		st, err := ReadState(ctx, c, "ses_r")
		if err != nil || st.Seq != want {
			t.Fatalf("read %d: %+v, %v; want seq %d", want, st, err, want)
		}
	}
	if store.requests != 3 {
		t.Errorf("3 reads made %d requests, want 3", store.requests)
	}
}

package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Many agents' calls at once, then as many again, reach the upstream over
// the connections the first opened: the gateway keeps each one idle for
// the next call rather than closing those past a per-upstream bound below
// the calls it serves at once.
func TestGatewayReusesUpstreamConnectionsOfCallsAtOnce(t *testing.T) {
	const n = 200 // calls at once: more than the bound before (128)
	var opened atomic.Int64
	var mu sync.Mutex
	arrived, release := 0, make(chan struct{})
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Each call waits for the whole wave, so that n connections are
		// in use at once.
		mu.Lock()
		wave := release
		if arrived++; arrived%n == 0 {
			close(release)
			release = make(chan struct{})
		}
		mu.Unlock()
		select {
		case <-wave:
		case <-r.Context().Done():
			return
		case <-time.After(time.Minute):
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"message","usage":{"input_tokens":1,"output_tokens":1}}`)
	}))
	up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			opened.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	gw, err := New(Options{Upstreams: []Upstream{{Name: "a", Kind: KindAnthropic, URL: up.URL, Credential: "anthropic"}},
		Credentials: &credStore{vals: realKeys}})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close(context.Background())
	srv := httptest.NewServer(gw)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: n, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var keys []string
	for i := range n {
		keys = append(keys, gw.Register(fmt.Sprintf("ses_%d", i)))
	}
	wave := func() {
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/a/v1/messages", strings.NewReader(`{"model":"m"}`))
				req.Header.Set("X-Api-Key", keys[i])
				resp, err := client.Do(req)
				if err != nil {
					errs[i] = err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs[i] = fmt.Errorf("status %d", resp.StatusCode)
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	wave()
	if got := opened.Load(); got != n {
		t.Fatalf("%d calls at once opened %d connections upstream", n, got)
	}
	wave()
	// A connection put back a moment after the next wave began may be
	// dialled anew; a bound below n closes n-128 of them every time.
	if got := opened.Load(); got > n+(n-128)/2 {
		t.Fatalf("two waves of %d calls opened %d connections upstream: the first wave's were closed", n, got)
	}
}

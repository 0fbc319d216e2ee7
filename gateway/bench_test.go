package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/modelstub"
)

// BenchmarkGateway times calls to the model stand-in straight and through
// the gateway, over kept-alive connections: the difference is what the
// gateway adds. It reports the median of a whole call (p50-ns) and of its
// first byte (first-byte-p50-ns). The official numbers are berth bench's.
func BenchmarkGateway(b *testing.B) {
	stub := httptest.NewServer(&modelstub.Server{})
	defer stub.Close()
	gw, err := New(Options{Upstreams: []Upstream{
		{Name: "anthropic", Kind: KindAnthropic, URL: stub.URL, Credential: "anthropic", Prices: testPrices},
		{Name: "openai", Kind: KindOpenAI, URL: stub.URL, Credential: "openai", Prices: testPrices},
	}, Credentials: &credStore{vals: realKeys}, Sessions: &sessionsRec{}})
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close(context.Background())
	srv := httptest.NewServer(gw)
	defer srv.Close()
	key := gw.Register("ses_bench")
	conversation := strings.Repeat(`{"role":"user","content":"a line of code\n\tand \"quotes\""},{"role":"assistant","content":"ok"},`, 1000)
	for _, c := range []struct{ name, path, body string }{
		{"anthropic-stream", "/v1/messages", `{"model":"m","stream":true,"max_tokens":9,"messages":[{"role":"user","content":"hello"}]}`},
		{"anthropic-stream-80KiB", "/v1/messages", `{"model":"m","stream":true,"max_tokens":9,"messages":[` + conversation + `{"role":"user","content":"hello"}]}`},
		{"openai-stream", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`},
		{"openai-json-80KiB", "/v1/chat/completions", `{"model":"m","messages":[` + conversation + `{"role":"user","content":"hello"}]}`},
	} {
		upstream := strings.SplitN(c.name, "-", 2)[0]
		for _, via := range []string{"direct", "gateway"} {
			url := stub.URL + c.path
			if via == "gateway" {
				url = srv.URL + "/" + upstream + c.path
			}
			b.Run(c.name+"/"+via, func(b *testing.B) {
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
				defer client.CloseIdleConnections()
				var total, first []time.Duration
				b.ReportAllocs()
				for b.Loop() {
					req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(c.body))
					req.Header.Set("X-Api-Key", key)
					req.Header.Set("Authorization", "Bearer "+key)
					start := time.Now()
					resp, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					var one [1]byte
					if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
						b.Fatal(err)
					}
					first = append(first, time.Since(start))
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					total = append(total, time.Since(start))
					if resp.StatusCode != http.StatusOK {
						b.Fatalf("status %d", resp.StatusCode)
					}
				}
				b.ReportMetric(float64(median(total)), "p50-ns")
				b.ReportMetric(float64(median(first)), "first-byte-p50-ns")
			})
		}
	}
}

// median is the middle of d.
func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

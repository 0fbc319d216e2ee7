package http

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkForward times a write sent to its session's owner directly and
// through another node (fake services and owner lookup: the proxy alone).
// cpu-ns/op is the whole process's CPU (client, B and A) per request, a
// figure the machine's load moves less than the time.
func BenchmarkForward(b *testing.B) {
	for _, via := range []string{"direct", "forwarded"} {
		b.Run(via, func(b *testing.B) {
			c := newFakeCluster()
			fa, fb := newFakeService(), newFakeService()
			srvA := NewServer(fa, ServerOptions{Token: "token-a", Cluster: c.clusterOf("a")})
			srvB := NewServer(fb, ServerOptions{Token: "token-b", Cluster: c.clusterOf("b")})
			for _, s := range []*Server{srvA, srvB} {
				if err := s.Listen("127.0.0.1:0", ""); err != nil {
					b.Fatal(err)
				}
				go s.Serve()
				defer s.Close(b.Context())
			}
			c.place("a", "http://"+srvA.Addr())
			c.set("ses_1", "a")
			target, tok := srvA, "token-a"
			if via == "forwarded" {
				target, tok = srvB, "token-b"
			}
			url := "http://" + target.Addr() + "/v1/sessions/ses_1/stop"
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			b.ReportAllocs()
			var before syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			b.ResetTimer()
			for b.Loop() {
				req, _ := http.NewRequest("POST", url, strings.NewReader(""))
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			var after syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

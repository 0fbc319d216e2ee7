package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/browsertest"
	"github.com/chromedp/chromedp"
)

// The web UI's speed in headless Chromium (BENCHMARKS.md): from the start
// of a navigation to the first animation frame that shows what the user
// came for. Run with
//
//	go test -run '^$' -bench BenchmarkUI -benchtime 5x ./cmd/berth
//
// They live here rather than in `berth bench` so the berth binary does not
// link chromedp.

// BenchmarkUIListFirstRows: the sessions list of a daemon with 1,000
// sessions, to its first rows.
func BenchmarkUIListFirstRows(b *testing.B) {
	s := serverOfStopped(b, 1000, "s-%04d")
	tab := signedInTab(b, s)
	tab.MarkWhen("rows", `document.querySelectorAll('table.sessions tbody tr[data-id]').length > 0`)
	b.ResetTimer()
	var total float64
	for range b.N {
		tab.Run(chromedp.Navigate("http://" + s.addr + "/"))
		total += tab.Mark("rows")
	}
	b.ReportMetric(total/float64(b.N), "ms/first-rows")
}

// BenchmarkUITranscriptLastEvent: a session with 10,000 events, to its
// last event on the page.
func BenchmarkUITranscriptLastEvent(b *testing.B) {
	s := startServer(b, b.TempDir())
	var lines []string
	for i := range 4999 {
		lines = append(lines, fmt.Sprintf("echo line %d", i), fmt.Sprintf("think thought %d", i))
	}
	var sess struct {
		ID string `json:"id"`
	}
	if st, err := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": "host"}, &sess); st != 201 || err != nil {
		b.Fatalf("create: %d %v", st, err)
	}
	if st, err := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]any{"text": strings.Join(lines, "\n")}, nil); st != 200 || err != nil {
		b.Fatalf("prompt: %d %v", st, err)
	}
	var got struct {
		LastSeq int64 `json:"last_seq"`
	}
	s.api("GET", "/v1/sessions/"+sess.ID, nil, &got)
	if got.LastSeq < 10000 {
		b.Fatalf("only %d events", got.LastSeq)
	}
	tab := signedInTab(b, s)
	tab.MarkWhen("last", fmt.Sprintf(`document.querySelector('.transcript') && document.querySelector('.transcript').dataset.lastSeq == '%d'`, got.LastSeq))
	b.ResetTimer()
	var total float64
	for range b.N {
		tab.Run(chromedp.Navigate("http://" + s.addr + "/sessions/" + sess.ID))
		total += tab.Mark("last")
	}
	b.ReportMetric(total/float64(b.N), "ms/last-event")
	b.ReportMetric(float64(got.LastSeq), "events")
}

// signedInTab opens a tab of a new browser signed in to s.
func signedInTab(tb testing.TB, s *server) *browsertest.Tab {
	tab := browsertest.New(tb).Tab(tb)
	signIn(tb, tab, s)
	return tab
}

package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/daemon"
	"github.com/berth-sh/berth/internal/ids"
)

// scrapeResult holds the figures of bench --scrape.
type scrapeResult struct {
	// ScrapeSessions is how many sessions the daemon had (the bench's live
	// ones and stopped ones stored to make up the number).
	ScrapeSessions int     `json:"scrape_sessions,omitempty"`
	ScrapeLive     int     `json:"scrape_live_sessions,omitempty"`
	ScrapeP50Ms    float64 `json:"scrape_p50_ms,omitempty"`
	ScrapeP99Ms    float64 `json:"scrape_p99_ms,omitempty"`
	// ScrapeCPUMs is the CPU time (user+sys) of this process per scrape:
	// the daemon's answer and the client reading it, which the machine's
	// load moves far less than the wall time.
	ScrapeCPUMs float64 `json:"scrape_cpu_ms,omitempty"`
	ScrapeBytes int     `json:"scrape_bytes,omitempty"`
}

// scrapeRounds is how many scrapes bench --scrape times.
const scrapeRounds = 50

// benchScrape stores stopped sessions until the daemon has n (across a
// few agents, stop reasons and failures, so the session gauge has many
// series), then times GET /metrics over TCP with the token.
func benchScrape(ctx context.Context, d *daemon.Daemon, live, n int, res *scrapeResult) error {
	base := time.Now().UTC()
	reasons := []berth.StopReason{berth.StopUserRequested, berth.StopIdleTimeout, berth.StopAgentExited, berth.StopAgentCrashed}
	for i := live; i < n; i++ {
		at := base.Add(time.Duration(i) * time.Microsecond)
		s := &berth.Session{ID: ids.New("ses"), Name: "scrape-" + strconv.Itoa(i), Agent: []string{"demo", "claude", "codex"}[i%3],
			State: berth.StateStopped, StopReason: reasons[i%len(reasons)], Workspace: d.Home(), Labels: map[string]string{},
			CreatedAt: at, UpdatedAt: at, LastActivityAt: at}
		if s.StopReason == berth.StopAgentCrashed {
			s.Failure = &berth.Failure{Kind: berth.FailProcessExit, Message: "exit status 1"}
		}
		if err := d.Store().CreateSession(ctx, s); err != nil {
			return err
		}
	}
	get := func() (int, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+d.Addr()+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+d.Token())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		nb, err := io.Copy(io.Discard, resp.Body)
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("GET /metrics = %d", resp.StatusCode)
		}
		return int(nb), err
	}
	// One scrape first: connections and the store's caches are warm.
	if _, err := get(); err != nil {
		return err
	}
	cpu0 := cpuTime()
	var lat []time.Duration
	for range scrapeRounds {
		t0 := time.Now()
		nb, err := get()
		lat = append(lat, time.Since(t0))
		if err != nil {
			return err
		}
		res.ScrapeBytes = nb
	}
	res.ScrapeCPUMs = float64((cpuTime() - cpu0).Microseconds()) / 1000 / scrapeRounds
	res.ScrapeSessions, res.ScrapeLive = max(n, live), live
	res.ScrapeP50Ms, res.ScrapeP99Ms = pct(lat, 50), pct(lat, 99)
	return nil
}

// cpuTime is this process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

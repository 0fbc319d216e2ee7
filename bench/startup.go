package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// startupResult is what `berth bench --startup N` measures: a process's
// start to its end, N times each, interleaved so that all see the same
// machine — `berth --help`, `berth --version` and a Go hello world (the
// floor: a Go program that does nothing, built by the go on PATH as a
// plain `go build` builds it) — and a daemon's start on an empty home to
// its first answer. Figures are milliseconds, [smallest, median,
// largest].
type startupResult struct {
	Rounds      int        `json:"startup_rounds"`
	HelpMs      [3]float64 `json:"startup_help_ms"`
	VersionMs   [3]float64 `json:"startup_version_ms"`
	HelloMs     [3]float64 `json:"startup_hello_world_ms,omitzero"`
	HelpRatio   float64    `json:"startup_help_hello_ratio_p50,omitempty"`
	DaemonMs    [3]float64 `json:"startup_daemon_first_answer_ms"`
	Binary      string     `json:"startup_binary"`
	HelloNote   string     `json:"startup_hello_world_note,omitempty"`
	LoadAverage float64    `json:"load_average"`
}

// helloWorld is the floor's source.
const helloWorld = "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello, world\") }\n"

// runStartupBench times rounds starts of each and prints the result.
func runStartupBench(ctx context.Context, o benchBootOptions, rounds int, asJSON bool, out, progress io.Writer) error {
	bin := o.binary
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		bin = self
	}
	o.binary = bin
	tmp, err := os.MkdirTemp("", "berth-bench-startup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	res := startupResult{Rounds: rounds, Binary: bin}
	hello, err := buildHelloWorld(ctx, tmp)
	if err != nil {
		res.HelloNote = err.Error()
		fmt.Fprintf(progress, "no hello world to compare with: %v\n", err)
	}
	fmt.Fprintf(progress, "starting `berth --help`, `berth --version` and a hello world %d times each…\n", rounds)
	var help, version, hw []float64
	for range rounds {
		for _, run := range []struct {
			argv []string
			into *[]float64
		}{{[]string{bin, "--help"}, &help}, {[]string{bin, "--version"}, &version}, {[]string{hello}, &hw}} {
			if run.argv[0] == "" {
				continue
			}
			ms, err := timeRun(ctx, run.argv)
			if err != nil {
				return err
			}
			*run.into = append(*run.into, ms)
		}
	}
	res.HelpMs, res.VersionMs = spreadMs(help), spreadMs(version)
	if len(hw) > 0 {
		res.HelloMs = spreadMs(hw)
		res.HelpRatio = ratio(res.HelpMs[1], res.HelloMs[1])
	}
	fmt.Fprintf(progress, "starting a daemon on an empty home %d times…\n", rounds)
	var daemon []float64
	for range rounds {
		ms, err := daemonFirstAnswer(ctx, o, tmp)
		if err != nil {
			return err
		}
		daemon = append(daemon, ms)
	}
	res.DaemonMs = spreadMs(daemon)
	res.LoadAverage = loadAverage()
	if asJSON {
		return json.NewEncoder(out).Encode(res)
	}
	printStartup(out, res)
	return nil
}

// printStartup writes res as a table.
func printStartup(out io.Writer, res startupResult) {
	fmt.Fprintf(out, "start-up of %s, %d rounds (p50 [min–max] ms)\n", res.Binary, res.Rounds)
	row := func(name string, v [3]float64) {
		fmt.Fprintf(out, "  %-36s %7.2f  [%.2f–%.2f]\n", name, v[1], v[0], v[2])
	}
	row("berth --help", res.HelpMs)
	row("berth --version", res.VersionMs)
	if res.HelloMs[1] > 0 {
		row("a Go hello world", res.HelloMs)
		fmt.Fprintf(out, "  %-36s %7.2f×\n", "--help over the hello world", res.HelpRatio)
	}
	row("berth serve, empty home → first answer", res.DaemonMs)
	fmt.Fprintf(out, "  load average %.2f\n", res.LoadAverage)
}

// buildHelloWorld builds the hello world in dir with the go on PATH.
func buildHelloWorld(ctx context.Context, dir string) (string, error) {
	src := filepath.Join(dir, "hello")
	if err := os.Mkdir(src, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module hello\n"), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(helloWorld), 0o600); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "hello-world")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w: %s", err, b)
	}
	return out, nil
}

// timeRun runs argv to its end, its output discarded, and returns how
// long it took in milliseconds.
func timeRun(ctx context.Context, argv []string) (float64, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%v: %w", argv, err)
	}
	return msSince(t0), nil
}

// daemonFirstAnswer starts `berth serve` on an empty home under dir and
// returns the time to its first answer (GET /v1/health) in milliseconds.
func daemonFirstAnswer(ctx context.Context, o benchBootOptions, dir string) (float64, error) {
	home, err := os.MkdirTemp(dir, "home-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(home)
	d, err := serveHealthy(ctx, o, home)
	if err != nil {
		return 0, err
	}
	defer func() { _ = d.stop(time.Minute) }()
	return msSince(d.start), nil
}

// spreadMs is the smallest, the median and the largest of xs.
func spreadMs(xs []float64) [3]float64 {
	if len(xs) == 0 {
		return [3]float64{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return [3]float64{s[0], s[len(s)/2], s[len(s)-1]}
}

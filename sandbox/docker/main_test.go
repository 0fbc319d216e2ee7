package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"go.uber.org/goleak"

	"github.com/berth-sh/berth"

	"github.com/berth-sh/berth/internal/syncx"
	"github.com/berth-sh/berth/internal/testenv"
)

// The engine the tests use: BERTH_TEST_DOCKER_HOST, or a throwaway dockerd
// that TestMain starts when we are root and dockerd is installed. When
// there is none, engineSkip says why, and the tests skip (or fail under
// BERTH_REQUIRE_INTEGRATION=1).
var (
	engineHost string
	engineSkip string
	// testInstance labels this run's containers, so that RemoveLeftovers
	// tests touch nothing else on a shared engine.
	testInstance = "test-" + randomHex(4)
	// testImage is the default image the tests build and share.
	testImage = "berth-sandbox:" + testInstance
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(attackEnv); spec != "" {
		os.Exit(attack(spec))
	}
	var eng *testEngine
	switch {
	case os.Getenv("BERTH_TEST_DOCKER_HOST") != "":
		engineHost = os.Getenv("BERTH_TEST_DOCKER_HOST")
	case os.Geteuid() != 0:
		engineSkip = "BERTH_TEST_DOCKER_HOST is unset and starting a throwaway dockerd needs root"
	default:
		if _, err := exec.LookPath("dockerd"); err != nil {
			engineSkip = "BERTH_TEST_DOCKER_HOST is unset and dockerd is not installed (apt-get install docker.io busybox-static)"
			break
		}
		var err error
		if eng, err = startEngine(); err != nil {
			engineSkip = "the throwaway dockerd did not start: " + err.Error()
			break
		}
		engineHost = eng.host
	}
	code := m.Run()
	removeHelper()
	if engineHost != "" && eng == nil {
		cleanupSharedEngine()
	}
	if eng != nil {
		eng.stop()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// cleanupSharedEngine removes what this run left on an engine that was
// given to it: its containers and its image.
func cleanupSharedEngine() {
	p, err := New(Options{Host: engineHost, Instance: testInstance})
	if err != nil {
		return
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = p.RemoveLeftovers(ctx, nil)
	removeImage(ctx, p, testImage)
}

// needEngine skips the test when there is no engine, or fails it under
// BERTH_REQUIRE_INTEGRATION=1.
func needEngine(t testing.TB) {
	t.Helper()
	if engineSkip == "" {
		return
	}
	testenv.Missing(t, "docker", "%s", engineSkip)
}

// newProvider returns a provider on the test engine with the test's
// image and instance, closed when the test ends.
func newProvider(t testing.TB, opts Options) *Provider {
	t.Helper()
	needEngine(t)
	opts.Host = engineHost
	if opts.Image == "" {
		opts.Image = testImage
	}
	if opts.Instance == "" {
		opts.Instance = testInstance
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// testDirs makes a workspace and a home for a session, the daemon's as
// a session's are (Open gives them to the sandbox's user).
func testDirs(t testing.TB) (workspace, home string) {
	t.Helper()
	return t.TempDir(), t.TempDir()
}

// openSandbox opens a sandbox with fresh dirs; cfg's empty workspace and
// home are filled in. It is closed when the test ends.
func openSandbox(t testing.TB, p *Provider, cfg berth.SandboxConfig) *Sandbox {
	t.Helper()
	ws, home := testDirs(t)
	if cfg.Workspace == "" {
		cfg.Workspace = ws
	}
	if cfg.Home == "" {
		cfg.Home = home
	}
	if cfg.SessionID == "" {
		cfg.SessionID = "ses_" + randomHex(6)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := p.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sb.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sb.(*Sandbox)
}

// result is what run collects from one process.
type result struct {
	stdout, stderr string
	status         berth.ExitStatus
}

// run starts argv in sb with stdin (nil: none), reads both outputs to EOF
// and waits, all within a minute.
func run(t testing.TB, sb berth.Sandbox, stdin io.Reader, argv ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := berth.ProcSpec{Path: argv[0], Args: argv[1:], Stdin: stdin}
	if stdin == nil {
		spec.Stdin = strings.NewReader("")
	}
	proc, err := sb.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start %q: %v", argv, err)
	}
	return collect(t, proc)
}

// collect drains a started process's pipes and waits for it.
func collect(t testing.TB, proc berth.Process) result {
	t.Helper()
	var res result
	var wg sync.WaitGroup
	wg.Go(func() { b, _ := io.ReadAll(proc.Stdout()); res.stdout = string(b) })
	wg.Go(func() { b, _ := io.ReadAll(proc.Stderr()); res.stderr = string(b) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if syncx.Wait(ctx, &wg) != nil {
		_, _ = proc.Stop(context.Background(), 0)
		wg.Wait()
		t.Fatal("the process did not end within a minute")
	}
	st, err := proc.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	res.status = st
	return res
}

// ensureTestImage makes sure p's default image is on the engine, for p's
// sandboxes' user, and returns its id.
func ensureTestImage(t testing.TB, p *Provider) string {
	t.Helper()
	who, err := p.identity(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	id, err := p.ensureImage(t.Context(), p.opts.Image, who)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// removeImage removes image from the engine, ignoring errors.
func removeImage(ctx context.Context, p *Provider, image string) {
	_, _ = p.cli.ImageRemove(ctx, image, client.ImageRemoveOptions{Force: true, PruneChildren: true})
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

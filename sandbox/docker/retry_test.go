package docker

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/moby/moby/client"

	"github.com/berth-sh/berth"
)

// startFailer is an HTTP relay to the engine that answers the first
// container starts as an engine under load has (500, the runtime failed
// to start the container's process) and relays everything else.
func startFailer(t *testing.T, failures int32) (host string, failed *atomic.Int32) {
	t.Helper()
	return engineFailer(t, "/start", failures, `{"message":"failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: \"/busybox.berth\": stat /busybox.berth: permission denied: unknown"}`)
}

// engineFailer is an HTTP relay to the engine that answers the first
// failures POSTs to a path ending in suffix with a 500 of body, and
// relays everything else.
func engineFailer(t *testing.T, suffix string, failures int32, body string) (host string, failed *atomic.Int32) {
	t.Helper()
	target, ok := strings.CutPrefix(engineHost, "unix://")
	if !ok {
		t.Fatalf("the engine %s is not on a Unix socket", engineHost)
	}
	failed = &atomic.Int32{}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", target)
	}}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(&url.URL{Scheme: "http", Host: "docker"}) },
		Transport: tr,
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, suffix) && failed.Load() < failures {
			failed.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(body))
			return
		}
		rp.ServeHTTP(w, r)
	})
	sock := filepath.Join(t.TempDir(), "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		tr.CloseIdleConnections()
	})
	return "unix://" + sock, failed
}

// A container whose start the runtime fails is made again and started, a
// few times; one that fails every time is an error, and neither leaves a
// container behind.
func TestOpenRetriesARuntimeStartFailure(t *testing.T) {
	needEngine(t)
	for _, c := range []struct {
		failures int32
		ok       bool
	}{{1, true}, {startAttempts - 1, true}, {startAttempts, false}} {
		host, failed := startFailer(t, c.failures)
		p, err := New(Options{Host: host, Image: testImage, Instance: testInstance})
		if err != nil {
			t.Fatal(err)
		}
		ws, home := testDirs(t)
		id := "ses_" + randomHex(6)
		sb, err := p.Open(t.Context(), berth.SandboxConfig{SessionID: id, Workspace: ws, Home: home})
		if c.ok {
			if err != nil {
				t.Fatalf("after %d failed start: %v", c.failures, err)
			}
			if res := run(t, sb, nil, "sh", "-c", "echo ok"); res.stdout != "ok\n" {
				t.Fatalf("the container made again: %+v", res)
			}
			_ = sb.Close(context.Background())
		} else if err == nil || !strings.Contains(err.Error(), "cannot start the container") {
			t.Fatalf("after %d failed starts: %v", c.failures, err)
		}
		if got := failed.Load(); got != c.failures {
			t.Fatalf("%d starts failed, want %d", got, c.failures)
		}
		list, err := p.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("name", containerName(id))})
		if err != nil || len(list.Items) != 0 {
			t.Fatalf("containers left: %+v, %v", list, err)
		}
		_ = p.Close()
		_ = os.RemoveAll(ws)
	}
}

// A build of the default image the engine fails is tried again, up to
// buildAttempts times in all; one that fails every time is an error.
func TestTheDefaultImageBuildIsTriedAgain(t *testing.T) {
	needEngine(t)
	const failure = `{"message":"Stat /var/lib/docker/overlay2/0123-init/merged/dev/shm: no such file or directory"}`
	for _, c := range []struct {
		failures int32
		ok       bool
	}{{buildAttempts - 1, true}, {buildAttempts, false}} {
		host, failed := engineFailer(t, "/build", c.failures, failure)
		// An image of its own, so that this provider has to build it.
		image := testImage + "-rebuilt-" + randomHex(3)
		p, err := New(Options{Host: host, Image: image, Instance: testInstance})
		if err != nil {
			t.Fatal(err)
		}
		ws, home := testDirs(t)
		sb, err := p.Open(t.Context(), berth.SandboxConfig{SessionID: "ses_" + randomHex(6), Workspace: ws, Home: home})
		if c.ok {
			if err != nil {
				t.Fatalf("after %d failed builds: %v", c.failures, err)
			}
			if res := run(t, sb, nil, "sh", "-c", "echo ok"); res.stdout != "ok\n" {
				t.Fatalf("in the image built again: %+v", res)
			}
			_ = sb.Close(context.Background())
			_, _ = p.cli.ImageRemove(context.Background(), image, client.ImageRemoveOptions{Force: true})
		} else if err == nil || !strings.Contains(err.Error(), "no such file or directory") {
			t.Fatalf("after %d failed builds: %v", c.failures, err)
		}
		if got := failed.Load(); got != c.failures {
			t.Fatalf("%d builds failed, want %d", got, c.failures)
		}
		_ = p.Close()
		_ = os.RemoveAll(ws)
	}
}

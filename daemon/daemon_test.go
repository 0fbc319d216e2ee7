package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/shim"
)

// Open assembles a daemon that serves its socket and TCP port once
// started; Run serves until its context ends and then closes everything,
// so the home is free for the next daemon; a second daemon on a held home
// fails and leaves the first serving.
func TestOpenRunClose(t *testing.T) {
	home, err := os.MkdirTemp("", "berth-daemon-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
	opts := Options{Home: home, Config: config.Default(), Addr: "127.0.0.1:0", Socket: filepath.Join(home, "berth.sock"), Version: "v-test"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()

	if d.Token() == "" || readTokenFile(home) != d.Token() {
		t.Errorf("token %q, home's %q: a TCP daemon keeps its generated token in its home", d.Token(), readTokenFile(home))
	}
	for name, mk := range map[string]func() (*berth.Health, error){
		"socket": func() (*berth.Health, error) {
			c, err := d.Client()
			if err != nil {
				return nil, err
			}
			defer c.Close()
			return c.Health(ctx)
		},
		"tcp": func() (*berth.Health, error) {
			// The same daemon seen without its socket: TCP with its token.
			c, err := (&Daemon{srv: d.srv, token: d.token}).Client()
			if err != nil {
				return nil, err
			}
			defer c.Close()
			return c.Health(ctx)
		},
	} {
		h, err := mk()
		if err != nil || h.Status != "ok" || h.Version != "v-test" || h.Store != "sqlite" {
			t.Errorf("%s: health = %+v, %v", name, h, err)
		}
	}
	// The home is this daemon's: another cannot open it.
	if _, err := Open(context.Background(), Options{Home: home, Config: config.Default(), Socket: filepath.Join(home, "other.sock")}); err == nil {
		t.Fatal("a second daemon opened a held home")
	}
	if h, err := d.Manager().Health(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("the first daemon after the second's attempt: %+v, %v", h, err)
	}

	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run after its context ended = %v, want nil", err)
		}
	case <-time.After(ShutdownTimeout):
		t.Fatal("Run did not return after its context ended")
	}
	if _, err := os.Stat(opts.Socket); !os.IsNotExist(err) {
		t.Errorf("the socket is still there after Run: %v", err)
	}
	d2, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("a daemon on the home Run left: %v", err)
	}
	d2.Close(context.Background())
}

// Open refuses a missing config rather than guess one.
func TestOpenWithoutConfig(t *testing.T) {
	if _, err := Open(context.Background(), Options{Home: t.TempDir()}); berth.ErrorCode(err) != berth.EInvalid {
		t.Fatalf("Open without a config = %v, want invalid", err)
	}
}

// A daemon answers while its small shim is still being installed: only
// the first shim it starts waits for the install (here, held until the
// test lets it go), and closing waits for the install to end.
func TestTheDaemonAnswersBeforeItsShimIsInstalled(t *testing.T) {
	home := t.TempDir()
	release, called := make(chan struct{}), make(chan struct{})
	var installed atomic.Bool
	opts := Options{Home: home, Config: config.Default(), Socket: filepath.Join(home, "berth.sock"), Version: "v-test",
		SmallShim: func(self, home, options string, logger *slog.Logger) []shim.Program {
			close(called)
			<-release
			installed.Store(true)
			return nil
		}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opened := make(chan error, 1)
	var d *Daemon
	go func() {
		var err error
		d, err = Open(ctx, opts)
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			close(release)
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("Open waits for the small shim's install")
	}
	<-called
	d.Start()
	c, err := d.Client()
	if err != nil {
		close(release)
		t.Fatal(err)
	}
	defer c.Close()
	if h, err := c.Health(ctx); err != nil || h.Status != "ok" {
		t.Errorf("health during the install = %+v, %v", h, err)
	}
	if installed.Load() {
		t.Fatal("the install ended before the test let it")
	}
	// The install ends while Close waits for it.
	time.AfterFunc(100*time.Millisecond, func() { close(release) })
	d.Close(context.Background())
	if !installed.Load() {
		t.Error("Close returned before the small shim's install ended")
	}
}

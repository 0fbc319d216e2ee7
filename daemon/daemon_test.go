package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
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

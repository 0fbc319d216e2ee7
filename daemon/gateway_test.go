package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/store/memory"
)

// The daemon serves the model gateway on a loopback port, refusing a call
// without a session's key in the upstream's format; the next daemon of
// the home listens on the same port, so host agents that outlived the
// first still reach it.
func TestGatewayLoopbackPort(t *testing.T) {
	home := t.TempDir()
	cfg := config.Default()
	cfg.Models = []config.Model{{Name: "local", Kind: "openai", URL: "http://127.0.0.1:9"}}
	open := func() *Daemon {
		d, err := Open(context.Background(), Options{Home: home, Config: cfg, Socket: filepath.Join(home, "berth.sock")})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := open()
	url := d.models.url
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("gateway url %q", url)
	}
	for _, c := range []struct{ path, want string }{
		{"/anthropic/v1/messages", `"authentication_error"`},
		{"/local/v1/chat/completions", `"invalid_request_error"`},
	} {
		resp, err := http.Post(url+c.path, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 4096)
		n, _ := resp.Body.Read(b)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b[:n]), c.want) {
			t.Fatalf("%s without a key: %d %s", c.path, resp.StatusCode, b[:n])
		}
	}
	d.Close(context.Background())
	if _, err := http.Post(url+"/anthropic/v1/messages", "application/json", strings.NewReader(`{}`)); err == nil {
		t.Fatal("the gateway answers after Close")
	}
	d = open()
	defer d.Close(context.Background())
	if d.models.url != url {
		t.Fatalf("the next daemon's gateway is at %s, the first's was at %s", d.models.url, url)
	}
}

// A bad [[models]] entry stops the daemon from opening, naming it.
func TestGatewayBadModels(t *testing.T) {
	cfg := config.Default()
	cfg.Models = []config.Model{{Name: "x", Kind: "claude"}}
	_, err := Open(context.Background(), Options{Home: t.TempDir(), Config: cfg})
	if !berth.IsCode(err, berth.EInvalid) || !strings.Contains(berth.ErrorMessage(err), "models[0].kind") {
		t.Fatalf("err = %v", err)
	}
}

// credStore is a store that keeps credentials.
type credStore struct {
	berth.Store
	vals map[string]string
}

func (c credStore) CredentialValue(_ context.Context, name string) ([]byte, error) {
	if v, ok := c.vals[name]; ok {
		return []byte(v), nil
	}
	return nil, berth.Errorf(berth.ENotFound, "no credential %s", name)
}

// The gateway's credentials are the store's; a store that keeps none has
// every credential unset, and the daemon's environment is never read.
func TestGatewayCredentialsFromStore(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-daemon-env")
	ctx := context.Background()
	if v, err := (storeCredentials{memory.New()}).Credential(ctx, "anthropic"); !berth.IsCode(err, berth.ENotFound) || v != "" {
		t.Fatalf("a store without credentials: %q, %v", v, err)
	}
	st := credStore{Store: memory.New(), vals: map[string]string{"anthropic": "sk-stored"}}
	if v, err := (storeCredentials{st}).Credential(ctx, "anthropic"); err != nil || v != "sk-stored" {
		t.Fatalf("the store's credential: %q, %v", v, err)
	}
	if _, err := (storeCredentials{st}).Credential(ctx, "openai"); !berth.IsCode(err, berth.ENotFound) {
		t.Fatalf("a credential not set: %v", err)
	}
}

// The loopback port serves maxGatewayConns connections at once; one let
// go, the next call is answered.
func TestGatewayLoopbackBoundsConnections(t *testing.T) {
	home := t.TempDir()
	d, err := Open(context.Background(), Options{Home: home, Config: config.Default(), Socket: filepath.Join(home, "berth.sock")})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	addr := strings.TrimPrefix(d.models.url, "http://")
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range maxGatewayConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /anthropic/v1/models HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 12)
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(b); err == nil {
		t.Fatalf("answered past the bound: %q", b[:n])
	}
	held[0].Close()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "HTTP/1.1 401" {
		t.Fatalf("once a connection is let go: %q %v", b, err)
	}
}

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// hookReceiver is a URL hook's receiver: it records each request's
// delivery id and event, and holds requests open while hold is set.
type hookReceiver struct {
	srv *httptest.Server

	mu   sync.Mutex
	got  []string // "<delivery> <event> <seq>"
	hold bool
	// release is closed to let held requests go (unanswered).
	release chan struct{}
}

func newHookReceiver(t *testing.T) *hookReceiver {
	rc := &hookReceiver{release: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev berth.Event
		_ = json.Unmarshal(b, &ev)
		rc.mu.Lock()
		rc.got = append(rc.got, fmt.Sprintf("%s %s %d", r.Header.Get("X-Berth-Delivery"), r.Header.Get("X-Berth-Event"), ev.Seq))
		hold := rc.hold
		rc.mu.Unlock()
		if hold {
			select {
			case <-rc.release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(func() {
		rc.mu.Lock()
		if rc.hold {
			close(rc.release)
			rc.hold = false
		}
		rc.mu.Unlock()
		rc.srv.Close()
	})
	return rc
}

func (rc *hookReceiver) requests() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.got...)
}

// A daemon SIGKILLed after a turn_ended event was committed, while its
// delivery hangs at the receiver (run 0) or as soon as the event is in the
// log (run 1), delivers it after a restart, under the same delivery id as
// any attempt made before the kill; `berth hooks -o json` shows it
// delivered.
func TestHookDeliveredAfterSIGKILL(t *testing.T) {
	for run := range 2 {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			home := t.TempDir()
			rc := newHookReceiver(t)
			rc.hold = run == 0
			cfg := fmt.Sprintf("[[hooks]]\nname = \"chat\"\nevents = [\"turn_ended\"]\nurl = %q\nsecret = \"k\"\n", rc.srv.URL+"/in")
			if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			s := startServer(t, home)
			sess := s.create(t, nil)
			if st, err := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts", map[string]any{"text": "echo hi"}, nil); st != 202 {
				t.Fatalf("prompt = %d %v", st, err)
			}
			if run == 0 {
				deadline := time.Now().Add(15 * time.Second)
				for len(rc.requests()) == 0 {
					if time.Now().After(deadline) {
						t.Fatalf("no hook request: %s", s.log)
					}
					time.Sleep(5 * time.Millisecond)
				}
			} else {
				s.waitLog(t, sess.ID, "turn_ended", func(evs []berth.Event) bool {
					return len(evs) > 0 && evs[len(evs)-1].Type == berth.EventTurnEnded
				})
			}
			s.kill9()
			before := rc.requests()
			rc.mu.Lock()
			if rc.hold {
				close(rc.release)
				rc.hold = false
			}
			rc.mu.Unlock()

			s2 := startServer(t, home)
			var delivered []*berth.HookDelivery
			deadline := time.Now().Add(20 * time.Second)
			for len(delivered) == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("not delivered after the restart; requests %v\n%s", rc.requests(), s2.log)
				}
				time.Sleep(20 * time.Millisecond)
				var page berth.HookDeliveryPage
				if st, err := s2.api("GET", "/v1/hooks/deliveries?state=delivered", nil, &page); st != 200 {
					t.Fatalf("deliveries = %d %v", st, err)
				}
				delivered = page.Deliveries
			}
			d := delivered[0]
			if len(delivered) != 1 || d.Event != berth.EventTurnEnded || d.SessionID != sess.ID || d.Hook != "chat" {
				t.Fatalf("delivered %+v", delivered)
			}
			after := rc.requests()
			if want := fmt.Sprintf("%s turn_ended %d", d.ID, d.Seq); after[len(after)-1] != want {
				t.Fatalf("last request %q, want %q", after[len(after)-1], want)
			}
			for _, r := range before {
				if !strings.HasPrefix(r, d.ID+" ") {
					t.Fatalf("an attempt before the kill was another delivery: %q (delivered %s)", r, d.ID)
				}
			}

			// The CLI prints the API's JSON: the hooks, then the deliveries.
			cli := exec.Command(bin, "--addr", s2.addr, "hooks", "-o", "json")
			cli.Env = cleanEnv(home)
			out, err := cli.CombinedOutput()
			if err != nil {
				t.Fatalf("berth hooks: %v\n%s", err, out)
			}
			sc := bufio.NewScanner(bytes.NewReader(out))
			var hooksOut struct {
				Hooks []berth.HookInfo `json:"hooks"`
			}
			var deliveriesOut berth.HookDeliveryPage
			for i, dst := range []any{&hooksOut, &deliveriesOut} {
				if !sc.Scan() || json.Unmarshal(sc.Bytes(), dst) != nil {
					t.Fatalf("line %d of berth hooks -o json: %s", i+1, out)
				}
			}
			if len(hooksOut.Hooks) != 1 || hooksOut.Hooks[0].Name != "chat" || strings.Contains(string(out), "/in") ||
				len(deliveriesOut.Deliveries) != 1 || deliveriesOut.Deliveries[0].ID != d.ID {
				t.Fatalf("berth hooks -o json:\n%s", out)
			}
		})
	}
}

// A bad [[hooks]] entry stops serve at start with an error naming it.
func TestServeRefusesABadHook(t *testing.T) {
	home := t.TempDir()
	cfg := "[[hooks]]\nname = \"chat\"\nevents = [\"turn_over\"]\nurl = \"https://chat.example/T0KEN\"\n"
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--home", home, "--addr", freeAddr(t))
	cmd.Env = cleanEnv(home)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "hooks[0] (chat)") || !strings.Contains(string(out), "turn_over") ||
		strings.Contains(string(out), "T0KEN") {
		t.Fatalf("serve with a bad hook: %v\n%s", err, out)
	}
}

func TestHooksCommand(t *testing.T) {
	isolateEnv(t)
	var mu sync.Mutex
	var asked []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/hooks":
			io.WriteString(w, `{"hooks":[{"name":"chat","index":0,"events":["turn_ended","badge:waiting"],"agent":"demo","kind":"url","target":"https://chat.example/…","signed":true,"timeout_ms":10000}]}`)
		case "/v1/hooks/deliveries":
			io.WriteString(w, `{"deliveries":[{"id":"dlv_1","hook":"chat","hook_index":0,"event":"turn_ended","session_id":"ses_a","seq":7,"state":"failed","attempts":31,"last_error":"POST https://chat.example/…: HTTP 500","created_at":"2026-01-02T03:04:05Z"}],"next_cursor":"9"}`)
		default:
			w.WriteHeader(404)
			io.WriteString(w, `{"error":{"code":"not_found","message":"no route","details":{}}}`)
		}
	}))
	t.Cleanup(api.Close)
	out, err := runCLI(t, "hooks", "--addr", api.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"HOOK", "chat", "url", "https://chat.example/…", "turn_ended,badge:waiting", "agent=demo",
		"DELIVERY", "dlv_1", "ses_a", "failed", "31", "HTTP 500"} {
		if !strings.Contains(out, want) {
			t.Errorf("berth hooks lacks %q:\n%s", want, out)
		}
	}
	out, err = runCLI(t, "hooks", "deliveries", "--state", "failed", "--session", "ses_a", "-o", "json", "--addr", api.URL)
	if err != nil || !strings.HasPrefix(out, `{"deliveries":[{"id":"dlv_1"`) || strings.Count(out, "\n") != 1 {
		t.Fatalf("berth hooks deliveries -o json = %q, %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := asked[len(asked)-1]; got != "/v1/hooks/deliveries?session=ses_a&state=failed" {
		t.Fatalf("asked %s", got)
	}
	if asked[1] != "/v1/hooks/deliveries?limit=20" {
		t.Fatalf("berth hooks asked %v", asked)
	}
}

// With the real session manager: a permission request of an "ask" session
// reaches a hook both as permission_requested and as badge:waiting.
func TestHookToldOfAWaitingSession(t *testing.T) {
	home := t.TempDir()
	rc := newHookReceiver(t)
	cfg := fmt.Sprintf("[[hooks]]\nevents = [\"permission_requested\", \"badge:waiting\"]\nurl = %q\n", rc.srv.URL)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, home)
	sess := s.create(t, map[string]any{"permission_mode": "ask"})
	if st, err := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts", map[string]any{"text": "ask may I"}, nil); st != 202 {
		t.Fatalf("prompt = %d %v", st, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var events []string
		for _, r := range rc.requests() {
			events = append(events, strings.Fields(r)[1])
		}
		got := strings.Join(events, " ")
		if strings.Contains(got, "permission_requested") && strings.Contains(got, "badge:waiting") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hook requests %v\n%s", rc.requests(), s.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package config

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

func TestHooksLoad(t *testing.T) {
	c, err := Load(writeFile(t, `
[[hooks]]
events = ["turn_ended", "badge:waiting"]
url = "https://chat.example/hook/T0KEN"
secret = "s3cret"
labels = {team = "web"}

[[hooks]]
name = "notify"
events = ["permission_requested"]
agent = "demo"
command = "/usr/bin/notify-send"
args = ["berth"]
timeout = "3s"
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Hooks) != 2 {
		t.Fatalf("hooks = %+v", c.Hooks)
	}
	a, b := c.Hooks[0], c.Hooks[1]
	if a.HookName(0) != "hook-0" || a.Timeout.Duration != DefaultHookTimeout || a.Labels["team"] != "web" {
		t.Fatalf("first hook = %+v", a)
	}
	if b.HookName(1) != "notify" || b.Timeout.Duration != 3*time.Second || b.Agent != "demo" {
		t.Fatalf("second hook = %+v", b)
	}
}

func TestHooksInvalid(t *testing.T) {
	for _, c := range []struct {
		body string
		want []string
	}{
		{`events = ["turn_ended"]`, []string{"hooks[0]", "needs url or command"}},
		{`events = ["turn_ended"]
url = "https://x.example/"
command = "true"`, []string{"hooks[0]", "either url or command"}},
		{`events = ["turn_over"]
url = "https://x.example/"`, []string{"hooks[0]", `unknown event type "turn_over"`}},
		{`events = ["badge:sleepy"]
url = "https://x.example/"`, []string{"hooks[0]", `unknown badge "sleepy"`}},
		{`events = []
url = "https://x.example/"`, []string{"hooks[0]", "at least one"}},
		{`name = "slack"
events = ["turn_ended"]
url = "file:///etc/passwd"`, []string{"hooks[0] (slack)", "http:// or https://"}},
		{`events = ["turn_ended"]
url = "https://user:pw@x.example/"`, []string{"hooks[0]", "no user info"}},
		{`events = ["turn_ended"]
url = "https://x.example/"
timeout = "0.5s"`, []string{"hooks[0]", "timeout", "1s..10m"}},
		{`events = ["turn_ended"]
command = "true"
secret = "x"`, []string{"hooks[0]", "secret is for a url hook"}},
		{`events = ["turn_ended"]
url = "https://x.example/"
bogus = 1`, []string{"unknown key", "hooks.bogus"}},
	} {
		_, err := Load(writeFile(t, "[[hooks]]\n"+c.body+"\n"), nil)
		wantInvalid(t, err, c.want...)
		if err != nil && (strings.Contains(err.Error(), "x.example") || strings.Contains(err.Error(), "pw")) {
			t.Errorf("%s: the error quotes the url: %v", c.body, err)
		}
	}
	_, err := Load(writeFile(t, `
[[hooks]]
name = "a"
events = ["turn_ended"]
command = "true"
[[hooks]]
name = "a"
events = ["turn_ended"]
command = "true"
`), nil)
	wantInvalid(t, err, "hooks[1] (a)", "appears twice")
}

// A hook may follow checkpoint_pruned: a tree's checkpoints pruned to keep
// it under [checkpoints] max_tree_bytes.
func TestHookOnCheckpointPruned(t *testing.T) {
	c, err := Load(writeFile(t, `
[[hooks]]
events = ["checkpoint_pruned"]
command = "/bin/true"
`), nil)
	if err != nil || len(c.Hooks) != 1 || c.Hooks[0].Events[0] != "checkpoint_pruned" {
		t.Fatalf("hooks %+v: %v", c, err)
	}
}

// A hook may follow every declared event type: the hooks take their list
// from the declaration (eventkind.go), so a new kind needs no second list.
func TestHooksFollowEveryEventKind(t *testing.T) {
	var events []string
	for _, k := range berth.EventKinds() {
		events = append(events, strconv.Quote(k.Name))
	}
	if len(events) == 0 {
		t.Fatal("no event kinds declared")
	}
	c, err := Load(writeFile(t, `
[[hooks]]
events = [`+strings.Join(events, ", ")+`]
command = "/bin/true"
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Hooks[0].Events; len(got) != len(events) {
		t.Fatalf("events = %v", got)
	}
}

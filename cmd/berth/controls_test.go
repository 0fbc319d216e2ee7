package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// controlsServer runs a daemon whose catalog also has the demo agent
// without controls, as "bare".
func controlsServer(t *testing.T) *server {
	home := t.TempDir()
	conf := fmt.Sprintf("[[agents]]\nname = \"bare\"\ncommand = %q\nargs = [\"agent-demo\", \"--no-controls\"]\n", bin)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServer(t, home)
}

func TestPatchSessionOverHTTP(t *testing.T) {
	s := controlsServer(t)
	sess := s.create(t, nil)
	if sess.ACP.Modes == nil || sess.ACP.Modes.Current != "default" || len(sess.ACP.Commands) != 2 {
		t.Fatalf("created session's acp = %+v", sess.ACP)
	}
	var got berth.Session
	st, err := s.api("PATCH", "/v1/sessions/"+sess.ID, map[string]any{"name": "n1", "labels": map[string]any{"team": "web"},
		"mode": "plan", "model": "demo-large", "config": map[string]any{"verbosity": "high"}}, &got)
	if st != 200 || err != nil || got.Name != "n1" || got.Labels["team"] != "web" || got.ACP.Modes.Current != "plan" ||
		got.ACP.Models.Current != "demo-large" || got.ACP.ConfigOptions[1].CurrentString() != "high" {
		t.Fatalf("patch = %d %v %+v", st, err, got)
	}
	var res berth.TurnResult
	if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]any{"text": "mode\nrun echo hi"}, &res); st != 200 ||
		res.Text != "mode: plan\nrefused in plan mode: run" {
		t.Fatalf("prompt in plan mode = %d %q", st, res.Text)
	}

	var bare berth.Session
	if st, _ := s.api("POST", "/v1/sessions", map[string]any{"agent": "bare", "sandbox": "host"}, &bare); st != 201 {
		t.Fatalf("create bare = %d", st)
	}
	bad := []struct {
		id      string
		body    any
		status  int
		field   string
		offered []string
	}{
		{sess.ID, map[string]any{"mode": "yolo"}, 400, "mode", []string{"default", "plan"}},
		{sess.ID, map[string]any{"model": "gpt-9"}, 400, "model", []string{"demo-small", "demo-large"}},
		{sess.ID, map[string]any{"config": map[string]any{"verbosity": "max"}}, 400, "config.verbosity", []string{"low", "high"}},
		{sess.ID, map[string]any{"mode": "plan", "colour": "red"}, 400, "", nil},
		{sess.ID, `{}`, 400, "", nil},
		{sess.ID, map[string]any{"name": 7}, 400, "", nil},
		{bare.ID, map[string]any{"mode": "plan"}, 409, "", nil},
		{bare.ID, map[string]any{"model": "demo-large"}, 409, "", nil},
		{bare.ID, map[string]any{"config": map[string]any{"verbosity": "high"}}, 409, "", nil},
		{"ses_nope", map[string]any{"mode": "plan"}, 404, "", nil},
	}
	for _, b := range bad {
		var eb errorBody
		st, err := s.api("PATCH", "/v1/sessions/"+b.id, b.body, &eb)
		if err != nil || st != b.status || eb.Error.Message == "" {
			t.Fatalf("PATCH %v = %d %+v %v, want %d", b.body, st, eb, err, b.status)
		}
		if b.field != "" {
			var offered []string
			for _, v := range eb.Error.Details["offered"].([]any) {
				offered = append(offered, v.(string))
			}
			if eb.Error.Details["field"] != b.field || !slices.Equal(offered, b.offered) {
				t.Fatalf("PATCH %v details = %v", b.body, eb.Error.Details)
			}
		}
	}
	// The refused patches changed nothing.
	s.api("GET", "/v1/sessions/"+sess.ID, nil, &got)
	if got.ACP.Modes.Current != "plan" || got.Name != "n1" {
		t.Fatalf("after refused patches: %+v", got)
	}
}

func TestSetAndCommandsCLI(t *testing.T) {
	s := controlsServer(t)
	id := strings.TrimSpace(s.cli(t, "create", "--agent", "demo", "--sandbox", "host", "-q"))
	out := s.cli(t, "show", id)
	if !strings.Contains(out, "mode:") || !strings.Contains(out, "default (of default, plan)") ||
		!strings.Contains(out, "demo-small (of demo-small, demo-large)") || !strings.Contains(out, "verbosity=low") {
		t.Fatalf("show before set:\n%s", out)
	}
	out = s.cli(t, "set", id, "--mode", "plan", "--model", "demo-large", "--config", "verbosity=high", "--name", "renamed", "--label", "k=v")
	if !strings.Contains(out, "plan (of default, plan)") || !strings.Contains(out, "demo-large (of") ||
		!strings.Contains(out, "verbosity=high") || !strings.Contains(out, "renamed") || !strings.Contains(out, "k=v") {
		t.Fatalf("set printed:\n%s", out)
	}
	code, out := s.cliFails(t, "set", id, "--mode", "yolo")
	if code != 1 || !strings.Contains(out, "default, plan") {
		t.Fatalf("set of a mode not offered = %d\n%s", code, out)
	}
	if code, out := s.cliFails(t, "set", id); code != 2 {
		t.Fatalf("set with nothing = %d\n%s", code, out)
	}
	out = s.cli(t, "commands", id)
	if !strings.Contains(out, "/echo") || !strings.Contains(out, "text to echo") || !strings.Contains(out, "/plan") {
		t.Fatalf("commands:\n%s", out)
	}
	var cmds []berth.ACPCommand
	if err := json.Unmarshal([]byte(s.cli(t, "commands", id, "-o", "json")), &cmds); err != nil || len(cmds) != 2 || cmds[0].InputHint != "text to echo" {
		t.Fatalf("commands -o json = %+v %v", cmds, err)
	}
}

// berth show says when berth put the agent in its asking mode, and why.
func TestShowSaysBerthSetTheMode(t *testing.T) {
	s := &berth.Session{ACP: berth.ACPInfo{Modes: &berth.ACPModes{Current: "default", SetBy: "berth", ForcedFrom: "auto",
		Available: []berth.ACPMode{{ID: "auto"}, {ID: "default"}}}}}
	rows := controlsRows(s)
	if len(rows) != 1 || rows[0][0] != "mode" || !strings.HasPrefix(rows[0][1], "default (set by berth: in auto the agent answers permissions by itself)") {
		t.Fatalf("rows = %q", rows)
	}
}

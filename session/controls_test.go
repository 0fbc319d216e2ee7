package session

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

func strp(s string) *string { return &s }

// modeIDs lists the ids of the modes a session shows.
func modeIDs(s *berth.Session) []string {
	if s.ACP.Modes == nil {
		return nil
	}
	var ids []string
	for _, m := range s.ACP.Modes.Available {
		ids = append(ids, m.ID)
	}
	return ids
}

func TestSessionShowsTheDemoAgentsControls(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	if s.ACP.Modes == nil || s.ACP.Modes.Current != "default" || !slices.Equal(modeIDs(s), []string{"default", "plan"}) {
		t.Fatalf("modes = %+v", s.ACP.Modes)
	}
	if len(s.ACP.Modes.Raw) == 0 || !strings.Contains(string(s.ACP.Modes.Raw), "availableModes") {
		t.Fatalf("the agent's mode state is not kept raw: %s", s.ACP.Modes.Raw)
	}
	m := s.ACP.Models
	if m == nil || m.Current != "demo-small" || m.ConfigID != "model" || len(m.Available) != 2 || m.Available[1].ID != "demo-large" {
		t.Fatalf("models = %+v", m)
	}
	if len(s.ACP.ConfigOptions) != 2 {
		t.Fatalf("config options = %+v", s.ACP.ConfigOptions)
	}
	v := s.ACP.ConfigOptions[1]
	if v.ID != "verbosity" || v.Type != "select" || v.CurrentString() != "low" || !slices.Equal(v.Values(), []string{"low", "high"}) {
		t.Fatalf("verbosity = %+v", v)
	}
	if s.ACP.ConfigOptions[0].Category != "model" {
		t.Fatalf("model option = %+v", s.ACP.ConfigOptions[0])
	}
	c := s.ACP.Commands
	if len(c) != 2 || c[0].Name != "echo" || c[0].InputHint != "text to echo" || c[1].Name != "plan" || c[1].Description == "" {
		t.Fatalf("commands = %+v", c)
	}
	// Taken during the handshake, they are stored with the session's
	// going active (one write for both).
	stored, err := e.store.GetSession(context.Background(), s.ID)
	if err != nil || len(stored.ACP.Commands) != 2 || stored.ACP.Commands[0].Name != "echo" || stored.ACP.Modes == nil || stored.ACP.Modes.Current != "default" {
		t.Fatalf("stored: %+v, %v", stored, err)
	}
	cu := ofType(e.events(s.ID), berth.EventCommandsUpdate)
	if len(cu) != 1 || !strings.Contains(string(cu[0].Data), `"commands":[{"name":"echo"`) || !strings.Contains(string(cu[0].Data), `"raw"`) {
		t.Fatalf("commands_update = %v", cu)
	}
	// A slash command runs as a prompt.
	if r := e.prompt(s.ID, "/echo hi there"); r.Text != "hi there" {
		t.Fatalf("/echo answered %q", r.Text)
	}
}

func TestPatchSetsModeModelConfigNameAndLabels(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{Labels: map[string]string{"team": "web", "old": "x"}})
	got, err := e.m.PatchSession(ctx, s.ID, berth.SessionPatch{Name: strp("renamed"),
		Labels: map[string]*string{"old": nil, "env": strp("prod")}, Mode: "plan", Model: "demo-large",
		Config: map[string]json.RawMessage{"verbosity": json.RawMessage(`"high"`)}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "renamed" || got.Labels["team"] != "web" || got.Labels["env"] != "prod" || len(got.Labels) != 2 {
		t.Fatalf("name/labels = %q %v", got.Name, got.Labels)
	}
	if got.ACP.Modes.Current != "plan" || got.ACP.Models.Current != "demo-large" || got.ACP.ConfigOptions[1].CurrentString() != "high" {
		t.Fatalf("controls = %+v / %+v / %+v", got.ACP.Modes, got.ACP.Models, got.ACP.ConfigOptions)
	}
	// The agent itself has them.
	if r := e.prompt(s.ID, "mode\nmodel\nconfig"); r.Text != "mode: plan\nmodel: demo-large\nconfig: model=demo-large verbosity=high" {
		t.Fatalf("the agent says %q", r.Text)
	}
	if r := e.prompt(s.ID, "write f.txt hello"); r.Text != "refused in plan mode: write" {
		t.Fatalf("write in plan mode: %q", r.Text)
	}
	evs := e.events(s.ID)
	mu := ofType(evs, berth.EventModeUpdate)
	if len(mu) != 1 || !strings.Contains(string(mu[0].Data), `"current":"plan"`) || !strings.Contains(string(mu[0].Data), `"source":"user"`) {
		t.Fatalf("mode_update = %v", mu)
	}
	cu := ofType(evs, berth.EventConfigUpdate)
	if len(cu) != 2 || !strings.Contains(string(cu[0].Data), `"changed":{"model":"demo-large"}`) ||
		!strings.Contains(string(cu[1].Data), `"changed":{"verbosity":"high"}`) {
		t.Fatalf("config_update = %v", cu)
	}
	// The stored session has them too.
	st, err := e.store.GetSession(ctx, s.ID)
	if err != nil || st.ACP.Modes.Current != "plan" || st.Name != "renamed" {
		t.Fatalf("stored = %+v, %v", st, err)
	}
}

func TestPatchRefusesWhatTheAgentDoesNotOfferAndAppliesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{Name: "keep"})
	cases := []struct {
		p       berth.SessionPatch
		field   string
		offered []string
	}{
		{berth.SessionPatch{Name: strp("changed"), Mode: "yolo"}, "mode", []string{"default", "plan"}},
		{berth.SessionPatch{Name: strp("changed"), Mode: "plan", Model: "gpt-9"}, "model", []string{"demo-small", "demo-large"}},
		{berth.SessionPatch{Mode: "plan", Config: map[string]json.RawMessage{"verbosity": json.RawMessage(`"max"`)}}, "config.verbosity", []string{"low", "high"}},
		{berth.SessionPatch{Config: map[string]json.RawMessage{"colour": json.RawMessage(`"red"`)}}, "config", []string{"model", "verbosity"}},
	}
	for _, c := range cases {
		_, err := e.m.PatchSession(ctx, s.ID, c.p)
		if !berth.IsCode(err, berth.EInvalid) {
			t.Fatalf("%+v: err = %v", c.p, err)
		}
		d := berth.ErrorDetails(err)
		if d["field"] != c.field || !slices.Equal(d["offered"].([]string), c.offered) {
			t.Fatalf("%+v: details = %v", c.p, d)
		}
	}
	got, _ := e.m.GetSession(ctx, s.ID)
	if got.Name != "keep" || got.ACP.Modes.Current != "default" {
		t.Fatalf("a refused patch changed the session: %q %+v", got.Name, got.ACP.Modes)
	}
	if n := len(ofType(e.events(s.ID), berth.EventModeUpdate)); n != 0 {
		t.Fatalf("%d mode_update events after refused patches", n)
	}
	if _, err := e.m.PatchSession(ctx, s.ID, berth.SessionPatch{Name: strp("bad\x1bname")}); !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("control character in name: %v", err)
	}
	if _, err := e.m.PatchSession(ctx, s.ID, berth.SessionPatch{Labels: map[string]*string{"a=b": strp("c")}}); !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("bad label key: %v", err)
	}
	if _, err := e.m.PatchSession(ctx, s.ID, berth.SessionPatch{}); !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("empty patch: %v", err)
	}
	if _, err := e.m.PatchSession(ctx, "nope", berth.SessionPatch{Mode: "plan"}); !berth.IsCode(err, berth.ENotFound) {
		t.Fatalf("unknown session: %v", err)
	}
}

func TestPatchConflictsWithoutTheCapabilityOrWhenStopped(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{Agent: "demo-nocontrols"})
	if s.ACP.Modes != nil || s.ACP.Models != nil || s.ACP.ConfigOptions != nil || s.ACP.Commands != nil {
		t.Fatalf("an agent without controls shows %+v", s.ACP)
	}
	for _, p := range []berth.SessionPatch{{Mode: "plan"}, {Model: "demo-large"},
		{Config: map[string]json.RawMessage{"verbosity": json.RawMessage(`"high"`)}}} {
		if _, err := e.m.PatchSession(ctx, s.ID, p); !berth.IsCode(err, berth.EConflict) {
			t.Fatalf("%+v: err = %v", p, err)
		}
	}
	d := e.create(berth.CreateRequest{})
	if _, err := e.m.StopSession(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.PatchSession(ctx, d.ID, berth.SessionPatch{Mode: "plan"}); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("mode of a stopped session: %v", err)
	}
	// Name and labels are berth's own: a stopped session takes them.
	got, err := e.m.PatchSession(ctx, d.ID, berth.SessionPatch{Name: strp("later"), Labels: map[string]*string{"k": strp("v")}})
	if err != nil || got.Name != "later" || got.Labels["k"] != "v" || got.State != berth.StateStopped {
		t.Fatalf("patch of a stopped session = %+v, %v", got, err)
	}
}

func TestModeSurvivesResumeAndDaemonRestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	if _, err := e.m.PatchSession(ctx, s.ID, berth.SessionPatch{Mode: "plan", Model: "demo-large"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	r, err := e.m.ResumeSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.ACP.Modes.Current != "plan" || r.ACP.Models.Current != "demo-large" || len(r.ACP.Commands) != 2 {
		t.Fatalf("after resume: %+v %+v %+v", r.ACP.Modes, r.ACP.Models, r.ACP.Commands)
	}
	if res := e.prompt(s.ID, "mode\nmodel"); res.Text != "mode: plan\nmodel: demo-large" {
		t.Fatalf("the resumed agent says %q", res.Text)
	}
	// The agent reopened the conversation with its controls (session/load
	// from its state dir): berth had nothing to set again.
	for _, ev := range e.events(s.ID) {
		if strings.Contains(string(ev.Data), `"source":"resume"`) || ev.Type == berth.EventRuntimeWarning {
			t.Fatalf("the resume had to set a control again: %s %s", ev.Type, ev.Data)
		}
	}
	if started := ofType(e.events(s.ID), berth.EventSessionStarted); !strings.Contains(string(started[1].Data), `"resumed_by":"load"`) {
		t.Fatalf("not resumed by load: %s", started[1].Data)
	}
	e.close()
	e.open()
	got, err := e.m.GetSession(ctx, s.ID)
	if err != nil || got.ACP.Modes == nil || got.ACP.Modes.Current != "plan" || len(got.ACP.ConfigOptions) != 2 || len(got.ACP.Commands) != 2 {
		t.Fatalf("after a restart: %+v, %v", got, err)
	}
}

func TestResumeSetsTheModeAgainWhenTheAgentForgotIt(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// An agent that cannot reopen the conversation starts with its defaults.
	s := e.create(berth.CreateRequest{Agent: "demo-noload"})
	if _, err := e.m.PatchSession(ctx, s.ID, berth.SessionPatch{Mode: "plan",
		Config: map[string]json.RawMessage{"verbosity": json.RawMessage(`"high"`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	r, err := e.m.ResumeSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.ACP.Modes.Current != "plan" || r.ACP.ConfigOptions[1].CurrentString() != "high" {
		t.Fatalf("after resume: %+v %+v", r.ACP.Modes, r.ACP.ConfigOptions)
	}
	if res := e.prompt(s.ID, "mode\nconfig"); !strings.HasSuffix(res.Text, "mode: plan\nconfig: model=demo-small verbosity=high") {
		t.Fatalf("the resumed agent says %q", res.Text)
	}
	evs := e.events(s.ID)
	var fromResume int
	for _, ev := range append(ofType(evs, berth.EventModeUpdate), ofType(evs, berth.EventConfigUpdate)...) {
		if strings.Contains(string(ev.Data), `"source":"resume"`) {
			fromResume++
		}
	}
	if fromResume != 2 {
		t.Fatalf("%d events say the resume set a control, want 2", fromResume)
	}
}

func TestAgentUpdatesKeepTheControlsCurrent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	if r := e.prompt(s.ID, "/plan"); r.Text != "mode: plan" {
		t.Fatalf("/plan answered %q", r.Text)
	}
	got, _ := e.m.GetSession(ctx, s.ID)
	if got.ACP.Modes.Current != "plan" {
		t.Fatalf("mode after the agent's update = %+v", got.ACP.Modes)
	}
	mu := ofType(e.events(s.ID), berth.EventModeUpdate)
	if len(mu) != 1 || !strings.Contains(string(mu[0].Data), `"source":"agent"`) || !strings.Contains(string(mu[0].Data), `"currentModeId":"plan"`) {
		t.Fatalf("mode_update = %v", mu)
	}
}

func TestUnstableModelsStateAndTitle(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{Agent: "scripted"})
	if s.ACP.Models == nil || s.ACP.Models.Current != "m1" || s.ACP.Models.ConfigID != "" || len(s.ACP.Models.Available) != 3 {
		t.Fatalf("models = %+v", s.ACP.Models)
	}
	got, err := e.m.PatchSession(ctx, s.ID, berth.SessionPatch{Model: "m2"})
	if err != nil || got.ACP.Models.Current != "m2" {
		t.Fatalf("set_model: %+v, %v", got, err)
	}
	if _, err := e.m.PatchSession(ctx, s.ID, berth.SessionPatch{Mode: "plan"}); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("mode of an agent without modes: %v", err)
	}
	// The agent fails part-way: the answer says what was applied.
	_, err = e.m.PatchSession(ctx, s.ID, berth.SessionPatch{Name: strp("half"), Model: "m3"})
	d := berth.ErrorDetails(err)
	if !berth.IsCode(err, berth.EUnavailable) || d["field"] != "model" || !slices.Equal(d["applied"].([]string), []string{"name"}) ||
		!strings.Contains(err.Error(), "model m3 is down") {
		t.Fatalf("a refused model = %v (details %v)", err, d)
	}
	got, _ = e.m.GetSession(ctx, s.ID)
	if got.Name != "half" || got.ACP.Models.Current != "m2" {
		t.Fatalf("after the partial patch: name %q model %q", got.Name, got.ACP.Models.Current)
	}
	e.prompt(s.ID, "title")
	got, _ = e.m.GetSession(ctx, s.ID)
	if got.Title != "Fix [31m login" {
		t.Fatalf("title = %q", got.Title)
	}
}

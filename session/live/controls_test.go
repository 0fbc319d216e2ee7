package live

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
)

func TestAnAgentsControlsAreBounded(t *testing.T) {
	var cmds []string
	for i := range 1000 {
		cmds = append(cmds, fmt.Sprintf(`{"name":"c%d","description":%q}`, i, strings.Repeat("d", 5000)))
	}
	got := decodeCommands(json.RawMessage(`{"sessionUpdate":"available_commands_update","availableCommands":[` + strings.Join(cmds, ",") + `]}`))
	if len(got) != maxControlItems || len(got[0].Description) != maxControlText || got[0].Raw != nil {
		t.Fatalf("%d commands, description %d bytes, raw %d bytes", len(got), len(got[0].Description), len(got[0].Raw))
	}
	opts, ok := decodeConfigOptions(json.RawMessage(`[{"id":"x","name":"X","type":"select","currentValue":"a","options":[{"group":"g","name":"G","options":[{"value":"a","name":"A"},{"value":"b","name":"B"}]}]}]`))
	if !ok || len(opts) != 1 || !slices.Equal(opts[0].Values(), []string{"a", "b"}) || opts[0].Options[1].Group != "g" {
		t.Fatalf("grouped option = %+v", opts)
	}
	if clip(strings.Repeat("é", 1000)) != strings.Repeat("é", 512) {
		t.Fatal("clip cut a rune")
	}
	// A mode update's id is clipped like the mode state's.
	u := &acp.Update{Kind: acp.UpdateCurrentMode, Raw: json.RawMessage(`{"sessionUpdate":"current_mode_update","currentModeId":"` + strings.Repeat("m", 1<<20) + `"}`)}
	var s berth.Session
	controlUpdateOf(u).apply(&s)
	if len(s.ACP.Modes.Current) != maxControlText {
		t.Fatalf("current mode of %d bytes kept", len(s.ACP.Modes.Current))
	}
	// All the options' values together are bounded, not each option's alone.
	var items []string
	for i := range maxControlItems {
		var vals []string
		for j := range maxControlItems {
			vals = append(vals, fmt.Sprintf(`{"value":"v%d","name":%q}`, j, strings.Repeat("n", 1000)))
		}
		items = append(items, fmt.Sprintf(`{"id":"o%d","name":"O","type":"select","currentValue":"v0","options":[%s]}`, i, strings.Join(vals, ",")))
	}
	opts, _ = decodeConfigOptions(json.RawMessage("[" + strings.Join(items, ",") + "]"))
	n := 0
	for _, o := range opts {
		n += len(o.Options)
	}
	if n > maxConfigValues {
		t.Fatalf("%d config values kept", n)
	}
}

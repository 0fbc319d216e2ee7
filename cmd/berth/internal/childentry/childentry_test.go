package childentry

import (
	"slices"
	"testing"

	"github.com/berth-sh/berth/gateway/relay"
)

// The entry takes agent-exec's arguments in the forms the daemon and a
// user write them, and leaves anything else to the command tree.
func TestRelayOptions(t *testing.T) {
	o, ok := relayOptions([]string{"--gateway-listen", "127.0.0.1:41400", "--gateway-socket", "/run/berth-gw/s",
		"--egress-listen=127.0.0.1:41401", "--egress-socket", "/run/berth-gw/e", "--", "/opt/agent", "--acp", "--", "x"})
	if !ok || o.Listen != "127.0.0.1:41400" || o.Socket != "/run/berth-gw/s" || o.EgressListen != "127.0.0.1:41401" ||
		o.EgressSocket != "/run/berth-gw/e" || !slices.Equal(o.Argv, []string{"/opt/agent", "--acp", "--", "x"}) {
		t.Fatalf("parsed %+v, %v", o, ok)
	}
	o, ok = relayOptions([]string{"--gateway-listen", "", "--gateway-socket", "", "--", "agent"})
	if !ok || o.Listen != "" || o.Socket != "" || o.EgressListen != "" || !slices.Equal(o.Argv, []string{"agent"}) {
		t.Fatalf("empty flags: %+v, %v", o, ok)
	}
	o, ok = relayOptions([]string{"--", "agent"})
	if !ok || o.Listen != relay.DefaultListen || o.Socket != relay.DefaultSocket {
		t.Fatalf("defaults: %+v, %v", o, ok)
	}
	for _, args := range [][]string{
		nil,
		{"agent"},                          // no "--": the tree's form
		{"--"},                             // no program
		{"--gateway-listen"},               // a flag without its value
		{"--gateway-listen", "a", "agent"}, // no "--"
		{"--help", "--", "agent"},          // a flag the entry does not know
		{"-h"},
	} {
		if _, ok := relayOptions(args); ok {
			t.Errorf("relayOptions(%q) took it", args)
		}
	}
}

package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// [sandbox] network takes true, false or an allow list, from the file (a
// table) or the environment (entries comma-separated); a bad entry is
// refused naming it, and so is any network when allow_network is false.
func TestSandboxNetworkPolicy(t *testing.T) {
	p := writeFile(t, "[sandbox]\nnetwork = { allow = [\"API.github.com\", \"127.0.0.1:11434\"], ask = true }\n")
	c, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Sandbox.NetworkPolicy()
	if err != nil || got.Mode != berth.NetworkAllowList || !got.Ask || !slices.Equal(got.Allow, []string{"api.github.com", "127.0.0.1:11434"}) {
		t.Fatalf("from the file: %+v, %v", got, err)
	}
	c, err = Load(p, []string{"BERTH_SANDBOX_NETWORK=pypi.org:443, *.npmjs.org"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Sandbox.NetworkPolicy(); got.Mode != berth.NetworkAllowList || got.Ask || !slices.Equal(got.Allow, []string{"pypi.org:443", "*.npmjs.org"}) {
		t.Fatalf("from the environment: %+v", got)
	}
	for _, env := range []string{"BERTH_SANDBOX_NETWORK=true", "BERTH_SANDBOX_NETWORK=false"} {
		c, err := Load(p, []string{env})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := c.Sandbox.NetworkPolicy(); got.Mode == berth.NetworkAllowList || got.Open() != strings.HasSuffix(env, "true") {
			t.Fatalf("%s: %+v", env, got)
		}
	}
	for _, c := range []struct{ body, want string }{
		{"[sandbox]\nnetwork = { allow = [\"ok.example\", \"bad host\"] }\n", "sandbox.network.allow[1]"},
		{"[sandbox]\nnetwork = { allow = [\"ok.example\"], deny = [] }\n", "sandbox.network.deny"},
		{"[sandbox]\nnetwork = \"yes\"\n", "sandbox.network"},
		{"[sandbox]\nallow_network = false\nnetwork = { allow = [\"ok.example\"] }\n", "allow_network is false"},
	} {
		if _, err := Load(writeFile(t, c.body), nil); !berth.IsCode(err, berth.EInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want invalid naming %s", c.body, err, c.want)
		}
	}
}

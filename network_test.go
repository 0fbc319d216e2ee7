package berth

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func TestParseNetworkEntryNormalizes(t *testing.T) {
	cases := map[string]string{
		"api.github.com":          "api.github.com",
		" API.GitHub.com. ":       "api.github.com",
		"pypi.org:443":            "pypi.org:443",
		"PyPI.org.:0443":          "pypi.org:443",
		"*.npmjs.org":             "*.npmjs.org",
		"*.Registry.NPMJS.org:80": "*.registry.npmjs.org:80",
		"127.0.0.1:11434":         "127.0.0.1:11434",
		"10.0.0.1":                "10.0.0.1",
		"::1":                     "::1",
		"[::1]":                   "::1",
		"[::1]:8080":              "[::1]:8080",
		"[2001:DB8::0:1]:443":     "[2001:db8::1]:443",
		"::ffff:127.0.0.1":        "127.0.0.1",
		"[::ffff:10.0.0.1]:22":    "10.0.0.1:22",
		"_srv.example.com":        "_srv.example.com",
		"localhost":               "localhost",
		"xn--bcher-kva.example":   "xn--bcher-kva.example",
		"a1.b2.c3:65535":          "a1.b2.c3:65535",
	}
	for in, want := range cases {
		e, err := ParseNetworkEntry(in)
		if err != nil {
			t.Errorf("ParseNetworkEntry(%q): %v", in, err)
			continue
		}
		if got := e.String(); got != want {
			t.Errorf("ParseNetworkEntry(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseNetworkEntryRefuses(t *testing.T) {
	bad := []string{
		"", "  ", "*", "*.", "*.com", "*.*.example.com", "a.*.example.com", "*example.com",
		"example.com:", "example.com:0", "example.com:65536", "example.com:+443", "example.com:44x",
		"example.com:443:1", "[::1", "[::1]443", "[::1]:", "[127.0.0.1]", "[example.com]:443",
		"fe80::1%eth0", "::1:443x", "exa mple.com", "exa/mple.com", "-bad.example.com", "bad-.example.com",
		"a..b", ".example.com", "example..", "127.1", "1.2.3", "10.0.0.1.", "bücher.example",
		"*.127.0.0.1", "*.[::1]", "user@example.com", "http://example.com",
		strings.Repeat("a", 64) + ".com", strings.Repeat("abcdefghi.", 26) + "com",
	}
	for _, in := range bad {
		e, err := ParseNetworkEntry(in)
		if err == nil {
			t.Errorf("ParseNetworkEntry(%q) = %q, want an error", in, e)
		} else if !IsCode(err, EInvalid) {
			t.Errorf("ParseNetworkEntry(%q): %v, want %s", in, err, EInvalid)
		}
	}
}

func TestNetworkEntryAllowsByNameAndPort(t *testing.T) {
	cases := []struct {
		entry, host string
		port        int
		want        bool
	}{
		{"api.github.com", "api.github.com", 443, true},
		{"api.github.com", "API.GITHUB.COM.", 80, true},
		{"api.github.com", "api.github.com", 22, false}, // no port: 80 and 443 only
		{"api.github.com", "github.com", 443, false},
		{"api.github.com", "x.api.github.com", 443, false},
		{"pypi.org:443", "pypi.org", 443, true},
		{"pypi.org:443", "pypi.org", 80, false},
		{"example.com:8080", "example.com", 8080, true},
		{"*.npmjs.org", "registry.npmjs.org", 443, true},
		{"*.npmjs.org", "a.b.npmjs.org", 443, true}, // one label or more
		{"*.npmjs.org", "npmjs.org", 443, false},    // never the suffix itself
		{"*.npmjs.org", "evilnpmjs.org", 443, false},
		{"*.npmjs.org", "npmjs.org.evil.com", 443, false},
		{"*.npmjs.org:8443", "x.npmjs.org", 8443, true},
		{"*.npmjs.org:8443", "x.npmjs.org", 443, false},
		{"127.0.0.1:11434", "127.0.0.1", 11434, true},
		{"127.0.0.1:11434", "127.0.0.1", 11435, false},
		{"127.0.0.1:11434", "::ffff:127.0.0.1", 11434, true},
		{"127.0.0.1:11434", "localhost", 11434, false}, // an address entry is no name
		{"127.0.0.1", "127.0.0.1", 443, true},
		{"127.0.0.1", "127.0.0.1", 7380, false},
		{"::1", "[0:0::1]", 443, true},
		{"[::1]:8080", "::1", 8080, true},
		{"[::1]:8080", "127.0.0.1", 8080, false},
		{"localhost:8080", "127.0.0.1", 8080, false}, // a name entry is no address
		{"example.com", "93.184.215.14", 443, false},
	}
	for _, c := range cases {
		e, err := ParseNetworkEntry(c.entry)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ParseNetworkHost(c.host)
		if err != nil {
			t.Fatalf("ParseNetworkHost(%q): %v", c.host, err)
		}
		if got := e.Allows(h, c.port); got != c.want {
			t.Errorf("%q allows %s:%d = %v, want %v", c.entry, c.host, c.port, got, c.want)
		}
		p := NetworkPolicy{Mode: NetworkAllowList, Allow: []string{c.entry}}
		if got := p.Allows(c.host, c.port); got != c.want {
			t.Errorf("policy [%q] allows %s:%d = %v, want %v", c.entry, c.host, c.port, got, c.want)
		}
	}
}

func TestNetworkPolicyAllowsByMode(t *testing.T) {
	if (NetworkPolicy{}).Allows("example.com", 443) {
		t.Error("no network allows example.com")
	}
	if !(NetworkPolicy{Mode: NetworkOpen}).Allows("example.com", 22) {
		t.Error("the open network refuses example.com:22")
	}
	if (NetworkPolicy{Mode: NetworkAllowList}).Allows("example.com", 443) {
		t.Error("an empty allow list allows example.com")
	}
	if (NetworkPolicy{Mode: NetworkAllowList, Allow: []string{"*.com"}}).Allows("example.com", 443) {
		t.Error("an entry that does not parse allows a host")
	}
}

func TestParseNetworkHostRefuses(t *testing.T) {
	for _, in := range []string{"", "*.example.com", "example.com:443", "[::1]:443", "a b", "127.1", "[example.com]", "fe80::1%25eth0"} {
		if h, err := ParseNetworkHost(in); !IsCode(err, EInvalid) {
			t.Errorf("ParseNetworkHost(%q) = %v, %v; want %s", in, h, err, EInvalid)
		}
	}
}

func TestNetworkPolicyJSONRoundTrip(t *testing.T) {
	cases := []struct{ in, want string }{
		{`false`, `false`},
		{`true`, `true`},
		{`{"allow": ["API.github.com.", "*.npmjs.org", "pypi.org:443", "127.0.0.1:11434", "api.github.com"], "ask": false}`,
			`{"allow":["api.github.com","*.npmjs.org","pypi.org:443","127.0.0.1:11434"],"ask":false}`},
		{`{"ask": true}`, `{"allow":[],"ask":true}`},
		{`{}`, `{"allow":[],"ask":false}`},
		{`{"allow": null}`, `{"allow":[],"ask":false}`},
		{`{"allow": ["[::1]:8080"]}`, `{"allow":["[::1]:8080"],"ask":false}`},
	}
	for _, c := range cases {
		var p NetworkPolicy
		if err := json.Unmarshal([]byte(c.in), &p); err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%s → %s, want %s", c.in, b, c.want)
		}
		var again NetworkPolicy
		if err := json.Unmarshal(b, &again); err != nil {
			t.Fatalf("%s does not read back: %v", b, err)
		}
		if b2, _ := json.Marshal(again); string(b2) != string(b) {
			t.Errorf("%s reads back as %s", b, b2)
		}
	}
}

func TestNetworkPolicyJSONErrorsNameTheField(t *testing.T) {
	many := make([]string, MaxNetworkEntries+1)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprintf("h%d.example.com", i))
	}
	cases := []struct{ in, field string }{
		{`"yes"`, "network"},
		{`1`, "network"},
		{`[]`, "network"},
		{`{"allow": ["ok.example.com", 3]}`, "network.allow[1]"},
		{`{"allow": ["ok.example.com", "a..b"]}`, "network.allow[1]"},
		{`{"allow": ["*.com"]}`, "network.allow[0]"},
		{`{"allow": "example.com"}`, "network.allow"},
		{`{"allow": [` + strings.Join(many, ",") + `]}`, "network.allow"},
		{`{"ask": "yes"}`, "network.ask"},
		{`{"alow": ["example.com"]}`, "network.alow"},
		{`{"ask": 1, "zzz": 2}`, "network.ask"},
	}
	for _, c := range cases {
		var body struct {
			Network NetworkPolicy `json:"network"`
		}
		err := json.Unmarshal([]byte(`{"network": `+c.in+`}`), &body)
		var be *Error
		if !errors.As(err, &be) || be.Code != EInvalid {
			t.Errorf("%s: %v, want %s", c.in, err, EInvalid)
			continue
		}
		if be.Details["field"] != c.field || !strings.Contains(be.Message, c.field) {
			t.Errorf("%s: field %v, message %q; want %s named", c.in, be.Details["field"], be.Message, c.field)
		}
	}
}

func TestNetworkPolicyJSONNullKeepsTheDefault(t *testing.T) {
	p := NetworkPolicy{Mode: NetworkOpen}
	if err := json.Unmarshal([]byte(`null`), &p); err != nil || p.Mode != NetworkOpen {
		t.Fatalf("null: %v, %+v", err, p)
	}
}

func TestNetworkPolicyNormalizeRefusesMixedModes(t *testing.T) {
	for _, p := range []NetworkPolicy{
		{Mode: NetworkNone, Allow: []string{"example.com"}},
		{Mode: NetworkOpen, Ask: true},
		{Mode: 7},
	} {
		if _, err := p.Normalize(); !IsCode(err, EInvalid) {
			t.Errorf("%+v: %v, want %s", p, err, EInvalid)
		}
		if _, err := json.Marshal(p); p.Mode == 7 && err == nil {
			t.Errorf("%+v marshals", p)
		}
	}
}

func TestNetworkPolicyFromTOMLShapes(t *testing.T) {
	p, err := NetworkPolicyFrom(map[string]any{"allow": []any{"Example.com"}, "ask": true})
	if err != nil || p.Mode != NetworkAllowList || !p.Ask || len(p.Allow) != 1 || p.Allow[0] != "example.com" {
		t.Fatalf("%+v, %v", p, err)
	}
	p, err = NetworkPolicyFrom(map[string]any{"allow": []string{"a.example.com", "A.example.com"}})
	if err != nil || len(p.Allow) != 1 {
		t.Fatalf("%+v, %v", p, err)
	}
}

func TestNetworkNarrower(t *testing.T) {
	none := NetworkPolicy{}
	open := NetworkPolicy{Mode: NetworkOpen}
	list := func(ask bool, allow ...string) NetworkPolicy {
		return NetworkPolicy{Mode: NetworkAllowList, Allow: allow, Ask: ask}
	}
	parent := list(false, "api.github.com", "*.npmjs.org", "pypi.org:443", "127.0.0.1:11434", "[::1]:8080")
	cases := []struct {
		name          string
		parent, child NetworkPolicy
		ok            bool
	}{
		{"none under none", none, none, true},
		{"none under list", parent, none, true},
		{"none under open", open, none, true},
		{"list under none", none, list(false), false},
		{"open under none", none, open, false},
		{"open under list", parent, open, false},
		{"open under open", open, open, true},
		{"list under open", open, list(true, "example.com", "*.example.org:22"), true},
		{"loopback under open", open, list(false, "127.0.0.1:11434"), false},
		{"private under open", open, list(false, "10.1.2.3:443"), false},
		{"public address under open", open, list(false, "93.184.215.14:443"), true},
		{"empty list under list", parent, list(false), true},
		{"same list", parent, parent, true},
		{"a name of the list", parent, list(false, "API.github.com."), true},
		{"a port of a portless name", parent, list(false, "api.github.com:443"), true},
		{"another port of a portless name", parent, list(false, "api.github.com:22"), false},
		{"a name under a wildcard", parent, list(false, "registry.npmjs.org", "a.b.npmjs.org:80"), true},
		{"a narrower wildcard", parent, list(false, "*.registry.npmjs.org"), true},
		{"the wildcard itself", parent, list(false, "*.npmjs.org"), true},
		{"the wildcard's suffix", parent, list(false, "npmjs.org"), false},
		{"a wider wildcard", list(false, "*.registry.npmjs.org"), list(false, "*.npmjs.org"), false},
		{"portless under a port", parent, list(false, "pypi.org"), false},
		{"the port of a port entry", parent, list(false, "pypi.org:443"), true},
		{"another host", parent, list(false, "api.github.com", "evil.example"), false},
		{"an address of the list", parent, list(false, "127.0.0.1:11434", "[::1]:8080"), true},
		{"another port of an address", parent, list(false, "127.0.0.1:7380"), false},
		{"a name where the list has an address", parent, list(false, "localhost:11434"), false},
		{"an address where the list has a name", list(false, "localhost:8080"), list(false, "127.0.0.1:8080"), false},
		{"ask under no ask", parent, list(true, "api.github.com"), false},
		{"ask under ask", list(true, "api.github.com"), list(true), true},
		{"no ask under ask", list(true), list(false), true},
	}
	for _, c := range cases {
		err := NetworkNarrower(c.parent, c.child)
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if !c.ok {
			var be *Error
			if !errors.As(err, &be) || be.Code != EForbidden || be.Details["field"] != "network" {
				t.Errorf("%s: %v, want %s naming network", c.name, err, EForbidden)
			}
		}
	}
	if err := NetworkNarrower(parent, list(false, "*.com")); !IsCode(err, EInvalid) {
		t.Errorf("a child's bad entry: %v, want %s", err, EInvalid)
	}
}

func TestInternalAddr(t *testing.T) {
	internal := []string{"127.0.0.1", "127.8.9.10", "::1", "0.0.0.0", "0.1.2.3", "::", "10.1.2.3", "172.17.0.1",
		"192.168.1.1", "169.254.169.254", "fe80::1", "fd00::1", "100.100.100.100", "224.0.0.1", "255.255.255.255",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "ff02::1"}
	for _, s := range internal {
		if !InternalAddr(netip.MustParseAddr(s)) {
			t.Errorf("%s is not internal", s)
		}
	}
	for _, s := range []string{"93.184.215.14", "140.82.112.3", "2606:4700::1", "203.0.113.5", "::ffff:8.8.8.8"} {
		if InternalAddr(netip.MustParseAddr(s)) {
			t.Errorf("%s is internal", s)
		}
	}
	if !InternalAddr(netip.Addr{}) {
		t.Error("the zero address is not internal")
	}
}

func FuzzParseNetworkEntry(f *testing.F) {
	for _, s := range []string{"api.github.com", "*.npmjs.org", "pypi.org:443", "127.0.0.1:11434", "[::1]:8080",
		"::ffff:1.2.3.4", "A.B.", "*.a.b:1", "[fe80::1%x]:1", "1.2.3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseNetworkEntry(s)
		if err != nil {
			if !IsCode(err, EInvalid) {
				t.Fatalf("%q: %v is not %s", s, err, EInvalid)
			}
			return
		}
		canon := e.String()
		again, err := ParseNetworkEntry(canon)
		if err != nil || again != e || again.String() != canon {
			t.Fatalf("%q → %q → %+v, %v", s, canon, again, err)
		}
		if !e.Covers(e) {
			t.Fatalf("%q does not cover itself", canon)
		}
		if e.Wildcard {
			return
		}
		port := e.Port
		if port == 0 {
			port = 443
		}
		if !e.Allows(e.NetworkHost, port) {
			t.Fatalf("%q does not allow its own host", canon)
		}
	})
}

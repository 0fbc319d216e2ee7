package gateway

import (
	"math"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// The table has the built-ins at the providers' public APIs; a configured
// entry of a built-in's name replaces it (keeping its credential when it
// names none); others are added; a missing URL is the kind's public API.
func TestResolve(t *testing.T) {
	table, err := Resolve([]Upstream{
		{Name: "anthropic", Kind: KindAnthropic, URL: "http://127.0.0.1:9000/proxy", Prices: Prices{Input: 1}},
		{Name: "ollama", Kind: KindOpenAI, URL: "http://127.0.0.1:11434"},
		{Name: "codex", Kind: KindOpenAIResponses, Credential: "openai"},
	})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Upstream{}
	var names []string
	for _, u := range table {
		byName[u.Name] = u
		names = append(names, u.Name)
	}
	if strings.Join(names, ",") != "anthropic,openai,gemini,ollama,codex" {
		t.Fatalf("names %v", names)
	}
	if a := byName["anthropic"]; a.URL != "http://127.0.0.1:9000/proxy" || a.Credential != "anthropic" || a.Prices.Input != 1 {
		t.Fatalf("anthropic %+v", a)
	}
	if g := byName["gemini"]; g.URL != "https://generativelanguage.googleapis.com" || g.Credential != "gemini" {
		t.Fatalf("gemini %+v", g)
	}
	if o := byName["ollama"]; o.Credential != "" {
		t.Fatalf("ollama %+v", o)
	}
	if c := byName["codex"]; c.URL != "https://api.openai.com" {
		t.Fatalf("codex %+v", c)
	}
}

// A bad entry is refused with berth.EInvalid and a message naming the
// entry and the field.
func TestResolveRefuses(t *testing.T) {
	ok := Upstream{Name: "x", Kind: KindOpenAI, URL: "http://h:1"}
	for _, c := range []struct {
		edit func(*Upstream)
		want string
	}{
		{func(u *Upstream) { u.Name = "My_Model" }, "models[1].name:"},
		{func(u *Upstream) { u.Name = "" }, "models[1].name:"},
		{func(u *Upstream) { u.Name = strings.Repeat("a", 65) }, "models[1].name:"},
		{func(u *Upstream) { u.Kind = "bedrock" }, "models[1].kind:"},
		{func(u *Upstream) { u.URL = "ftp://h" }, "models[1].url:"},
		{func(u *Upstream) { u.URL = "http://" }, "models[1].url:"},
		{func(u *Upstream) { u.URL = "http://user:pw@h" }, "models[1].url:"},
		{func(u *Upstream) { u.URL = "http://h/?a=1" }, "models[1].url:"},
		{func(u *Upstream) { u.URL = "%" }, "models[1].url:"},
		{func(u *Upstream) { u.Credential = "A B" }, "models[1].credential:"},
		{func(u *Upstream) { u.Prices.Output = -1 }, "models[1].prices.output:"},
		{func(u *Upstream) { u.Prices.CacheRead = math.NaN() }, "models[1].prices.cache_read:"},
		{func(u *Upstream) { u.Headers = map[string]string{"Host": "evil"} }, "models[1].headers:"},
		{func(u *Upstream) { u.Headers = map[string]string{"X-A": "b\r\nX-Injected: 1"} }, "models[1].headers:"},
		{func(u *Upstream) { u.Headers = map[string]string{"X A": "b"} }, "models[1].headers:"},
		{func(u *Upstream) { u.Name = "ok" }, "models[1].name: \"ok\" is also models[0]'s"},
	} {
		bad := ok
		bad.Name = "bad"
		c.edit(&bad)
		first := ok
		first.Name = "ok"
		_, err := Resolve([]Upstream{first, bad})
		if !berth.IsCode(err, berth.EInvalid) || !strings.HasPrefix(berth.ErrorMessage(err), c.want) {
			t.Errorf("%+v: %v, want %s…", bad, err, c.want)
		}
	}
	if _, err := New(Options{Upstreams: []Upstream{{Name: "x", Kind: "nope", URL: "http://h"}}, Credentials: &credStore{}}); !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("New with a bad upstream: %v", err)
	}
	if _, err := New(Options{}); !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("New without credentials: %v", err)
	}
}

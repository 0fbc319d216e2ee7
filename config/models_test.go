package config

import (
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/gateway"
)

func TestModelsLoad(t *testing.T) {
	c, err := Load(writeFile(t, `
[[models]]
name = "anthropic"
url = "http://127.0.0.1:9/prefix"
kind = "anthropic"
prices = { input = 3, output = 15, cache_read = 0.3, cache_write = 3.75 }

[[models]]
name = "local"
kind = "openai"
url = "http://127.0.0.1:11434"
headers = { "X-Team" = "a" }
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	table, err := c.Upstreams()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]gateway.Upstream{}
	for _, u := range table {
		byName[u.Name] = u
	}
	a := byName["anthropic"]
	if a.URL != "http://127.0.0.1:9/prefix" || a.Credential != "anthropic" || a.Prices.Output != 15 || a.Prices.CacheWrite != 3.75 {
		t.Errorf("anthropic = %+v, want the configured URL and prices and the built-in's credential", a)
	}
	if l := byName["local"]; l.Kind != gateway.KindOpenAI || l.Credential != "" || l.Headers["X-Team"] != "a" {
		t.Errorf("local = %+v", l)
	}
	if byName["gemini"].URL != gateway.DefaultURL(gateway.KindGemini) {
		t.Errorf("the built-in gemini is gone: %+v", table)
	}
}

func TestModelsInvalid(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`name = "x"` + "\n" + `kind = "anthropic"` + "\n[[models]]\n" + `name = "y"` + "\n" + `kind = "claude"`, "models[1].kind"},
		{`name = "X Y"` + "\n" + `kind = "openai"`, "models[0].name"},
		{`name = "x"` + "\n" + `kind = "openai"` + "\n" + `url = "ftp://h"`, "models[0].url"},
		{`name = "x"` + "\n" + `kind = "openai"` + "\n" + `prices = { input = -1 }`, "models[0].prices.input"},
		{`name = "x"` + "\n" + `kind = "openai"` + "\n[[models]]\n" + `name = "x"` + "\n" + `kind = "openai"`, "models[1].name"},
		{`name = "x"` + "\n" + `kind = "openai"` + "\n" + `colour = "red"`, "colour"},
	} {
		_, err := Load(writeFile(t, "[[models]]\n"+c.body+"\n"), nil)
		if !berth.IsCode(err, berth.EInvalid) || !strings.Contains(berth.ErrorMessage(err), c.want) {
			t.Errorf("%q: err = %v, want EInvalid naming %s", c.body, err, c.want)
		}
	}
}

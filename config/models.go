package config

import (
	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/gateway"
)

// Model is one [[models]] entry (docs/api.md, The model gateway): an
// upstream the model gateway forwards agents' calls to, or an override of
// a built-in one (anthropic, openai, gemini) of the same name.
type Model struct {
	// Name is the gateway's path segment that reaches it (/NAME/v1/…).
	Name string `toml:"name"`
	// Kind is the API it speaks: anthropic, openai, openai-responses or
	// gemini.
	Kind string `toml:"kind"`
	// URL is where it is (default: the provider's public API).
	URL string `toml:"url"`
	// Credential names the credential added to each call ("" for none;
	// a built-in's override keeps the built-in's).
	Credential string `toml:"credential"`
	// Prices are US dollars per million tokens.
	Prices ModelPrices `toml:"prices"`
	// Headers are added to every call to it.
	Headers map[string]string `toml:"headers"`
}

// ModelPrices are a [[models]] entry's prices, in US dollars per million
// tokens.
type ModelPrices struct {
	// Input prices the input tokens not read from a cache.
	Input float64 `toml:"input"`
	// Output prices the output tokens (thinking included).
	Output float64 `toml:"output"`
	// CacheRead prices the input tokens read from the prompt cache.
	CacheRead float64 `toml:"cache_read"`
	// CacheWrite prices the input tokens written to the cache.
	CacheWrite float64 `toml:"cache_write"`
}

// Upstreams is the model gateway's table of upstreams: the built-ins with
// the [[models]] entries applied (gateway.Resolve). An error names the
// entry and the field (`models[1].kind: …`), code berth.EInvalid.
func (c *Config) Upstreams() ([]gateway.Upstream, error) {
	configured := make([]gateway.Upstream, 0, len(c.Models))
	for _, m := range c.Models {
		configured = append(configured, gateway.Upstream{Name: m.Name, Kind: gateway.Kind(m.Kind), URL: m.URL,
			Credential: m.Credential, Headers: m.Headers,
			Prices: gateway.Prices{Input: m.Prices.Input, Output: m.Prices.Output, CacheRead: m.Prices.CacheRead,
				CacheWrite: m.Prices.CacheWrite}})
	}
	table, err := gateway.Resolve(configured)
	if err != nil {
		return nil, berth.WrapError(berth.EInvalid, err, "config: %s", berth.ErrorMessage(err))
	}
	return table, nil
}

// validateModels checks the [[models]] entries.
func (c *Config) validateModels() error {
	_, err := c.Upstreams()
	return err
}

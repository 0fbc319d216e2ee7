package config

import (
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth"
)

// Hook is one [[hooks]] entry (docs/api.md, "Hooks"): which events it wants,
// for which sessions, and where they go: a URL (POST, signed with Secret) or a
// command (the JSON on its stdin).
type Hook struct {
	// Name names the hook in deliveries and logs; default "hook-<index>".
	Name string `toml:"name"`
	// Events are event types (turn_ended, …) and badge changes
	// ("badge:waiting", …). At least one.
	Events []string `toml:"events"`
	// Agent, when set, keeps sessions of that agent only.
	Agent string `toml:"agent"`
	// Labels, when set, keeps sessions that carry every one of them.
	Labels map[string]string `toml:"labels"`
	// URL is where a URL hook POSTs (http or https).
	URL string `toml:"url"`
	// Secret signs a URL hook's body (X-Berth-Signature); optional.
	Secret string `toml:"secret"`
	// Command and Args run a command hook, outside any sandbox.
	Command string   `toml:"command"`
	Args    []string `toml:"args"`
	// Timeout bounds one attempt (1s..10m, default 10s).
	Timeout Duration `toml:"timeout"`
}

// DefaultHookTimeout is a hook attempt's time limit when none is set.
const DefaultHookTimeout = 10 * time.Second

// hookBadges are the badges a "badge:<badge>" hook may ask for.
var hookBadges = []berth.Badge{berth.BadgeRunning, berth.BadgeIdle, berth.BadgeWaiting, berth.BadgeHung,
	berth.BadgeNeedsAuth, berth.BadgeStopped, berth.BadgeFailed, berth.BadgeStarting}

// hookName is what a hook's name may be.
var hookName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

// HookName returns the hook's name, its default when it has none.
func (h *Hook) HookName(index int) string {
	if h.Name != "" {
		return h.Name
	}
	return "hook-" + strconv.Itoa(index)
}

// validateHooks checks every [[hooks]] entry and fills in defaults. An
// error names the entry (its index, and its name when it has one); it never
// quotes a URL or a secret, which may hold tokens.
func validateHooks(hooks []Hook) error {
	seen := map[string]bool{}
	for i := range hooks {
		h := &hooks[i]
		where := "hooks[" + strconv.Itoa(i) + "]"
		if h.Name != "" {
			if !hookName().MatchString(h.Name) {
				return invalid("%s: name %q must be letters, digits, '.', '_' or '-' (at most 64)", where, h.Name)
			}
			where += " (" + h.Name + ")"
		}
		name := h.HookName(i)
		if seen[name] {
			return invalid("%s: name %q appears twice", where, name)
		}
		seen[name] = true
		if len(h.Events) == 0 {
			return invalid("%s: events must name at least one event type or badge:<badge>", where)
		}
		for _, e := range h.Events {
			if b, ok := strings.CutPrefix(e, "badge:"); ok {
				if !slices.Contains(hookBadges, berth.Badge(b)) {
					return invalid("%s: events: unknown badge %q (want one of running, idle, waiting, hung, needs_auth, stopped, failed, starting)", where, b)
				}
				continue
			}
			// A hook may follow every event type (docs/api.md, Hooks).
			if !berth.IsEventKind(e) {
				return invalid("%s: events: unknown event type %q", where, e)
			}
		}
		switch {
		case h.URL != "" && h.Command != "":
			return invalid("%s: set either url or command, not both", where)
		case h.URL == "" && h.Command == "":
			return invalid("%s: needs url or command", where)
		case h.URL != "":
			u, err := url.Parse(h.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
				return invalid("%s: url must be an http:// or https:// URL with a host and no user info", where)
			}
			if len(h.Args) > 0 {
				return invalid("%s: args is for a command hook", where)
			}
		default:
			if h.Secret != "" {
				return invalid("%s: secret is for a url hook", where)
			}
		}
		if h.Timeout.Duration == 0 {
			h.Timeout.Duration = DefaultHookTimeout
		}
		if h.Timeout.Duration < time.Second || h.Timeout.Duration > 10*time.Minute {
			return invalid("%s: timeout = %s is out of range (1s..10m)", where, h.Timeout)
		}
	}
	return nil
}

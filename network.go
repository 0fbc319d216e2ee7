package berth

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// NetworkMode is how much of the network a sandbox reaches (docs/api.md,
// Network policy). The modes are ordered from the narrowest.
type NetworkMode uint8

// The network modes: `"network": false`, the object with "allow", and
// `true`.
const (
	// NetworkNone: no network but the model gateway.
	NetworkNone NetworkMode = iota
	// NetworkAllowList: the gateway plus the egress proxy, which lets
	// through only the hosts of the allow list.
	NetworkAllowList
	// NetworkOpen: the open network (and the gateway).
	NetworkOpen
)

// String names the mode as messages do.
func (m NetworkMode) String() string {
	switch m {
	case NetworkNone:
		return "none"
	case NetworkAllowList:
		return "allow-list"
	case NetworkOpen:
		return "open"
	}
	return fmt.Sprintf("NetworkMode(%d)", uint8(m))
}

// MaxNetworkEntries bounds the entries of one allow list.
const MaxNetworkEntries = 256

// NetworkPolicy is the `network` of a create request and of `[sandbox]
// network` (docs/api.md, Network policy). In JSON it is `false`
// (NetworkNone, the zero value), `true` (NetworkOpen) or `{"allow":
// [entries], "ask": bool}` (NetworkAllowList).
type NetworkPolicy struct {
	Mode NetworkMode
	// Allow holds the allow list's entries (see ParseNetworkEntry); only
	// in NetworkAllowList.
	Allow []string
	// Ask turns a refused connection into a permission request instead of
	// a refusal; only in NetworkAllowList.
	Ask bool
}

// Normalize checks p and returns it in canonical form: each entry as
// NetworkEntry.String writes it, duplicates dropped, the order kept.
// EInvalid naming the field (`network.allow[2]`) otherwise.
func (p NetworkPolicy) Normalize() (NetworkPolicy, error) {
	switch p.Mode {
	case NetworkNone, NetworkOpen:
		if len(p.Allow) > 0 || p.Ask {
			return NetworkPolicy{}, fieldError("network", "network: allow and ask belong only to an allow list ({\"allow\": [...]})")
		}
		return NetworkPolicy{Mode: p.Mode}, nil
	case NetworkAllowList:
	default:
		return NetworkPolicy{}, fieldError("network", "network: unknown mode %d", p.Mode)
	}
	if len(p.Allow) > MaxNetworkEntries {
		return NetworkPolicy{}, fieldError("network.allow", "network.allow may hold at most %d entries", MaxNetworkEntries)
	}
	out := NetworkPolicy{Mode: NetworkAllowList, Ask: p.Ask, Allow: make([]string, 0, len(p.Allow))}
	for i, s := range p.Allow {
		e, err := parseEntry(s)
		if err != nil {
			return NetworkPolicy{}, entryError(i, s, err)
		}
		if c := e.String(); !slices.Contains(out.Allow, c) {
			out.Allow = append(out.Allow, c)
		}
	}
	return out, nil
}

// Entries parses the allow list. EInvalid naming the field for an entry
// that does not parse.
func (p NetworkPolicy) Entries() ([]NetworkEntry, error) {
	out := make([]NetworkEntry, 0, len(p.Allow))
	for i, s := range p.Allow {
		e, err := parseEntry(s)
		if err != nil {
			return nil, entryError(i, s, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Allows reports whether the policy lets a connection to host and port
// through by its list: never in NetworkNone, always in NetworkOpen, and
// in NetworkAllowList when an entry allows it (NetworkEntry.Allows; an
// entry that does not parse allows nothing). Where a name resolves to
// is the egress proxy's concern, not the list's.
func (p NetworkPolicy) Allows(host string, port int) bool {
	switch p.Mode {
	case NetworkOpen:
		return true
	case NetworkAllowList:
	default:
		return false
	}
	h, err := ParseNetworkHost(host)
	if err != nil {
		return false
	}
	for _, s := range p.Allow {
		if e, err := parseEntry(s); err == nil && e.Allows(h, port) {
			return true
		}
	}
	return false
}

// networkJSON is the object form of a policy.
type networkJSON struct {
	Allow []string `json:"allow"`
	Ask   bool     `json:"ask"`
}

// MarshalJSON writes false, true, or {"allow": [...], "ask": bool}.
func (p NetworkPolicy) MarshalJSON() ([]byte, error) {
	switch p.Mode {
	case NetworkNone:
		return []byte("false"), nil
	case NetworkOpen:
		return []byte("true"), nil
	case NetworkAllowList:
		allow := p.Allow
		if allow == nil {
			allow = []string{}
		}
		return json.Marshal(networkJSON{Allow: allow, Ask: p.Ask})
	}
	return nil, fieldError("network", "network: unknown mode %d", p.Mode)
}

// UnmarshalJSON reads what MarshalJSON writes, checked and normalized as
// Normalize does; null leaves p as it is. EInvalid naming the field.
func (p *NetworkPolicy) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return WrapError(EInvalid, err, "network must be true, false or {\"allow\": [...], \"ask\": false}")
	}
	if v == nil {
		return nil
	}
	np, err := NetworkPolicyFrom(v)
	if err != nil {
		return err
	}
	*p = np
	return nil
}

// NetworkPolicyFrom reads a policy from a decoded JSON or TOML value: a
// bool, or a map with "allow" (a list of strings) and "ask" (a bool),
// no other key. The result is normalized. EInvalid naming the field.
func NetworkPolicyFrom(v any) (NetworkPolicy, error) {
	switch v := v.(type) {
	case bool:
		if v {
			return NetworkPolicy{Mode: NetworkOpen}, nil
		}
		return NetworkPolicy{Mode: NetworkNone}, nil
	case map[string]any:
		return networkObject(v)
	}
	return NetworkPolicy{}, fieldError("network", "network must be true, false or {\"allow\": [...], \"ask\": false}")
}

// networkObject reads the object form of a policy.
func networkObject(m map[string]any) (NetworkPolicy, error) {
	p := NetworkPolicy{Mode: NetworkAllowList}
	// Sorted, so that of two bad fields the same one is always named.
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch k {
		case "allow":
			allow, err := stringList(v)
			if err != nil {
				return NetworkPolicy{}, err
			}
			p.Allow = allow
		case "ask":
			b, ok := v.(bool)
			if !ok {
				return NetworkPolicy{}, fieldError("network.ask", "network.ask must be true or false")
			}
			p.Ask = b
		default:
			return NetworkPolicy{}, fieldError("network."+k, "network.%s: unknown field (network takes allow and ask)", k)
		}
	}
	return p.Normalize()
}

// stringList reads network.allow: a list of strings, as JSON ([]any) or a
// Go caller ([]string) gives it.
func stringList(v any) ([]string, error) {
	switch v := v.(type) {
	case []string:
		return v, nil
	case []any:
		if len(v) > MaxNetworkEntries {
			return nil, fieldError("network.allow", "network.allow may hold at most %d entries", MaxNetworkEntries)
		}
		out := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fieldError(fmt.Sprintf("network.allow[%d]", i), "network.allow[%d] must be a string", i)
			}
			out[i] = s
		}
		return out, nil
	case nil:
		return nil, nil
	}
	return nil, fieldError("network.allow", "network.allow must be a list of hosts")
}

// NetworkNarrower checks that child's policy is no wider than parent's:
// NetworkNone is narrower than an allow list, which is narrower than
// NetworkOpen. A child's allow list under a parent's allow list must have
// every entry covered by one of the parent's (NetworkEntry.Covers: the
// same address, the same name or a name under a wildcard, and a port the
// parent's entry allows), and may ask only when the parent asks. Under an
// open parent, a child's list may not name an InternalAddr: the open
// network does not reach the host's loopback, the proxy would. EForbidden
// naming `network` otherwise (EInvalid for a policy that does not parse).
func NetworkNarrower(parent, child NetworkPolicy) error {
	if _, err := child.Normalize(); err != nil {
		return err
	}
	if child.Mode == NetworkNone {
		return nil
	}
	if child.Mode > parent.Mode {
		return fieldErrorCode(EForbidden, "network", "network: a child's network (%s) may not be wider than its parent's (%s)", child.Mode, parent.Mode)
	}
	if child.Mode != NetworkAllowList {
		return nil
	}
	entries, err := child.Entries()
	if err != nil {
		return err
	}
	if parent.Mode == NetworkOpen {
		for _, e := range entries {
			if e.Addr.IsValid() && InternalAddr(e.Addr) {
				return fieldErrorCode(EForbidden, "network", "network: a child may not name %s, an address of the host or of its own networks, unless its parent's allow list does", e)
			}
		}
		return nil
	}
	if child.Ask && !parent.Ask {
		return fieldErrorCode(EForbidden, "network", "network.ask: a child may not ask for hosts when its parent does not")
	}
	parents, err := parent.Entries()
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !slices.ContainsFunc(parents, func(p NetworkEntry) bool { return p.Covers(e) }) {
			return fieldErrorCode(EForbidden, "network", "network: %s is not within its parent's allow list", e)
		}
	}
	return nil
}

// entryError is EInvalid about the i-th entry s of the allow list.
func entryError(i int, s string, err error) *Error {
	f := fmt.Sprintf("network.allow[%d]", i)
	return fieldError(f, "%s %q: %v", f, s, err)
}

// fieldError is EInvalid about field.
func fieldError(field, format string, args ...any) *Error {
	return fieldErrorCode(EInvalid, field, format, args...)
}

// fieldErrorCode is an error with code about field.
func fieldErrorCode(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Details: map[string]any{"field": field}}
}

// NetworkOf is the policy of a bool: NetworkOpen for true, NetworkNone
// for false.
func NetworkOf(open bool) NetworkPolicy {
	if open {
		return NetworkPolicy{Mode: NetworkOpen}
	}
	return NetworkPolicy{}
}

// Open reports whether p is the open network.
func (p NetworkPolicy) Open() bool { return p.Mode == NetworkOpen }

// IsZero reports whether p is `false` with nothing else, for omitzero.
func (p NetworkPolicy) IsZero() bool { return p.Mode == NetworkNone && len(p.Allow) == 0 && !p.Ask }

// PolicyOf is the network policy a session's sandbox was given.
func (s SandboxSpec) PolicyOf() NetworkPolicy {
	if s.NetworkPolicy != nil {
		return *s.NetworkPolicy
	}
	return NetworkOf(s.Network)
}

package berth

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
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

// maxEntryLen bounds one entry of an allow list as written: a DNS
// name's 253 characters, a port and room for brackets and spaces.
const maxEntryLen = 300

// NetworkHost is a destination host as an allow-list entry names it or a
// connection asks for it: a DNS name (lower case, ASCII, no trailing dot)
// or an address (IPv4-mapped IPv6 addresses are their IPv4 address).
// Exactly one of Name and Addr is set.
type NetworkHost struct {
	Name string
	Addr netip.Addr
}

// String returns the host as an entry writes it (an IPv6 address bare).
func (h NetworkHost) String() string {
	if h.Addr.IsValid() {
		return h.Addr.String()
	}
	return h.Name
}

// NetworkEntry is one parsed entry of an allow list (docs/api.md, Network
// policy): a name, a wildcard "*.suffix" (Name holds the suffix) or an
// address, with a port or without one (Port 0: ports 80 and 443 only).
type NetworkEntry struct {
	NetworkHost
	// Wildcard: the entry matches every name one or more labels below
	// Name, never Name itself.
	Wildcard bool
	// Port is the one port allowed; 0 allows 80 and 443.
	Port int
}

// String returns the entry in its canonical form, which ParseNetworkEntry
// reads back as the same entry.
func (e NetworkEntry) String() string {
	h := e.NetworkHost.String()
	if e.Wildcard {
		h = "*." + h
	}
	if e.Port == 0 {
		return h
	}
	if e.Addr.Is6() {
		h = "[" + h + "]"
	}
	return h + ":" + strconv.Itoa(e.Port)
}

// ParseNetworkEntry parses one allow-list entry: a DNS name
// ("api.github.com"), a wildcard ("*.npmjs.org": every name below
// npmjs.org, whose suffix has two labels or more), an IPv4 or IPv6
// address ("127.0.0.1", "::1"), any of them followed by ":port" (an IPv6
// address then in brackets: "[::1]:8080"). Names are ASCII (an
// internationalized name is written in its "xn--" form), case-folded, a
// trailing dot dropped. EInvalid otherwise, saying what is wrong with s.
func ParseNetworkEntry(s string) (NetworkEntry, error) {
	e, err := parseEntry(s)
	if err != nil {
		return NetworkEntry{}, Errorf(EInvalid, "network entry %q: %v", s, err)
	}
	return e, nil
}

// parseEntry is ParseNetworkEntry with a plain error, for the caller to
// name the field.
func parseEntry(s string) (NetworkEntry, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "":
		return NetworkEntry{}, fmt.Errorf("an entry may not be empty")
	case "*":
		return NetworkEntry{}, fmt.Errorf("\"*\" is not an entry: \"network\": true is the open network")
	}
	if len(s) > maxEntryLen {
		return NetworkEntry{}, fmt.Errorf("an entry may be at most %d characters", maxEntryLen)
	}
	hostPart, port, bracketed, err := splitEntryPort(s)
	if err != nil {
		return NetworkEntry{}, err
	}
	var e NetworkEntry
	e.Port = port
	if name, ok := strings.CutPrefix(hostPart, "*."); ok && !bracketed {
		e.Wildcard = true
		hostPart = name
	}
	if e.NetworkHost, err = parseHost(hostPart, bracketed); err != nil {
		return NetworkEntry{}, err
	}
	if e.Wildcard {
		if e.Addr.IsValid() {
			return NetworkEntry{}, fmt.Errorf("a wildcard must be followed by a name, not an address")
		}
		if !strings.Contains(e.Name, ".") {
			return NetworkEntry{}, fmt.Errorf("a wildcard's suffix must have two labels or more (\"*.example.com\")")
		}
	}
	return e, nil
}

// ParseNetworkHost parses the host a connection asks for (the host of a
// CONNECT line or of a URL, without its port): a name or an address,
// normalized as ParseNetworkEntry normalizes them. An IPv6 address may be
// in brackets. EInvalid otherwise.
func ParseNetworkHost(s string) (NetworkHost, error) {
	in := s
	bracketed := len(s) >= 2 && s[0] == '[' && s[len(s)-1] == ']'
	if bracketed {
		s = s[1 : len(s)-1]
	}
	if len(s) > maxEntryLen {
		return NetworkHost{}, Errorf(EInvalid, "a host may be at most %d characters", maxEntryLen)
	}
	h, err := parseHost(s, bracketed)
	if err != nil {
		return NetworkHost{}, Errorf(EInvalid, "host %q: %v", in, err)
	}
	return h, nil
}

// splitEntryPort splits s into its host and port (0 when there is none).
// An IPv6 address with a port is in brackets; one without may be bare.
func splitEntryPort(s string) (host string, port int, bracketed bool, err error) {
	if rest, ok := strings.CutPrefix(s, "["); ok {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return "", 0, false, fmt.Errorf("a '[' must close with ']'")
		}
		host, rest = rest[:end], rest[end+1:]
		if rest == "" {
			return host, 0, true, nil
		}
		p, ok := strings.CutPrefix(rest, ":")
		if !ok {
			return "", 0, false, fmt.Errorf("only \":port\" may follow ']'")
		}
		port, err = parsePort(p)
		return host, port, true, err
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, 0, false, nil
	case 1:
		h, p, _ := strings.Cut(s, ":")
		port, err = parsePort(p)
		return h, port, false, err
	}
	// Two colons or more: a bare IPv6 address, whose port needs brackets.
	return s, 0, false, nil
}

// parsePort parses a port of decimal digits, 1 to 65535.
func parsePort(p string) (int, error) {
	if p == "" || strings.Trim(p, "0123456789") != "" {
		return 0, fmt.Errorf("port %q must be a number from 1 to 65535", p)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q must be a number from 1 to 65535", p)
	}
	return n, nil
}

// parseHost parses a name or an address; bracketed hosts must be IPv6.
func parseHost(s string, bracketed bool) (NetworkHost, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return NetworkHost{}, fmt.Errorf("address %q may not carry a zone", s)
		}
		if bracketed && !a.Is6() {
			return NetworkHost{}, fmt.Errorf("only an IPv6 address goes in brackets")
		}
		return NetworkHost{Addr: a.Unmap()}, nil
	}
	if bracketed || strings.Contains(s, ":") {
		return NetworkHost{}, fmt.Errorf("%q is not an IPv6 address", s)
	}
	name, err := parseName(s)
	return NetworkHost{Name: name}, err
}

// parseName checks a DNS name and returns it lower case without its
// trailing dot: ASCII labels of letters, digits, '-' and '_', 1 to 63
// characters, not starting or ending with '-'; at most 253 characters;
// the last label not all digits (such a name is an address's shorthand,
// "127.1", which entries must write in full).
func parseName(s string) (string, error) {
	s = strings.ToLower(strings.TrimSuffix(s, "."))
	if s == "" {
		return "", fmt.Errorf("a host may not be empty")
	}
	if len(s) > 253 {
		return "", fmt.Errorf("a name may be at most 253 characters")
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if err := checkLabel(l); err != nil {
			return "", fmt.Errorf("%q is not a host name: %w", s, err)
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", fmt.Errorf("%q is neither a name nor a full IPv4 address", s)
	}
	return s, nil
}

// checkLabel checks one label of a DNS name.
func checkLabel(l string) error {
	if l == "" || len(l) > 63 {
		return fmt.Errorf("each label must be 1 to 63 characters")
	}
	if l[0] == '-' || l[len(l)-1] == '-' {
		return fmt.Errorf("a label may not start or end with '-'")
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		case c >= 0x80:
			return fmt.Errorf("write an internationalized name in its ASCII form (xn--…)")
		default:
			return fmt.Errorf("%q may not appear in a name", string(c))
		}
	}
	return nil
}

// Allows reports whether the entry lets a connection to host and port
// through: a name entry by the name as asked (never by an address it
// resolves to), a wildcard by a name one or more labels below its
// suffix, an address entry by that same address; and a port entry by
// that port, a portless one by 80 and 443.
func (e NetworkEntry) Allows(host NetworkHost, port int) bool {
	return e.allowsPort(port) && e.coversHost(host, false)
}

// allowsPort reports whether port is one the entry allows.
func (e NetworkEntry) allowsPort(port int) bool {
	if e.Port == 0 {
		return port == 80 || port == 443
	}
	return port == e.Port
}

// coversHost reports whether every host that h (a wildcard when wild)
// names is one the entry's host matches.
func (e NetworkEntry) coversHost(h NetworkHost, wild bool) bool {
	switch {
	case e.Addr.IsValid() || h.Addr.IsValid():
		return !wild && e.Addr == h.Addr
	case !e.Wildcard:
		return !wild && e.Name == h.Name
	case wild && h.Name == e.Name:
		return true
	default:
		return strings.HasSuffix(h.Name, "."+e.Name)
	}
}

// Covers reports whether the entry allows everything o allows: every
// port of o's, and every host o matches.
func (e NetworkEntry) Covers(o NetworkEntry) bool {
	portsOK := e.Port == 0 && (o.Port == 0 || o.Port == 80 || o.Port == 443) || e.Port != 0 && o.Port == e.Port
	return portsOK && e.coversHost(o.NetworkHost, o.Wildcard)
}

// InternalAddr reports whether a is an address of the host itself or of
// the networks only it reaches: loopback, unspecified and "this network"
// (0.0.0.0/8), link-local (169.254.0.0/16, cloud metadata; fe80::/10),
// private (10/8, 172.16/12, 192.168/16, fc00::/7), shared (100.64.0.0/10),
// multicast and broadcast. A name never reaches such an address through
// the egress proxy unless an entry names the address itself.
func InternalAddr(a netip.Addr) bool {
	a = a.Unmap()
	return !a.IsGlobalUnicast() || a.IsPrivate() ||
		sharedV4.Contains(a) || thisNetV4.Contains(a)
}

var (
	sharedV4  = netip.MustParsePrefix("100.64.0.0/10")
	thisNetV4 = netip.MustParsePrefix("0.0.0.0/8")
)

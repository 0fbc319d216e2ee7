package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/berth-sh/berth"
)

// dial connects to h:port once admitted. An address is dialed as it is.
// A name is resolved here, never by the agent, and only its addresses
// that are not the host's own or its networks' (berth.InternalAddr) are
// dialed, unless an entry names the address itself: an allowed name
// whose DNS answer points at 127.0.0.1 reaches nothing. The addresses
// checked are the ones dialed, so a second answer cannot differ.
func (s *Session) dial(ctx context.Context, h berth.NetworkHost, port int) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.DialTimeout)
	defer cancel()
	addrs := []netip.Addr{h.Addr}
	if !h.Addr.IsValid() {
		var err error
		if addrs, err = s.resolve(ctx, h, port); err != nil {
			return nil, err
		}
	}
	var last error
	for _, a := range addrs {
		c, err := s.opts.Dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		last = err
	}
	s.log.Debug("egress: cannot connect", "host", h.String(), "port", port, "err", last)
	if errors.Is(last, context.DeadlineExceeded) {
		return nil, refused(http.StatusGatewayTimeout, "connecting to %s:%d timed out", h, port)
	}
	return nil, refused(http.StatusBadGateway, "cannot connect to %s:%d", h, port)
}

// resolve returns the addresses of h.Name that h:port may reach.
func (s *Session) resolve(ctx context.Context, h berth.NetworkHost, port int) ([]netip.Addr, error) {
	found, err := s.opts.Resolver.LookupNetIP(ctx, "ip", h.Name)
	if err != nil || len(found) == 0 {
		s.log.Debug("egress: cannot resolve", "host", h.Name, "err", err)
		return nil, refused(http.StatusBadGateway, "cannot resolve %s", h.Name)
	}
	var ok []netip.Addr
	for _, a := range found {
		a = a.Unmap()
		if !berth.InternalAddr(a) || s.listed(berth.NetworkHost{Addr: a}, port) {
			ok = append(ok, a)
		}
	}
	if len(ok) == 0 {
		s.deny(target{h.Name, port})
		a := found[0].Unmap()
		return nil, refused(http.StatusForbidden, "%s resolves to %s, an address of the host or of its networks: only an entry naming the address (%q) allows it",
			h.Name, a, entryFor(berth.NetworkHost{Addr: a}, port))
	}
	return ok, nil
}

// parseTarget parses the host and port a connection asks for. EInvalid
// for a port that is not 1 to 65535 in plain digits, or a host that is
// neither a name nor an address.
func parseTarget(host, port string) (berth.NetworkHost, int, error) {
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return berth.NetworkHost{}, 0, berth.Errorf(berth.EInvalid, "port %q must be a number from 1 to 65535", port)
	}
	h, err := berth.ParseNetworkHost(host)
	return h, n, err
}

package egress

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"time"
)

// forward serves a request for an absolute http:// URL: admitted, it is
// sent on to the URL's host and its answer streamed back. The Host header
// the server reads is the URL's too (net/http sets r.Host from an
// absolute URL), so a request names one destination.
func (s *Session) forward(w http.ResponseWriter, r *http.Request) {
	if r.URL.Scheme != "http" {
		http.Error(w, "berth egress: only http:// URLs are forwarded; https:// goes through CONNECT", http.StatusBadRequest)
		return
	}
	if _, _, ok := s.admitTarget(w, r, r.URL.Hostname(), cmp.Or(r.URL.Port(), "80")); !ok {
		return
	}
	s.rp.ServeHTTP(w, r)
}

// newReverseProxy returns what forwards an admitted request: to its URL
// as it is, with the hop-by-hop and X-Forwarded headers dropped, each
// piece of the answer passed on as it arrives.
func (s *Session) newReverseProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u := *pr.In.URL
			pr.Out.URL = &u
		},
		Transport:     s.transport,
		FlushInterval: -1,
		ErrorHandler:  func(w http.ResponseWriter, _ *http.Request, err error) { s.refuse(w, err) },
		ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}

// newTransport returns the session's client for forwarded requests: it
// dials through s.dial (never through another proxy), leaves bodies as
// they came, and waits at most IdleTimeout for an answer's headers.
func (s *Session) newTransport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			h, n, err := parseTarget(host, port)
			if err != nil {
				return nil, err
			}
			return s.dial(ctx, h, n)
		},
		DisableCompression:    true,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: s.opts.IdleTimeout,
	}
}

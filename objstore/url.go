package objstore

import (
	"net"
	"net/url"
	"strings"

	"github.com/berth-sh/berth"
)

// Location is a parsed [storage] url: where in which bucket of which
// S3-compatible server berth keeps sessions' state (docs/api.md, "Session
// state in an object store").
type Location struct {
	// Bucket is the bucket's name.
	Bucket string
	// Prefix is the key prefix every object of this berth is under, without
	// a leading or trailing slash ("" for the bucket's root).
	Prefix string
	// Endpoint is host:port of the server; Secure says https.
	Endpoint string
	Secure   bool
	// Region is the bucket's region ("" lets the client ask the server).
	Region string
}

// ParseURL parses s3://BUCKET/PREFIX?endpoint=[http(s)://]HOST[:PORT]&region=R.
// An endpoint without a scheme is https. Anything else is EInvalid naming
// storage.url; the message never repeats the URL (it may hold a secret
// someone put there).
func ParseURL(raw string) (Location, error) {
	bad := func(why string) (Location, error) {
		return Location{}, berth.Errorf(berth.EInvalid, "storage.url: %s (want s3://BUCKET/PREFIX?endpoint=http://HOST:PORT&region=R)", why)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("not a URL")
	}
	if u.Scheme != "s3" {
		return bad("the scheme must be s3")
	}
	if u.User != nil {
		return bad("credentials do not go in the URL (use storage.access_key_file and storage.secret_key_file)")
	}
	if u.Fragment != "" || u.Opaque != "" {
		return bad("unexpected fragment or opaque part")
	}
	if !validBucket(u.Host) {
		return bad("the bucket name must be 3..63 lower-case letters, digits, '.' or '-'")
	}
	loc := Location{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
	for _, seg := range strings.Split(loc.Prefix, "/") {
		if loc.Prefix != "" && (seg == "" || seg == "." || seg == "..") {
			return bad("the prefix has an empty, . or .. segment")
		}
	}
	q := u.Query()
	for k, v := range q {
		if (k != "endpoint" && k != "region") || len(v) != 1 {
			return bad("only one endpoint and one region are accepted as parameters")
		}
	}
	loc.Region = q.Get("region")
	endpoint := q.Get("endpoint")
	if endpoint == "" {
		return bad("the endpoint parameter is required")
	}
	loc.Secure = true
	if scheme, rest, ok := strings.Cut(endpoint, "://"); ok {
		switch scheme {
		case "http":
			loc.Secure = false
		case "https":
		default:
			return bad("the endpoint's scheme must be http or https")
		}
		endpoint = strings.TrimSuffix(rest, "/")
	}
	if endpoint == "" || strings.ContainsAny(endpoint, "/?#@ ") {
		return bad("the endpoint must be HOST[:PORT]")
	}
	if host, port, err := net.SplitHostPort(endpoint); err == nil && (host == "" || port == "") {
		return bad("the endpoint must be HOST[:PORT]")
	}
	loc.Endpoint = endpoint
	return loc, nil
}

// validBucket reports whether b is an S3 bucket name.
func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for _, r := range b {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-') {
			return false
		}
	}
	return b[0] != '.' && b[0] != '-' && b[len(b)-1] != '.' && b[len(b)-1] != '-'
}

// key joins the prefix and a relative key.
func (l Location) key(rel string) string {
	if l.Prefix == "" {
		return rel
	}
	return l.Prefix + "/" + rel
}

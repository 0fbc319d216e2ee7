package config

import (
	"path/filepath"
	"strings"
)

// Storage is the [storage] section (docs/api.md, "Session state in an
// object store"): an S3-compatible store that keeps every managed
// session's checkpoints, snapshots and HOME off the node.
type Storage struct {
	// URL is s3://BUCKET/PREFIX?endpoint=http(s)://HOST:PORT&region=R;
	// "" keeps sessions' state on this node only (the default).
	URL string `toml:"url"`
	// AccessKeyFile and SecretKeyFile are the files of the store's access
	// key and secret (absolute paths, mode 0600); both "" takes
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from the environment.
	AccessKeyFile string `toml:"access_key_file"`
	SecretKeyFile string `toml:"secret_key_file"`
	// MaxFileBytes: a larger file of a workspace or HOME stays on the node
	// and is listed as left out (1 B..64 GiB, default 1 GiB).
	MaxFileBytes int `toml:"max_file_bytes"`
	// MaxTotalBytes bounds the files of one workspace or HOME written
	// (1 B..1 TiB, default 8 GiB); past it files are left out and listed.
	MaxTotalBytes int `toml:"max_total_bytes"`
}

// defaultStorage are the [storage] defaults.
func defaultStorage() Storage {
	return Storage{MaxFileBytes: GiB, MaxTotalBytes: 8 * GiB}
}

// Enabled reports whether sessions' state goes to an object store.
func (s *Storage) Enabled() bool { return s.URL != "" }

// validate checks the shape of the keys; the URL's own parts are
// objstore.ParseURL's, which the daemon calls at start.
func (s *Storage) validate() error {
	if s.URL != "" && !strings.HasPrefix(s.URL, "s3://") {
		// The URL may hold a secret someone put there: never echo it.
		return invalid("storage.url must be s3://BUCKET/PREFIX?endpoint=http://HOST:PORT&region=R")
	}
	for _, f := range []struct{ key, v string }{{"storage.access_key_file", s.AccessKeyFile}, {"storage.secret_key_file", s.SecretKeyFile}} {
		if f.v != "" && !filepath.IsAbs(f.v) {
			return invalid("%s must be an absolute path", f.key)
		}
	}
	if (s.AccessKeyFile == "") != (s.SecretKeyFile == "") {
		return invalid("storage.access_key_file and storage.secret_key_file go together: set both or neither")
	}
	if s.URL == "" && s.AccessKeyFile != "" {
		return invalid("storage.access_key_file is set but storage.url is empty")
	}
	if err := intRange("storage.max_file_bytes", s.MaxFileBytes, 1, 64*GiB); err != nil {
		return err
	}
	return intRange("storage.max_total_bytes", s.MaxTotalBytes, 1, 1024*GiB)
}

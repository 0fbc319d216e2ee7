package config

import "path/filepath"

// Credentials is the [credentials] section (docs/api.md, Credentials).
type Credentials struct {
	// KeyFile is the file of the key that encrypts the credentials in a
	// PostgreSQL store: 32 random bytes (or their hex or base64), mode
	// 0600, the same on every node. "" leaves such a store unable to set
	// or read credentials. A SQLite store does not use it.
	KeyFile string `toml:"key_file"`
}

func (c *Credentials) validate() error {
	if c.KeyFile != "" && !filepath.IsAbs(c.KeyFile) {
		return invalid("credentials.key_file must be an absolute path")
	}
	return nil
}

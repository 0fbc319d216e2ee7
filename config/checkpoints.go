package config

// Checkpoints is the [checkpoints] section (CONTRACT §4.8): the workspace
// recorded before every turn, for rewind and fork.
type Checkpoints struct {
	// Enabled turns checkpoints on (default true).
	Enabled bool `toml:"enabled"`
	// MaxFileBytes: a larger file is skipped and listed (1 B..16 GiB,
	// default 10 MiB).
	MaxFileBytes int `toml:"max_file_bytes"`
	// MaxTotalBytes bounds the files of one checkpoint; past it files are
	// skipped and listed, the turn goes on (1 B..1 TiB, default 1 GiB).
	MaxTotalBytes int `toml:"max_total_bytes"`
}

// defaultCheckpoints are the [checkpoints] defaults.
func defaultCheckpoints() Checkpoints {
	return Checkpoints{Enabled: true, MaxFileBytes: 10 * MiB, MaxTotalBytes: GiB}
}

func (c *Checkpoints) validate() error {
	if err := intRange("checkpoints.max_file_bytes", c.MaxFileBytes, 1, 16*GiB); err != nil {
		return err
	}
	return intRange("checkpoints.max_total_bytes", c.MaxTotalBytes, 1, 1024*GiB)
}

package config

// Checkpoints is the [checkpoints] section (docs/api.md, "Checkpoints, rewind
// and fork"): the workspace recorded before every turn, for rewind and fork.
type Checkpoints struct {
	// Enabled turns checkpoints on (default true).
	Enabled bool `toml:"enabled"`
	// MaxFileBytes: a larger file is skipped and listed (1 B..16 GiB,
	// default 10 MiB).
	MaxFileBytes int `toml:"max_file_bytes"`
	// MaxTotalBytes bounds the files of one checkpoint; past it files are
	// skipped and listed, the turn goes on (1 B..1 TiB, default 1 GiB).
	MaxTotalBytes int `toml:"max_total_bytes"`
	// MaxTreeBytes bounds what the checkpoints of a tree (a root session
	// and all its children) take on disk, each blob counted once; past it
	// the tree's oldest checkpoints are pruned (1 B..1 PiB, default 2 GiB;
	// docs/api.md, Checkpoints).
	MaxTreeBytes int `toml:"max_tree_bytes"`
}

// defaultCheckpoints are the [checkpoints] defaults.
func defaultCheckpoints() Checkpoints {
	return Checkpoints{Enabled: true, MaxFileBytes: 10 * MiB, MaxTotalBytes: GiB, MaxTreeBytes: 2 * GiB}
}

func (c *Checkpoints) validate() error {
	if err := intRange("checkpoints.max_file_bytes", c.MaxFileBytes, 1, 16*GiB); err != nil {
		return err
	}
	if err := intRange("checkpoints.max_tree_bytes", c.MaxTreeBytes, 1, PiB); err != nil {
		return err
	}
	return intRange("checkpoints.max_total_bytes", c.MaxTotalBytes, 1, 1024*GiB)
}

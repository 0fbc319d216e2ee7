package bwrap

// archProbes are the probes of calls only arm64 has: none.
func archProbes() []probe { return nil }

package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as text in the config: "5m", "10s",
// "1h30m". A plain integer is read as seconds ("30" is 30s), in the file and
// in the environment alike. Negative durations are refused.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string or a whole number of seconds.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := parseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration in its shortest Go form ("5m", not "5m0s").
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// String is the duration in its shortest Go form ("5m", "1h", "90s" → "1m30s").
func (d Duration) String() string {
	s := d.Duration.String()
	// time.Duration.String spells out zero minor units: trim them.
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// parseDuration reads "5m"-style text or an integer number of seconds.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("duration %q is negative", s)
		}
		if n > int64(never/time.Second) {
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		return time.Duration(n) * time.Second, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (want e.g. \"30s\", \"5m\", \"1h\" or a number of seconds)", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return v, nil
}

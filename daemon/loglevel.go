package daemon

import (
	"context"
	"log/slog"
)

// infoAsDebug logs its Info records at Debug: for the store, whose only
// info lines are the migrations it applies, routine at every first start
// and noise in a terminal (docs/api.md, Transport: logs).
type infoAsDebug struct{ h slog.Handler }

// debugInfo returns logger with its Info records logged at Debug.
func debugInfo(logger *slog.Logger) *slog.Logger {
	if logger == nil {
		return nil
	}
	return slog.New(infoAsDebug{logger.Handler()})
}

// demote maps Info to Debug and leaves every other level.
func demote(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

// Enabled implements slog.Handler.
func (h infoAsDebug) Enabled(ctx context.Context, l slog.Level) bool {
	return h.h.Enabled(ctx, demote(l))
}

// Handle implements slog.Handler.
func (h infoAsDebug) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return h.h.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h infoAsDebug) WithAttrs(attrs []slog.Attr) slog.Handler {
	return infoAsDebug{h.h.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h infoAsDebug) WithGroup(name string) slog.Handler { return infoAsDebug{h.h.WithGroup(name)} }

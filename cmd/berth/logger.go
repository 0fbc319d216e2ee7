package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/daemon"
)

// loadConfig reads the config file (--config, else $home/config.toml) and
// the environment.
func loadConfig(home, path string) (*config.Config, error) {
	if path != "" {
		return config.Load(path, os.Environ())
	}
	return config.LoadDefault(home, os.Environ())
}

// newLogger returns the daemon's logger writing to stderr: format text,
// json, or "" for text on a terminal and JSON otherwise; level debug,
// info (""), warn or error.
func newLogger(format, level string) (*slog.Logger, error) {
	var lv slog.Level
	switch level {
	case "debug":
		lv = slog.LevelDebug
	case "", "info":
		lv = slog.LevelInfo
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return nil, berth.Errorf(berth.EInvalid, "log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "":
		// Text for a person at a terminal, JSON for whatever collects it.
		if isTerminal(os.Stderr) {
			return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
		}
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, berth.Errorf(berth.EInvalid, "log format %q: want text or json", format)
}

// quietLogger logs warnings and errors only: for a daemon that runs inside
// another command (run, bench), whose own output is what the user reads.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// shutdownTimeout bounds a graceful shutdown.
const shutdownTimeout = daemon.ShutdownTimeout

// isUnavailable reports whether err says no daemon answers.
func isUnavailable(err error) bool {
	return berth.IsCode(err, berth.EUnavailable) && !errors.Is(err, context.Canceled)
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/objstore"
)

// checkStorage: with [storage] url, the object store is reached with the
// configured key (the bucket is there; a probe object is put, read back
// and removed), and a running daemon says how far behind its writes are
// (docs/api.md, "Session state in an object store").
func checkStorage(cmd *cobra.Command, sc config.Storage) check {
	const name = "storage"
	if !sc.Enabled() {
		return check{name, checkSkip, "no [storage] url: sessions' state stays on this node"}
	}
	c, err := objstore.Open(objstore.Config{URL: sc.URL, AccessKeyFile: sc.AccessKeyFile, SecretKeyFile: sc.SecretKeyFile,
		Environ: os.Environ(), Timeout: doctorTimeout, TransferTimeout: doctorTimeout})
	if err != nil {
		return check{name, checkFail, berth.ErrorMessage(err)}
	}
	loc := c.Location()
	where := "s3://" + loc.Bucket + "/" + loc.Prefix + " at " + loc.Endpoint
	if err := probeStorage(cmd.Context(), c); err != nil {
		return check{name, checkFail, where + ": " + berth.ErrorMessage(err)}
	}
	detail := where + ": a probe object was written, read back and removed"
	if h := daemonHealth(cmd); h != nil && h.Storage != nil {
		lag := time.Duration(h.Storage.LagSeconds * float64(time.Second)).Round(time.Second)
		if h.Storage.Error != "" {
			return check{name, checkWarn, fmt.Sprintf("%s; the daemon's writes fail (oldest unwritten turn %s ago): %s", detail, lag, h.Storage.Error)}
		}
		detail += fmt.Sprintf("; the daemon's oldest unwritten turn ended %s ago", lag)
	}
	return check{name, checkOK, detail}
}

// probeStorage writes, reads back and removes a probe object.
func probeStorage(ctx context.Context, c *objstore.Client) error {
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	// As the daemon does at its first write.
	if err := c.EnsureBucket(ctx); err != nil {
		return err
	}
	body := fmt.Sprintf("berth doctor %d", time.Now().UnixNano())
	if err := c.Put(ctx, "doctor-probe", strings.NewReader(body), int64(len(body))); err != nil {
		return err
	}
	r, _, err := c.Get(ctx, "doctor-probe")
	if err != nil {
		return err
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(len(body))+1))
	_ = r.Close()
	if err != nil || string(b) != body {
		return berth.Errorf(berth.EUnavailable, "the probe object read back differs from what was written")
	}
	return c.Delete(ctx, "doctor-probe")
}

// daemonHealth is the running daemon's /v1/health, nil when none answers.
func daemonHealth(cmd *cobra.Command) *berth.Health {
	c, err := dial(cmd)
	if err != nil {
		return nil
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
	defer cancel()
	var h berth.Health
	if err := c.Do(ctx, "GET", "/v1/health", nil, nil, &h); err != nil {
		return nil
	}
	return &h
}

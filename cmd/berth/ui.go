package main

import (
	"context"
	"fmt"
	"html"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	bclient "github.com/berth-sh/berth/client"
)

// newUICommand prints, and opens where a desktop is, a one-time sign-in
// address for the web UI (docs/api.md, "Sign-in and browser safety").
func newUICommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ui [--no-open]",
		Short: "Sign in to the web UI with a one-time address",
		Long: "Print a one-time sign-in address for the web UI, valid two minutes and once, and\n" +
			"open it in the browser when a desktop is available. The token never appears in it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callAPI(cmd, "POST", "/v1/login/codes", nil, nil, func(w io.Writer, lc *bclient.LoginCode) error {
				fmt.Fprintln(w, lc.URL)
				if noOpen, _ := cmd.Flags().GetBool("no-open"); !noOpen {
					home, err := homeDir(cmd)
					if err != nil {
						return err
					}
					openBrowser(cmd.Context(), home, lc.URL)
				}
				return nil
			})
		},
	}
	cmd.Flags().Bool("no-open", false, "only print the address")
	return cmd
}

// openBrowser opens url with xdg-open when a graphical session is there
// (DISPLAY or WAYLAND_DISPLAY) and xdg-open is installed; otherwise, or when
// it fails, printing the address was enough. The address carries a
// one-time code, and a process's arguments are readable by every local
// user: xdg-open (and the browser after it) is given a private file under
// home that sends the browser on, never the address itself.
func openBrowser(ctx context.Context, home, url string) {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return
	}
	path, err := exec.LookPath("xdg-open")
	if err != nil {
		return
	}
	page, err := signInPage(home, url)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, page)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// xdg-open hands the page to the browser and returns.
	_ = cmd.Run()
}

// signInPageTTL is how long a sign-in page is kept: its code is spent or
// expired (two minutes) well before.
const signInPageTTL = 10 * time.Minute

// signInPage writes a page that redirects to url into $home/ui (0700),
// readable by its owner only, and returns its path. Pages older than
// signInPageTTL are removed first.
func signInPage(home, url string) (string, error) {
	dir := filepath.Join(home, "ui")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", err
	}
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > signInPageTTL {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	f, err := os.CreateTemp(dir, "sign-in-*.html")
	if err != nil {
		return "", err
	}
	defer f.Close()
	q := html.EscapeString(url)
	_, err = fmt.Fprintf(f, "<!doctype html><meta charset=utf-8><meta name=referrer content=no-referrer>"+
		"<meta http-equiv=refresh content=\"0;url=%s\"><title>berth: signing in</title><a href=\"%s\">Sign in to berth</a>\n", q, q)
	return f.Name(), err
}

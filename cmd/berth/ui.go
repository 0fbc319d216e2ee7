package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	bhttp "github.com/berth-sh/berth/http"
)

// newUICommand prints, and opens where a desktop is, a one-time sign-in
// address for the web UI (CONTRACT §4.6).
func newUICommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ui [--no-open]",
		Short: "Sign in to the web UI with a one-time address",
		Long: "Print a one-time sign-in address for the web UI, valid two minutes and once, and\n" +
			"open it in the browser when a desktop is available. The token never appears in it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callAPI(cmd, "POST", "/v1/login/codes", nil, nil, func(w io.Writer, lc *bhttp.LoginCode) error {
				fmt.Fprintln(w, lc.URL)
				if noOpen, _ := cmd.Flags().GetBool("no-open"); !noOpen {
					openBrowser(cmd.Context(), lc.URL)
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
// it fails, printing the address was enough.
func openBrowser(ctx context.Context, url string) {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return
	}
	path, err := exec.LookPath("xdg-open")
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, url)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// xdg-open hands the address to the browser and returns.
	_ = cmd.Run()
}

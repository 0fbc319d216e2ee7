package hooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/procgroup"
	"github.com/berth-sh/berth/internal/syncx"
)

// Headers of a URL hook's request.
const (
	HeaderEvent     = "X-Berth-Event"
	HeaderDelivery  = "X-Berth-Delivery"
	HeaderSignature = "X-Berth-Signature"
)

// maxAnswerBytes is how much of a receiver's answer is read (for the
// error of a failed attempt); the rest is left unread.
const maxAnswerBytes = 4 << 10

// Sign returns the X-Berth-Signature value of body under secret:
// "sha256=" and the hex HMAC-SHA256.
func Sign(body []byte, secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether signature is body's under secret, in constant
// time: what a receiver does.
func Verify(body []byte, secret, signature string) bool {
	return hmac.Equal([]byte(Sign(body, secret)), []byte(signature))
}

// post sends d to a URL hook. Any answer but 2xx is an error; the error
// names the hook's host only (a URL's path may be a credential).
func (s *Service) post(ctx context.Context, h *hook, d *berth.HookDelivery) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(d.Body))
	if err != nil {
		return fmt.Errorf("bad hook url")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "berth-hooks")
	req.Header.Set(HeaderEvent, d.Event)
	req.Header.Set(HeaderDelivery, d.ID)
	if h.Secret != "" {
		req.Header.Set(HeaderSignature, Sign(d.Body, h.Secret))
	}
	resp, err := s.o.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("POST %s: timed out after %s", redactURL(h.URL), h.Timeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("POST %s: %v", redactURL(h.URL), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	return fmt.Errorf("POST %s: HTTP %d: %s", redactURL(h.URL), resp.StatusCode, printable(answer, 200))
}

// run runs a command hook with d's body on its stdin, in a process group
// of its own outside any sandbox, and kills the whole group when ctx ends
// (the hook's timeout, or shutdown). A non-zero exit is an error carrying
// the end of its stderr.
func (s *Service) run(ctx context.Context, h *hook, d *berth.HookDelivery) error {
	cmd := exec.Command(h.Command, h.Args...)
	cmd.Env = append(hookEnv(os.Environ()), "BERTH_HOOK_EVENT="+d.Event, "BERTH_HOOK_DELIVERY="+d.ID,
		"BERTH_HOOK_SESSION="+d.SessionID, "BERTH_HOOK_NAME="+h.Name)
	cmd.Stdin = bytes.NewReader(d.Body)
	stderr := syncx.NewTail(maxAnswerBytes)
	cmd.Stdout = io.Discard
	cmd.Stderr = stderr
	// Output a leftover child holds open is cut this long after the
	// group is killed or the leader exits.
	cmd.WaitDelay = time.Second
	p, err := procgroup.StartProc(cmd)
	if err != nil {
		return fmt.Errorf("start %s: %v", h.Command, err)
	}
	var timedOut bool
	select {
	case <-p.Done():
	case <-ctx.Done():
		timedOut = true
	}
	// Kill what is left of the group either way (a hook leaves no process
	// behind) and reap the leader.
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	st, werr := p.Stop(kctx, 0)
	cancel()
	switch {
	case timedOut:
		return fmt.Errorf("%s: timed out after %s (killed)", h.Command, h.Timeout)
	case werr != nil:
		return fmt.Errorf("%s: %v", h.Command, werr)
	case st.Code != 0 || st.Signal != "":
		msg := fmt.Sprintf("%s: exit %d", h.Command, st.Code)
		if st.Signal != "" {
			msg = fmt.Sprintf("%s: killed by %s", h.Command, st.Signal)
		}
		if e := strings.TrimSpace(printable(stderr.Bytes(), 300)); e != "" {
			msg += ": " + e
		}
		return errors.New(msg)
	}
	return nil
}

// hookEnv is the daemon's environment without BERTH_* variables, which
// may carry its configuration's secrets (BERTH_SERVER_TOKEN, …).
func hookEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "BERTH_") {
			out = append(out, kv)
		}
	}
	return out
}

// printable returns at most n bytes of b as one line of valid UTF-8.
func printable(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	s := strings.ToValidUTF8(string(b), "?")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

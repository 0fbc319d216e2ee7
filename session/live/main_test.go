package live

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/acp/demoagent"
)

// agentEnvVar makes the test binary run the demo agent instead of tests,
// so live sessions run the real agent as a real child process.
const agentEnvVar = "BERTH_LIVE_TEST_AGENT"

// agentLosesFirstCancel is the demo agent that never sees the first
// session/cancel it is sent, as an agent that lost it would.
const agentLosesFirstCancel = "loses-first-cancel"

// dropFirstCancel is in without its first session/cancel line.
func dropFirstCancel(in io.Reader) io.Reader {
	r, w := io.Pipe()
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		dropped := false
		for sc.Scan() {
			if !dropped && bytes.Contains(sc.Bytes(), []byte(`"session/cancel"`)) {
				dropped = true
				continue
			}
			if _, err := w.Write(append(sc.Bytes(), '\n')); err != nil {
				return
			}
		}
		w.CloseWithError(sc.Err())
	}()
	return r
}

func TestMain(m *testing.M) {
	switch os.Getenv(agentEnvVar) {
	case "demo":
		os.Exit(demoagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	case agentLosesFirstCancel:
		os.Exit(demoagent.Main(os.Args[1:], dropFirstCancel(os.Stdin), os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

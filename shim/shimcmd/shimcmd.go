// Package shimcmd is the body of the shim program, shared by the programs
// that can be a shim: the small berth-shim (cmd/berth-shim) and `berth
// shim-local` (a berth without the small shim; entered from an init
// function, see cmd/berth/internal/childentry), which know the host and
// bwrap providers only, and `berth shim`, which knows docker too. All read
// the same options, the same job on stdin and write the same ready line:
// only the providers they can make differ.
package shimcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/internal/rawsock"
	"github.com/berth-sh/berth/sandbox/bwrap"
	"github.com/berth-sh/berth/sandbox/local"
	"github.com/berth-sh/berth/shim"
)

// Options are what it takes to make the sandbox providers the daemon has,
// passed to its shims (as JSON, in --options) so theirs are the same.
type Options struct {
	UID         int                `json:"uid"`
	HostUID     int                `json:"host_uid"`
	DockerHost  string             `json:"docker_host,omitempty"`
	DockerImage string             `json:"docker_image,omitempty"`
	Berth       string             `json:"berth"`
	Limits      core.SandboxLimits `json:"limits"`
	Instance    string             `json:"instance"`
	// EtcView is bwrap's view of /etc (bwrap.Options.EtcView).
	EtcView string `json:"etc_view,omitempty"`
}

// Local is what the local providers are made with.
func (o Options) Local() local.Options {
	return local.Options{UID: o.UID, HostUID: o.HostUID, EtcView: o.EtcView}
}

// Bwrap makes the bwrap provider.
func (o Options) Bwrap() *bwrap.Provider {
	return bwrap.New(bwrap.Options{UID: o.UID, HostUID: o.HostUID, EtcView: o.EtcView})
}

// MakeProvider makes the provider called name; close releases it.
type MakeProvider func(o Options, name string) (p core.SandboxProvider, close func(), err error)

// Local makes the providers that run on this machine without a service:
// host and bwrap.
func Local(o Options, name string) (core.SandboxProvider, func(), error) {
	if p := local.Make(o.Local(), name); p != nil {
		return p, func() {}, nil
	}
	return nil, nil, core.Errorf(core.EInvalid, "this shim program cannot make the sandbox provider %q", name)
}

// OptionsArg returns the value of the one flag a shim program takes,
// --options JSON or --options=JSON, as the daemon passes it.
func OptionsArg(args []string) (string, bool) {
	switch {
	case len(args) == 2 && args[0] == "--options":
		return args[1], true
	case len(args) == 1 && len(args[0]) > len("--options=") && strings.HasPrefix(args[0], "--options="):
		return args[0][len("--options="):], true
	}
	return "", false
}

// ParseOptions decodes the options a daemon passes in --options.
func ParseOptions(raw string) (Options, error) {
	var o Options
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		return o, core.WrapError(core.EInvalid, err, "--options")
	}
	return o, nil
}

// warmCodecs has encoding/json learn the job's and the ready line's types
// while the shim waits for its job (a spare waits long): the first
// decode of a type in a process builds its decoder, a tenth of a
// millisecond on the path from the job to the agent's start.
func warmCodecs() {
	var job shim.Config
	_ = json.Unmarshal([]byte(`{}`), &job)
	_ = json.NewEncoder(io.Discard).Encode(shim.Ready{})
}

// warmFor is what a shim of the daemon's options opts makes ahead when
// its launcher expects a job of the provider expect ("": any).
func warmFor(opts Options, expect string) bwrap.Warm {
	if expect != "" && expect != core.SandboxBwrap {
		return bwrap.Warm{}
	}
	return bwrap.Warm{Pids: opts.Limits.Pids > 0, Memory: opts.Limits.MemoryBytes > 0, Stage: opts.HostUID > 0, EtcView: opts.EtcView}
}

// readJob reads the job on stdin: nil, and no error, when stdin ends
// without one (a spare the daemon never needed).
func readJob(stdin io.Reader) (*shim.Config, error) {
	b, err := io.ReadAll(stdin)
	if err != nil {
		return nil, fmt.Errorf("read the job: %w", err)
	}
	if len(b) == 0 {
		return nil, nil
	}
	var job shim.Config
	if err := json.Unmarshal(b, &job); err != nil {
		return nil, core.WrapError(core.EInvalid, err, "decode the job")
	}
	return &job, nil
}

// daemonConn takes the connection the daemon's launcher handed the shim
// as the descriptor EnvConn names, nil when there is none. The descriptor
// is replaced by a close-on-exec one, so the agent does not inherit it.
func daemonConn() *rawsock.Conn {
	fd, err := strconv.Atoi(os.Getenv(shim.EnvConn))
	if err != nil || fd < 3 {
		return nil
	}
	f := os.NewFile(uintptr(fd), "daemon")
	defer f.Close()
	nc, err := rawsock.FileConn(f)
	if err != nil {
		return nil
	}
	return nc
}

// Run is a shim program given the daemon's options: it reads its job from stdin, sends its log and stderr to the job's log, and
// serves the job (see shim.Serve), writing the ready line to stdout. Only
// SIGTERM and SIGINT sent to the shim itself stop it. A spare the daemon
// never needed (stdin closed with no job) returns nil at once.
func Run(ctx context.Context, opts Options, stdin io.Reader, stdout io.WriteCloser, makeProvider MakeProvider) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	// Taken first: nothing the shim starts may inherit it, nor any other
	// descriptor the shim was handed (the daemon's, which it may have
	// inherited from whatever started it).
	attached := daemonConn()
	_ = unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	// Closed here unless Serve is given it.
	defer func() {
		if attached != nil {
			_ = attached.Close()
		}
	}()
	// While it waits for its job, a shim that expects a bwrap job makes
	// the cgroups its sandbox needs with the daemon's limits and a root
	// daemon's stage, and brings the view of /etc up to date
	// (bwrap.Prewarm); one that expects another makes nothing.
	dropWarm := bwrap.Prewarm(warmFor(opts, os.Getenv(shim.EnvExpect)))
	defer dropWarm()
	warmCodecs()
	job, err := readJob(stdin)
	if err != nil || job == nil {
		return err
	}
	if job.Provider != core.SandboxBwrap {
		// Not this job's: removed without holding up its start (their
		// making may still be under way).
		dropped := make(chan struct{})
		go func() {
			defer close(dropped)
			dropWarm()
		}()
		defer func() { <-dropped }()
	}
	if job.Log != "" {
		// The shim's log and anything written to its stderr (a panic) go
		// to the session's shim log, once the agent is on its way.
		job.Opened = func() {
			if f, err := os.OpenFile(job.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
				_ = unix.Dup2(int(f.Fd()), 2)
				_ = f.Close()
			}
		}
	}
	// The shim's log is a file: JSON lines, about its session.
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("shim", os.Getpid(), "session_id", job.SessionID)
	p, closeProvider, err := makeProvider(opts, job.Provider)
	if err != nil {
		_ = json.NewEncoder(stdout).Encode(shim.Ready{ShimPID: os.Getpid(), Stage: "sandbox", Code: core.ErrorCode(err), Error: core.ErrorMessage(err)})
		return err
	}
	defer closeProvider()
	job.Attached, attached = attached, nil
	err = shim.Serve(ctx, p, *job, stdout, logger)
	_ = stdout.Close()
	return err
}

// Main is a shim of the local providers (host and bwrap) as a program:
// args are its arguments (--options JSON), the job comes on stdin. It
// returns the exit code; name prefixes its errors.
func Main(name string, args []string) int {
	raw, ok := OptionsArg(args)
	if !ok {
		fmt.Fprintf(os.Stderr, "usage: %s --options JSON (the job on stdin)\n", name)
		return 2
	}
	opts, err := ParseOptions(raw)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, core.ErrorMessage(err))
		return 2
	}
	if err := Run(context.Background(), opts, os.Stdin, os.Stdout, Local); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, core.ErrorMessage(err))
		return 1
	}
	return 0
}

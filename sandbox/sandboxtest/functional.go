package sandboxtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// functionalCases hold for every provider.
var functionalCases = []testCase{
	{"Provider", testProvider},
	{"Workspace", testWorkspace},
	{"Dir", testDir},
	{"Pipes", testPipes},
	{"Input", testInput},
	{"CallerStreams", testCallerStreams},
	{"ExitStatus", testExitStatus},
	{"Signal", testSignal},
	{"Environment", testEnvironment},
	{"StopEscalates", testStopEscalates},
	{"StopPolite", testStopPolite},
	{"Binds", testBinds},
}

// testProvider: the provider names itself and works here.
func testProvider(t *testing.T, s *suite) {
	p := s.open(t)
	if p.Name() == "" {
		t.Error("Name is empty")
	}
	if err := p.Probe(context.Background()); err != nil {
		t.Errorf("Probe = %v", err)
	}
}

// testWorkspace: the process starts in the workspace, reads what the host
// put there and writes what the host then sees.
func testWorkspace(t *testing.T, s *suite) {
	b := s.newBox(t, nil)
	if err := os.WriteFile(filepath.Join(b.cfg.Workspace, "from-host.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := b.run(t, `cat from-host.txt && echo "from the sandbox" > from-sandbox.txt`, nil)
	if !r.status.Success() || r.stdout != "from the host\n" {
		t.Fatalf("got %q (stderr %q), %+v", r.stdout, r.stderr, r.status)
	}
	got, err := os.ReadFile(filepath.Join(b.cfg.Workspace, "from-sandbox.txt"))
	if err != nil || string(got) != "from the sandbox\n" {
		t.Errorf("the file written in the workspace: %q, %v", got, err)
	}
}

// testDir: a relative Dir is a directory of the workspace.
func testDir(t *testing.T, s *suite) {
	b := s.newBox(t, nil)
	sub := filepath.Join(b.cfg.Workspace, "sub", "deeper")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	r := b.run(t, `echo here > here.txt`, func(p *berth.ProcSpec) { p.Dir = "sub/deeper" })
	if !r.status.Success() {
		t.Fatalf("%+v, stderr %q", r.status, r.stderr)
	}
	if got, err := os.ReadFile(filepath.Join(sub, "here.txt")); err != nil || string(got) != "here\n" {
		t.Errorf("the file written in Dir: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(b.cfg.Workspace, "here.txt")); err == nil {
		t.Error("the file landed in the workspace's top, not in Dir")
	}
}

// testPipes: stdin, stdout and stderr pipes, each its own.
func testPipes(t *testing.T, s *suite) {
	b := s.newBox(t, nil)
	p := b.start(t, b.shell(`cat; echo to-stderr >&2`))
	if p.Stdin() == nil || p.Stdout() == nil || p.Stderr() == nil {
		t.Fatal("a pipe is missing")
	}
	errc := make(chan []byte, 1)
	go func() {
		// Read stderr alongside stdout: either may fill first.
		b, _ := io.ReadAll(p.Stderr())
		errc <- b
	}()
	// No t.Fatal until errc is read: the reader must end first.
	if _, err := io.WriteString(p.Stdin(), "hello\n"); err != nil {
		t.Error(err)
	}
	if err := p.Stdin().Close(); err != nil {
		t.Error(err)
	}
	out, err := io.ReadAll(p.Stdout())
	errOut := <-errc
	if err != nil || string(out) != "hello\n" {
		t.Errorf("stdout %q, %v", out, err)
	}
	if string(errOut) != "to-stderr\n" {
		t.Errorf("stderr %q", errOut)
	}
	if st := waitExit(t, p, runTimeout); !st.Success() {
		t.Errorf("status %+v", st)
	}
}

// testInput: the spec's Input is on stdin before what is written to the
// pipe after Start, whole.
func testInput(t *testing.T, s *suite) {
	b := s.newBox(t, nil)
	spec := b.shell(`cat`)
	first := strings.Repeat("initialize ", 300) + "\n"
	spec.Input = []byte(first)
	p := b.start(t, spec)
	if _, err := io.WriteString(p.Stdin(), "then this\n"); err != nil {
		t.Error(err)
	}
	if err := p.Stdin().Close(); err != nil {
		t.Error(err)
	}
	out, err := io.ReadAll(p.Stdout())
	if err != nil || string(out) != first+"then this\n" {
		t.Errorf("stdout %d bytes %.40q…, %v; want the input, then what followed", len(out), out, err)
	}
	if st := waitExit(t, p, runTimeout); !st.Success() {
		t.Errorf("status %+v", st)
	}
	// More than any pipe takes whole is refused: its write would wait.
	spec.Input = make([]byte, berth.MaxProcInput+1)
	if _, err := b.sb.Start(context.Background(), spec); !berth.IsCode(err, berth.EInvalid) {
		t.Errorf("an input of %d bytes: %v, want invalid_argument", len(spec.Input), err)
	}
}

// testCallerStreams: streams the caller gives are used, and no pipe is
// offered for them.
func testCallerStreams(t *testing.T, s *suite) {
	b := s.newBox(t, nil)
	var out, errOut bytes.Buffer
	spec := b.shell(`cat; echo E >&2`)
	spec.Stdin, spec.Stdout, spec.Stderr = strings.NewReader("in\n"), &out, &errOut
	p := b.start(t, spec)
	if p.Stdin() != nil || p.Stdout() != nil || p.Stderr() != nil {
		t.Fatal("pipes offered for streams the caller gave")
	}
	if st := waitExit(t, p, runTimeout); !st.Success() {
		t.Errorf("status %+v", st)
	}
	if out.String() != "in\n" || errOut.String() != "E\n" {
		t.Errorf("stdout %q, stderr %q", out.String(), errOut.String())
	}
}

// testExitStatus: exit codes, and deaths by signal as a shell reports them.
func testExitStatus(t *testing.T, s *suite) {
	b := s.newBox(t, nil)
	cases := []struct {
		script string
		want   berth.ExitStatus
	}{
		{"exit 0", berth.ExitStatus{}},
		{"exit 3", berth.ExitStatus{Code: 3}},
		{"kill -KILL $$", berth.ExitStatus{Code: 137, Signal: "SIGKILL"}},
		{"kill -TERM $$", berth.ExitStatus{Code: 143, Signal: "SIGTERM"}},
		{"kill -SEGV $$", berth.ExitStatus{Code: 139, Signal: "SIGSEGV"}},
	}
	for _, tc := range cases {
		if r := b.run(t, tc.script, nil); r.status != tc.want {
			t.Errorf("%q: %+v, want %+v (stderr %q)", tc.script, r.status, tc.want, r.stderr)
		}
	}
}

// testSignal: Signal reaches the process right after Start, and a process
// that is gone cannot be signalled.
func testSignal(t *testing.T, s *suite) {
	b := s.newBox(t, nil)
	p := b.start(t, b.shell(`exec $BB sleep 1000`))
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	if st := waitExit(t, p, runTimeout); st != (berth.ExitStatus{Code: 143, Signal: "SIGTERM"}) {
		t.Errorf("after SIGTERM: %+v", st)
	}
	if st, _ := p.Wait(); st.Signal != "SIGTERM" {
		t.Errorf("a second Wait says %+v", st)
	}
	if err := p.Signal(syscall.SIGTERM); err == nil {
		t.Error("signalling a process that is gone succeeded")
	}
}

// testEnvironment: the sandbox's Env and the spec's Env, the spec winning;
// HOME is the sandbox's home.
func testEnvironment(t *testing.T, s *suite) {
	b := s.newBox(t, func(c *berth.SandboxConfig) {
		c.Env["SBT_CONFIG"] = "from-config"
		c.Env["SBT_BOTH"] = "from-config"
	})
	r := b.run(t, `env; echo home > "$HOME/home.txt"`, func(p *berth.ProcSpec) {
		p.Env = []string{"SBT_BOTH=from-spec", "SBT_SPEC=from-spec"}
	})
	if !r.status.Success() {
		t.Fatalf("%+v, stderr %q", r.status, r.stderr)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(r.stdout, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[k] = v
		}
	}
	want := map[string]string{
		"SBT_CONFIG": "from-config",
		"SBT_BOTH":   "from-spec",
		"SBT_SPEC":   "from-spec",
		MarkerVar:    b.marker,
	}
	for k, v := range want {
		if vars[k] != v {
			t.Errorf("%s = %q, want %q", k, vars[k], v)
		}
	}
	if vars["PATH"] == "" {
		t.Error("PATH is empty")
	}
	if got, err := os.ReadFile(filepath.Join(b.cfg.Home, "home.txt")); err != nil || string(got) != "home\n" {
		t.Errorf("a file written in $HOME is not in the sandbox's home: %q, %v", got, err)
	}
}

// testStopEscalates: Stop waits the grace, then kills the whole group,
// children that ignore SIGTERM included, and reaps the leader.
func testStopEscalates(t *testing.T, s *suite) {
	b := s.newBox(t, nil)
	// The children inherit the ignored SIGTERM; each has its own name as
	// $0 so that the host can see it run.
	names := []string{b.marker + "-child-0", b.marker + "-child-1"}
	loop := quote(`while :; do ` + b.bb + ` sleep 1; done`)
	p := b.start(t, b.shell(fmt.Sprintf(`trap "" TERM
$BB sh -c %[1]s %[2]s &
($BB sh -c %[1]s %[3]s; :) &
echo ready
wait`, loop, names[0], names[1])))
	// Stop only once the trap is set, or SIGTERM would end the script.
	if line := readLine(t, bufio.NewReader(p.Stdout()), p.Stdout()); line != "ready" {
		t.Fatalf("got %q", line)
	}
	if !waitFor(goneTimeout, func() bool { return len(missingNamed(b.marker, names)) == 0 }) {
		t.Fatalf("the script's children did not show up: %v\n%s", missingNamed(b.marker, names), joinProcs(marked(b.marker)))
	}
	const grace = 300 * time.Millisecond
	t0 := time.Now()
	st, err := p.Stop(context.Background(), grace)
	took := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	if st != (berth.ExitStatus{Code: 137, Signal: "SIGKILL"}) {
		t.Errorf("status %+v, want SIGKILL", st)
	}
	if took < grace {
		t.Errorf("killed after %v, before the %v grace", took, grace)
	}
	if !reaped(p.Pid()) {
		t.Error("the leader is left a zombie")
	}
	requireNoMarked(t, b.marker, "after Stop")
	if st2, err := p.Stop(context.Background(), grace); err != nil || st2 != st {
		t.Errorf("a second Stop = %+v, %v; want %+v", st2, err, st)
	}
}

// testStopPolite: a process that obeys SIGTERM ends well before the grace.
func testStopPolite(t *testing.T, s *suite) {
	b := s.newBox(t, nil)
	p := b.start(t, b.shell(`exec $BB sleep 1000`))
	t0 := time.Now()
	st, err := p.Stop(context.Background(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took > 20*time.Second {
		t.Errorf("Stop took %v for a process that obeys SIGTERM", took)
	}
	if st != (berth.ExitStatus{Code: 143, Signal: "SIGTERM"}) {
		t.Errorf("status %+v, want SIGTERM", st)
	}
	if !reaped(p.Pid()) {
		t.Error("the leader is left a zombie")
	}
	requireNoMarked(t, b.marker, "after Stop")
}

// testBinds: a read-only bind is visible and cannot be written, through
// the bind or by replacing its files; a writable one can.
func testBinds(t *testing.T, s *suite) {
	if !s.opts.Isolated {
		t.Skip("the provider does not isolate (Options.Isolated is false): binds do not apply")
	}
	roDir, rwDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(roDir, "data.txt"), []byte("read-only data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	roFile := filepath.Join(t.TempDir(), "file.txt")
	if err := os.WriteFile(roFile, []byte("read-only file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const base = "/.berth-sandboxtest/binds"
	b := s.newBox(t, func(c *berth.SandboxConfig) {
		c.Binds = append(c.Binds,
			berth.Bind{Source: roDir, Target: base + "/ro"},
			berth.Bind{Source: rwDir, Target: base + "/rw", Writable: true},
			berth.Bind{Source: roFile, Target: base + "/deep/er/file.txt"},
		)
	})
	r := b.run(t, `B=`+base+`
cat $B/ro/data.txt $B/deep/er/file.txt
echo x > $B/ro/new.txt 2>/dev/null && echo RO_DIR_WRITABLE
echo x >> $B/ro/data.txt 2>/dev/null && echo RO_FILE_WRITABLE
rm -f $B/ro/data.txt 2>/dev/null; [ -e $B/ro/data.txt ] || echo RO_FILE_REMOVED
echo x >> $B/deep/er/file.txt 2>/dev/null && echo RO_FILE_BIND_WRITABLE
echo rw > $B/rw/out.txt && echo RW_OK
true`, nil)
	if !strings.Contains(r.stdout, "read-only data\nread-only file\n") || !strings.Contains(r.stdout, "RW_OK") {
		t.Errorf("binds not visible or not writable as asked: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	for _, bad := range []string{"RO_DIR_WRITABLE", "RO_FILE_WRITABLE", "RO_FILE_REMOVED", "RO_FILE_BIND_WRITABLE"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("%s: a read-only bind was changed", bad)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(roDir, "data.txt")); string(got) != "read-only data\n" {
		t.Errorf("the read-only file on the host is now %q", got)
	}
	if got, _ := os.ReadFile(roFile); string(got) != "read-only file\n" {
		t.Errorf("the read-only bound file on the host is now %q", got)
	}
	if _, err := os.Stat(filepath.Join(roDir, "new.txt")); err == nil {
		t.Error("a file was created in the read-only directory on the host")
	}
	if got, err := os.ReadFile(filepath.Join(rwDir, "out.txt")); err != nil || string(got) != "rw\n" {
		t.Errorf("the writable bind's file on the host: %q, %v", got, err)
	}
}

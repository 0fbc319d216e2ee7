package bwrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

// fakeEtc is a directory standing for the host's /etc: a world-readable
// file, one of root's alone, a directory, resolv.conf, a link into /usr,
// a link out of the system directories, a nested file, and a secret the
// view must never hold.
func fakeEtc(t *testing.T) (etc string, entries []string) {
	t.Helper()
	etc = t.TempDir()
	write := func(name, body string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(etc, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("hosts", "127.0.0.1 localhost\n", 0o644)
	write("services", "ssh 22/tcp\n", 0o644)
	write("private.conf", "only root reads this\n", 0o600)
	write("resolv.conf", "nameserver 192.0.2.1\n", 0o644)
	write("ssl/openssl.cnf", "[openssl]\n", 0o644)
	write("ssl/certs/ca.pem", "CERT\n", 0o644)
	write("shadow", "root:$y$secret:::\n", 0o640)
	elsewhere := filepath.Join(t.TempDir(), "stub-resolv.conf")
	if err := os.WriteFile(elsewhere, []byte("linked out\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(etc, "gai.conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin/env", filepath.Join(etc, "localtime")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(etc, "ld.so.conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	return etc, []string{"hosts", "services", "private.conf", "resolv.conf", "ssl/openssl.cnf", "ssl/certs", "gai.conf", "localtime", "ld.so.conf.d", "missing"}
}

// wantView is what the view of fakeEtc holds.
var wantView = []string{"gai.conf", "group", "hosts", "ld.so.conf.d/", "localtime", "passwd", "private.conf", "resolv.conf", "services", "ssl/", "ssl/certs/", "ssl/openssl.cnf"}

// listView lists every entry under dir, "/"-joined, with a trailing "/"
// for directories.
func listView(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if fi.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// The view holds a copy of each world-readable file, a link for a link
// into /usr, and an empty mount point (mode 0600, bound over) for a
// directory, a file not every user may read, a link elsewhere (nothing
// is read through it) and resolv.conf; passwd and group are mount
// points; nothing else is there.
func TestTheViewOfEtc(t *testing.T) {
	etc, entries := fakeEtc(t)
	view := filepath.Join(t.TempDir(), "etc")
	ms, err := refreshView(etc, view, entries)
	if err != nil {
		t.Fatal(err)
	}
	if got := listView(t, view); !slices.Equal(got, wantView) {
		t.Errorf("the view holds %v, want %v", got, wantView)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(view, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read("hosts"); got != "127.0.0.1 localhost\n" {
		t.Errorf("hosts = %q", got)
	}
	if got := read("ssl/openssl.cnf"); got != "[openssl]\n" {
		t.Errorf("ssl/openssl.cnf = %q", got)
	}
	for _, name := range []string{"private.conf", "resolv.conf", "passwd", "group", "gai.conf"} {
		if got := read(name); got != "" {
			t.Errorf("the mount point %s holds %q", name, got)
		}
		if fi, err := os.Lstat(filepath.Join(view, name)); err != nil || fi.Mode() != 0o600 {
			t.Errorf("the mount point %s: %v, %v; want a file of mode 0600", name, fi.Mode(), err)
		}
	}
	if target, err := os.Readlink(filepath.Join(view, "localtime")); err != nil || target != mustEval(t, "/usr/bin/env") {
		t.Errorf("localtime links to %q (%v), want where /usr/bin/env leads", target, err)
	}
	if fi, err := os.Stat(view); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the view's mode: %v, %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(view, "hosts")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("hosts' mode: %v, %v", fi.Mode(), err)
	}
	var binds []string
	for _, m := range ms[1:] {
		binds = append(binds, m.src+" "+m.dst)
	}
	wantBinds := []string{
		filepath.Join(etc, "private.conf") + " /etc/private.conf",
		filepath.Join(etc, "resolv.conf") + " /etc/resolv.conf",
		filepath.Join(etc, "ssl/certs") + " /etc/ssl/certs",
		filepath.Join(etc, "gai.conf") + " /etc/gai.conf",
		filepath.Join(etc, "ld.so.conf.d") + " /etc/ld.so.conf.d",
	}
	if ms[0].src != view || ms[0].dst != "/etc" || ms[0].kind != roBind || !ms[0].user || !slices.Equal(binds, wantBinds) {
		t.Errorf("mounts %+v, then binds %v; want the view at /etc, then %v", ms[0], binds, wantBinds)
	}
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		// Every system the sandboxes run on has it (coreutils).
		t.Fatalf("%s: %v", p, err)
	}
	return r
}

// A file the host changes is copied again (by rename: a sandbox reading
// the old one keeps it whole); one the host removes goes, but for
// resolv.conf, whose mount point a sandbox with network has its own on;
// an entry unchanged is not written again.
func TestTheViewFollowsTheHost(t *testing.T) {
	etc, entries := fakeEtc(t)
	view := filepath.Join(t.TempDir(), "etc")
	if _, err := refreshView(etc, view, entries); err != nil {
		t.Fatal(err)
	}
	copied, err := os.Stat(filepath.Join(view, "ssl/openssl.cnf"))
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.Open(filepath.Join(view, "hosts"))
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	later := time.Now().Add(time.Minute)
	if err := os.WriteFile(filepath.Join(etc, "hosts"), []byte("10.0.0.1 moved\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(etc, "hosts"), later, later); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"services", "resolv.conf"} {
		if err := os.Remove(filepath.Join(etc, gone)); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := refreshView(etc, view, entries)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(view, "hosts")); string(b) != "10.0.0.1 moved\n" {
		t.Errorf("hosts after the host's changed: %q", b)
	}
	old := make([]byte, 64)
	if n, _ := before.Read(old); string(old[:n]) != "127.0.0.1 localhost\n" {
		t.Errorf("a reader of the old copy read %q: it was written over, not replaced", old[:n])
	}
	if _, err := os.Lstat(filepath.Join(view, "services")); !os.IsNotExist(err) {
		t.Errorf("services, gone from the host, is still in the view: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(view, "resolv.conf")); err != nil {
		t.Errorf("resolv.conf's mount point went with the host's: %v", err)
	}
	for _, m := range ms {
		if m.dst == "/etc/resolv.conf" {
			t.Errorf("a resolv.conf the host no longer has is bound: %+v", m)
		}
	}
	if fi, err := os.Stat(filepath.Join(view, "ssl/openssl.cnf")); err != nil || !os.SameFile(fi, copied) {
		t.Errorf("an unchanged copy was written again")
	}
	if got := listView(t, view); slices.ContainsFunc(got, func(s string) bool { return filepath.Base(s)[0] == '.' }) {
		t.Errorf("a temporary file is left in the view: %v", got)
	}
}

// A mount point is never replaced: an entry that turns from a directory
// into a file makes the view unusable (the sandbox binds each entry
// itself), and the directory, which running sandboxes have mounts on,
// stays.
func TestTheViewKeepsItsMountPoints(t *testing.T) {
	etc, entries := fakeEtc(t)
	view := filepath.Join(t.TempDir(), "etc")
	if _, err := refreshView(etc, view, entries); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(etc, "ld.so.conf.d")
	if err := os.Remove(d); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d, []byte("now a file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := refreshView(etc, view, entries); err == nil {
		t.Error("a view whose directory turned into a file on the host was refreshed")
	}
	if fi, err := os.Lstat(filepath.Join(view, "ld.so.conf.d")); err != nil || !fi.IsDir() {
		t.Errorf("the directory mount point was replaced: %v", err)
	}
}

// Shims starting sandboxes at once refresh one view: each sees it whole.
func TestTheViewMadeByManyAtOnce(t *testing.T) {
	etc, entries := fakeEtc(t)
	view := filepath.Join(t.TempDir(), "etc")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			if _, err := refreshView(etc, view, entries); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := listView(t, view); !slices.Equal(got, wantView) {
		t.Errorf("the view holds %v, want %v", got, wantView)
	}
}

// Without a view, or when it cannot be made, each entry is bound by
// itself, as it always was.
func TestEtcWithoutAView(t *testing.T) {
	for _, view := range []string{"", filepath.Join(t.TempDir(), "no-parent", "etc")} {
		ms := etcMounts(view)
		if len(ms) == 0 || ms[0].kind != dir || ms[0].dst != "/etc" {
			t.Fatalf("etcMounts(%q) = %+v, want /etc made, then its entries bound", view, ms)
		}
		for _, m := range ms[1:] {
			if m.kind != roBind || m.src != m.dst || !m.try {
				t.Errorf("etcMounts(%q): %+v is not a bind of the host's entry", view, m)
			}
		}
	}
}

// Inside, /etc holds the host's entries of etcEntries and the sandbox's
// passwd and group, and nothing else, read-only, with the host's content:
// through the view and without one alike.
func TestEtcInside(t *testing.T) {
	hosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		testenv.Missing(t, "/etc/hosts", "the host has none to compare the sandbox's with: %v", err)
	}
	for _, view := range []string{testEtcView, ""} {
		t.Run(fmt.Sprintf("view=%v", view != ""), func(t *testing.T) {
			p := provider(t)
			p = New(Options{EtcView: view, HostUID: p.hostUID})
			cfg := berth.SandboxConfig{SessionID: "ses_etc_test", Workspace: t.TempDir(), Home: t.TempDir(),
				Binds: []berth.Bind{{Source: sandboxtest.HostBusybox, Target: "/.berth/busybox"}}}
			sb, err := p.Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sb.Close(context.Background()) })
			out, st := run(t, sb.(*Sandbox), `B=/.berth/busybox
$B ls -A /etc | $B tr '\n' ' '; echo
$B cat /etc/hosts
$B grep -c berth /etc/passwd
echo x > /etc/hosts 2>/dev/null && echo HOSTS_WRITTEN
echo x > /etc/new && echo ETC_WRITTEN
true`)
			if !st.Success() {
				t.Fatalf("status %+v, output %q", st, out)
			}
			listed, rest, _ := strings.Cut(out, "\n")
			want := map[string]bool{"passwd": true, "group": true}
			if view != "" {
				want["resolv.conf"] = true
			}
			for _, name := range etcEntries {
				if _, err := os.Stat(filepath.Join("/etc", name)); err == nil {
					want[strings.Split(name, "/")[0]] = true
				}
			}
			got := strings.Fields(listed)
			for _, name := range got {
				if !want[name] {
					t.Errorf("/etc/%s is in the sandbox", name)
				}
				delete(want, name)
			}
			for name := range want {
				t.Errorf("/etc/%s, which the host has, is not in the sandbox (it has %v)", name, got)
			}
			if !strings.HasPrefix(rest, string(hosts)) {
				t.Errorf("/etc/hosts inside is not the host's: %q", rest)
			}
			if !strings.Contains(rest, "\n1\n") {
				t.Errorf("/etc/passwd inside is not the sandbox's: %q", rest)
			}
			for _, bad := range []string{"HOSTS_WRITTEN", "ETC_WRITTEN"} {
				if strings.Contains(out, bad) {
					t.Errorf("%s: /etc is writable inside", bad)
				}
			}
		})
	}
}

// A file the host makes private is emptied in place in the view (the
// inode running sandboxes see through it), becomes a mount point and is
// bound; made readable again, it stays a mount point (a sandbox may have
// it mounted on) and is still bound. A link the host makes point
// elsewhere becomes a mount point by rename.
func TestTheViewKeepsWhatTheHostMadePrivate(t *testing.T) {
	etc, entries := fakeEtc(t)
	view := filepath.Join(t.TempDir(), "etc")
	if _, err := refreshView(etc, view, entries); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(filepath.Join(view, "hosts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(etc, "hosts"), 0o600); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "zone")
	if err := os.WriteFile(elsewhere, []byte("zone"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(etc, "localtime")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(etc, "localtime")); err != nil {
		t.Fatal(err)
	}
	bound := func(ms mounts, name string) bool {
		return slices.ContainsFunc(ms, func(m mount) bool { return m.dst == "/etc/"+name && m.src == filepath.Join(etc, name) })
	}
	ms, err := refreshView(etc, view, entries)
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(filepath.Join(view, "hosts"))
	if err != nil || !os.SameFile(before, after) || after.Size() != 0 || after.Mode().Perm() != 0o600 || !bound(ms, "hosts") {
		t.Errorf("hosts made private: %v (same file %v), %v; bound %v", after.Mode(), os.SameFile(before, after), err, bound(ms, "hosts"))
	}
	if fi, err := os.Lstat(filepath.Join(view, "localtime")); err != nil || !fi.Mode().IsRegular() || !bound(ms, "localtime") {
		t.Errorf("localtime linked out of /usr: %v, %v; bound %v", fi.Mode(), err, bound(ms, "localtime"))
	}
	if err := os.Chmod(filepath.Join(etc, "hosts"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ms, err = refreshView(etc, view, entries); err != nil {
		t.Fatal(err)
	}
	if again, err := os.Stat(filepath.Join(view, "hosts")); err != nil || !os.SameFile(before, again) || !bound(ms, "hosts") {
		t.Errorf("hosts readable again: the mount point was replaced (%v) or not bound (%v)", err, bound(ms, "hosts"))
	}
}

// Under a umask that takes other users' bits away, the view is still
// what the sandbox's uid may search and read.
func TestTheViewUnderAStrictUmask(t *testing.T) {
	etc, entries := fakeEtc(t)
	view := filepath.Join(t.TempDir(), "etc")
	old := syscall.Umask(0o077)
	_, err := refreshView(etc, view, entries)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{".", "ssl", "ssl/certs", "ld.so.conf.d"} {
		if fi, err := os.Stat(filepath.Join(view, d)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v, %v; want mode 0755", d, fi.Mode(), err)
		}
	}
	for _, f := range []string{"hosts", "ssl/openssl.cnf"} {
		if fi, err := os.Stat(filepath.Join(view, f)); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v, %v; want the host's mode 0644", f, fi.Mode(), err)
		}
	}
}

// What an older berth, or a shim killed while it refreshed, left in and
// beside the view goes; a mount point stays.
func TestTheViewIsSwept(t *testing.T) {
	etc, entries := fakeEtc(t)
	view := filepath.Join(t.TempDir(), "etc")
	if _, err := refreshView(etc, view, entries); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{"old-copy": 0o644, "old-mount": 0o600} {
		if err := os.WriteFile(filepath.Join(view, name), nil, mode); err != nil {
			t.Fatal(err)
		}
	}
	stale := filepath.Join(view+".new", "123-4")
	if err := os.WriteFile(stale, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-time.Hour)
	if err := os.Chtimes(stale, long, long); err != nil {
		t.Fatal(err)
	}
	if _, err := refreshView(etc, view, entries); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(view, "old-copy")); !os.IsNotExist(err) {
		t.Errorf("an entry no longer given is still in the view: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(view, "old-mount")); err != nil {
		t.Errorf("a mount point was removed: %v", err)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("a killed shim's temporary file is still there: %v", err)
	}
}

// A file of /etc swapped for a link between the look and the copy is
// not read through it: the view binds it instead.
func TestTheViewReadsNoLink(t *testing.T) {
	etc, entries := fakeEtc(t)
	view := filepath.Join(t.TempDir(), "etc")
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("not for the view"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(etc, "hosts")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(etc, "hosts")); err != nil {
		t.Fatal(err)
	}
	// As classify would have found it a moment before.
	if err := viewCopyFile(filepath.Join(etc, "hosts"), filepath.Join(view, "hosts"), view+".new"); !errors.Is(err, errNotCopyable) {
		t.Errorf("a copy through a link: %v, want errNotCopyable", err)
	}
	ms, err := refreshView(etc, view, entries)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(view, "hosts")); len(b) != 0 {
		t.Errorf("the view holds what the link leads to: %q", b)
	}
	if !slices.ContainsFunc(ms, func(m mount) bool { return m.dst == "/etc/hosts" }) {
		t.Error("hosts, now a link out of /usr, is not bound")
	}
}

// A bind whose target lies in /etc (an agent's program on a host whose
// PATH runs through /etc, as NixOS's does) is made there: that sandbox
// binds the entries of /etc one by one, as bwrap cannot make a mount
// point in the view, which is read-only.
func TestABindIntoEtc(t *testing.T) {
	p := provider(t)
	p = New(Options{EtcView: testEtcView, HostUID: p.hostUID})
	cfg := berth.SandboxConfig{SessionID: "ses_etc_bind", Workspace: t.TempDir(), Home: t.TempDir(),
		Binds: []berth.Bind{{Source: sandboxtest.HostBusybox, Target: "/.berth/busybox"},
			{Source: sandboxtest.HostBusybox, Target: "/etc/profiles/per-user/berth/bin/busybox"}}}
	sb, err := p.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	out, st := run(t, sb.(*Sandbox), `/etc/profiles/per-user/berth/bin/busybox echo BOUND; /.berth/busybox cat /etc/hosts >/dev/null && echo HOSTS`)
	if !st.Success() || !strings.Contains(out, "BOUND") || !strings.Contains(out, "HOSTS") {
		t.Fatalf("status %+v, output %q", st, out)
	}
}

// A copy in the view goes file to file: the shim that makes it keeps no
// buffer of the file's size in its heap (a 2 MiB shim bound, issue 26,
// was passed by the first bwrap shim of a home when /etc held a 74 KB
// mime.types read whole).
func TestTheViewCopiesWithoutABuffer(t *testing.T) {
	dir := t.TempDir()
	src, view := filepath.Join(dir, "big"), filepath.Join(dir, "etc")
	want := []byte(strings.Repeat("a line of a large /etc file\n", 24<<10)) // ~670 KB
	if err := os.WriteFile(src, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(view, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(view+".new", 0o700); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := viewCopyFile(src, filepath.Join(view, "big"), view+".new"); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got, _ := os.ReadFile(filepath.Join(view, "big")); string(got) != string(want) {
		t.Fatalf("the copy holds %d bytes, want %d", len(got), len(want))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 {
		t.Errorf("copying %d bytes allocated %d bytes", len(want), alloc)
	}
}

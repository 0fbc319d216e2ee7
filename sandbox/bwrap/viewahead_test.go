package bwrap

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The view brought up to date ahead is taken while the host's /etc is
// unchanged: its mounts are those Open would make, and the watch ends.
func TestTheViewAheadIsTakenWhileEtcIsUnchanged(t *testing.T) {
	etc, entries := fakeEtc(t)
	view := filepath.Join(t.TempDir(), "etc")
	v := makeViewAhead(etc, view, entries)
	if v == nil {
		t.Fatal("no view made ahead")
	}
	ms, ok := v.take(etc, view)
	v.wait()
	if !ok {
		t.Fatal("the view made ahead was not taken, with nothing changed")
	}
	want, err := refreshView(etc, view, entries)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ms, want) {
		t.Errorf("mounts made ahead %+v, want %+v", ms, want)
	}
	if got := listView(t, view); !reflect.DeepEqual(got, wantView) {
		t.Errorf("view %v, want %v", got, wantView)
	}
}

// Any change of the host's /etc after the view was brought up to date
// ahead, or of a directory of its entries, leaves it untaken: Open brings
// the view up to date itself. So is a view of another directory.
func TestTheViewAheadIsNotTakenOnceEtcChanged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, etc string)
	}{
		{"a file written in place", func(t *testing.T, etc string) {
			f, err := os.OpenFile(filepath.Join(etc, "hosts"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("192.0.2.7 new\n"); err != nil {
				t.Fatal(err)
			}
		}},
		{"a file's mode", func(t *testing.T, etc string) {
			if err := os.Chmod(filepath.Join(etc, "services"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"a file replaced", func(t *testing.T, etc string) {
			tmp := filepath.Join(etc, ".hosts.new")
			if err := os.WriteFile(tmp, []byte("new\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(etc, "hosts")); err != nil {
				t.Fatal(err)
			}
		}},
		{"an entry made", func(t *testing.T, etc string) {
			if err := os.WriteFile(filepath.Join(etc, "missing"), []byte("here now\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"an entry removed", func(t *testing.T, etc string) {
			if err := os.Remove(filepath.Join(etc, "gai.conf")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a nested file written", func(t *testing.T, etc string) {
			if err := os.WriteFile(filepath.Join(etc, "ssl", "openssl.cnf"), []byte("[changed]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			etc, entries := fakeEtc(t)
			view := filepath.Join(t.TempDir(), "etc")
			v := makeViewAhead(etc, view, entries)
			if v == nil {
				t.Fatal("no view made ahead")
			}
			tc.change(t, etc)
			_, ok := v.take(etc, view)
			v.wait()
			if ok {
				t.Fatalf("the view made ahead was taken after %s", tc.name)
			}
		})
	}
	t.Run("another view", func(t *testing.T) {
		etc, entries := fakeEtc(t)
		view := filepath.Join(t.TempDir(), "etc")
		v := makeViewAhead(etc, view, entries)
		if v == nil {
			t.Fatal("no view made ahead")
		}
		_, ok := v.take(etc, view+"2")
		v.wait()
		if ok {
			t.Fatal("the view made ahead was taken for another view")
		}
	})
}

// Prewarm brings the provider's view up to date ahead for the sandbox the
// shim opens next; drop ends its watch when no sandbox took it.
func TestPrewarmBringsTheViewUpToDateAhead(t *testing.T) {
	view := filepath.Join(t.TempDir(), "etc")
	drop := prewarm(t, Warm{EtcView: view})
	v := takeWarmView()
	if v == nil || v.view != view || v.etc != "/etc" {
		t.Fatalf("Prewarm's view %+v, want the view of /etc in %s", v, view)
	}
	if _, err := os.Stat(filepath.Join(view, "passwd")); err != nil {
		t.Errorf("the view was not brought up to date: %v", err)
	}
	if takeWarmView() != nil {
		t.Error("the view made ahead was taken twice")
	}
	// drop ends the watch of the view taken.
	drop()
	if l, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", v.fd)); strings.Contains(l, "inotify") {
		t.Error("drop left the watch of the view taken open")
	}
}

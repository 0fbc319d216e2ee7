package main

import (
	"bytes"
	"strings"
	"testing"
)

// nopCloser is a buffer a child role writes its stdout to.
type nopCloser struct{ bytes.Buffer }

func (*nopCloser) Close() error { return nil }

// The shim and the demo agent run straight from main, as the daemon
// starts them; anything else, and a shim with arguments the fast path
// does not take, is left to the command tree.
func TestChildRolesRunWithoutTheCommandTree(t *testing.T) {
	for _, c := range []struct {
		args    []string
		code    int
		ok      bool
		stderr  string
		comment string
	}{
		{[]string{"shim", "--options", "{}"}, 0, true, "", "a spare given no job"},
		{[]string{"shim", "--options={}"}, 0, true, "", "the = form"},
		{[]string{"shim", "--options", "{"}, exitUsage, true, "--options", "options that are not JSON"},
		{[]string{"agent-demo"}, 0, true, "", "the demo agent, its stdin closed"},
		{[]string{"shim"}, 0, false, "", "no options: the tree says what is wrong"},
		{[]string{"shim", "--help"}, 0, false, "", ""},
		{[]string{"--home", "x", "shim", "--options", "{}"}, 0, false, "", "a global flag first"},
		{[]string{"ls"}, 0, false, "", ""},
		{nil, 0, false, "", "no command"},
	} {
		var stdout nopCloser
		var stderr bytes.Buffer
		code, ok := runChildRole(c.args, strings.NewReader(""), &stdout, &stderr)
		if code != c.code || ok != c.ok || !strings.Contains(stderr.String(), c.stderr) {
			t.Errorf("%q (%s): %d, %v, stderr %q; want %d, %v, %q", c.args, c.comment, code, ok, stderr.String(), c.code, c.ok, c.stderr)
		}
	}
}

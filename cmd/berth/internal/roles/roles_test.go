package roles

import "testing"

func TestLongLived(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"berth", "shim-local", "--options", "{}"}, true},
		{[]string{"berth", "agent-exec", "--", "claude"}, true},
		{[]string{"berth", "mcp"}, true},
		{[]string{"berth", "agent-demo"}, true},
		{[]string{"berth", "serve"}, false},
		{[]string{"berth", "--help"}, false},
		{[]string{"berth"}, false},
		{nil, false},
	} {
		if got := LongLived(c.args); got != c.want {
			t.Errorf("LongLived(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

func TestDaemon(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"berth", "serve"}, true},
		{[]string{"berth", "serve", "--home", "/h"}, true},
		{[]string{"berth", "shim-local"}, false},
		{[]string{"berth", "ls", "serve"}, false},
		{[]string{"berth"}, false},
		{nil, false},
	} {
		if got := Daemon(c.args); got != c.want {
			t.Errorf("Daemon(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

package shimcmd

import "testing"

// The one flag is read as the daemon passes it, and nothing else is taken.
func TestOptionsArg(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
		ok   bool
	}{
		{[]string{"--options", `{"uid":1}`}, `{"uid":1}`, true},
		{[]string{`--options={"uid":1}`}, `{"uid":1}`, true},
		{nil, "", false},
		{[]string{"--options"}, "", false},
		{[]string{"--options", "{}", "extra"}, "", false},
		{[]string{"-x", "{}"}, "", false},
		{[]string{"--options="}, "", false},
	} {
		got, ok := OptionsArg(c.args)
		if got != c.want || ok != c.ok {
			t.Errorf("OptionsArg(%q) = %q, %v; want %q, %v", c.args, got, ok, c.want, c.ok)
		}
	}
}

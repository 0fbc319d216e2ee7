// Package helpentry answers `berth --help` from an init function, before
// the packages only the daemon and the other commands use are initialised
// (as childentry runs the programs that live beside each agent): the
// command a user types first prints as fast as a Go hello world, not
// after the ~25 ms the daemon's libraries take to initialise (the Docker
// client's reference grammar, the S3 client, Prometheus, JSON Schema,
// SQLite, the CLI's own command tree).
//
// It answers only the root's help asked alone (--help, -h or help, no
// other argument); anything else goes to the command tree. The text is the
// tree's own, kept in root.go: TestTheEarlyHelpIsTheTreesHelp fails when
// they differ and rewrites root.go with -update.
//
// cmd/berth imports it for its side effect.
package helpentry

import "os"

func init() {
	if len(os.Args) != 2 {
		return
	}
	switch os.Args[1] {
	case "--help", "-h", "help":
		_, err := os.Stdout.WriteString(Root)
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
}

package storetest

import (
	"testing"

	"github.com/berth-sh/berth/store/internal/codec"
)

// PageStatementArgs are the arguments of each codec.PageKind's list-events
// statement, but for its trailing limit, in the order every SQL backend
// takes them: what a backend's query-plan test explains each statement
// with. It fails the test when a kind has none.
func PageStatementArgs(t *testing.T) map[codec.PageKind][]any {
	t.Helper()
	args := map[codec.PageKind][]any{
		codec.PageAll:          {"s", 0},
		codec.PageByType:       {"s", "turn_ended", 0},
		codec.PageByChunkType:  {"s", 0, "agent_message"},
		codec.PageByTurn:       {"s", 0, 10, "u", ""},
		codec.PageByTypeInTurn: {"s", "turn_ended", 0, 10, "u"},
	}
	if len(args) != int(codec.PageKinds) {
		t.Fatalf("%d page statements, %d checked", codec.PageKinds, len(args))
	}
	return args
}

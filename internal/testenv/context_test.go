package testenv

import (
	"context"
	"testing"
	"time"
)

// Context is one context per test, bounded, and ends with its test.
func TestContext(t *testing.T) {
	c := Context(t)
	if Context(t) != c {
		t.Fatal("a second call made another context")
	}
	if d, ok := c.Deadline(); !ok || time.Until(d) > ContextTimeout {
		t.Fatalf("deadline %v, %v: want one within %v", d, ok, ContextTimeout)
	}
	var sub context.Context
	t.Run("sub", func(t *testing.T) {
		if sub = Context(t); sub == c {
			t.Fatal("a subtest shares its parent's context")
		}
	})
	if sub.Err() == nil {
		t.Fatal("the subtest's context outlived it")
	}
	if c.Err() != nil {
		t.Fatal("the parent's context ended with its subtest")
	}
}

package postgres

import (
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pgtest"
	"github.com/berth-sh/berth/store/storetest"
)

func TestHookConformance(t *testing.T) {
	pgtest.ServerURL(t)
	storetest.RunHookStoreTests(t, func(t *testing.T, dir string) berth.Store { return openAt(t, dir) })
}

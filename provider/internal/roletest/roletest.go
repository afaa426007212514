package roletest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/db"
)

// OpenDB opens a database in the test's temp folder, closed at its end.
func OpenDB(t testing.TB) *db.DB {
	t.Helper()
	st, err := db.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Handler is a role's event handler.
type Handler interface {
	HandleEvent(ctx context.Context, tx *db.Tx, ev chain.Event) (func(), error)
}

// Deliver hands evs to role in one database transaction, as the daemon
// hands it a block's events, and returns what the role asked to do once
// the transaction committed, without running it.
func Deliver(t testing.TB, st *db.DB, role Handler, evs ...chain.Event) []func() {
	t.Helper()
	var after []func()
	if err := st.Update(func(tx *db.Tx) error {
		after = after[:0]
		for _, ev := range evs {
			act, err := role.HandleEvent(context.Background(), tx, ev)
			if err != nil {
				return err
			}
			if act != nil {
				after = append(after, act)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return after
}

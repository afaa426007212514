package storage

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosmos/gogoproto/proto"
	"google.golang.org/grpc"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/bech32"
	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// noChain is a gRPC connection that answers nothing: the parts under test
// must not need the chain.
type noChain struct{}

func (noChain) Invoke(context.Context, string, any, any, ...grpc.CallOption) error {
	return errors.New("no chain in this test")
}

func (noChain) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errors.New("no chain in this test")
}

func address(t *testing.T, b byte) string {
	t.Helper()
	addr, err := bech32.ConvertAndEncode("depin", []byte(strings.Repeat(string(rune(b)), 20)))
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func newTestRole(t *testing.T, opts Options) (*Role, *db.DB) {
	t.Helper()
	st, err := db.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if opts.Operator == "" {
		opts.Operator = address(t, 'o')
	}
	opts.Submit = func(context.Context, sdk.Msg) (*chain.TxResult, error) { return nil, errors.New("no chain") }
	opts.Conn, opts.DB, opts.PiecesDir = noChain{}, st, t.TempDir()
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r, st
}

func TestNewChecksOptions(t *testing.T) {
	st, err := db.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	good := Options{
		Operator: address(t, 'o'), Conn: noChain{}, DB: st, PiecesDir: t.TempDir(),
		Submit: func(context.Context, sdk.Msg) (*chain.TxResult, error) { return nil, nil },
	}
	if _, err := New(good); err != nil {
		t.Fatal(err)
	}
	for want, mutate := range map[string]func(*Options){
		"operator":       func(o *Options) { o.Operator = "depin1nope" },
		"submitter":      func(o *Options) { o.Submit = nil },
		"gRPC":           func(o *Options) { o.Conn = nil },
		"database":       func(o *Options) { o.DB = nil },
		"pieces folder":  func(o *Options) { o.PiecesDir = "" },
		"repair dataset": func(o *Options) { o.RepairDatasets = []string{"Bad_ID"} },
	} {
		o := good
		mutate(&o)
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}

// The daemon replays a height after a crash, and every block's events reach
// every role: only the operator's replica events count, each proof and miss
// once per period.
func TestHandleEventCountsTheOperatorsEventsOnce(t *testing.T) {
	r, st := newTestRole(t, Options{Repair: true})
	op, other := r.opts.Operator, address(t, 'x')
	slash := sdk.NewInt64Coin("udepin", 5000)
	fault := sdk.NewInt64Coin("udepin", 1000)
	events := []struct {
		height int64
		msg    proto.Message
	}{
		{10, &types.EventReplicaClaimed{ReplicaId: 7, DatasetId: "ds", Shard: 1, Piece: 2, Holder: op, NextPeriod: 1, NextDeadline: 40}},
		{10, &types.EventReplicaClaimed{ReplicaId: 8, DatasetId: "ds", Shard: 1, Piece: 0, Holder: other, NextPeriod: 1, NextDeadline: 41}},
		{40, &types.EventStorageProofAccepted{ReplicaId: 7, Holder: op, Period: 1, NextPeriod: 2}},
		{40, &types.EventStorageProofAccepted{ReplicaId: 8, Holder: other, Period: 1, NextPeriod: 2}},
		{60, &types.EventDeadlineMissed{ReplicaId: 7, Holder: op, Period: 2, Slashed: slash, NextPeriod: 3}},
		{70, &types.EventRepairSlotOpened{DatasetId: "ds", Shard: 3, Piece: 1}},
		{75, &types.EventFaultDeclared{ReplicaId: 7, Holder: op, Slashed: fault}},
		{75, &types.EventReplicaTerminated{ReplicaId: 7, DatasetId: "ds", Shard: 1, Piece: 2, Holder: op, Reason: types.TERMINATION_REASON_DECLARED_FAULT}},
	}
	deliver := func() {
		for i, ev := range events {
			if after, err := r.HandleEvent(context.Background(), nil, chain.Event{Height: ev.height, Index: i, Message: ev.msg}); err != nil || after != nil {
				t.Fatal(err)
			}
		}
		r.applyNotes(context.Background())
	}
	deliver()
	st0 := r.Status()
	deliver() // the replay after a crash
	if got := r.Status(); got.Counters != st0.Counters {
		t.Fatalf("a replay changed the counters:\n got %+v\nwant %+v", got.Counters, st0.Counters)
	}
	c := st0.Counters
	if c.Claims != 1 || c.ChallengesAnswered != 1 || c.ChallengesMissed != 1 || c.FaultsDeclared != 1 || c.PiecesHeld != 0 || c.Slashed != "6000udepin" {
		t.Fatalf("counters: %+v", c)
	}
	if st0.Height != 75 {
		t.Fatalf("height %d, want the last event's 75", st0.Height)
	}
	err := st.View(func(tx *db.Tx) error {
		recs, err := tx.StorageReplicas()
		if err != nil {
			return err
		}
		if len(recs) != 1 || recs[0].ReplicaID != 7 || recs[0].Status != db.StorageReplicaFaulted || recs[0].DatasetID != "ds" ||
			recs[0].ClaimedHeight != 10 || recs[0].EndReason != "TERMINATION_REASON_DECLARED_FAULT" {
			t.Fatalf("records: %+v", recs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	_, queued := r.candidates[slotKey{"ds", 3, 1}]
	r.mu.Unlock()
	if !queued {
		t.Fatal("the opened repair slot was not queued")
	}
}

// HandleEvent never waits for the worker: past maxNotes it asks for a
// reconciliation instead of queueing more.
func TestHandleEventNeverBlocks(t *testing.T) {
	r, _ := newTestRole(t, Options{})
	for h := int64(1); h <= maxNotes+10; h++ {
		ev := chain.Event{Height: h, Message: &types.EventStorageProofAccepted{ReplicaId: 1, Holder: r.opts.Operator, Period: 1}}
		if _, err := r.HandleEvent(context.Background(), nil, ev); err != nil {
			t.Fatal(err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.notes) != maxNotes || !r.resync {
		t.Fatalf("%d notes queued, resync %v", len(r.notes), r.resync)
	}
}

func TestChainErrIs(t *testing.T) {
	delivered := &chain.TxError{Result: &chain.TxResult{Height: 9, Codespace: types.ModuleName, Code: types.ErrWrongPeriod.ABCICode(), Log: "whatever"}}
	if !chainErrIs(delivered, types.ErrWrongPeriod) || chainErrIs(delivered, types.ErrDeadlinePassed) {
		t.Fatal("a delivered failure is matched by codespace and code")
	}
	other := &chain.TxError{Result: &chain.TxResult{Codespace: sdkerrors.RootCodespace, Code: types.ErrWrongPeriod.ABCICode()}}
	if chainErrIs(other, types.ErrWrongPeriod) {
		t.Fatal("another module's code 14 matched")
	}
	simulated := errors.New("simulating: rpc error: code = Unknown desc = failed to execute message; message index: 0: period 3, current period is 4: proof is for the wrong period")
	if !chainErrIs(simulated, types.ErrWrongPeriod) || chainErrIs(nil, types.ErrWrongPeriod) {
		t.Fatal("a failed simulation is matched by the error's text")
	}
}

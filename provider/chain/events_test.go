package chain

import (
	"log/slog"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/cosmos/gogoproto/proto"

	sdk "github.com/cosmos/cosmos-sdk/types"

	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// abciEvent encodes a typed event the way the SDK emits it, plus extra
// attributes (the SDK's mode and msg_index).
func abciEvent(t *testing.T, msg proto.Message, extra ...abci.EventAttribute) abci.Event {
	t.Helper()
	ev, err := sdk.TypedEventToEvent(msg)
	if err != nil {
		t.Fatal(err)
	}
	ev.Attributes = append(ev.Attributes, extra...)
	return abci.Event(ev)
}

func untyped(kind string, extra ...abci.EventAttribute) abci.Event {
	return abci.Event{Type: kind, Attributes: append([]abci.EventAttribute{{Key: "amount", Value: "5udepin"}}, extra...)}
}

var (
	beginBlock = abci.EventAttribute{Key: "mode", Value: "BeginBlock"}
	endBlock   = abci.EventAttribute{Key: "mode", Value: "EndBlock"}
	msgIndex   = abci.EventAttribute{Key: "msg_index", Value: "0"}
)

func TestDecodeOrdersEventsAsTheyRan(t *testing.T) {
	results := &ctypes.ResultBlockResults{
		Height: 12,
		// Finalize-block events list begin-block events first and end-block
		// events last; transactions ran in between.
		FinalizeBlockEvents: []abci.Event{
			abciEvent(t, &verifytypes.EventCheckpointFinalized{LeaseId: 4, Index: 1}, beginBlock),
			untyped("transfer", endBlock),
			abciEvent(t, &markettypes.EventJobClosed{JobId: 1, State: markettypes.JOB_STATE_EXPIRED}, endBlock),
			abciEvent(t, &markettypes.EventLeaseCreated{LeaseId: 9, JobId: 2}, endBlock),
		},
		TxsResults: []*abci.ExecTxResult{
			{Code: 0, Events: []abci.Event{
				untyped("message", msgIndex),
				abciEvent(t, &markettypes.EventJobCreated{JobId: 2, Owner: "depin1owner"}, msgIndex),
			}},
			// A failed transaction's events describe reverted changes.
			{Code: 5, Events: []abci.Event{abciEvent(t, &markettypes.EventBidPlaced{JobId: 2, Provider: "failed"})}},
			{Code: 0, Events: []abci.Event{
				abciEvent(t, &markettypes.EventBidPlaced{JobId: 2, Provider: "depin1provider"}, msgIndex),
				// A known type whose attributes do not fit it.
				{Type: "depinchain.market.v1.EventBidWithdrawn", Attributes: []abci.EventAttribute{{Key: "job_id", Value: "not json"}}},
			}},
		},
	}
	decodeErrors := 0
	d := blockDecoder{log: slog.New(slog.DiscardHandler), onDecodeError: func() { decodeErrors++ }}
	got := d.decode(12, []string{"AA", "BB", "CC"}, results)

	want := []struct {
		source  string
		txIndex int
		index   int
		msgType string
	}{
		{FinalizeBlock, -1, 0, "depinchain.verify.v1.EventCheckpointFinalized"},
		{"AA", 0, 1, "depinchain.market.v1.EventJobCreated"},
		{"CC", 2, 0, "depinchain.market.v1.EventBidPlaced"},
		{FinalizeBlock, -1, 2, "depinchain.market.v1.EventJobClosed"},
		{FinalizeBlock, -1, 3, "depinchain.market.v1.EventLeaseCreated"},
	}
	if len(got) != len(want) {
		for _, e := range got {
			t.Logf("%s %s", e.Key(), e.Type())
		}
		t.Fatalf("decoded %d events, want %d", len(got), len(want))
	}
	for i, w := range want {
		e := got[i]
		if e.Height != 12 || e.Source != w.source || e.TxIndex != w.txIndex || e.Index != w.index || e.Type() != w.msgType {
			t.Errorf("event %d = {%d %s tx %d idx %d %s}, want {12 %s tx %d idx %d %s}",
				i, e.Height, e.Source, e.TxIndex, e.Index, e.Type(), w.source, w.txIndex, w.index, w.msgType)
		}
	}
	if closed := got[3].Message.(*markettypes.EventJobClosed); closed.JobId != 1 || closed.State != markettypes.JOB_STATE_EXPIRED {
		t.Errorf("end-block event decoded as %+v", closed)
	}
	if bid := got[2].Message.(*markettypes.EventBidPlaced); bid.Provider != "depin1provider" {
		t.Errorf("bid decoded as %+v", bid)
	}
	if decodeErrors != 1 {
		t.Errorf("decode errors = %d, want 1", decodeErrors)
	}
	if key := got[1].Key(); key != "12/0/1" {
		t.Errorf("key = %q", key)
	}
}

// A typed event with its own "mode" field keeps it: only the SDK's bare
// mode attribute is stripped.
func TestDecodeKeepsATypedFieldNamedMode(t *testing.T) {
	ev := abci.Event{Type: "x", Attributes: []abci.EventAttribute{{Key: "mode", Value: `"FAST"`}, endBlock}}
	if got := eventMode(ev); got != "EndBlock" {
		t.Errorf("eventMode = %q", got)
	}
	stripped := withoutBlockMode(ev)
	if len(stripped.Attributes) != 1 || stripped.Attributes[0].Value != `"FAST"` {
		t.Errorf("stripped attributes %+v", stripped.Attributes)
	}
}

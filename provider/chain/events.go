package chain

import (
	"encoding/json"
	"fmt"
	"log/slog"

	abci "github.com/cometbft/cometbft/abci/types"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/cosmos/gogoproto/proto"

	sdk "github.com/cosmos/cosmos-sdk/types"
)

// FinalizeBlock is the Source of events the block itself emitted (begin and
// end blockers: auction results, deadlines) rather than a transaction.
const FinalizeBlock = "finalize_block"

// Event is one typed event of a block, decoded into its generated proto type
// (e.g. *markettypes.EventJobCreated).
type Event struct {
	Height int64
	// Source is the emitting transaction's hash (upper-case hex) or FinalizeBlock.
	Source string
	// TxIndex is the transaction's position in the block; -1 for FinalizeBlock events.
	TxIndex int
	// Index is the event's position among all ABCI events of its source
	// (typed or not), so it is the same on every replay.
	Index   int
	Message proto.Message
}

// Key identifies the event across replays: "height/tx-index/event-index".
// It is the natural key for store.Tx.MarkHandled.
func (e Event) Key() string {
	return fmt.Sprintf("%d/%d/%d", e.Height, e.TxIndex, e.Index)
}

// Type is the event's proto message name, e.g. "depinchain.market.v1.EventJobCreated".
func (e Event) Type() string { return proto.MessageName(e.Message) }

// blockDecoder turns block results into typed events.
type blockDecoder struct {
	log *slog.Logger
	// onDecodeError counts events of a known type that did not decode.
	onDecodeError func()
}

// decode returns a block's typed events in execution order: pre- and
// begin-block events, then each successful transaction's events, then
// end-block events. txHashes are the hashes of the block's transactions, in
// block order. Events of types this binary does not know are skipped, and so
// are failed transactions' events: their state changes were reverted.
func (d blockDecoder) decode(height int64, txHashes []string, results *ctypes.ResultBlockResults) []Event {
	var before, after []positioned
	for i, ev := range results.FinalizeBlockEvents {
		// The SDK tags end-block events with mode=EndBlock; they ran after the
		// transactions. Everything else (pre- and begin-block) ran before.
		if eventMode(ev) == "EndBlock" {
			after = append(after, positioned{i, ev})
		} else {
			before = append(before, positioned{i, ev})
		}
	}

	var out []Event
	out = d.appendTyped(out, height, FinalizeBlock, -1, before)
	for i, res := range results.TxsResults {
		if res == nil || res.Code != 0 {
			continue
		}
		events := make([]positioned, len(res.Events))
		for j, ev := range res.Events {
			events[j] = positioned{j, ev}
		}
		out = d.appendTyped(out, height, txHashes[i], i, events)
	}
	return d.appendTyped(out, height, FinalizeBlock, -1, after)
}

// positioned is an ABCI event with its index in its source's event list.
type positioned struct {
	index int
	event abci.Event
}

func (d blockDecoder) appendTyped(out []Event, height int64, source string, txIndex int, events []positioned) []Event {
	for _, p := range events {
		if proto.MessageType(p.event.Type) == nil {
			continue // untyped ("transfer", "message") or from a module this binary does not link
		}
		msg, err := sdk.ParseTypedEvent(withoutBlockMode(p.event))
		if err != nil {
			// The type is known but the attributes do not fit it: the chain runs
			// a different schema. Retrying cannot help; say so loudly.
			d.log.Error("undecodable typed event skipped", "height", height, "source", source, "index", p.index, "type", p.event.Type, "err", err)
			d.onDecodeError()
			continue
		}
		out = append(out, Event{Height: height, Source: source, TxIndex: txIndex, Index: p.index, Message: msg})
	}
	return out
}

// eventMode returns the mode attribute the SDK adds to begin- and end-block
// events ("BeginBlock", "EndBlock"), or "" when there is none.
func eventMode(ev abci.Event) string {
	for _, a := range ev.Attributes {
		if isBlockMode(a) {
			return a.Value
		}
	}
	return ""
}

// isBlockMode tells the SDK's mode attribute from a typed event's own field
// named "mode": typed attributes hold JSON, the SDK's holds a bare word.
func isBlockMode(a abci.EventAttribute) bool {
	return a.Key == "mode" && !json.Valid([]byte(a.Value))
}

// withoutBlockMode drops the mode attribute, which sdk.ParseTypedEvent would
// otherwise fail on: it reads every attribute value as JSON.
func withoutBlockMode(ev abci.Event) abci.Event {
	attrs := make([]abci.EventAttribute, 0, len(ev.Attributes))
	for _, a := range ev.Attributes {
		if !isBlockMode(a) {
			attrs = append(attrs, a)
		}
	}
	ev.Attributes = attrs
	return ev
}

// FindEvent returns the first typed event of type T among a transaction's events (a
// TxResult's): how a sender reads what its message did, e.g. the id it opened.
func FindEvent[T proto.Message](events []abci.Event) (T, bool) {
	var zero T
	name := proto.MessageName(zero)
	for _, ev := range events {
		if ev.Type != name {
			continue
		}
		msg, err := sdk.ParseTypedEvent(ev)
		if err != nil {
			continue
		}
		if t, ok := msg.(T); ok {
			return t, true
		}
	}
	return zero, false
}

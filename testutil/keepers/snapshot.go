package keepers

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/cosmos/gogoproto/proto"
	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"
	storetypes "cosmossdk.io/store/types"

	"github.com/cosmos/cosmos-sdk/codec"
	sdk "github.com/cosmos/cosmos-sdk/types"
)

// A Part is one named piece of state a rejected message must leave alone, and how to
// render it as text: a module's exported genesis as JSON, an index that genesis leaves
// out, every byte of a store.
type Part struct {
	Name string
	Read func(t testing.TB) string
}

// Snapshot is what a rejected message must leave alone: the texts of its parts and the
// number of events emitted so far on the context.
type Snapshot struct {
	ctx    func() sdk.Context
	parts  []Part
	texts  []string
	events int
}

// TakeSnapshot reads every part now; ctx is the context whose event manager counts the
// events (read again by RequireUnchanged, so a fixture's current context serves).
func TakeSnapshot(t testing.TB, ctx func() sdk.Context, parts ...Part) Snapshot {
	t.Helper()
	s := Snapshot{ctx: ctx, parts: parts, events: len(ctx().EventManager().Events())}
	for _, p := range parts {
		s.texts = append(s.texts, p.Read(t))
	}
	return s
}

// RequireUnchanged reads the parts again and fails t with a diff of the first one that
// changed, or when events were emitted since the snapshot. why (a format and its
// arguments) says what should have left the state alone.
func (s Snapshot) RequireUnchanged(t testing.TB, why ...any) {
	t.Helper()
	context := ""
	if len(why) > 0 {
		if format, ok := why[0].(string); ok {
			context = fmt.Sprintf(format, why[1:]...) + ": "
		}
	}
	after := TakeSnapshot(t, s.ctx, s.parts...)
	for i, p := range s.parts {
		if s.texts[i] != after.texts[i] {
			t.Fatalf("%s%s changed:\n%s", context, p.Name, JSONDiff(s.texts[i], after.texts[i]))
		}
	}
	if s.events != after.events {
		t.Fatalf("%s%d events were emitted", context, after.events-s.events)
	}
}

// Text is the text of the part named name, or "" when the snapshot has none.
func (s Snapshot) Text(name string) string {
	for i, p := range s.parts {
		if p.Name == name {
			return s.texts[i]
		}
	}
	return ""
}

// String renders every part under its name.
func (s Snapshot) String() string {
	var b strings.Builder
	for i, p := range s.parts {
		fmt.Fprintf(&b, "%s:\n%s\n", p.Name, s.texts[i])
	}
	return b.String()
}

// RequireRejected runs call, requires it to fail with want and to leave every part of
// the snapshot take returns, and the event log, exactly as they were. It returns the
// error for checks of its message.
func RequireRejected(t testing.TB, want error, take func() Snapshot, call func() error) error {
	t.Helper()
	before := take()
	err := call()
	require.ErrorIs(t, err, want)
	before.RequireUnchanged(t)
	return err
}

// GenesisPart renders what export returns (a module's ExportGenesis) as JSON.
func GenesisPart[G proto.Message](name string, cdc codec.JSONCodec, ctx func() sdk.Context, export func(context.Context) (G, error)) Part {
	return Part{Name: name, Read: func(t testing.TB) string {
		t.Helper()
		gs, err := export(ctx())
		require.NoError(t, err)
		bz, err := cdc.MarshalJSON(gs)
		require.NoError(t, err)
		return string(bz)
	}}
}

// KeySetPart renders every key of a key set (a derived index genesis export leaves out),
// one a line.
func KeySetPart[K any](name string, ctx func() sdk.Context, set collections.KeySet[K]) Part {
	return Part{Name: name, Read: func(t testing.TB) string {
		t.Helper()
		var b strings.Builder
		require.NoError(t, set.Walk(ctx(), nil, func(k K) (bool, error) {
			b.WriteString(set.KeyCodec().Stringify(k) + "\n")
			return false, nil
		}))
		return b.String()
	}}
}

// StorePart renders every entry of a store, byte for byte, one a line in hex.
func StorePart(name string, ctx func() sdk.Context, key storetypes.StoreKey) Part {
	return Part{Name: name, Read: func(t testing.TB) string {
		t.Helper()
		var b strings.Builder
		iter := ctx().KVStore(key).Iterator(nil, nil)
		for ; iter.Valid(); iter.Next() {
			fmt.Fprintf(&b, "%s=%s\n", hex.EncodeToString(iter.Key()), hex.EncodeToString(iter.Value()))
		}
		require.NoError(t, iter.Close())
		return b.String()
	}}
}

// JSONDiff shows where two JSON documents (or plain strings) differ: the lines between
// their common beginning and common end, with a little context.
func JSONDiff(a, b string) string {
	lines := func(s string) []string {
		var buf bytes.Buffer
		if json.Indent(&buf, []byte(s), "", "  ") == nil {
			s = buf.String()
		}
		return strings.Split(s, "\n")
	}
	la, lb := lines(a), lines(b)
	pre := 0
	for pre < len(la) && pre < len(lb) && la[pre] == lb[pre] {
		pre++
	}
	suf := 0
	for suf < len(la)-pre && suf < len(lb)-pre && la[len(la)-1-suf] == lb[len(lb)-1-suf] {
		suf++
	}
	const context = 3
	var out strings.Builder
	for _, l := range la[max(0, pre-context):pre] {
		out.WriteString("  " + l + "\n")
	}
	for _, l := range la[pre : len(la)-suf] {
		out.WriteString("- " + l + "\n")
	}
	for _, l := range lb[pre : len(lb)-suf] {
		out.WriteString("+ " + l + "\n")
	}
	for _, l := range la[len(la)-suf : min(len(la), len(la)-suf+context)] {
		out.WriteString("  " + l + "\n")
	}
	return out.String()
}

// TypedEvents returns the typed events of type T among events, decoded.
func TypedEvents[T proto.Message](t testing.TB, events []abci.Event) []T {
	t.Helper()
	var zero T
	name := proto.MessageName(zero)
	var out []T
	for _, ev := range events {
		if ev.Type != name {
			continue
		}
		msg, err := sdk.ParseTypedEvent(ev)
		require.NoError(t, err)
		out = append(out, msg.(T))
	}
	return out
}

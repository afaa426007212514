package keeperutil_test

import (
	"errors"
	"fmt"
	"testing"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	addresscodec "github.com/cosmos/cosmos-sdk/codec/address"
	sdk "github.com/cosmos/cosmos-sdk/types"
	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
)

var errKind = errorsmod.Register("keeperutiltest", 2, "thing not allowed")

var errNoThing = errorsmod.Register("keeperutiltest", 3, "thing not found")

func TestParseAddress(t *testing.T) {
	codec := addresscodec.NewBech32Codec("depin")
	want := sdk.AccAddress("01234567890123456789")
	text, err := codec.BytesToString(want)
	if err != nil {
		t.Fatal(err)
	}
	got, canonical, err := keeperutil.ParseAddressCanonical(codec, "owner", text)
	if err != nil || !got.Equals(want) || canonical != text {
		t.Fatalf("ParseAddressCanonical(%q) = %s, %q, %v", text, got, canonical, err)
	}
	for _, bad := range []string{"", "depin1nope", "cosmos1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5lzv7xu"} {
		_, err := keeperutil.ParseAddress(codec, "owner", bad)
		if !sdkerrors.ErrInvalidAddress.Is(err) || !errors.Is(err, sdkerrors.ErrInvalidAddress) {
			t.Fatalf("ParseAddress(%q) = %v, want ErrInvalidAddress", bad, err)
		}
		if want := fmt.Sprintf("owner %q: ", bad); err.Error()[:len(want)] != want {
			t.Fatalf("ParseAddress(%q) = %q, want it to start with %q", bad, err, want)
		}
	}
}

func TestWrapCauseKeepsCodeAndCause(t *testing.T) {
	cause := fmt.Errorf("lock: %w", errNoThing)
	err := keeperutil.WrapCause(errKind, cause, "locking collateral for %d", 7)
	if got, want := err.Error(), errorsmod.Wrapf(errKind, "locking collateral for %d: %s", 7, cause).Error(); got != want {
		t.Fatalf("text %q, want %q (what Wrapf with %%s gave)", got, want)
	}
	if !errKind.Is(err) || !errors.Is(err, errKind) {
		t.Fatalf("%v does not match its kind", err)
	}
	if !errors.Is(err, cause) || !errors.Is(err, errNoThing) {
		t.Fatalf("%v lost its cause", err)
	}
	codespace, code, _ := errorsmod.ABCIInfo(err, false)
	if codespace != errKind.Codespace() || code != errKind.ABCICode() {
		t.Fatalf("ABCI %s/%d, want the kind's %s/%d", codespace, code, errKind.Codespace(), errKind.ABCICode())
	}
	// Without a description the cause is the description.
	if got, want := keeperutil.WrapCause(errKind, cause, "").Error(), errorsmod.Wrapf(errKind, "%s", cause).Error(); got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
}

func TestNotFoundSeparatesMissesFromStoreErrors(t *testing.T) {
	miss := fmt.Errorf("%w: key 3", collections.ErrNotFound)
	err := keeperutil.NotFound(miss, errNoThing, "thing %d", 3)
	if err.Error() != "thing 3: thing not found" {
		t.Fatalf("text %q", err)
	}
	if !errNoThing.Is(err) || !keeperutil.IsNotFound(err) {
		t.Fatalf("%v: want the module's not-found error that still says not found", err)
	}
	broken := errors.New("store: corrupted value")
	if got := keeperutil.NotFound(broken, errNoThing, "thing %d", 3); got != broken {
		t.Fatalf("a store error became %v", got)
	}
	if keeperutil.NotFound(nil, errNoThing, "thing") != nil {
		t.Fatal("nil became an error")
	}
	if keeperutil.IsNotFound(broken) {
		t.Fatal("a store error counts as not found")
	}
	if got := status.Code(keeperutil.LookupStatus(err)); got != codes.NotFound {
		t.Fatalf("a miss answers %s", got)
	}
	if got := status.Code(keeperutil.LookupStatus(broken)); got != codes.Internal {
		t.Fatalf("a store error answers %s", got)
	}
}

func TestOptional(t *testing.T) {
	if v, ok, err := keeperutil.Optional(5, nil); v != 5 || !ok || err != nil {
		t.Fatalf("present: %d %v %v", v, ok, err)
	}
	if v, ok, err := keeperutil.Optional(5, collections.ErrNotFound); v != 0 || ok || err != nil {
		t.Fatalf("absent: %d %v %v", v, ok, err)
	}
	broken := errors.New("store: corrupted value")
	if _, ok, err := keeperutil.Optional(5, broken); ok || err != broken {
		t.Fatalf("store error: %v %v", ok, err)
	}
}

func TestWithCauseAndIsRefusal(t *testing.T) {
	cause := fmt.Errorf("lookup: %w", errNoThing)
	err := keeperutil.WithCause(errorsmod.Wrapf(errKind, "no hash (%s); widen retention", cause), cause)
	if err.Error() != "no hash (lookup: thing not found); widen retention: thing not allowed" {
		t.Fatalf("text %q", err)
	}
	if !errKind.Is(err) || !errors.Is(err, errNoThing) {
		t.Fatalf("%v lost its kind or its cause", err)
	}
	if keeperutil.WithCause(nil, cause) != nil {
		t.Fatal("nil became an error")
	}
	if !keeperutil.IsRefusal(err) || !keeperutil.IsRefusal(cause) || !keeperutil.IsRefusal(sdkerrors.ErrInvalidAddress) {
		t.Fatal("a registered error is not a refusal")
	}
	if keeperutil.IsRefusal(errors.New("store: corrupted value")) || keeperutil.IsRefusal(collections.ErrNotFound) || keeperutil.IsRefusal(nil) {
		t.Fatal("a store error counts as a refusal")
	}
}

func TestRespondEmitsInOrder(t *testing.T) {
	ctx := sdk.Context{}.WithEventManager(sdk.NewEventManager())
	type answer struct{ n int }
	first, second := sdk.NewInt64Coin("aaa", 1), sdk.NewInt64Coin("bbb", 2)
	resp, err := keeperutil.Respond(ctx, &answer{n: 7}, &first, &second)
	if err != nil || resp.n != 7 {
		t.Fatalf("Respond = %v, %v", resp, err)
	}
	events := ctx.EventManager().Events()
	if len(events) != 2 || events[0].Type != "cosmos.base.v1beta1.Coin" {
		t.Fatalf("events %v", events)
	}
	if v, ok := events[0].GetAttribute("denom"); !ok || v.Value != `"aaa"` {
		t.Fatalf("first event %v", events[0])
	}
}

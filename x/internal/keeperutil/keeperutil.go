// Package keeperutil holds the conventions the four modules' keepers and message servers
// share, so that they answer alike:
//
//   - ParseAddress: an address field that does not decode is sdkerrors.ErrInvalidAddress,
//     naming the field;
//   - WrapCause: a module error that reports its own registered code but keeps the error
//     that caused it, so errors.Is and errors.As still find the cause;
//   - NotFound and Optional: collections.ErrNotFound becomes the module's not-found error
//     (or "absent"), every other store error passes through unchanged; IsRefusal tells a
//     module's registered refusal from a store failure;
//   - LookupStatus: a query answers NotFound only for what does not exist;
//   - Emit and Respond: the typed events the modules emit, and no other kind; a
//     handler answers with its response and its event in one call.
package keeperutil

import (
	"context"
	"errors"
	"fmt"

	"cosmossdk.io/collections"
	"cosmossdk.io/core/address"
	errorsmod "cosmossdk.io/errors"
	"github.com/cosmos/gogoproto/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sdk "github.com/cosmos/cosmos-sdk/types"
	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"
)

// ParseAddress decodes the address field of a message. A text that does not decode is
// sdkerrors.ErrInvalidAddress naming the field, e.g. `owner "x": decoding bech32 failed:
// …: invalid address`.
func ParseAddress(codec address.Codec, field, text string) (sdk.AccAddress, error) {
	addr, err := codec.StringToBytes(text)
	if err != nil {
		return nil, WrapCause(sdkerrors.ErrInvalidAddress, err, "%s %q", field, text)
	}
	return addr, nil
}

// ParseAddressCanonical is ParseAddress that also returns the address's canonical text
// (the codec's own encoding of the decoded bytes), for records and events that must not
// depend on how the sender spelled it.
func ParseAddressCanonical(codec address.Codec, field, text string) (sdk.AccAddress, string, error) {
	addr, err := ParseAddress(codec, field, text)
	if err != nil {
		return nil, "", err
	}
	canonical, err := codec.BytesToString(addr)
	if err != nil {
		return nil, "", WrapCause(sdkerrors.ErrInvalidAddress, err, "%s %q", field, text)
	}
	return addr, canonical, nil
}

// WrapCause returns kind with a description and the error that caused it. The result
// reads "<description>: <cause>: <kind>" (without the description when format is
// empty), as errorsmod.Wrapf(kind, "<description>: %s", cause) does, and reports kind's
// code and codespace to clients; unlike that, it keeps cause, so errors.Is(err, cause)
// and errors.As still find it.
func WrapCause(kind *errorsmod.Error, cause error, format string, args ...any) error {
	if cause == nil {
		return errorsmod.Wrapf(kind, format, args...)
	}
	desc := cause.Error()
	if format != "" {
		desc = fmt.Sprintf(format, args...) + ": " + desc
	}
	return &causedError{wrapped: errorsmod.Wrap(kind, desc), cause: cause}
}

// WithCause keeps cause behind err, an error the caller built with its own text (for
// example errorsmod.Wrapf(kind, "… (%s) …", cause)): the result reads and reports like
// err, and errors.Is and errors.As also find cause.
func WithCause(err, cause error) error {
	if err == nil || cause == nil {
		return err
	}
	return &causedError{wrapped: err, cause: cause}
}

// IsRefusal reports whether err is a refusal a module (or the SDK) registered with a code,
// such as "provider is jailed" or "dataset not found", as opposed to a failure of the
// store or of decoding, which has none. Callers that may turn a refusal into a decision
// (skip an auction winner, call data unsupported) pass every other error on.
func IsRefusal(err error) bool {
	var registered *errorsmod.Error
	return errors.As(err, &registered)
}

// causedError is kind wrapped with a description (wrapped) and the error behind it.
type causedError struct {
	wrapped error
	cause   error
}

func (e *causedError) Error() string { return e.wrapped.Error() }

// Cause is the chain errorsmod walks for the ABCI code and codespace and for
// (*errorsmod.Error).Is: the module's error.
func (e *causedError) Cause() error { return e.wrapped }

// Unwrap lets errors.Is and errors.As see both the module's error and the cause.
func (e *causedError) Unwrap() []error { return []error{e.wrapped, e.cause} }

// NotFound turns collections.ErrNotFound into kind, described by format and args (the
// text reads "<description>: <kind>"); the result still matches collections.ErrNotFound.
// Any other error (a store or decoding failure) passes through unchanged, and nil stays
// nil.
func NotFound(err error, kind *errorsmod.Error, format string, args ...any) error {
	if errors.Is(err, collections.ErrNotFound) {
		return &causedError{wrapped: errorsmod.Wrapf(kind, format, args...), cause: err}
	}
	return err
}

// IsNotFound reports whether err says that something does not exist: a collections
// miss, or an error NotFound made from one.
func IsNotFound(err error) bool { return errors.Is(err, collections.ErrNotFound) }

// LookupStatus is the gRPC status of a query's failed lookup: NotFound when the thing
// does not exist, Internal for a store failure, with err's text.
func LookupStatus(err error) error {
	if IsNotFound(err) {
		return status.Error(codes.NotFound, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// Optional reads a value that may be absent: found is false only when get reports
// collections.ErrNotFound; every other error is returned.
func Optional[V any](v V, err error) (value V, found bool, _ error) {
	switch {
	case err == nil:
		return v, true, nil
	case errors.Is(err, collections.ErrNotFound):
		var zero V
		return zero, false, nil
	default:
		var zero V
		return zero, false, err
	}
}

// Respond is a message handler's answer: it emits the message's typed events, in order,
// and returns resp, or nil and the error when an event cannot be emitted.
func Respond[R any](ctx context.Context, resp *R, events ...proto.Message) (*R, error) {
	if err := Emit(ctx, events...); err != nil {
		return nil, err
	}
	return resp, nil
}

// Emit emits typed events, in order, on the context's event manager.
func Emit(ctx context.Context, events ...proto.Message) error {
	em := sdk.UnwrapSDKContext(ctx).EventManager()
	for _, ev := range events {
		if err := em.EmitTypedEvent(ev); err != nil {
			return err
		}
	}
	return nil
}

// Package simutil holds what the project's simulation operations share: signing and
// delivering a message as a simulated account, and the two outcomes an operation checks
// (a message built to succeed must succeed, one built to fail must fail with the error the
// module documents), plus small helpers for picking from chain state.
package simutil

import (
	"context"
	"fmt"
	"math/rand"
	"os"

	errorsmod "cosmossdk.io/errors"

	"github.com/cosmos/cosmos-sdk/baseapp"
	"github.com/cosmos/cosmos-sdk/client"
	simtestutil "github.com/cosmos/cosmos-sdk/testutil/sims"
	sdk "github.com/cosmos/cosmos-sdk/types"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"
)

// AccountKeeper reads the signer's account number and sequence.
type AccountKeeper interface {
	GetAccount(ctx context.Context, addr sdk.AccAddress) sdk.AccountI
}

// BankKeeper reads what a simulated account can spend.
type BankKeeper interface {
	SpendableCoins(ctx context.Context, addr sdk.AccAddress) sdk.Coins
}

// GasLimit is every simulated transaction's gas limit: enough for a referee step of the
// reference transformer at the simulation's most expensive params (gas_per_mac 2 over
// 9.4 M MACs and elements, gas_per_byte 3 over its 479 KB pre-state: about 25 M) and for
// the manifests the simulation registers.
const GasLimit = 40_000_000

// Op is one simulated operation call: the arguments the framework passes to a
// simtypes.Operation plus what signing needs.
type Op struct {
	R       *rand.Rand
	App     *baseapp.BaseApp
	Ctx     sdk.Context
	Accs    []simtypes.Account
	ChainID string

	TxGen  client.TxConfig
	AK     AccountKeeper
	BK     BankKeeper
	Module string
}

// traceEnv names the environment variable that makes every operation print its outcome
// (delivered, rejected as expected, or why it did nothing), for working on the
// simulation itself.
const traceEnv = "DEPINCHAIN_SIM_TRACE"

var trace = os.Getenv(traceEnv) != ""

func (o Op) trace(msg sdk.Msg, outcome, detail string) {
	if trace {
		fmt.Printf("SIMOP h=%d %s %s %s\n", o.Ctx.BlockHeight(), sdk.MsgTypeURL(msg), outcome, detail)
	}
}

// NoOp reports that the operation found nothing to do (its preconditions are missing).
func (o Op) NoOp(msg sdk.Msg, format string, args ...any) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
	reason := fmt.Sprintf(format, args...)
	o.trace(msg, "noop", reason)
	return simtypes.NoOpMsg(o.Module, sdk.MsgTypeURL(msg), reason), nil, nil
}

// Account returns the simulated account (with its key) of addr.
func (o Op) Account(addr string) (simtypes.Account, bool) {
	a, err := sdk.AccAddressFromBech32(addr)
	if err != nil {
		return simtypes.Account{}, false
	}
	return simtypes.FindAccount(o.Accs, a)
}

// Spendable is what acc can spend in denom.
func (o Op) Spendable(acc simtypes.Account, denom string) sdk.Coin {
	return sdk.NewCoin(denom, o.BK.SpendableCoins(o.Ctx, acc.Address).AmountOf(denom))
}

// Deliver signs msg as from and delivers it with random fees out of what is left after
// spent. The operation built msg to be valid, so a rejection is a failure of the run.
func (o Op) Deliver(from simtypes.Account, msg sdk.Msg, spent sdk.Coins) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
	spendable := o.BK.SpendableCoins(o.Ctx, from.Address)
	rest, neg := spendable.SafeSub(spent...)
	if neg {
		return o.NoOp(msg, "%s cannot pay %s (spendable %s)", from.Address, spent, spendable)
	}
	fees, err := simtypes.RandomFees(o.R, o.Ctx, rest)
	if err != nil {
		return o.NoOp(msg, "cannot draw fees: %s", err)
	}
	if err := o.deliver(from, msg, fees); err != nil {
		o.trace(msg, "FAILED", err.Error())
		return simtypes.NoOpMsg(o.Module, sdk.MsgTypeURL(msg), "valid message rejected"), nil,
			fmt.Errorf("%s from %s was built to succeed but failed: %w", sdk.MsgTypeURL(msg), from.Address, err)
	}
	o.trace(msg, "ok", "")
	return simtypes.NewOperationMsg(msg, true, ""), nil, nil
}

// DeliverInvalid delivers a message built to be rejected (without fees) and checks that
// it is rejected with want (any error when want is nil). Acceptance, or a different
// error, fails the run: the module let through something it documents refusing, or
// checked its rules in another order than documented.
func (o Op) DeliverInvalid(from simtypes.Account, msg sdk.Msg, want *errorsmod.Error, why string) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
	err := o.deliver(from, msg, nil)
	o.trace(msg, "invalid", fmt.Sprintf("%s: %v", why, err))
	if err == nil {
		return simtypes.NoOpMsg(o.Module, sdk.MsgTypeURL(msg), why), nil,
			fmt.Errorf("%s from %s should have been rejected (%s) but was accepted", sdk.MsgTypeURL(msg), from.Address, why)
	}
	if want != nil && !want.Is(err) {
		return simtypes.NoOpMsg(o.Module, sdk.MsgTypeURL(msg), why), nil,
			fmt.Errorf("%s from %s (%s) was rejected with %q, want %s/%d %q", sdk.MsgTypeURL(msg), from.Address, why, err, want.Codespace(), want.ABCICode(), want.Error())
	}
	// The framework counts OK operations as delivered; a rejected one is reported as not OK
	// with the reason, as the SDK's own operations do.
	return simtypes.NewOperationMsg(msg, false, "rejected as expected: "+why), nil, nil
}

func (o Op) deliver(from simtypes.Account, msg sdk.Msg, fees sdk.Coins) error {
	account := o.AK.GetAccount(o.Ctx, from.Address)
	if account == nil {
		return fmt.Errorf("account %s does not exist", from.Address)
	}
	tx, err := simtestutil.GenSignedMockTx(o.R, o.TxGen, []sdk.Msg{msg}, fees, GasLimit, o.ChainID,
		[]uint64{account.GetAccountNumber()}, []uint64{account.GetSequence()}, from.PrivKey)
	if err != nil {
		return err
	}
	_, _, err = o.App.SimDeliver(o.TxGen.TxEncoder(), tx)
	return err
}

// Pick returns a random element of xs; ok is false when xs is empty.
func Pick[T any](r *rand.Rand, xs []T) (x T, ok bool) {
	if len(xs) == 0 {
		return x, false
	}
	return xs[r.Intn(len(xs))], true
}

// Between returns a random integer in [lo, hi] (lo when hi < lo).
func Between(r *rand.Rand, lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	return lo + r.Int63n(hi-lo+1)
}

// Chance is true with probability percent/100.
func Chance(r *rand.Rand, percent int) bool { return r.Intn(100) < percent }

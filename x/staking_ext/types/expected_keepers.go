package types

import (
	"context"

	sdk "github.com/cosmos/cosmos-sdk/types"
)

// AccountKeeper is what x/stakingext needs from x/auth: its module account.
type AccountKeeper interface {
	GetModuleAddress(moduleName string) sdk.AccAddress
	// GetModuleAccount creates the module account on first use; InitGenesis relies on that.
	GetModuleAccount(ctx context.Context, moduleName string) sdk.ModuleAccountI
}

// BankKeeper moves bonds between operators and the module account.
type BankKeeper interface {
	SendCoinsFromAccountToModule(ctx context.Context, senderAddr sdk.AccAddress, recipientModule string, amt sdk.Coins) error
	SendCoinsFromModuleToAccount(ctx context.Context, senderModule string, recipientAddr sdk.AccAddress, amt sdk.Coins) error
	GetBalance(ctx context.Context, addr sdk.AccAddress, denom string) sdk.Coin
	// BlockedAddr tells which addresses may not receive funds; checking it up
	// front keeps an unbonding payout from failing in EndBlock.
	BlockedAddr(addr sdk.AccAddress) bool
}

// DistributionKeeper receives the part of a slash that does not go to a beneficiary.
type DistributionKeeper interface {
	FundCommunityPool(ctx context.Context, amount sdk.Coins, sender sdk.AccAddress) error
}

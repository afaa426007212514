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
	// SendCoinsFromModuleToModule hands a slash to the module that distributes it (x/verify).
	SendCoinsFromModuleToModule(ctx context.Context, senderModule, recipientModule string, amt sdk.Coins) error
	GetBalance(ctx context.Context, addr sdk.AccAddress, denom string) sdk.Coin
	// BlockedAddr tells which addresses may not receive funds; checking it up
	// front keeps an unbonding payout from failing in EndBlock.
	BlockedAddr(addr sdk.AccAddress) bool
}

// DistributionKeeper receives the part of a slash that does not go to a beneficiary.
type DistributionKeeper interface {
	FundCommunityPool(ctx context.Context, amount sdk.Coins, sender sdk.AccAddress) error
}

// SlashWindow is x/verify's side of the one rule spanning both modules' params: how many
// blocks an unbonding must stay slashable (its challenge window plus its longest
// dispute). x/verify is built after x/stakingext, so the app hands it over with
// Keeper.SetSlashWindow.
type SlashWindow interface {
	RequiredUnbondingBlocks(ctx context.Context) (uint64, error)
}

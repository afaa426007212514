package types

import (
	"math"

	"cosmossdk.io/core/address"
	errorsmod "cosmossdk.io/errors"
	sdkmath "cosmossdk.io/math"
)

// DefaultGenesis is an empty registry with default params. Unbonding ids
// start at 1 so that 0 never names an unbonding.
func DefaultGenesis() *GenesisState {
	return &GenesisState{
		Params:          DefaultParams(),
		NextUnbondingId: 1,
	}
}

// Validate checks a genesis state on its own: valid params, addresses and
// coins; one record per provider and per lock; every lock belongs to a
// provider and each provider's locked amount is the sum of its locks;
// unbonding ids are unique and below next_unbonding_id. The module account's
// balance is checked against the bonds in InitGenesis, where bank state is known.
func (gs GenesisState) Validate(addressCodec address.Codec) error {
	if err := gs.Params.Validate(); err != nil {
		return errorsmod.Wrapf(ErrInvalidGenesis, "params: %s", err)
	}
	bondDenom := gs.Params.BondDenom

	// lockSums[i] adds up the locks of gs.Providers[i]; providerIndex finds i by operator bytes.
	lockSums := make([]sdkmath.Int, len(gs.Providers))
	providerIndex := make(map[string]int, len(gs.Providers))
	for i, provider := range gs.Providers {
		operator, err := addressCodec.StringToBytes(provider.Operator)
		if err != nil {
			return errorsmod.Wrapf(ErrInvalidGenesis, "providers[%d]: operator %q: %s", i, provider.Operator, err)
		}
		if _, dup := providerIndex[string(operator)]; dup {
			return errorsmod.Wrapf(ErrInvalidGenesis, "providers[%d]: operator %s is registered twice", i, provider.Operator)
		}
		if err := validateGenesisProvider(provider, bondDenom); err != nil {
			return errorsmod.Wrapf(ErrInvalidGenesis, "providers[%d] (%s): %s", i, provider.Operator, err)
		}
		providerIndex[string(operator)] = i
		lockSums[i] = sdkmath.ZeroInt()
	}

	type lockKey struct{ operator, ref string }
	locks := make(map[lockKey]struct{}, len(gs.Locks))
	for i, lock := range gs.Locks {
		operator, err := addressCodec.StringToBytes(lock.Operator)
		if err != nil {
			return errorsmod.Wrapf(ErrInvalidGenesis, "locks[%d]: operator %q: %s", i, lock.Operator, err)
		}
		owner, found := providerIndex[string(operator)]
		if !found {
			return errorsmod.Wrapf(ErrInvalidGenesis, "locks[%d]: operator %s is not a provider", i, lock.Operator)
		}
		if err := ValidateLockRef(lock.Ref); err != nil {
			return errorsmod.Wrapf(ErrInvalidGenesis, "locks[%d]: %s", i, err)
		}
		if err := ValidateNonNegativeAmount("amount", lock.Amount, bondDenom); err != nil {
			return errorsmod.Wrapf(ErrInvalidGenesis, "locks[%d]: %s", i, err)
		}
		key := lockKey{operator: string(operator), ref: lock.Ref}
		if _, dup := locks[key]; dup {
			return errorsmod.Wrapf(ErrInvalidGenesis, "locks[%d]: %s already has a lock %q", i, lock.Operator, lock.Ref)
		}
		locks[key] = struct{}{}
		lockSums[owner] = lockSums[owner].Add(lock.Amount.Amount)
	}
	for i, provider := range gs.Providers {
		if !provider.Locked.Amount.Equal(lockSums[i]) {
			return errorsmod.Wrapf(ErrInvalidGenesis, "providers[%d] (%s): locked is %s but its locks add up to %s",
				i, provider.Operator, provider.Locked.Amount, lockSums[i])
		}
	}

	unbondingIDs := make(map[uint64]struct{}, len(gs.Unbondings))
	for i, unbonding := range gs.Unbondings {
		if unbonding.Id >= gs.NextUnbondingId {
			return errorsmod.Wrapf(ErrInvalidGenesis, "unbondings[%d]: id %d is not below next_unbonding_id %d", i, unbonding.Id, gs.NextUnbondingId)
		}
		if _, dup := unbondingIDs[unbonding.Id]; dup {
			return errorsmod.Wrapf(ErrInvalidGenesis, "unbondings[%d]: id %d is used twice", i, unbonding.Id)
		}
		unbondingIDs[unbonding.Id] = struct{}{}
		if _, err := addressCodec.StringToBytes(unbonding.Operator); err != nil {
			return errorsmod.Wrapf(ErrInvalidGenesis, "unbondings[%d]: operator %q: %s", i, unbonding.Operator, err)
		}
		if err := ValidatePositiveAmount("amount", unbonding.Amount, bondDenom); err != nil {
			return errorsmod.Wrapf(ErrInvalidGenesis, "unbondings[%d]: %s", i, err)
		}
		if _, err := CompletionTimeKey(unbonding.CompletionTime); err != nil {
			return errorsmod.Wrapf(ErrInvalidGenesis, "unbondings[%d]: %s", i, err)
		}
		if unbonding.CompletionHeight < 0 || unbonding.CreationHeight < 0 {
			return errorsmod.Wrapf(ErrInvalidGenesis, "unbondings[%d]: negative creation or completion height", i)
		}
		if _, ok := UnbondingRole_name[int32(unbonding.Role)]; !ok {
			return errorsmod.Wrapf(ErrInvalidGenesis, "unbondings[%d]: unknown role %d", i, unbonding.Role)
		}
	}
	return gs.validateVerifiers(addressCodec)
}

// validateVerifiers checks the verifier records and the audit set: one record per
// operator with a valid bond and status, and the set lists every ACTIVE verifier exactly
// once and nothing else.
func (gs GenesisState) validateVerifiers(addressCodec address.Codec) error {
	active := map[string]bool{}
	seen := map[string]bool{}
	for i, v := range gs.Verifiers {
		operator, err := addressCodec.StringToBytes(v.Operator)
		if err != nil {
			return errorsmod.Wrapf(ErrInvalidGenesis, "verifiers[%d]: operator %q: %s", i, v.Operator, err)
		}
		if seen[string(operator)] {
			return errorsmod.Wrapf(ErrInvalidGenesis, "verifiers[%d]: operator %s is registered twice", i, v.Operator)
		}
		seen[string(operator)] = true
		if err := ValidateNonNegativeAmount("bond", v.Bond, gs.Params.BondDenom); err != nil {
			return errorsmod.Wrapf(ErrInvalidGenesis, "verifiers[%d]: %s", i, err)
		}
		switch v.Status {
		case VERIFIER_STATUS_ACTIVE:
			active[string(operator)] = true
		case VERIFIER_STATUS_INACTIVE, VERIFIER_STATUS_TOMBSTONED:
		default:
			return errorsmod.Wrapf(ErrInvalidGenesis, "verifiers[%d]: status %s is not a verifier status", i, v.Status)
		}
	}
	inSet := map[string]bool{}
	for i, member := range gs.AuditSet {
		operator, err := addressCodec.StringToBytes(member)
		if err != nil {
			return errorsmod.Wrapf(ErrInvalidGenesis, "audit_set[%d]: %q: %s", i, member, err)
		}
		if !active[string(operator)] {
			return errorsmod.Wrapf(ErrInvalidGenesis, "audit_set[%d]: %s is not an active verifier", i, member)
		}
		if inSet[string(operator)] {
			return errorsmod.Wrapf(ErrInvalidGenesis, "audit_set[%d]: %s is listed twice", i, member)
		}
		inSet[string(operator)] = true
	}
	if len(inSet) != len(active) {
		return errorsmod.Wrapf(ErrInvalidGenesis, "audit_set lists %d verifiers but %d are active", len(inSet), len(active))
	}
	return nil
}

// validateGenesisProvider checks one provider record. The GPU class count is
// not held to the current max_gpu_classes: governance may have lowered it
// after the provider registered, and an export must still import.
func validateGenesisProvider(provider Provider, bondDenom string) error {
	if err := ValidateDescription(provider.Moniker, provider.Endpoint, provider.Region); err != nil {
		return err
	}
	if err := ValidateGPUs(provider.Gpus, math.MaxUint32); err != nil {
		return err
	}
	if err := ValidateNonNegativeAmount("bond", provider.Bond, bondDenom); err != nil {
		return err
	}
	if err := ValidateNonNegativeAmount("locked", provider.Locked, bondDenom); err != nil {
		return err
	}
	switch provider.Status {
	case PROVIDER_STATUS_ACTIVE, PROVIDER_STATUS_JAILED, PROVIDER_STATUS_TOMBSTONED:
		return nil
	default:
		return errorsmod.Wrapf(ErrInvalidGenesis, "status %s is not a provider status", provider.Status)
	}
}

package daemon

import (
	"context"
	"fmt"

	"github.com/cosmos/cosmos-sdk/x/authz"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/storage"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardregistrytypes "github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// stateReaders is who may read a checkpoint state, whole (the trainer's checkpoint
// server) or as custody pieces (a holder's piece server), as the chain has it: the
// job's owner, and anyone bonded in x/stakingext — a provider (the job's workers, the
// storage holders and those about to become holders or replacement workers, who must
// read before the chain knows them), a verifier (the auditors, a verifier-mode
// challenger), or the hot key of either (an authz grantee of one: sidecars sign with
// their hot key). An outsider has to bond to read.
type stateReaders struct{ conn grpc.ClientConnInterface }

// MayRead is the policy for the pieces of custody object datasetID (storage.PieceReaders).
func (c stateReaders) MayRead(ctx context.Context, reader, datasetID string) error {
	ds, err := shardregistrytypes.NewQueryClient(c.conn).Dataset(ctx, &shardregistrytypes.QueryDatasetRequest{DatasetId: datasetID})
	if err != nil {
		return err
	}
	return c.mayRead(ctx, reader, ds.Dataset.Owner, storage.ErrNotAReader)
}

// MayReadState is the policy for the states of a lease's checkpoints
// (checkpoint.StateReaders).
func (c stateReaders) MayReadState(ctx context.Context, reader string, leaseID uint64) error {
	market := markettypes.NewQueryClient(c.conn)
	l, err := market.Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: leaseID})
	if status.Code(err) == codes.NotFound {
		return fmt.Errorf("lease %d: %w", leaseID, checkpoint.ErrNotAStateReader)
	} else if err != nil {
		return err
	}
	j, err := market.Job(ctx, &markettypes.QueryJobRequest{JobId: l.Lease.JobId})
	if err != nil {
		return err
	}
	return c.mayRead(ctx, reader, j.Job.Owner, checkpoint.ErrNotAStateReader)
}

// mayRead lets owner and the bonded read; forbidden is the error of everyone else.
func (c stateReaders) mayRead(ctx context.Context, reader, owner string, forbidden error) error {
	if owner == reader {
		return nil
	}
	staking := stakingexttypes.NewQueryClient(c.conn)
	if ok, err := found(staking.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: reader})); ok || err != nil {
		return err
	}
	if ok, err := found(staking.Verifier(ctx, &stakingexttypes.QueryVerifierRequest{Operator: reader})); ok || err != nil {
		return err
	}
	grants, err := authz.NewQueryClient(c.conn).GranteeGrants(ctx, &authz.QueryGranteeGrantsRequest{Grantee: reader})
	if err != nil {
		return err
	}
	for _, g := range grants.Grants {
		if ok, err := found(staking.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: g.Granter})); ok || err != nil {
			return err
		}
		if ok, err := found(staking.Verifier(ctx, &stakingexttypes.QueryVerifierRequest{Operator: g.Granter})); ok || err != nil {
			return err
		}
	}
	return fmt.Errorf("%s %w: it is neither the job's owner nor bonded in x/stakingext (a provider or a verifier, or the hot key of one)",
		reader, forbidden)
}

// found turns a query's answer into "exists": NotFound is false with no error.
func found[T any](_ T, err error) (bool, error) {
	if status.Code(err) == codes.NotFound {
		return false, nil
	}
	return err == nil, err
}

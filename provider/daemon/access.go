package daemon

import (
	"context"
	"fmt"

	"github.com/cosmos/cosmos-sdk/x/authz"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/depinchain/depinchain/provider/storage"
	shardregistrytypes "github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// custodyReaders is who may read a checkpoint state's pieces, as the chain has it: the
// job's owner, and anyone bonded in x/stakingext — a provider (the job's workers, the
// storage holders and those about to become holders or replacement workers, who must
// read before the chain knows them), a provider's hot key (an authz grantee of one), or
// a verifier (the auditors). An outsider has to bond to read.
type custodyReaders struct{ conn grpc.ClientConnInterface }

func (c custodyReaders) MayRead(ctx context.Context, reader, datasetID string) error {
	ds, err := shardregistrytypes.NewQueryClient(c.conn).Dataset(ctx, &shardregistrytypes.QueryDatasetRequest{DatasetId: datasetID})
	if err != nil {
		return err
	}
	if ds.Dataset.Owner == reader {
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
	}
	return fmt.Errorf("%s %w: it is neither the job's owner nor bonded in x/stakingext (a provider, a provider's hot key or a verifier)",
		reader, storage.ErrNotAReader)
}

// found turns a query's answer into "exists": NotFound is false with no error.
func found[T any](_ T, err error) (bool, error) {
	if status.Code(err) == codes.NotFound {
		return false, nil
	}
	return err == nil, err
}

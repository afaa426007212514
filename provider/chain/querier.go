package chain

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	codectypes "github.com/cosmos/cosmos-sdk/codec/types"
	sdk "github.com/cosmos/cosmos-sdk/types"
	grpctypes "github.com/cosmos/cosmos-sdk/types/grpc"
	"github.com/cosmos/cosmos-sdk/types/query"
	"github.com/cosmos/cosmos-sdk/x/authz"

	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// RequiredGrants are the messages the hot key sends on the operator's behalf,
// each needing an authz grant from the operator. (MsgRespond is a
// challenger's move; a provider never sends it. MsgClaimTimeout ends a game
// whose challenger missed its deadline without waiting for the end blocker.)
var RequiredGrants = []string{
	sdk.MsgTypeURL(&markettypes.MsgPlaceBid{}),
	sdk.MsgTypeURL(&markettypes.MsgWithdrawBid{}),
	sdk.MsgTypeURL(&markettypes.MsgWithdrawEarnings{}),
	sdk.MsgTypeURL(&markettypes.MsgCommitRound{}),
	sdk.MsgTypeURL(&markettypes.MsgCommitGlobal{}),
	sdk.MsgTypeURL(&verifytypes.MsgSubmitCheckpoint{}),
	sdk.MsgTypeURL(&verifytypes.MsgRevealHash{}),
	sdk.MsgTypeURL(&verifytypes.MsgStep{}),
	sdk.MsgTypeURL(&verifytypes.MsgClaimTimeout{}),
	sdk.MsgTypeURL(&verifytypes.MsgCommitRecords{}),
	sdk.MsgTypeURL(&verifytypes.MsgRevealNode{}),
	sdk.MsgTypeURL(&verifytypes.MsgOpenRecord{}),
	sdk.MsgTypeURL(&verifytypes.MsgRevealChunk{}),
	// A training-together worker checks the other workers' rounds (the rounds role) and
	// answers the file queries on its own.
	sdk.MsgTypeURL(&verifytypes.MsgProveRoundFault{}),
	sdk.MsgTypeURL(&verifytypes.MsgOpenFileQuery{}),
	sdk.MsgTypeURL(&verifytypes.MsgDescendFileQuery{}),
	sdk.MsgTypeURL(&verifytypes.MsgAnswerFileQuery{}),
}

// Querier reads chain state over gRPC.
type Querier struct {
	market markettypes.QueryClient
	authz  authz.QueryClient
	// registry decodes the authorizations inside grants.
	registry codectypes.InterfaceRegistry
	// pageSize is how many items each page of a listing query asks for.
	pageSize uint64
}

// NewQuerier returns a Querier on a connection from DialGRPC; registry comes
// from NewEncodingConfig.
func NewQuerier(conn grpc.ClientConnInterface, registry codectypes.InterfaceRegistry) *Querier {
	return &Querier{
		market:   markettypes.NewQueryClient(conn),
		authz:    authz.NewQueryClient(conn),
		registry: registry,
		pageSize: 100,
	}
}

// Snapshot is the chain's view of the provider's world at one height, read
// at start-up to reconcile the store with what happened while the sidecar
// was away.
type Snapshot struct {
	// Height is the height every list was read at.
	Height int64
	// OpenJobs are all jobs taking bids, in id order.
	OpenJobs []markettypes.Job
	// ActiveLeases are the operator's active leases, in id order.
	ActiveLeases []markettypes.Lease
}

// Reconcile reads the open jobs and the operator's active leases. Every page
// of both listings is read at the same height (the first response's), so
// the two lists agree with each other even while blocks are committed.
func (q *Querier) Reconcile(ctx context.Context, operator string) (*Snapshot, error) {
	snap := &Snapshot{}
	var header metadata.MD
	first, err := q.market.Jobs(ctx, &markettypes.QueryJobsRequest{
		State:      markettypes.JOB_STATE_OPEN,
		Pagination: &query.PageRequest{Limit: q.pageSize},
	}, grpc.Header(&header))
	if err != nil {
		return nil, fmt.Errorf("listing open jobs: %w", err)
	}
	if snap.Height, err = blockHeight(header); err != nil {
		return nil, err
	}
	atHeight := metadata.AppendToOutgoingContext(ctx, grpctypes.GRPCBlockHeightHeader, strconv.FormatInt(snap.Height, 10))

	snap.OpenJobs = first.Jobs
	for next := first.Pagination.GetNextKey(); len(next) > 0; {
		page, err := q.market.Jobs(atHeight, &markettypes.QueryJobsRequest{
			State:      markettypes.JOB_STATE_OPEN,
			Pagination: &query.PageRequest{Key: next, Limit: q.pageSize},
		})
		if err != nil {
			return nil, fmt.Errorf("listing open jobs at height %d: %w", snap.Height, err)
		}
		snap.OpenJobs = append(snap.OpenJobs, page.Jobs...)
		next = page.Pagination.GetNextKey()
	}

	for next := []byte(nil); ; {
		page, err := q.market.Leases(atHeight, &markettypes.QueryLeasesRequest{
			Provider:   operator,
			ActiveOnly: true,
			Pagination: &query.PageRequest{Key: next, Limit: q.pageSize},
		})
		if err != nil {
			return nil, fmt.Errorf("listing active leases of %s at height %d: %w", operator, snap.Height, err)
		}
		snap.ActiveLeases = append(snap.ActiveLeases, page.Leases...)
		if next = page.Pagination.GetNextKey(); len(next) == 0 {
			break
		}
	}
	return snap, nil
}

func blockHeight(header metadata.MD) (int64, error) {
	values := header.Get(grpctypes.GRPCBlockHeightHeader)
	if len(values) == 0 {
		return 0, fmt.Errorf("node did not report the query's height (%s header)", grpctypes.GRPCBlockHeightHeader)
	}
	h, err := strconv.ParseInt(values[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("node reported query height %q: %w", values[0], err)
	}
	return h, nil
}

// CheckGrants reports which of msgTypeURLs the operator has not granted to
// grantee (or granted with an expiry already passed), in the order asked, so
// a caller can name exactly what the operator still has to grant.
func (q *Querier) CheckGrants(ctx context.Context, operator, grantee string, msgTypeURLs []string) ([]string, error) {
	granted := map[string]bool{}
	now := time.Now()
	for next := []byte(nil); ; {
		resp, err := q.authz.Grants(ctx, &authz.QueryGrantsRequest{
			Granter:    operator,
			Grantee:    grantee,
			Pagination: &query.PageRequest{Key: next, Limit: q.pageSize},
		})
		if err != nil {
			return nil, fmt.Errorf("listing grants from %s to %s: %w", operator, grantee, err)
		}
		for _, g := range resp.Grants {
			if g.Expiration != nil && !g.Expiration.After(now) {
				continue
			}
			// An authorization type this binary does not know (some other
			// module's) cannot be one of the generic grants asked about.
			if err := g.UnpackInterfaces(q.registry); err != nil {
				continue
			}
			auth, err := g.GetAuthorization()
			if err != nil {
				continue
			}
			granted[auth.MsgTypeURL()] = true
		}
		if next = resp.Pagination.GetNextKey(); len(next) == 0 {
			break
		}
	}
	var missing []string
	for _, url := range msgTypeURLs {
		if !granted[url] {
			missing = append(missing, url)
		}
	}
	return missing, nil
}

// Queries are the generated query clients of the modules the sidecar reads,
// on one connection. A role takes a narrow interface of the queries it
// makes; Queries satisfies each of them.
type Queries struct {
	marketQueries
	verifyQueries
}

type (
	marketQueries = markettypes.QueryClient
	verifyQueries = verifytypes.QueryClient
)

// NewQueries returns the query clients on conn.
func NewQueries(conn grpc.ClientConnInterface) Queries {
	return Queries{marketQueries: markettypes.NewQueryClient(conn), verifyQueries: verifytypes.NewQueryClient(conn)}
}

// VerifyParams reads x/verify's params (Queries.Params would be ambiguous:
// x/market has one too).
func (q Queries) VerifyParams(ctx context.Context, in *verifytypes.QueryParamsRequest, opts ...grpc.CallOption) (*verifytypes.QueryParamsResponse, error) {
	return q.verifyQueries.Params(ctx, in, opts...)
}

// One interface per query a role makes, so a role can name exactly the
// queries it needs (composing them into its Chain); the generated query
// clients and Queries satisfy them.
type (
	JobQuerier interface {
		Job(ctx context.Context, in *markettypes.QueryJobRequest, opts ...grpc.CallOption) (*markettypes.QueryJobResponse, error)
	}
	LeaseQuerier interface {
		Lease(ctx context.Context, in *markettypes.QueryLeaseRequest, opts ...grpc.CallOption) (*markettypes.QueryLeaseResponse, error)
	}
	LeasesQuerier interface {
		Leases(ctx context.Context, in *markettypes.QueryLeasesRequest, opts ...grpc.CallOption) (*markettypes.QueryLeasesResponse, error)
	}
	CheckpointQuerier interface {
		Checkpoint(ctx context.Context, in *verifytypes.QueryCheckpointRequest, opts ...grpc.CallOption) (*verifytypes.QueryCheckpointResponse, error)
	}
	CheckpointsQuerier interface {
		Checkpoints(ctx context.Context, in *verifytypes.QueryCheckpointsRequest, opts ...grpc.CallOption) (*verifytypes.QueryCheckpointsResponse, error)
	}
	VerifyParamsQuerier interface {
		VerifyParams(ctx context.Context, in *verifytypes.QueryParamsRequest, opts ...grpc.CallOption) (*verifytypes.QueryParamsResponse, error)
	}
	ChallengeQuerier interface {
		Challenge(ctx context.Context, in *verifytypes.QueryChallengeRequest, opts ...grpc.CallOption) (*verifytypes.QueryChallengeResponse, error)
	}
	ChallengesQuerier interface {
		Challenges(ctx context.Context, in *verifytypes.QueryChallengesRequest, opts ...grpc.CallOption) (*verifytypes.QueryChallengesResponse, error)
	}
	AuditsQuerier interface {
		Audits(ctx context.Context, in *verifytypes.QueryAuditsRequest, opts ...grpc.CallOption) (*verifytypes.QueryAuditsResponse, error)
	}
)

// Package storage is the provider sidecar's storage role: it holds pieces of
// datasets registered in x/shardregistry and keeps proving it does.
//
// A Role
//   - claims open slots of pieces whose files it finds under its pieces
//     folder (<pieces dir>/<dataset id>/pieces/sSSSSSS-pPPP.piece, the layout
//     `depinchaind dataset build --out` writes), proving the current period's
//     challenge from the file as `depinchaind tx shardregistry claim-replica`
//     does;
//   - answers every storage challenge of every replica the operator holds as
//     soon as its seed block is committed, well before its deadline, with the
//     challenged chunks and their Merkle proofs, each checked against the
//     registered root before it is sent;
//   - hashes every held piece file in full every check interval, and declares
//     a fault (MsgDeclareFault: a small slash, the slot reopens at once) for a
//     piece it finds missing or corrupt, rather than missing deadlines (a
//     larger slash each, then termination anyway);
//   - with Repair on, claims open repair slots: it rebuilds the piece from k
//     other pieces of its shard (manifest.Rebuild, then re-encodes), taken from
//     local files or downloaded from the holders' sidecars (NewPieceHandler,
//     at the endpoint each provider registered) and checked against their
//     roots; with Repair on it also rebuilds its own lost piece that way
//     before falling back to declaring a fault.
//
// The daemon feeds it every typed event (HandleEvent, which never blocks and
// never touches the network or the store) and runs its worker (Run), which
// reconciles with the chain at start and polls the height between events, so
// a missed event delays the role but never misleads it.
package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/bech32"
	grpctypes "github.com/cosmos/cosmos-sdk/types/grpc"

	"github.com/depinchain/depinchain/pkg/custody/fetch"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/pieces"
	"github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// RequiredGrants are the messages the storage role sends on the operator's
// behalf; with a hot key, each needs an authz grant from the operator.
var RequiredGrants = []string{
	sdk.MsgTypeURL(&types.MsgClaimReplica{}),
	sdk.MsgTypeURL(&types.MsgSubmitStorageProof{}),
	sdk.MsgTypeURL(&types.MsgDeclareFault{}),
	// A custody repair that finds a trainer's parity wrong proves it (parity.go).
	sdk.MsgTypeURL(&verifytypes.MsgProveParityFault{}),
}

// Defaults of Options.
const (
	DefaultCheckInterval = time.Hour
	DefaultPollInterval  = 2 * time.Second
	DefaultFetchTimeout  = 2 * time.Minute
)

// Options configure a Role.
type Options struct {
	// Operator is the bech32 provider address that holds the replicas and
	// that every message is signed for.
	Operator string
	// Submit sends one message and waits until it is in a block (the
	// daemon's serialised, authz-aware submitter). A message the chain
	// refuses returns a *chain.TxError.
	Submit chain.SubmitFunc
	// Conn is a gRPC connection to the node, for queries.
	Conn grpc.ClientConnInterface
	// PiecesDir holds the piece files: <PiecesDir>/<dataset id>/pieces/...
	PiecesDir string
	// ClaimLocal claims open slots of pieces found under PiecesDir: at start,
	// when a dataset is registered and when a slot reopens.
	ClaimLocal bool
	// Repair claims open repair slots of pieces not held locally by
	// rebuilding them from other pieces, and rebuilds the operator's own lost
	// pieces before declaring them faulty.
	Repair bool
	// RepairDatasets limits Repair to these dataset ids; empty means any.
	RepairDatasets []string
	// Custody holds pieces of checkpoint states (x/shardregistry custody objects): when
	// one is registered, or a slot of one reopens, the role fetches an open piece from
	// the trainer (or rebuilds it from k other pieces), checks it against its root and
	// claims it. A state it trained itself is never taken.
	Custody bool
	// CheckInterval is how often every held piece file is hashed in full, and
	// open slots are listed again in case an event was missed (default 1h).
	CheckInterval time.Duration
	// PollInterval is how often the chain height is read between events
	// (default 2s); HandleEvent wakes the worker earlier.
	PollInterval time.Duration
	// Fetch downloads a piece from another holder; nil uses
	// pieces.HTTPFetcher with http.DefaultClient and DefaultFetchTimeout.
	Fetch pieces.Fetcher
	// Authorize signs the default fetcher's requests (pkg/reqauth): holders serve the
	// pieces of checkpoint states only to signed requests of parties allowed to read them.
	Authorize func(*http.Request) error
	// DB keeps the role's records (db.StorageReplicaRecord).
	DB *db.DB
	// Logger receives the role's logs; nil discards them.
	Logger *slog.Logger
}

// Role is the storage role of one operator. Create it with New, feed it
// events with HandleEvent and run it with Run.
type Role struct {
	opts  Options
	log   *slog.Logger
	query types.QueryClient
	// download gets pieces from other holders, checked against their roots.
	download pieces.Downloader
	// custody streams checkpoint states' pieces from the trainer and the holders.
	custody fetch.Fetcher

	running atomic.Bool
	// wake wakes the answering loop; repairWake the slot-filling loop.
	wake, repairWake chan struct{}
	// claimMu serialises claims: ClaimLocal may be called beside Run.
	claimMu sync.Mutex

	mu          sync.Mutex
	params      types.Params
	haveParams  bool
	height      int64 // latest chain height read
	eventHeight int64 // latest height HandleEvent saw
	notes       []heightEvent
	resync      bool // notes overflowed: reconcile instead
	held        map[uint64]*heldReplica
	records     map[uint64]db.StorageReplicaRecord
	candidates  map[slotKey]struct{}
	retryAt     map[slotKey]time.Time
	scan        map[string]bool // datasets to look for local pieces of
	shards      map[shardKey]*shardInfo
	counters    processCounters
	lastErr     string
	lastCheck   time.Time
}

// heldReplica is a replica the operator holds, as the role last read it.
type heldReplica struct {
	rep types.Replica
	// stale means rep's schedule may be out of date: read it again.
	stale bool
	// provedPeriod is the newest period this sidecar's proof was accepted
	// for (valid while proved), so a period is never answered twice.
	proved       bool
	provedPeriod uint64
	// busy is set while the piece is being restored or declared faulty.
	busy    bool
	checked time.Time
	problem string
}

// slotKey names a piece of a dataset.
type slotKey struct {
	dataset      string
	shard, piece uint32
}

type shardKey struct {
	dataset string
	shard   uint32
}

// processCounters count what happened since the process started.
type processCounters struct {
	repairFailures, restores, txErrors, checks uint64
}

// maxNotes bounds the events queued for the worker; past it the worker
// reconciles with the chain instead of replaying them.
const maxNotes = 10000

// maxCandidates bounds the slots queued to fill; the rest are found again
// by the next listing.
const maxCandidates = 10000

// Name implements the daemon's Role.
func (*Role) Name() string { return "storage" }

// New checks opts and prepares a Role; nothing is sent until Run.
func New(opts Options) (*Role, error) {
	if _, _, err := bech32.DecodeAndConvert(opts.Operator); err != nil {
		return nil, fmt.Errorf("storage role: operator %q is not a bech32 address: %w", opts.Operator, err)
	}
	switch {
	case opts.Submit == nil:
		return nil, errors.New("storage role: no submitter")
	case opts.Conn == nil:
		return nil, errors.New("storage role: no gRPC connection")
	case opts.DB == nil:
		return nil, errors.New("storage role: no database")
	case opts.PiecesDir == "":
		return nil, errors.New("storage role: no pieces folder")
	}
	for _, id := range opts.RepairDatasets {
		if err := types.ValidateDatasetID(id); err != nil {
			return nil, fmt.Errorf("storage role: repair dataset %q: %w", id, err)
		}
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Role{
		opts:       opts,
		log:        opts.Logger.With("component", "storage"),
		query:      types.NewQueryClient(opts.Conn),
		wake:       make(chan struct{}, 1),
		repairWake: make(chan struct{}, 1),
		held:       map[uint64]*heldReplica{},
		records:    map[uint64]db.StorageReplicaRecord{},
		candidates: map[slotKey]struct{}{},
		retryAt:    map[slotKey]time.Time{},
		scan:       map[string]bool{},
		shards:     map[shardKey]*shardInfo{},
	}
	r.download = pieces.Downloader{Endpoints: pieces.NewEndpoints(stakingexttypes.NewQueryClient(opts.Conn)), Fetch: opts.Fetch}
	if r.download.Fetch == nil {
		r.download.Fetch = pieces.SignedHTTPFetcher(nil, DefaultFetchTimeout, opts.Authorize)
	}
	r.custody = newCustodyFetcher(r.download.Endpoints, opts.Authorize)
	return r, nil
}

// Run is the role's worker. It reconciles with the chain (retrying while
// the node is unreachable), then answers challenges, checks piece files and
// fills slots until ctx ends. It returns nil after ctx ends, or an error
// no retry can fix (the pieces folder or the store is unusable).
func (r *Role) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("storage role: already running")
	}
	defer r.running.Store(false)
	if err := os.MkdirAll(r.opts.PiecesDir, 0o755); err != nil {
		return fmt.Errorf("storage role: pieces folder: %w", err)
	}
	if err := r.loadRecords(); err != nil {
		return fmt.Errorf("storage role: reading the store: %w", err)
	}
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		err := r.reconcile(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		r.noteError("reconciling with the chain", err)
		if !sleep(ctx, wait) {
			return nil
		}
	}
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){r.answerLoop, r.checkLoop, r.slotLoop} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(ctx)
		}()
	}
	wg.Wait()
	return nil
}

// loadRecords reads the role's records into memory for Status.
func (r *Role) loadRecords() error {
	return r.opts.DB.View(func(tx *db.Tx) error {
		recs, err := tx.StorageReplicas()
		if err != nil {
			return err
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, rec := range recs {
			r.records[rec.ReplicaID] = rec
		}
		return nil
	})
}

// reconcile reads the operator's active replicas and the open slots worth
// filling from the chain, and settles records the chain has moved past
// (replicas that ended while the sidecar was away).
func (r *Role) reconcile(ctx context.Context) error {
	if _, err := r.readHeight(ctx); err != nil {
		return err
	}
	var active []types.Replica
	req := &types.QueryReplicasRequest{Holder: r.opts.Operator, ActiveOnly: true}
	for {
		res, err := r.query.Replicas(ctx, req)
		if err != nil {
			return fmt.Errorf("listing the operator's replicas: %w", err)
		}
		active = append(active, res.Replicas...)
		if res.Pagination == nil || len(res.Pagination.NextKey) == 0 {
			break
		}
		req.Pagination = nextPage(res.Pagination.NextKey)
	}

	r.mu.Lock()
	held := make(map[uint64]*heldReplica, len(active))
	for _, rep := range active {
		h := r.held[rep.Id]
		if h == nil {
			h = &heldReplica{}
		}
		h.rep, h.stale = rep, false
		held[rep.Id] = h
	}
	r.held = held
	var gone []uint64
	for id, rec := range r.records {
		if _, ok := held[id]; !ok && rec.Status == db.StorageReplicaActive {
			gone = append(gone, id)
		}
	}
	r.mu.Unlock()

	err := r.withRecords(func(rt *recordTx) error {
		for _, rep := range active {
			if err := rt.mergeChain(rep); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range gone {
		if err := r.settle(ctx, id); err != nil {
			return err
		}
	}
	if r.opts.ClaimLocal {
		if err := r.queueLocalDatasets(); err != nil {
			r.noteError("listing the pieces folder", err)
		}
	}
	if r.opts.Repair || r.opts.Custody {
		if err := r.queueRepairSlots(ctx); err != nil {
			r.noteError("listing repair slots", err)
		}
	}
	r.log.Info("storage role reconciled", "replicas", len(active), "ended_while_away", len(gone),
		"claim_local", r.opts.ClaimLocal, "repair", r.opts.Repair)
	poke(r.repairWake)
	return nil
}

// settle reads a replica the operator no longer actively holds and records
// how it ended.
func (r *Role) settle(ctx context.Context, id uint64) error {
	res, err := r.query.Replica(ctx, &types.QueryReplicaRequest{ReplicaId: id})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("reading replica %d: %w", id, err)
	}
	return r.withRecords(func(rt *recordTx) error {
		switch {
		case err != nil: // released replicas are deleted
			if _, ok, err := rt.get(id); err != nil || !ok {
				return err
			}
			return rt.end(id, db.StorageReplicaReleased, "", 0)
		case res.Replica.Holder != r.opts.Operator:
			return nil
		}
		return rt.mergeChain(res.Replica)
	})
}

// readHeight reads the module's params and, from the response's header, the
// chain's latest height.
func (r *Role) readHeight(ctx context.Context) (int64, error) {
	var header metadata.MD
	res, err := r.query.Params(ctx, &types.QueryParamsRequest{}, grpc.Header(&header))
	if err != nil {
		return 0, fmt.Errorf("reading shardregistry params: %w", err)
	}
	values := header.Get(grpctypes.GRPCBlockHeightHeader)
	if len(values) == 0 {
		return 0, fmt.Errorf("node did not report the query's height (%s header)", grpctypes.GRPCBlockHeightHeader)
	}
	height, err := strconv.ParseInt(values[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("node reported query height %q: %w", values[0], err)
	}
	r.mu.Lock()
	r.params, r.haveParams = res.Params, true
	r.height = max(r.height, height)
	r.mu.Unlock()
	return height, nil
}

// waitPast waits until the chain is past height.
func (r *Role) waitPast(ctx context.Context, height int64) error {
	for {
		h, err := r.readHeight(ctx)
		if err == nil && h > height {
			return nil
		}
		if !sleep(ctx, r.opts.PollInterval) {
			return ctx.Err()
		}
	}
}

// submit sends msg and counts failures.
func (r *Role) submit(ctx context.Context, msg sdk.Msg) (*chain.TxResult, error) {
	res, err := r.opts.Submit(ctx, msg)
	if err != nil {
		r.mu.Lock()
		r.counters.txErrors++
		r.mu.Unlock()
	}
	return res, err
}

func (r *Role) noteError(what string, err error) {
	r.log.Warn(what+" failed", "err", err)
	r.mu.Lock()
	r.lastErr = what + ": " + err.Error()
	r.mu.Unlock()
}

// Status is a snapshot of the storage role for the status API.
type Status struct {
	Operator   string `json:"operator"`
	PiecesDir  string `json:"pieces_dir"`
	ClaimLocal bool   `json:"claim_local"`
	Repair     bool   `json:"repair"`
	Running    bool   `json:"running"`
	// Height is the latest chain height the role read.
	Height int64 `json:"height"`
	// Pieces are the replicas the operator holds now, in id order.
	Pieces   []PieceStatus `json:"pieces"`
	Counters Counters      `json:"counters"`
	// LastCheck is when every held piece file was last hashed in full.
	LastCheck time.Time `json:"last_check,omitzero"`
	LastError string    `json:"last_error,omitempty"`
}

// PieceStatus is one held replica.
type PieceStatus struct {
	ReplicaID uint64 `json:"replica_id"`
	DatasetID string `json:"dataset_id"`
	Shard     uint32 `json:"shard"`
	Piece     uint32 `json:"piece"`
	File      string `json:"file"`
	// NextPeriod is the period whose challenge is owed next, due by NextDeadline.
	NextPeriod   uint64 `json:"next_period"`
	NextSeed     int64  `json:"next_seed_height"`
	NextDeadline int64  `json:"next_deadline"`
	// Answered and Missed count this replica's accepted proofs (the claim
	// not included) and missed deadlines.
	Answered uint64 `json:"answered"`
	Missed   uint64 `json:"missed"`
	Repaired bool   `json:"repaired"`
	// LastChecked is when the file was last hashed in full; Problem is what
	// is wrong with it, if anything.
	LastChecked time.Time `json:"last_checked,omitzero"`
	Problem     string    `json:"problem,omitempty"`
}

// Counters are totals for metrics. Those kept in the store (everything but
// RepairFailures, Restores, TxErrors and Checks) survive restarts; all only grow,
// except PiecesHeld.
type Counters struct {
	PiecesHeld         int    `json:"pieces_held"`
	Claims             uint64 `json:"claims"`
	ChallengesAnswered uint64 `json:"challenges_answered"`
	ChallengesMissed   uint64 `json:"challenges_missed"`
	FaultsDeclared     uint64 `json:"faults_declared"`
	// Repairs are repair slots claimed by rebuilding the piece from others.
	Repairs uint64 `json:"repairs"`
	// RepairFailures are attempts to rebuild a piece that failed.
	RepairFailures uint64 `json:"repair_failures"`
	// Restores are the operator's own lost pieces rebuilt in place.
	Restores uint64 `json:"restores"`
	// TxErrors are messages the chain or the submitter refused.
	TxErrors uint64 `json:"tx_errors"`
	// Checks are full passes over the held piece files.
	Checks uint64 `json:"checks"`
	// Slashed is everything slashed for the operator's replicas, as coins.
	Slashed string `json:"slashed,omitempty"`
}

// Status returns a snapshot; it never blocks on the chain or the disk.
func (r *Role) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := Status{
		Operator: r.opts.Operator, PiecesDir: r.opts.PiecesDir, ClaimLocal: r.opts.ClaimLocal, Repair: r.opts.Repair,
		Running: r.running.Load(), Height: max(r.height, r.eventHeight), LastCheck: r.lastCheck, LastError: r.lastErr,
		Counters: Counters{
			RepairFailures: r.counters.repairFailures, Restores: r.counters.restores,
			TxErrors: r.counters.txErrors, Checks: r.counters.checks,
		},
	}
	var slashed sdk.Coins
	for _, rec := range r.records {
		st.Counters.Claims++
		st.Counters.ChallengesAnswered += rec.Answered
		st.Counters.ChallengesMissed += rec.Missed
		if rec.FaultDeclared {
			st.Counters.FaultsDeclared++
		}
		if rec.Repaired {
			st.Counters.Repairs++
		}
		if coins, err := sdk.ParseCoinsNormalized(rec.Slashed); err == nil {
			slashed = slashed.Add(coins...)
		}
	}
	st.Counters.Slashed = slashed.String()
	for id, h := range r.held {
		rec := r.records[id]
		st.Pieces = append(st.Pieces, PieceStatus{
			ReplicaID: id, DatasetID: h.rep.DatasetId, Shard: h.rep.Shard, Piece: h.rep.Piece,
			File:       PiecePath(r.opts.PiecesDir, h.rep.DatasetId, h.rep.Shard, h.rep.Piece),
			NextPeriod: h.rep.NextPeriod, NextSeed: h.rep.NextSeedHeight, NextDeadline: h.rep.NextDeadline,
			Answered: rec.Answered, Missed: rec.Missed, Repaired: rec.Repaired,
			LastChecked: h.checked, Problem: h.problem,
		})
	}
	slices.SortFunc(st.Pieces, func(a, b PieceStatus) int { return cmp.Compare(a.ReplicaID, b.ReplicaID) })
	st.Counters.PiecesHeld = len(st.Pieces)
	return st
}

// poke wakes a loop without blocking; wake-ups while one is pending merge.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// sleep waits d or until ctx ends, reporting whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

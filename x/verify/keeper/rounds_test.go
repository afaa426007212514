package keeper_test

import (
	"context"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	"fmt"
	"maps"
	"slices"
	"testing"

	sdk "github.com/cosmos/cosmos-sdk/types"
	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"
	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/testutil/keepers"
	marketkeeper "github.com/depinchain/depinchain/x/market/keeper"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// roundStore is x/market's round state as the referee reads it, faked: the rounds and
// commits a test lays out, and what a conviction did to them.
type roundStore struct {
	rounds   map[[2]uint64]markettypes.Round
	commits  map[[3]uint64]markettypes.RoundCommit
	rejected []uint64
}

// fakeRounds is the market keeper x/verify is built with in these tests: the real one,
// with its round methods answered from a roundStore.
type fakeRounds struct {
	marketkeeper.Keeper
	s *roundStore
}

func (f fakeRounds) GetRound(_ context.Context, jobID, round uint64) (markettypes.Round, error) {
	r, ok := f.s.rounds[[2]uint64{jobID, round}]
	if !ok {
		return r, errorsmod.Wrapf(sdkerrors.ErrNotFound, "job %d has no round %d", jobID, round)
	}
	r.Entered = slices.Clone(r.Entered)
	return r, nil
}

func (f fakeRounds) GetRoundCommit(_ context.Context, jobID, round uint64, worker uint32) (markettypes.RoundCommit, error) {
	c, ok := f.s.commits[[3]uint64{jobID, round, uint64(worker)}]
	if !ok {
		return c, errorsmod.Wrapf(sdkerrors.ErrNotFound, "job %d round %d has no commit of worker %d", jobID, round, worker)
	}
	return c, nil
}

func (f fakeRounds) ExcludeRoundWorker(_ context.Context, jobID, round uint64, worker uint32, reason string) error {
	key := [3]uint64{jobID, round, uint64(worker)}
	c := f.s.commits[key]
	c.Excluded, c.ExcludedReason = true, reason
	f.s.commits[key] = c
	r := f.s.rounds[[2]uint64{jobID, round}]
	r.Entered = slices.DeleteFunc(slices.Clone(r.Entered), func(w uint32) bool { return w == worker })
	r.NextGlobalRoot, r.State = nil, markettypes.ROUND_STATE_AGGREGATING
	f.s.rounds[[2]uint64{jobID, round}] = r
	return nil
}

func (f fakeRounds) RejectGlobal(_ context.Context, jobID, round uint64) (string, error) {
	r := f.s.rounds[[2]uint64{jobID, round}]
	r.NextGlobalRoot, r.State = nil, markettypes.ROUND_STATE_AGGREGATING
	f.s.rounds[[2]uint64{jobID, round}] = r
	f.s.rejected = append(f.s.rejected, round)
	return r.Aggregator, nil
}

func (s *roundStore) clone() *roundStore {
	return &roundStore{rounds: maps.Clone(s.rounds), commits: maps.Clone(s.commits), rejected: slices.Clone(s.rejected)}
}

// roundScenario: a two-worker job training in rounds, two rounds of honest files laid
// out (G_0, G_1, G_2, each worker's start and end states and pseudo-gradients), and the
// fake round state committing to them. Worker w's lease is leases[w]; worker 0 also
// aggregates.
type roundScenario struct {
	*env
	store  *roundStore
	job    markettypes.Job
	leases [2]markettypes.Lease
	provs  [2]sdk.AccAddress
	cfg    exact.Config
	sync   diloco.Sync
	layout diloco.Layout
	// files by name: "g0", "g1", "g2", "start/r/w", "end/r/w", "pg/r/w"
	files map[string][]byte
	// traces by "r/w": worker w's trace of round r, from its start state
	traces map[string]trace.Trace
}

func newRoundScenario(t *testing.T, topK int) *roundScenario {
	store := &roundStore{rounds: map[[2]uint64]markettypes.Round{}, commits: map[[3]uint64]markettypes.RoundCommit{}}
	f := keepers.New(t, keepers.WithVerifyMarket(func(mk marketkeeper.Keeper) types.MarketKeeper { return fakeRounds{mk, store} }))
	e := newEnvOn(t, f)
	s := &roundScenario{env: e, store: store, files: map[string][]byte{}, traces: map[string]trace.Trace{}}
	spec := referenceSpec(40, 4)
	spec.Workers = 2
	res, err := e.mmsg.SubmitJob(e.Ctx, &markettypes.MsgSubmitJob{Owner: e.owner.String(), Spec: spec, Deposit: coin(jobDeposit)})
	require.NoError(t, err)
	for i := range s.provs {
		s.provs[i] = e.registerProvider(fmt.Sprintf("worker-%d", i), 2)
		_, err = e.mmsg.PlaceBid(e.Ctx, &markettypes.MsgPlaceBid{Provider: s.provs[i].String(), JobId: res.JobId, PricePerGpuHour: coin(bidPrice), StepsPerHour: testRate})
		require.NoError(t, err)
	}
	for deadline := e.getJob(res.JobId).BiddingDeadline; e.Ctx.BlockHeight() <= deadline; {
		e.nextBlock()
	}
	for _, l := range e.ActiveLeasesOfJob(t, res.JobId) {
		s.leases[l.Worker] = l
	}
	require.NotZero(t, s.leases[0].Id)
	require.NotZero(t, s.leases[1].Id)
	job := e.getJob(res.JobId)
	spec2 := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9, TopK: topK}
	s.sync, err = spec2.Sync()
	require.NoError(t, err)
	job.Spec.CheckpointInterval = 2
	job.Spec.Sync = &markettypes.SyncSpec{Every: 2, OuterLrQ30: uint64(s.sync.OuterLR), OuterMomentumQ30: uint64(s.sync.OuterMomentum), TopK: uint32(topK)}
	require.NoError(t, e.Market.Jobs.Set(e.Ctx, job.Id, job))
	s.job = job
	s.cfg, err = types.JobConfig(job)
	require.NoError(t, err)
	s.layout = diloco.NewLayout(s.cfg)

	g, err := diloco.InitGlobal(s.cfg, s.sync, job.Seed)
	require.NoError(t, err)
	carry := [2]*exact.State{}
	errBufs := [2][]int64{}
	for r := uint64(0); r < 2; r++ {
		s.files[fmt.Sprintf("g%d", r)] = g.Encode()
		var pgs []*diloco.PseudoGradient
		for w := range 2 {
			start := g.WorkerStart(carry[w])
			hashes := []merkle.Hash{start.Root()}
			data, err := types.WorkerTrainingData(job, uint32(w), start.Step)
			require.NoError(t, err)
			end, err := exact.Run(start, data.Bytes, job.Seed, uint64(s.sync.Every), func(_ uint64, info exact.StepInfo) error {
				hashes = append(hashes, info.Root)
				return nil
			})
			require.NoError(t, err)
			s.traces[fmt.Sprintf("%d/%d", r, w)] = trace.New(start.Step, hashes)
			pg, err := diloco.NewPseudoGradient(g, uint32(w), end)
			require.NoError(t, err)
			var file []byte
			if topK > 0 {
				in := errBufs[w]
				if in == nil {
					in = make([]int64, s.layout.Elems())
				}
				pg, errBufs[w], err = pg.Compress(in)
				require.NoError(t, err)
				s.files["err/"+pg.ErrIn.Hex()] = diloco.EncodeErrorBuffer(in)
				s.files["err/"+pg.ErrOut.Hex()] = diloco.EncodeErrorBuffer(errBufs[w])
				c, err := pg.Compressed()
				require.NoError(t, err)
				file = c.Encode()
			} else {
				file = pg.EncodeDense()
			}
			carry[w] = end
			pgs = append(pgs, pg)
			s.files[fmt.Sprintf("start/%d/%d", r, w)] = start.Encode()
			s.files[fmt.Sprintf("end/%d/%d", r, w)] = end.Encode()
			s.files[fmt.Sprintf("pg/%d/%d", r, w)] = file
			s.commit(r, uint32(w))
		}
		next, err := diloco.Aggregate(g, pgs)
		require.NoError(t, err)
		s.files[fmt.Sprintf("g%d", r+1)] = next.Encode()
		s.setRound(markettypes.Round{
			JobId: job.Id, Round: r, State: markettypes.ROUND_STATE_CHALLENGE, GlobalRoot: s.root(fmt.Sprintf("g%d", r)),
			Entered: []uint32{0, 1}, Workers: []uint32{0, 1}, Aggregator: s.provs[0].String(), AggregatorLeaseId: s.leases[0].Id,
			NextGlobalRoot: s.root(fmt.Sprintf("g%d", r+1)), OpenedHeight: e.Ctx.BlockHeight(),
		})
		g = next
	}
	return s
}

// setRound writes a round to the fake and to x/market's store (whose invariants want
// every commit's round), with the job at that round.
func (s *roundScenario) setRound(r markettypes.Round) {
	s.store.rounds[[2]uint64{r.JobId, r.Round}] = r
	require.NoError(s.t, s.Market.Rounds.Set(s.Ctx, collections.Join(r.JobId, r.Round), r))
	job := s.getJob(r.JobId)
	job.Round = max(job.Round, r.Round)
	require.NoError(s.t, s.Market.Jobs.Set(s.Ctx, job.Id, job))
	s.job = job
}

func (s *roundScenario) root(name string) []byte {
	r := merkle.RootOfBytes(s.files[name], diloco.ChunkSize)
	return r[:]
}

// commit (re)writes worker w's round-r commit from its files, in the fake and in
// x/market's store (whose checkpoint pay reads it).
func (s *roundScenario) commit(r uint64, w uint32) {
	n := func(kind string) string { return fmt.Sprintf("%s/%d/%d", kind, r, w) }
	c := markettypes.RoundCommit{
		JobId: s.job.Id, Round: r, Worker: w, LeaseId: s.leases[w].Id, Provider: s.provs[w].String(),
		StartRoot: s.root(n("start")), EndRoot: s.root(n("end")), PseudoGradientRoot: s.root(n("pg")),
		PseudoGradientSize: uint64(len(s.files[n("pg")])), CommittedHeight: s.Ctx.BlockHeight(),
	}
	s.store.commits[[3]uint64{s.job.Id, r, uint64(w)}] = c
	c.Claim = sdk.NewCoin(s.job.Escrow.Denom, math.ZeroInt())
	require.NoError(s.t, s.Market.RoundCommits.Set(s.Ctx, collections.Join3(s.job.Id, r, w), c))
}

// open returns chunks idx of a file with their proofs.
func (s *roundScenario) open(name string, idx ...uint64) []types.FileChunk {
	s.t.Helper()
	b, ok := s.files[name]
	require.True(s.t, ok, name)
	leaves := merkle.LeafHashesOfBytes(b, diloco.ChunkSize)
	var out []types.FileChunk
	for _, i := range idx {
		proof, err := merkle.InclusionProof(leaves, i)
		require.NoError(s.t, err)
		out = append(out, types.FileChunk{Index: i, Data: b[i*diloco.ChunkSize : min(uint64(len(b)), (i+1)*diloco.ChunkSize)], Proof: merkle.HashesToBytes(proof)})
	}
	return out
}

func (s *roundScenario) open1(name string, i uint64) *types.FileChunk { return &s.open(name, i)[0] }

// startProof proves chunk c of worker w's round-r start state against its source.
func (s *roundScenario) startProof(prover sdk.AccAddress, r uint64, w uint32, c uint64) *types.MsgProveRoundFault {
	msg := &types.MsgProveRoundFault{Prover: prover.String(), JobId: s.job.Id, Round: r, Worker: w, Kind: types.ROUND_FAULT_START, Chunk: c,
		Claimed: s.open(fmt.Sprintf("start/%d/%d", r, w), c)}
	src, k, err := s.layout.StartSourceOf(c)
	require.NoError(s.t, err)
	switch {
	case src == diloco.StartWeights:
		msg.Global = s.open(fmt.Sprintf("g%d", r), diloco.WeightsChunk(k))
	case src == diloco.StartMoments && r > 0:
		msg.Source = s.open(fmt.Sprintf("end/%d/%d", r-1, w), c)
	}
	return msg
}

// pgProof proves section chunk k of worker w's round-r pseudo-gradient.
func (s *roundScenario) pgProof(prover sdk.AccAddress, r uint64, w uint32, k int) *types.MsgProveRoundFault {
	sc, err := s.layout.StateWeightsChunk(k)
	require.NoError(s.t, err)
	pg := fmt.Sprintf("pg/%d/%d", r, w)
	msg := &types.MsgProveRoundFault{Prover: prover.String(), JobId: s.job.Id, Round: r, Worker: w, Kind: types.ROUND_FAULT_PSEUDO_GRADIENT, Chunk: uint64(k),
		Global: s.open(fmt.Sprintf("g%d", r), diloco.WeightsChunk(k)), Source: s.open(fmt.Sprintf("end/%d/%d", r, w), sc)}
	if s.sync.TopK == 0 {
		msg.Claimed = s.open(pg, diloco.WeightsChunk(k))
		return msg
	}
	msg.Claimed = s.open(pg, diloco.RecordChunks(int(s.sync.TopK), k)...)
	msg.Header = s.open1(pg, 0)
	if r > 0 {
		msg.PreviousHeader = s.open1(fmt.Sprintf("pg/%d/%d", r-1, w), 0)
	}
	p, err := diloco.DecodeCompressed(s.files[pg])
	require.NoError(s.t, err)
	for _, e := range []struct {
		root merkle.Hash
		dst  **types.FileChunk
	}{{p.ErrIn, &msg.ErrorIn}, {p.ErrOut, &msg.ErrorOut}} {
		name := "err/" + e.root.Hex()
		require.Contains(s.t, s.files, name, "error buffer %s not recorded", e.root)
		*e.dst = s.open1(name, uint64(k))
	}
	return msg
}

// aggregation is what a party holding round r's files builds aggregation proofs from:
// the entered workers (as the round now says) and their pseudo-gradient files.
func (s *roundScenario) aggregation(r uint64) ([]uint32, [][]byte) {
	entered := s.store.rounds[[2]uint64{s.job.Id, r}].Entered
	pgs := make([][]byte, len(entered))
	for i, w := range entered {
		pgs[i] = s.files[fmt.Sprintf("pg/%d/%d", r, w)]
	}
	return entered, pgs
}

// aggProof is dispute.AggregationProof of section chunk k of round r's aggregation
// (weights, or momentum) from the scenario's files.
func (s *roundScenario) aggProof(prover sdk.AccAddress, r uint64, k int, momentum bool) *types.MsgProveRoundFault {
	s.t.Helper()
	entered, pgs := s.aggregation(r)
	msg, err := dispute.AggregationProof(prover.String(), s.job.Id, r, s.layout, s.sync, s.files[fmt.Sprintf("g%d", r)], s.files[fmt.Sprintf("g%d", r+1)], entered, pgs, k, momentum)
	require.NoError(s.t, err)
	return msg
}

// aggFault is dispute.AggregationFault of round r from the scenario's files.
func (s *roundScenario) aggFault(prover sdk.AccAddress, r uint64) *types.MsgProveRoundFault {
	s.t.Helper()
	entered, pgs := s.aggregation(r)
	msg, err := dispute.AggregationFault(prover.String(), s.job.Id, r, s.layout, s.sync, s.files[fmt.Sprintf("g%d", r)], s.files[fmt.Sprintf("g%d", r+1)], entered, pgs)
	require.NoError(s.t, err)
	return msg
}

func (s *roundScenario) prove(msg *types.MsgProveRoundFault) (uint64, error) {
	return s.deliver(func(ctx sdk.Context) error {
		_, err := s.env.msg.ProveRoundFault(ctx, msg)
		return err
	})
}

// requireRefused: the proof fails with want (its text containing text) and changes
// nothing — chain state, balances, events and the round state x/market holds.
func (s *roundScenario) requireRefused(want *errorsmod.Error, text string, msg *types.MsgProveRoundFault) {
	s.t.Helper()
	before := s.store.clone()
	err := s.requireRejected(want, func(ctx sdk.Context) error {
		_, err := s.env.msg.ProveRoundFault(ctx, msg)
		return err
	})
	require.ErrorContains(s.t, err, text)
	require.Equal(s.t, before, s.store, "a refused proof changed x/market's rounds")
}

// requireConvicted checks what a conviction of provider op's lease did.
func (s *roundScenario) requireConvicted(prover, op sdk.AccAddress, leaseID uint64, bond, proverBalance math.Int) {
	s.t.Helper()
	params := s.verifyParams()
	prov := s.provider(op)
	slashed := params.FraudSlashFraction.MulInt(bond).TruncateInt()
	require.Equal(s.t, bond.Sub(slashed), prov.Bond.Amount)
	require.Equal(s.t, stakingexttypes.PROVIDER_STATUS_TOMBSTONED, prov.Status)
	reward := params.WhistleblowerShare.MulInt(slashed).TruncateInt()
	require.True(s.t, reward.IsPositive())
	require.Equal(s.t, proverBalance.Add(reward), s.Balance(prover))
	lease := s.getLease(leaseID)
	require.Equal(s.t, markettypes.LEASE_STATE_CLOSED, lease.State)
	require.Equal(s.t, markettypes.LEASE_CLOSE_REASON_FRAUD, lease.CloseReason)
	events := typedEvents[*types.EventRoundFaultProven](s.env)
	require.Len(s.t, events, 1)
	require.Equal(s.t, op.String(), events[0].Convicted)
	require.Equal(s.t, reward, events[0].Reward.Amount)
	s.requireInvariants()
}

// replace swaps a file of the scenario for a tampered one; commit (or the round's root)
// must then be rewritten by the test, as the liar would commit it.
func (s *roundScenario) replace(name string, b []byte) { s.files[name] = b }

// An honest round cannot be convicted: a proof about any kind of chunk — the start
// state's header, weights and carried moments, a pseudo-gradient chunk, the aggregation's
// weights and momentum — is refused as consistent and changes nothing.
func TestRoundFaultHonestRoundCannotBeConvicted(t *testing.T) {
	s := newRoundScenario(t, 0)
	prover := s.account("prover")
	seen := map[diloco.StartSource]bool{}
	for c := range s.layout.StateChunks() {
		src, _, err := s.layout.StartSourceOf(c)
		require.NoError(t, err)
		if seen[src] {
			continue
		}
		seen[src] = true
		s.requireRefused(types.ErrRoundConsistent, "start state chunk", s.startProof(prover, 1, 1, c))
	}
	require.Len(t, seen, 3)
	last := s.layout.Chunks - 1
	for _, k := range []int{0, last} {
		s.requireRefused(types.ErrRoundConsistent, "is G_1 − its end state", s.pgProof(prover, 1, 0, k))
		s.requireRefused(types.ErrRoundConsistent, "weights chunk", s.aggProof(prover, 1, k, false))
		s.requireRefused(types.ErrRoundConsistent, "momentum chunk", s.aggProof(prover, 0, k, true))
	}
}

// A worker that fabricates its pseudo-gradient (one element changed) is convicted by a
// proof about the chunk holding it: excluded from the round, slashed, tombstoned, its
// lease closed, the prover rewarded. The same proof again is refused.
func TestRoundFaultFabricatedPseudoGradientConvicted(t *testing.T) {
	s := newRoundScenario(t, 0)
	p, err := diloco.DecodePseudoGradient(s.files["pg/1/1"])
	require.NoError(t, err)
	k := s.layout.Chunks / 2
	p.Delta[k*diloco.ChunkElems+3]++
	s.replace("pg/1/1", p.EncodeDense())
	s.commit(1, 1)
	prover := s.account("prover")
	// Other chunks are still right.
	s.requireRefused(types.ErrRoundConsistent, "is G_1 − its end state", s.pgProof(prover, 1, 1, k+1))

	bond, balance := s.provider(s.provs[1]).Bond.Amount, s.Balance(prover)
	_, err = s.prove(s.pgProof(prover, 1, 1, k))
	require.NoError(t, err)
	s.requireConvicted(prover, s.provs[1], s.leases[1].Id, bond, balance)
	c := s.store.commits[[3]uint64{s.job.Id, 1, 1}]
	require.True(t, c.Excluded)
	require.Contains(t, c.ExcludedReason, fmt.Sprintf("pseudo-gradient chunk %d", k))
	require.Equal(t, []uint32{0}, s.store.rounds[[2]uint64{s.job.Id, 1}].Entered)
	s.requireRefused(types.ErrInvalidRoundProof, "already excluded", s.pgProof(prover, 1, 1, k))
}

// A wrong aggregation (one momentum element off) convicts the aggregator: the global is
// rejected (x/market voids it) and the aggregator's lease is punished.
func TestRoundFaultWrongAggregationConvicted(t *testing.T) {
	s := newRoundScenario(t, 0)
	g, err := diloco.DecodeGlobal(s.files["g2"])
	require.NoError(t, err)
	g.Momentum[5]--
	s.replace("g2", g.Encode())
	r := s.store.rounds[[2]uint64{s.job.Id, 1}]
	r.NextGlobalRoot = s.root("g2")
	s.store.rounds[[2]uint64{s.job.Id, 1}] = r
	prover := s.account("prover")
	s.requireRefused(types.ErrRoundConsistent, "weights chunk 0", s.aggProof(prover, 1, 0, false))

	built := s.aggFault(prover, 1)
	require.NotNil(t, built)
	require.True(t, built.Chunk == 0 && built.Momentum, "the builder finds the momentum chunk")

	bond, balance := s.provider(s.provs[0]).Bond.Amount, s.Balance(prover)
	_, err = s.prove(built)
	require.NoError(t, err)
	s.requireConvicted(prover, s.provs[0], s.leases[0].Id, bond, balance)
	require.Equal(t, []uint64{1}, s.store.rejected)
	require.Empty(t, s.store.rounds[[2]uint64{s.job.Id, 1}].NextGlobalRoot)
	s.requireRefused(types.ErrInvalidRoundProof, "no committed aggregation", s.aggProof(prover, 1, 0, true))
}

// A worker that starts a round from a wrong state — it drops the Adam moments it carries
// from its previous round, as a joiner would start — is convicted at a moments chunk.
func TestRoundFaultWrongStartConvicted(t *testing.T) {
	s := newRoundScenario(t, 0)
	g, err := diloco.DecodeGlobal(s.files["g1"])
	require.NoError(t, err)
	s.replace("start/1/0", g.WorkerStart(nil).Encode())
	s.commit(1, 0)
	prover := s.account("prover")
	var moments, weights uint64
	for c := range s.layout.StateChunks() {
		src, _, err := s.layout.StartSourceOf(c)
		require.NoError(t, err)
		if src == diloco.StartWeights && weights == 0 {
			weights = c
		}
		if src == diloco.StartMoments && !bytesZero(s.files["end/0/0"][c*diloco.ChunkSize:min(uint64(len(s.files["end/0/0"])), (c+1)*diloco.ChunkSize)]) {
			moments = c
			break
		}
	}
	require.NotZero(t, moments)
	s.requireRefused(types.ErrRoundConsistent, "G_1's weights chunk", s.startProof(prover, 1, 0, weights))
	// Claiming the worker is a joiner (no carry opened) is refused: it has one.
	joiner := s.startProof(prover, 1, 0, moments)
	joiner.Source = nil
	s.requireRefused(types.ErrInvalidRoundProof, "want chunks", joiner)

	built, err := dispute.StartFault(prover.String(), s.job.Id, 1, 0, s.layout, s.sync, s.files["g1"], s.files["end/0/0"], s.files["start/1/0"])
	require.NoError(t, err)
	require.Equal(t, s.startProof(prover, 1, 0, moments), built, "the builder finds the first dropped moments chunk")
	honest, err := dispute.StartFault(prover.String(), s.job.Id, 1, 1, s.layout, s.sync, s.files["g1"], s.files["end/0/1"], s.files["start/1/1"])
	require.NoError(t, err)
	require.Nil(t, honest)

	bond, balance := s.provider(s.provs[0]).Bond.Amount, s.Balance(prover)
	_, err = s.prove(built)
	require.NoError(t, err)
	s.requireConvicted(prover, s.provs[0], s.leases[0].Id, bond, balance)
	require.True(t, s.store.commits[[3]uint64{s.job.Id, 1, 0}].Excluded)
}

func bytesZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// Malformed proofs are refused with an error naming what is wrong and change nothing.
func TestRoundFaultMalformedProofsRefused(t *testing.T) {
	s := newRoundScenario(t, 0)
	prover := s.account("prover")
	k := 1
	for name, tc := range map[string]struct {
		msg  func() *types.MsgProveRoundFault
		want *errorsmod.Error
		text string
	}{
		"no kind": {func() *types.MsgProveRoundFault {
			m := s.pgProof(prover, 1, 0, k)
			m.Kind = types.ROUND_FAULT_UNSPECIFIED
			return m
		}, types.ErrInvalidRoundProof, "is not a round fault"},
		"chunk out of range": {func() *types.MsgProveRoundFault {
			m := s.pgProof(prover, 1, 0, k)
			m.Chunk = uint64(s.layout.Chunks)
			return m
		}, types.ErrInvalidRoundProof, "out of range"},
		"claimed chunk of another index": {func() *types.MsgProveRoundFault {
			m := s.pgProof(prover, 1, 0, k)
			m.Claimed = s.open("pg/1/0", diloco.WeightsChunk(k+1))
			return m
		}, types.ErrInvalidRoundProof, "want chunk"},
		"opening that does not prove": {func() *types.MsgProveRoundFault {
			m := s.pgProof(prover, 1, 0, k)
			m.Claimed[0].Data = append([]byte(nil), m.Claimed[0].Data...)
			m.Claimed[0].Data[0] ^= 1
			return m
		}, types.ErrInvalidRoundProof, "claimed (pseudo-gradient)"},
		"proof of the wrong length": {func() *types.MsgProveRoundFault {
			m := s.pgProof(prover, 1, 0, k)
			m.Global[0].Proof = m.Global[0].Proof[1:]
			return m
		}, types.ErrInvalidRoundProof, "global chunk"},
		"global from another round": {func() *types.MsgProveRoundFault {
			m := s.pgProof(prover, 1, 0, k)
			m.Global = s.open("g0", diloco.WeightsChunk(k))
			return m
		}, types.ErrInvalidRoundProof, "global chunk"},
		"missing end state": {func() *types.MsgProveRoundFault {
			m := s.pgProof(prover, 1, 0, k)
			m.Source = nil
			return m
		}, types.ErrInvalidRoundProof, "source (end state)"},
		"extra header on a dense proof": {func() *types.MsgProveRoundFault {
			m := s.pgProof(prover, 1, 0, k)
			m.Header = s.open1("pg/1/0", 0)
			return m
		}, types.ErrInvalidRoundProof, "has no header"},
		"oversized chunk": {func() *types.MsgProveRoundFault {
			m := s.pgProof(prover, 1, 0, k)
			m.Claimed[0].Data = make([]byte, diloco.ChunkSize+1)
			return m
		}, types.ErrInvalidRoundProof, "a chunk at most"},
		"aggregation missing a worker": {func() *types.MsgProveRoundFault {
			m := s.aggProof(prover, 1, k, false)
			m.PseudoGradients = m.PseudoGradients[:1]
			return m
		}, types.ErrInvalidRoundProof, "entered workers [0 1]"},
		"aggregation workers out of order": {func() *types.MsgProveRoundFault {
			m := s.aggProof(prover, 1, k, false)
			m.PseudoGradients[0], m.PseudoGradients[1] = m.PseudoGradients[1], m.PseudoGradients[0]
			return m
		}, types.ErrInvalidRoundProof, "the entered list says"},
		"aggregation naming a worker": {func() *types.MsgProveRoundFault {
			m := s.aggProof(prover, 1, k, false)
			m.Worker = 1
			return m
		}, types.ErrInvalidRoundProof, "accuses the aggregator"},
		"start of a header chunk with a source": {func() *types.MsgProveRoundFault {
			m := s.startProof(prover, 1, 0, 0)
			m.Global = s.open("g1", 1)
			return m
		}, types.ErrInvalidRoundProof, "header chunk"},
		"round 0 moments with a carry": {func() *types.MsgProveRoundFault {
			c := s.layout.StateChunks() - 1
			m := s.startProof(prover, 0, 0, c)
			m.Source = s.open("end/0/0", c)
			return m
		}, types.ErrInvalidRoundProof, "no earlier entered round"},
	} {
		t.Run(name, func(t *testing.T) { s.requireRefused(tc.want, tc.text, tc.msg()) })
	}
	// A worker cannot prove its own commitment wrong to collect the reward.
	s.requireRefused(types.ErrSelfChallenge, "made the commitment", func() *types.MsgProveRoundFault {
		p, err := diloco.DecodePseudoGradient(s.files["pg/1/1"])
		require.NoError(t, err)
		p.Delta[k*diloco.ChunkElems]++
		s.replace("pg/1/1", p.EncodeDense())
		s.commit(1, 1)
		return s.pgProof(s.provs[1], 1, 1, k)
	}())
}

// With top-k compression: honest records and error buffers cannot be convicted; a
// fabricated record, and a worker that restarts its error buffer from zero instead of
// the one its previous round left, are.
func TestRoundFaultCompressedPseudoGradient(t *testing.T) {
	s := newRoundScenario(t, 700) // a record of 4200 bytes straddles a chunk boundary
	prover := s.account("prover")
	for _, k := range []int{0, s.layout.Chunks - 1} {
		s.requireRefused(types.ErrRoundConsistent, "are its compression", s.pgProof(prover, 1, 1, k))
		s.requireRefused(types.ErrRoundConsistent, "weights chunk", s.aggProof(prover, 1, k, false))
	}
	hp, err := diloco.DecodeCompressed(s.files["pg/1/1"])
	require.NoError(t, err)
	none, err := dispute.CompressedPseudoGradientFault(prover.String(), s.job.Id, 1, 1, s.layout, s.sync, s.files["g1"], s.files["end/1/1"], s.files["pg/1/1"],
		s.files["pg/0/1"], s.files["err/"+hp.ErrIn.Hex()], s.files["err/"+hp.ErrOut.Hex()])
	require.NoError(t, err)
	require.Nil(t, none, "the builder finds nothing in an honest compressed pseudo-gradient")
	noPrev := s.pgProof(prover, 1, 1, 0)
	noPrev.PreviousHeader = nil
	s.requireRefused(types.ErrInvalidRoundProof, "previous_header: missing", noPrev)

	// Worker 1 pretends it has no error buffer in round 1: it compresses from zero.
	g, err := diloco.DecodeGlobal(s.files["g1"])
	require.NoError(t, err)
	end, err := exact.Decode(s.files["end/1/1"])
	require.NoError(t, err)
	pg, err := diloco.NewPseudoGradient(g, 1, end)
	require.NoError(t, err)
	zero := make([]int64, s.layout.Elems())
	cp, out, err := pg.Compress(zero)
	require.NoError(t, err)
	c, err := cp.Compressed()
	require.NoError(t, err)
	s.replace("pg/1/1", c.Encode())
	s.files["err/"+cp.ErrIn.Hex()] = diloco.EncodeErrorBuffer(zero)
	s.files["err/"+cp.ErrOut.Hex()] = diloco.EncodeErrorBuffer(out)
	s.commit(1, 1)
	built, err := dispute.CompressedPseudoGradientFault(prover.String(), s.job.Id, 1, 1, s.layout, s.sync, s.files["g1"], s.files["end/1/1"], s.files["pg/1/1"],
		s.files["pg/0/1"], nil, nil) // no error buffers: a checker that cannot rebuild them still proves this
	require.NoError(t, err)
	require.NotNil(t, built)
	require.Nil(t, built.Claimed, "a wrong error_in is proven by the headers alone")

	bond, balance := s.provider(s.provs[1]).Bond.Amount, s.Balance(prover)
	_, err = s.prove(built)
	require.NoError(t, err)
	s.requireConvicted(prover, s.provs[1], s.leases[1].Id, bond, balance)
	require.Contains(t, s.store.commits[[3]uint64{s.job.Id, 1, 1}].ExcludedReason, "starts from error buffer")
}

// A fabricated compressed record (one kept value changed) is convicted.
func TestRoundFaultFabricatedRecordConvicted(t *testing.T) {
	s := newRoundScenario(t, 700)
	p, err := diloco.DecodeCompressed(s.files["pg/0/0"])
	require.NoError(t, err)
	k := s.layout.Chunks - 1
	for i := range diloco.ChunkElems {
		if x := p.Delta[k*diloco.ChunkElems+i]; x != 0 {
			p.Delta[k*diloco.ChunkElems+i] = x + 1
			break
		}
	}
	c, err := p.Compressed()
	require.NoError(t, err)
	s.replace("pg/0/0", c.Encode())
	s.commit(0, 0)
	prover := s.account("prover")
	built, err := dispute.CompressedPseudoGradientFault(prover.String(), s.job.Id, 0, 0, s.layout, s.sync, s.files["g0"], s.files["end/0/0"], s.files["pg/0/0"],
		nil, s.files["err/"+p.ErrIn.Hex()], s.files["err/"+p.ErrOut.Hex()])
	require.NoError(t, err)
	require.Equal(t, s.pgProof(prover, 0, 0, k), built, "the builder finds the fabricated record")
	bond, balance := s.provider(s.provs[0]).Bond.Amount, s.Balance(prover)
	_, err = s.prove(built)
	require.NoError(t, err)
	s.requireConvicted(prover, s.provs[0], s.leases[0].Id, bond, balance)
	require.Contains(t, s.store.commits[[3]uint64{s.job.Id, 0, 0}].ExcludedReason, fmt.Sprintf("record %d", k))
}

// A wrong aggregation of compressed pseudo-gradients (one weight off where the entered
// records straddle chunk boundaries) convicts the aggregator on the builder's proof: the
// referee decompresses every entered record and recomputes the chunk. A proof about a
// right chunk of the same global is refused and changes nothing; an honest round's
// aggregation has nothing to prove.
func TestRoundFaultCompressedWrongAggregationConvicted(t *testing.T) {
	s := newRoundScenario(t, 700) // a record of 4200 bytes straddles a chunk boundary
	prover := s.account("prover")
	require.Nil(t, s.aggFault(prover, 0), "the builder finds nothing in an honest compressed round")

	g, err := diloco.DecodeGlobal(s.files["g2"])
	require.NoError(t, err)
	k := s.layout.Chunks - 1
	g.Weights[k*diloco.ChunkElems+1]++
	s.replace("g2", g.Encode())
	r := s.store.rounds[[2]uint64{s.job.Id, 1}]
	r.NextGlobalRoot = s.root("g2")
	s.store.rounds[[2]uint64{s.job.Id, 1}] = r

	built := s.aggFault(prover, 1)
	require.NotNil(t, built)
	require.Equal(t, uint64(k), built.Chunk)
	require.False(t, built.Momentum)
	for _, w := range built.PseudoGradients {
		require.Equal(t, diloco.RecordChunks(700, k), chunkIndices(w.Chunks), "worker %d's record %d", w.Worker, k)
	}
	require.Greater(t, len(built.PseudoGradients[0].Chunks), 1, "the accused record straddles chunks")
	s.requireRefused(types.ErrRoundConsistent, fmt.Sprintf("momentum chunk %d is the aggregation", k), s.aggProof(prover, 1, k, true))
	s.requireRefused(types.ErrRoundConsistent, "weights chunk 0 is the aggregation", s.aggProof(prover, 1, 0, false))

	// A record the worker made malformed is its fault, not the aggregator's: the builder
	// names it instead of building an aggregation proof.
	entered, pgs := s.aggregation(1)
	bad := slices.Clone(pgs[1])
	// Record 0 with its first two indices equal: not ascending.
	rec := bad[diloco.ChunkSize:]
	copy(rec[0:2], rec[diloco.EntryBytes:diloco.EntryBytes+2])
	_, err = dispute.AggregationFault(prover.String(), s.job.Id, 1, s.layout, s.sync, s.files["g1"], s.files["g2"], entered, [][]byte{pgs[0], bad})
	require.ErrorContains(t, err, "worker 1's pseudo-gradient chunk 0")

	bond, balance := s.provider(s.provs[0]).Bond.Amount, s.Balance(prover)
	_, err = s.prove(built)
	require.NoError(t, err)
	s.requireConvicted(prover, s.provs[0], s.leases[0].Id, bond, balance)
	require.Equal(t, []uint64{1}, s.store.rejected)
	require.Empty(t, s.store.rounds[[2]uint64{s.job.Id, 1}].NextGlobalRoot)
}

func chunkIndices(cs []types.FileChunk) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i] = c.Index
	}
	return out
}

// maxSyncWorkers is x/market's default max_sync_workers (rounds-chain): the most
// pseudo-gradients an aggregation proof opens.
const maxSyncWorkers = 32

// The costliest round fault proof — an aggregation over max_sync_workers compressed
// pseudo-gradients at top_k 1024, whose records (6 KiB) straddle two or three chunks —
// convicts within a dispute move's gas bound (types.MaxMoveGas, a share of the block gas).
func TestRoundFaultWorstProofFitsBlockGas(t *testing.T) {
	s := newRoundScenario(t, diloco.ChunkElems)
	g, err := diloco.DecodeGlobal(s.files["g1"])
	require.NoError(t, err)
	var pgs []*diloco.PseudoGradient
	entered := make([]uint32, maxSyncWorkers)
	for w := range uint32(maxSyncWorkers) {
		p, err := diloco.DecodeCompressed(s.files[fmt.Sprintf("pg/1/%d", w%2)])
		require.NoError(t, err)
		p.Worker = w
		c, err := p.Compressed()
		require.NoError(t, err)
		s.files[fmt.Sprintf("pg/1/%d", w)] = c.Encode()
		key := [3]uint64{s.job.Id, 1, uint64(w)}
		lease, prov := s.leases[min(w, 1)], s.provs[min(w, 1)]
		pgRoot := merkle.RootOfBytes(s.files[fmt.Sprintf("pg/1/%d", w)], diloco.ChunkSize)
		s.store.commits[key] = markettypes.RoundCommit{JobId: s.job.Id, Round: 1, Worker: w, LeaseId: lease.Id, Provider: prov.String(), PseudoGradientRoot: pgRoot[:]}
		pgs = append(pgs, p)
		entered[w] = w
	}
	next, err := diloco.Aggregate(g, pgs)
	require.NoError(t, err)
	k := s.layout.Chunks - 1
	next.Weights[k*diloco.ChunkElems]++
	s.files["g2"] = next.Encode()
	r := s.store.rounds[[2]uint64{s.job.Id, 1}]
	r.Entered, r.NextGlobalRoot = entered, s.root("g2")
	s.store.rounds[[2]uint64{s.job.Id, 1}] = r

	prover := s.account("prover")
	msg := s.aggProof(prover, 1, k, false)
	chunks := 0
	for _, w := range msg.PseudoGradients {
		chunks += len(w.Chunks)
	}
	gas, err := s.prove(msg)
	require.NoError(t, err)
	t.Logf("aggregation proof over %d workers at top_k %d: %d pseudo-gradient chunks, %d bytes, %d gas (bound %d)",
		maxSyncWorkers, diloco.ChunkElems, chunks, msg.Size(), gas, types.MaxMoveGas)
	require.Greater(t, chunks, maxSyncWorkers, "records straddle chunks")
	require.Less(t, gas, types.MaxMoveGas)
	require.Equal(t, []uint64{1}, s.store.rejected)
}

// A job that trains in rounds checkpoints each committed round once: round 0 from h_0,
// round r from the worker's committed start state, ending at its committed end_root; a
// missed round is skipped. Anything else is refused and changes nothing.
func TestRoundCheckpointStartsFromTheRoundCommit(t *testing.T) {
	s := newRoundScenario(t, 0)
	w0 := func(r uint64) *party { return newParty(s.provs[0], s.traces[fmt.Sprintf("%d/0", r)], nil) }
	cp0 := s.submitCheckpoint(w0(0), s.leases[0].Id, 0)
	h0, err := types.InitialStateHash(s.job)
	require.NoError(t, err)
	require.Equal(t, h0, cp0.StartHash)
	cp1 := s.submitCheckpoint(w0(1), s.leases[0].Id, 1)
	require.Equal(t, s.store.commits[[3]uint64{s.job.Id, 1, 0}].StartRoot, cp1.StartHash)
	require.Equal(t, uint64(2), cp1.StartStep)

	w1 := newParty(s.provs[1], s.traces["1/1"], nil)
	submit := func(m *types.MsgSubmitCheckpoint) func(ctx sdk.Context) error {
		return func(ctx sdk.Context) error { _, err := s.env.msg.SubmitCheckpoint(ctx, m); return err }
	}
	// A trace that does not end at the committed end_root.
	liar := newParty(s.provs[1], trace.New(2, append(slices.Clone(s.traces["1/1"].Hashes[:2]), merkle.Hash{7})), nil)
	err = s.requireRejected(types.ErrInvalidCheckpoint, submit(checkpointMsg(liar, s.leases[1].Id, 0)))
	require.ErrorContains(t, err, "is not round 1's committed end_root")
	// Not a round's range.
	short := newParty(s.provs[1], trace.New(2, s.traces["1/1"].Hashes[:2]), nil)
	err = s.requireRejected(types.ErrWrongRange, submit(checkpointMsg(short, s.leases[1].Id, 0)))
	require.ErrorContains(t, err, "covers one round")
	// A round the worker did not commit.
	commit := s.store.commits[[3]uint64{s.job.Id, 1, 1}]
	delete(s.store.commits, [3]uint64{s.job.Id, 1, 1})
	require.NoError(t, s.Market.RoundCommits.Remove(s.Ctx, collections.Join3(s.job.Id, uint64(1), uint32(1))))
	err = s.requireRejected(types.ErrInvalidCheckpoint, submit(checkpointMsg(w1, s.leases[1].Id, 0)))
	require.ErrorContains(t, err, "commit the round")
	s.commit(1, 1)
	// Worker 1 skips round 0's checkpoint: its first checkpoint is round 1's.
	cp := s.submitCheckpoint(w1, s.leases[1].Id, 0)
	require.Equal(t, commit.StartRoot, cp.StartHash)
}

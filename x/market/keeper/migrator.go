package keeper

import (
	"slices"

	"cosmossdk.io/collections"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/market/types"

	v2 "github.com/depinchain/depinchain/x/market/migrations/v2"
)

// Migrator runs x/market's in-place store migrations; the module registers
// each with the configurator and x/upgrade's RunMigrations calls them.
type Migrator struct {
	keeper Keeper
}

// NewMigrator returns the migrator of a keeper's store.
func NewMigrator(k Keeper) Migrator { return Migrator{keeper: k} }

// Migrate1to2 back-fills the leases-by-state index (see migrations/v2).
func (m Migrator) Migrate1to2(ctx sdk.Context) error {
	return v2.MigrateStore(ctx, m.keeper.storeService, m.keeper.cdc)
}

// Migrate2to3 fills in the transformer bounds version 3 added to the params
// (max_transformer_params, max_tokens_per_step) and closes every live job of kind
// reference: until v3 that kind trained the fixed-point MLP, which the exact transformer
// replaced, and its leases could never commit a checkpoint that chains on from an MLP
// state. Each is closed as an owner's cancel would close it (work already final stays
// paid, the unspent escrow goes back to the owner), with a reason that says why.
func (m Migrator) Migrate2to3(ctx sdk.Context) error {
	params, err := m.keeper.Params.Get(ctx)
	if err != nil {
		return err
	}
	defaults := types.DefaultParams()
	if params.MaxTransformerParams == 0 {
		params.MaxTransformerParams = defaults.MaxTransformerParams
	}
	if params.MaxTokensPerStep == 0 {
		params.MaxTokensPerStep = defaults.MaxTokensPerStep
	}
	if err := m.keeper.Params.Set(ctx, params); err != nil {
		return err
	}
	var retired []types.Job
	if err := m.keeper.Jobs.Walk(ctx, nil, func(_ uint64, job types.Job) (bool, error) {
		if !job.State.IsTerminal() && job.Spec.Workload.Kind == types.WORKLOAD_KIND_REFERENCE {
			retired = append(retired, job)
		}
		return false, nil
	}); err != nil {
		return err
	}
	for i := range retired {
		if _, err := m.keeper.closeJob(ctx, &retired[i], types.JOB_STATE_CANCELLED, types.LEASE_CLOSE_REASON_CANCELLED,
			"the v3 upgrade retired the MLP reference workload: resubmit as kind reference (now the exact transformer) or transformer"); err != nil {
			return err
		}
	}
	return nil
}

// v3DefaultMaxTransformerParams is the max_transformer_params default of consensus version 3.
const v3DefaultMaxTransformerParams = 4 << 20

// Migrate3to4 moves x/market to pay for work (consensus version 4). It fills in the
// rate-check params, and gives every bid and lease from before committed rates the
// conservative rate types.ConservativeRate(total_steps, max_duration): the slowest that
// finishes the job in max_duration, so a lease's most pay (total_steps × its price per
// step) is what it could earn by time under v3 and not more. A lease's claimed step
// becomes the step its accrued pay buys at that price (rounded up, at most total_steps),
// so the time v3 already paid for is never paid again by step; steps beyond it are
// claimed by its next checkpoint. Every active lease gets its first rate check one
// rate_check_interval from now, each live job the price cap of its current leases and its
// claimed high-water marks, and its time deadline is recomputed under the new rule.
// max_transformer_params still at v3's default (4 Mi, set when only whole steps were
// adjudicable) rises to v4's, which phases 2–3 of x/verify's game adjudicate; a value
// governance chose is kept.
func (m Migrator) Migrate3to4(ctx sdk.Context) error {
	k := m.keeper
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	defaults := types.DefaultParams()
	if params.RateTolerance.IsNil() || params.RateTolerance.IsZero() { // absent from v3 params
		params.RateTolerance = defaults.RateTolerance
	}
	if params.RateCheckInterval == 0 {
		params.RateCheckInterval = defaults.RateCheckInterval
	}
	if params.MaxTransformerParams == v3DefaultMaxTransformerParams {
		params.MaxTransformerParams = defaults.MaxTransformerParams
	}
	if err := k.Params.Set(ctx, params); err != nil {
		return err
	}
	jobs := map[uint64]types.Job{}
	jobOf := func(id uint64) (types.Job, error) {
		if j, ok := jobs[id]; ok {
			return j, nil
		}
		j, err := k.GetJob(ctx, id)
		jobs[id] = j
		return j, err
	}

	var bids []types.Bid
	if err := k.Bids.Walk(ctx, nil, func(_ collections.Pair[uint64, []byte], b types.Bid) (bool, error) {
		bids = append(bids, b)
		return false, nil
	}); err != nil {
		return err
	}
	for _, b := range bids {
		if b.StepsPerHour != 0 {
			continue
		}
		job, err := jobOf(b.JobId)
		if err != nil {
			return err
		}
		b.StepsPerHour = types.ConservativeRate(job.Spec.TotalSteps, job.Spec.MaxDuration)
		provider, err := k.addressCodec.StringToBytes(b.Provider)
		if err != nil {
			return err
		}
		if err := k.Bids.Set(ctx, collections.Join(b.JobId, provider), b); err != nil {
			return err
		}
	}

	var leases []types.Lease
	if err := k.Leases.Walk(ctx, nil, func(_ uint64, l types.Lease) (bool, error) {
		if l.StepsPerHour == 0 {
			leases = append(leases, l)
		}
		return false, nil
	}); err != nil {
		return err
	}
	touched := map[uint64]bool{}
	for i := range leases {
		l := &leases[i]
		job, err := jobOf(l.JobId)
		if err != nil {
			return err
		}
		l.StepsPerHour = types.ConservativeRate(job.Spec.TotalSteps, job.Spec.MaxDuration)
		l.PricePerStep = types.PricePerStep(l.PricePerGpuHour.Amount, l.Gpus, l.StepsPerHour)
		l.ClaimedStep = l.ResumeStep + stepsBoughtBy(*l)
		l.ClaimedStep = max(min(l.ClaimedStep, job.Spec.TotalSteps), l.ResumeStep)
		if l.State == types.LEASE_STATE_ACTIVE {
			if err := k.scheduleRateCheck(ctx, l, ctx.BlockTime().Add(params.RateCheckInterval)); err != nil {
				return err
			}
			if !job.State.IsTerminal() {
				touched[job.Id] = true
				if l.ClaimedStep > claimedStepOf(job, l.Worker) {
					setClaimedStep(&job, l.Worker, l.ClaimedStep)
				}
				if job.CapStepsPerHour == 0 || types.CheaperPerStep(job.CapPricePerGpuHour.Amount, job.CapStepsPerHour, l.PricePerGpuHour.Amount, l.StepsPerHour) {
					job.CapPricePerGpuHour = l.PricePerGpuHour
					job.CapStepsPerHour = l.StepsPerHour
				}
				jobs[job.Id] = job
			}
		}
		if err := k.Leases.Set(ctx, l.Id, *l); err != nil {
			return err
		}
	}
	ids := make([]uint64, 0, len(touched))
	for id := range touched {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		job := jobs[id]
		for w := uint32(0); w < job.Spec.Workers; w++ {
			if p := progressOf(job, w).Step; p > claimedStepOf(job, w) {
				setClaimedStep(&job, w, p)
			}
		}
		if err := k.scheduleTimeDeadline(ctx, &job); err != nil {
			return err
		}
		if err := k.Jobs.Set(ctx, job.Id, job); err != nil {
			return err
		}
	}
	return nil
}

// stepsBoughtBy is how many steps a lease's accrued pay covers at its price per step,
// rounded up: accrued × rate ÷ (price × GPUs).
func stepsBoughtBy(l types.Lease) uint64 {
	perHour := l.PricePerGpuHour.Amount.MulRaw(int64(l.Gpus))
	if !perHour.IsPositive() || l.Accrued.Amount.IsNil() || !l.Accrued.IsPositive() {
		return 0
	}
	n := l.Accrued.Amount.Mul(math.NewIntFromUint64(l.StepsPerHour))
	steps := n.Add(perHour).SubRaw(1).Quo(perHour)
	if !steps.IsUint64() {
		return ^uint64(0) / 2
	}
	return steps.Uint64()
}

// Migrate4to5 brings x/market to consensus version 5 (rounds of sync jobs): the round
// params get their defaults (migrate_v5_rounds.go). Each topic of the v5 release adds its
// step here as a function of its own file.
func (m Migrator) Migrate4to5(ctx sdk.Context) error {
	return migrateRoundParams(ctx, m.keeper)
}

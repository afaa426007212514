package keeper

import (
	"bytes"
	"slices"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/market/types"
)

// migrateV5Custody moves x/market's custody bookkeeping to consensus version 5:
//
//   - default_custody stays off (the zero value the v4 params decode to): turning it on
//     where no storage provider offers custody would leave every adjudicable checkpoint
//     short of holders, so governance turns it on once holders have bonded (new chains
//     start with it on);
//   - each job's custody_held is the number of its custody objects x/shardregistry holds;
//   - each worker's progress names the custody object of its last final checkpoint: the
//     job's object of that worker's lease whose state root is the progress's state hash
//     (an adjudicable state's hash is its root) and that has no release time yet;
//   - objects v4 left without a release time that nobody resumes from are scheduled
//     retain_checkpoints from the upgrade: those of closed leases that are not their
//     worker's progress (superseded by a replacement's final checkpoint, the gap v5
//     closes), and every worker's last final one of a job that already ended;
//   - an ended job with no object held gets its storage escrow left back.
//
// Its cost is one pass over the custody objects and the jobs that have any (plus the ended
// jobs with storage escrow left), done once in the upgrade block.
func (m Migrator) migrateV5Custody(ctx sdk.Context) error {
	k := m.keeper
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	if err := k.Params.Set(ctx, params); err != nil {
		return err
	}
	if k.custody.keeper == nil {
		return nil
	}
	byJob := map[uint64][]types.HeldCustody{}
	if err := k.custody.keeper.WalkCustody(ctx, func(c types.HeldCustody) error {
		byJob[c.JobID] = append(byJob[c.JobID], c)
		return nil
	}); err != nil {
		return err
	}
	ids := make([]uint64, 0, len(byJob))
	for id := range byJob {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		job, err := k.GetJob(ctx, id)
		if err != nil {
			return err
		}
		held := byJob[id]
		job.CustodyHeld = uint32(len(held))
		progress := map[string]bool{}
		var retain []string
		for _, c := range held {
			if c.ReleaseScheduled {
				continue
			}
			lease, err := k.GetLease(ctx, c.LeaseID)
			if err != nil {
				return err
			}
			if i := progressIndex(job, lease.Worker); i >= 0 && bytes.Equal(job.Progress[i].StateHash, c.StateRoot) && job.Progress[i].CustodyId == "" {
				job.Progress[i].CustodyId = c.ID
				progress[c.ID] = true
				continue
			}
			if lease.State == types.LEASE_STATE_CLOSED {
				retain = append(retain, c.ID)
			}
		}
		if job.State.IsTerminal() {
			for _, p := range job.Progress {
				if progress[p.CustodyId] {
					retain = append(retain, p.CustodyId)
				}
			}
		}
		for _, r := range retain {
			if err := k.retainCustody(ctx, r); err != nil {
				return err
			}
		}
		if err := k.Jobs.Set(ctx, job.Id, job); err != nil {
			return err
		}
	}
	// Ended jobs without any custody object held: what is left of their storage escrow
	// would never be paid to anyone.
	var done []types.Job
	if err := k.Jobs.Walk(ctx, nil, func(_ uint64, j types.Job) (bool, error) {
		if j.State.IsTerminal() && j.CustodyHeld == 0 && !j.StorageEscrow.Amount.IsNil() && j.StorageEscrow.IsPositive() {
			done = append(done, j)
		}
		return false, nil
	}); err != nil {
		return err
	}
	for i := range done {
		if err := k.refundStorageIfDone(ctx, &done[i]); err != nil {
			return err
		}
		if err := k.Jobs.Set(ctx, done[i].Id, done[i]); err != nil {
			return err
		}
	}
	return nil
}

// progressIndex is the index of worker's entry in job.Progress, -1 without one.
func progressIndex(job types.Job, worker uint32) int {
	return slices.IndexFunc(job.Progress, func(p types.WorkerProgress) bool { return p.Worker == worker })
}

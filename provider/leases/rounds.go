package leases

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/rounds"
	"github.com/depinchain/depinchain/provider/runtime"
	"github.com/depinchain/depinchain/provider/trainer"
)

// serveRounds serves a training-together lease through the rounds role: it trains the
// lease's slot round after round with the lease's exact trainer (Go, or PyTorch when the
// operator configured runtimes.exact_torch), and each round-end
// checkpoint goes through this role's checkpoint path (catalog, custody pieces,
// MsgSubmitCheckpoint) in one transaction after the round's MsgCommitRound.
func (r *Role) serveRounds(ctx context.Context, l *lease) error {
	if r.opts.Rounds == nil || r.opts.SubmitTx == nil {
		return fmt.Errorf("%w: job %d trains in rounds and this sidecar runs no rounds role", errPermanent, l.job.Id)
	}
	onChain, err := r.chainCheckpoints(ctx, l.rec.LeaseID)
	if err != nil {
		return err
	}
	if err := r.adoptChainCheckpoints(l.rec, onChain); err != nil {
		return err
	}
	l.next = uint64(len(onChain))
	tr, ok := l.rt.(rounds.Trainer)
	if !ok {
		return fmt.Errorf("%w: job %d trains in rounds and runtime %s does not run rounds", errPermanent, l.job.Id, l.rt.Name())
	}
	err = r.opts.Rounds.Serve(ctx, rounds.Lease{
		ID: l.rec.LeaseID, Worker: l.chain.Worker, Job: l.job, Trainer: tr, GPUs: l.rec.GPUs, OutputDir: l.out(), DataDir: l.dataDir(), LogDir: l.logDir(),
		SubmitCheckpoint: func(ctx context.Context, cp trainer.Checkpoint, commit sdk.Msg) error {
			if err := r.submitCheckpoint(ctx, l.rec, l.next, cp, custodySpecOf(l.job), commit); err != nil {
				// Refused (e.g. the round closed without it): this index goes to the
				// next round's checkpoint, so the refused one is not served under it.
				var txErr *chain.TxError
				if errors.As(err, &txErr) {
					if derr := r.opts.Catalog.Discard(checkpoint.Ref{LeaseID: l.rec.LeaseID, Index: l.next}); derr != nil {
						r.log.Warn("discarding a refused round checkpoint", "lease", l.rec.LeaseID, "index", l.next, "err", derr)
					}
				}
				return err
			}
			l.next++
			return nil
		},
		OnStep: func(m trainer.StepMetric) {
			time.Sleep(r.opts.Hooks.RoundStepDelay)
			r.onTrainingProgress(runtime.Progress{LeaseID: l.rec.LeaseID, Step: m.Step, TotalSteps: l.job.Spec.TotalSteps, Loss: m.Loss})
		},
	})
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

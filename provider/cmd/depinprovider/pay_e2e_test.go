package main_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	sdkmath "cosmossdk.io/math"

	"github.com/depinchain/depinchain/provider/daemon"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// A job long enough that no lease of the test finishes it.
const payJobYAML = `name: pay-for-work
gpu:
  models: [H100-SXM5-80GB]
  min_vram_gib: 80
  per_worker: 1
workload:
  kind: reference
total_steps: 100000
checkpoint_every: 64
max_price_per_gpu_hour: 3000000udepin
max_duration: 24h
bidding_window_blocks: 8
`

// TestSlowProviderIsPaidForItsStepsAndClosedAtTheRateTolerance: a real sidecar bids
// the rate it measured on this host, trains, and then stops delivering (it blocks
// before its third checkpoint, as a host that fell far behind its committed rate). At
// the chain's rate check it is closed for non-performance, slashed and jailed; it is
// paid for exactly the steps its two checkpoints covered, at its price per step, once
// they are final; and the owner's spend is those steps at that price plus the audit
// fees: within total_steps × the winning price per step + audit fees.
func TestSlowProviderIsPaidForItsStepsAndClosedAtTheRateTolerance(t *testing.T) {
	rateCheckInterval = "40s"
	t.Cleanup(func() { rateCheckInterval = "" })
	w := newWorld(t, 6*time.Minute, sidecar.Options{})
	if err := w.provider.StartWith(w.ctx, "--pause-before-checkpoint", "3"); err != nil {
		t.Fatal(err)
	}
	var cps *verifytypes.QueryCheckpointsResponse
	owner, err := w.node.Address(w.ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	ownerStart := w.balanceOf(owner)
	const deposit = 500_000_000
	jobID := w.submitJob(payJobYAML, fmt.Sprintf("%dudepin", deposit))

	var lease markettypes.Lease
	w.eventually("a lease of the job", 2*time.Minute, func() bool {
		ls := w.leasesOf(jobID)
		if len(ls) == 1 {
			lease = ls[0]
		}
		return len(ls) == 1
	})
	if lease.StepsPerHour == 0 || lease.Provider != w.provider.Operator {
		t.Fatalf("lease %+v: want the sidecar's, with a committed rate", lease)
	}
	t.Logf("lease %d commits %d steps per hour at %s per GPU-hour: %s per step", lease.Id, lease.StepsPerHour, lease.PricePerGpuHour, lease.PricePerStep)
	if err := w.provider.WaitLog(w.ctx, daemon.PausedLogMsg); err != nil {
		t.Fatal(err)
	}

	// The rate check closes it: 128 checkpointed steps are far below half of what its
	// rate promises for 40 s.
	w.eventually("the lease closed for non-performance", 2*time.Minute, func() bool {
		lease = w.leasesOf(jobID)[0]
		return lease.State == markettypes.LEASE_STATE_CLOSED
	})
	if lease.CloseReason != markettypes.LEASE_CLOSE_REASON_NON_PERFORMANCE || lease.ClaimedStep != 128 {
		t.Fatalf("lease closed %s at claimed step %d, want non-performance at 128", lease.CloseReason, lease.ClaimedStep)
	}
	prov, err := w.node.Exec(w.ctx, "query", "stakingext", "provider", w.provider.Operator, "--output", "json")
	if err != nil || !strings.Contains(prov, stakingexttypes.PROVIDER_STATUS_JAILED.String()) || !strings.Contains(prov, `"slashes": "1"`) {
		t.Fatalf("provider after the close (want jailed and slashed once): %v\n%s", err, prov)
	}

	// Its two checkpoints become final and release exactly 128 steps' pay; nothing was
	// paid for the time it sat idle. Nobody else bids: the job expires and the owner
	// gets the rest back.
	pay := markettypes.PayForSteps(lease.PricePerGpuHour.Amount, lease.Gpus, lease.StepsPerHour, 128)
	w.eventually("the job closed and the checkpoints final", 3*time.Minute, func() bool {
		lease = w.leasesOf(jobID)[0]
		return w.job(jobID).State.IsTerminal() && lease.Pending.IsZero()
	})
	cps, err = w.verify.Checkpoints(w.ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: lease.Id})
	if err != nil {
		t.Fatal(err)
	}
	claimed := sdkmath.ZeroInt()
	for _, cp := range cps.Checkpoints {
		if cp.Status != verifytypes.CHECKPOINT_STATUS_FINAL {
			t.Fatalf("checkpoint %d is %s", cp.Index, cp.Status)
		}
		claimed = claimed.Add(cp.Claim.Amount)
	}
	paid := lease.Withdrawable.Amount.Add(lease.Withdrawn.Amount)
	if len(cps.Checkpoints) != 2 || !claimed.Equal(pay) || !paid.Equal(pay) {
		t.Fatalf("%d checkpoints claimed %s, lease paid %s; want 2 checkpoints and 128 steps × %s = %s",
			len(cps.Checkpoints), claimed, paid, lease.PricePerStep, pay)
	}
	job := w.job(jobID)
	fees := sdkmath.ZeroInt()
	if !job.AuditFees.Amount.IsNil() {
		fees = job.AuditFees.Amount
	}
	spent := sdkmath.NewInt(ownerStart - w.balanceOf(owner))
	bound := markettypes.PayForSteps(job.CapPricePerGpuHour.Amount, lease.Gpus, job.CapStepsPerHour, job.Spec.TotalSteps).Add(fees)
	t.Logf("owner spent %s: %s for 128 steps + %s audit fees; bound %s", spent, pay, fees, bound)
	if !spent.Equal(pay.Add(fees)) || spent.GT(bound) {
		t.Fatalf("owner spent %s, want the 128 steps' %s + audit fees %s, within %s", spent, pay, fees, bound)
	}

	// `depinchaind job status -o json` shows the worker's money and the lease's rate.
	out, err := w.node.Exec(w.ctx, "job", "status", fmt.Sprint(jobID), "-o", "json", "--grpc-addr", w.node.GRPC)
	if err != nil || !strings.Contains(out, fmt.Sprintf(`"paid": "%s"`, pay)) || !strings.Contains(out, fmt.Sprintf(`"steps_per_hour": %d`, lease.StepsPerHour)) {
		t.Fatalf("job status: %v\n%s", err, out)
	}
}

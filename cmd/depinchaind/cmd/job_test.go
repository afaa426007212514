package cmd

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/cmd/depinchaind/jobview"
)

func sampleView() *jobview.View {
	lp := jobview.LossPoint{Worker: 0, Step: 40, Nats: 2.5, Source: jobview.LossVerified}
	return &jobview.View{ID: 3, Name: "tiny", State: "JOB_STATE_LEASED", Kind: "WORKLOAD_KIND_REFERENCE", Owner: "owner1",
		Money: jobview.Money{Denom: "udpin", Deposited: "1000", Escrowed: "900", Pending: "10", Paid: "90", AuditFees: "0", Refunded: "0"},
		Workers: []jobview.Worker{
			{Worker: 0, Step: 40, Total: 80, LeaseID: 2, Provider: "prov1", StepsPerHour: 120, ETASeconds: 1200, CheckpointDeadline: 55, LatestLoss: &lp,
				CommittedStepsPerHour: 200, CheckpointedStep: 60, CheckpointedStepsPerHour: 90, PricePerStep: "1.5", Paid: "90", Pending: "10", Refunded: "7"},
			{Worker: 1, Step: 80, Total: 80, Paid: "0", Pending: "0", Refunded: "0"},
		},
		Checkpoints: []jobview.Checkpoint{
			{LeaseID: 2, Index: 0, StartStep: 0, EndStep: 40, Status: "CHECKPOINT_STATUS_FINAL", Final: true, Claim: "90udpin", Loss: &lp},
			{LeaseID: 4, Index: 0, Worker: 1, StartStep: 0, EndStep: 80, Status: "CHECKPOINT_STATUS_PENDING", Claim: "5udpin",
				Loss: &jobview.LossPoint{Worker: 1, Step: 80, Nats: 3, Source: jobview.LossSelfReported}, LossError: "provider unreachable"},
		},
		Disputes: []jobview.Dispute{{ID: 1, LeaseID: 4, Phase: "GAME_TURN_PROVIDER", ToMove: "provider", Rounds: 3, Lo: 0, Hi: 80, Challenger: "ch1"}},
		Leases: []jobview.Lease{{ID: 2, Worker: 0, Provider: "prov1", State: "LEASE_STATE_ACTIVE", Paid: "90udpin",
			StepsPerHour: 200, PricePerStep: "1.5", ClaimedStep: 60, Pending: "10udpin", Refunded: "7"}},
		BiddingDeadline: 70,
		Bids: []jobview.Bid{
			{Provider: "prov3", PricePerGPUHour: "300udpin", GPUs: 1, StepsPerHour: 240, PricePerStep: "1.25udpin", Runtime: "reference", Status: jobview.BidOpen, CreatedHeight: 66},
			{Provider: "prov1", PricePerGPUHour: "300udpin", GPUs: 1, StepsPerHour: 200, PricePerStep: "1.5udpin", Status: jobview.BidWon, CreatedHeight: 12, LeaseID: 2},
		},
	}
}

func TestJobStatusTable(t *testing.T) {
	var b strings.Builder
	require.NoError(t, writeStatus(&b, sampleView()))
	out := b.String()
	require.Regexp(t, `(?m)^0 +40/80 +120 steps/h +60 +90 / 200 steps/h \(45%\) +1\.5 +90 +10 +7 +20m0s`, out)
	for _, want := range []string{
		`job 3 "tiny"`, "deposited 1000", "paid 90",
		"40/80", "120 steps/h", "20m0s", "height 55", "2.5000 nats @40 (verified)",
		"80/80", "done",
		"2/0", "FINAL", "verified", "self-reported (not verified: provider unreachable)",
		"GAME_TURN_PROVIDER  provider", "0-80",
		"prov1", "ACTIVE",
		// Pay for work: the checkpointed rate against the committed one, the price per
		// step and the worker's money.
		"90 / 200 steps/h (45%)", "1.5", "200 steps/h",
		// The auction: an open bid and the bid that won lease 2.
		"auction open until the end of height 70",
	} {
		require.Contains(t, out, want)
	}
}

func TestJobStatusTableShowsBids(t *testing.T) {
	var b strings.Builder
	require.NoError(t, writeStatus(&b, sampleView()))
	out := b.String()
	require.Regexp(t, `(?m)^open +prov3 +300udpin +1 +240 steps/h +1\.25udpin +reference +height 66$`, out)
	require.Regexp(t, `(?m)^won: lease 2 \(worker 0\) +prov1 +300udpin +1 +200 steps/h +1\.5udpin +- +leased at height 12$`, out)
}

func TestJobStatusTableShowsRounds(t *testing.T) {
	v := sampleView()
	var b strings.Builder
	require.NoError(t, writeStatus(&b, v))
	require.NotContains(t, b.String(), "ROUND COMMIT")

	v.Sync = &jobview.Sync{Every: 10, OuterLR: 0.7, OuterMomentum: 0.9, TopK: 64, Round: 1, TotalRounds: 8}
	v.Rounds = []jobview.Round{
		{Round: 0, State: "FINAL", OpenedHeight: 3, Entered: []uint32{0}, Missed: []uint32{2}, Excluded: []uint32{1},
			Aggregator: "prov1", NextGlobalRoot: "abcdef012345", ChallengeDeadline: 20, Commits: []jobview.RoundCommit{
				{Worker: 0, LeaseID: 2, Provider: "prov1", CommittedHeight: 9, Claim: "50udpin", Pay: jobview.PayPaid},
				{Worker: 1, LeaseID: 4, Provider: "prov2", CommittedHeight: 10, Claim: "0udpin", Excluded: true, ExcludedReason: "wrong pseudo-gradient", Pay: jobview.PayReturned}}},
		{Round: 1, State: "OPEN", OpenedHeight: 15, Deadline: 25, Commits: []jobview.RoundCommit{}},
	}
	b.Reset()
	require.NoError(t, writeStatus(&b, v))
	out := b.String()
	require.Contains(t, out, "sync: every 10 steps, outer lr 0.7, outer momentum 0.9, top_k 64; round 1 of 8")
	require.Regexp(t, `(?m)^0 +FINAL +height 3 +- +0 +2 +1 \(wrong pseudo-gradient\) +prov1 +abcdef012345 +height 20$`, out)
	require.Regexp(t, `(?m)^1 +OPEN +height 15 +height 25 +- +- +- +- +- +-$`, out)
	require.Regexp(t, `(?m)^0 +0 +2 +prov1 +height 9 +50udpin +paid$`, out)
	require.Regexp(t, `(?m)^0 +1 +4 +prov2 +height 10 +0udpin +returned$`, out)
}

func TestJobStatusWatchFrame(t *testing.T) {
	f := watchFrame(sampleView())
	lines := strings.Split(strings.TrimSpace(f), "\n")
	require.Len(t, lines, 3, f)
	require.Contains(t, lines[1], "worker 0")
	require.Contains(t, lines[1], "50%")
	require.Contains(t, lines[1], "(40/80")
	require.Contains(t, lines[1], "ETA 20m0s")
	require.Contains(t, lines[1], "loss 2.5000 nats @40 (verified)")
	require.Contains(t, lines[2], "100%")
	require.Contains(t, lines[2], "ETA done")

	// A sync job's frame names its latest round under the header.
	v := sampleView()
	v.Sync = &jobview.Sync{Every: 10, Round: 1, TotalRounds: 8}
	v.Rounds = []jobview.Round{{Round: 0, State: "FINAL", Entered: []uint32{0, 1}, NextGlobalRoot: "abcdef012345"},
		{Round: 1, State: "AGGREGATING", Entered: []uint32{0}, Missed: []uint32{1}}}
	lines = strings.Split(strings.TrimSpace(watchFrame(v)), "\n")
	require.Len(t, lines, 4)
	require.Equal(t, "round 1 of 8  AGGREGATING  entered 0  missed 1  next global -", lines[1])
}

package main_test

import (
	"testing"
	"time"

	"github.com/depinchain/depinchain/testutil/localnet"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// BenchmarkBidLatency measures how soon the sidecar bids on a new job, against
// the chain's own block time measured in the same run: "block" waits for one
// block, "job-to-bid" submits a job and waits until the sidecar's bid is on
// chain. The ratio is the latency in blocks; blocks/bid counts them exactly
// (bid height − job height), where 1 is the best possible (the next block).
func BenchmarkBidLatency(b *testing.B) {
	w := newWorld(b, 10*time.Minute, localnet.ProviderOptions{})
	if err := w.provider.Start(w.ctx); err != nil {
		b.Fatal(err)
	}
	b.Run("block", func(b *testing.B) {
		for b.Loop() {
			if err := w.node.WaitBlocks(w.ctx, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("job-to-bid", func(b *testing.B) {
		var blocks int64
		for b.Loop() {
			jobID := w.submitJob(referenceJobYAML, "500000000udepin")
			created := w.job(jobID).CreatedHeight
			for {
				res, err := w.market.Bids(w.ctx, &markettypes.QueryBidsRequest{JobId: jobID})
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Bids) > 0 {
					blocks += res.Bids[0].CreatedHeight - created
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		b.ReportMetric(float64(blocks)/float64(b.N), "blocks/bid")
	})
}

package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/pkg/diloco"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// compressedRoundsJobYAML is roundsJobYAML with its pseudo-gradients compressed: the
// top 64 of every 1024 elements with error feedback.
var compressedRoundsJobYAML = strings.Replace(roundsJobYAML, "  outer_momentum: 0.9\n", "  outer_momentum: 0.9\n  top_k: 64\n", 1)

// TestSidecarsTrainCompressedAndProveAWrongAggregation: the three-sidecar job of
// TestSidecarsProveAWrongAggregation with top_k 64. Every worker commits, and the
// holders keep, its compressed pseudo-gradient (the committed size is the compressed
// file's); slot 0, restarted as a lying aggregator, commits round 0's global with one
// weight off and an honest trainer proves it wrong from the entered workers' records
// (the chain decompresses them and recomputes the chunk): the global is rejected, the
// cheater slashed exactly, an honest slot (slot 1 first) re-aggregates, and both globals are diloco.Simulate's
// with the same top_k bit for bit (slot 0 out of round 1, slots 1 and 2 carrying their
// error buffers into it); the global model's held-out loss fell. It logs the bytes the
// pseudo-gradients took against dense ones.
func TestSidecarsTrainCompressedAndProveAWrongAggregation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node and six real sidecars")
	}
	if !strings.Contains(compressedRoundsJobYAML, "top_k: 64") {
		t.Fatal("the compressed job spec has no top_k")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	t.Cleanup(cancel)
	r, want := runLyingAggregator(ctx, t, compressedRoundsJobYAML)
	if want[0].Sync.TopK != 64 { // checkSimulate ran Simulate with the job's sync
		t.Fatalf("the job trained with top_k %d", want[0].Sync.TopK)
	}
	r.checkHeldOutLossFell(ctx, t, want)

	l := diloco.NewLayout(want[0].Config)
	size, dense := uint64(l.CompressedFileBytes(64)), l.DenseFileChunks()*diloco.ChunkSize
	files := 0
	for round := range uint64(len(want) - 1) {
		res, err := r.market.RoundCommits(ctx, &markettypes.QueryRoundCommitsRequest{JobId: r.jobID, Round: round})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Commits {
			if c.PseudoGradientSize != size {
				t.Fatalf("round %d worker %d committed a pseudo-gradient of %d bytes, a compressed one is %d", round, c.Worker, c.PseudoGradientSize, size)
			}
			files++
		}
	}
	if files < 5 {
		t.Fatalf("%d pseudo-gradients committed over 2 rounds, want at least 5", files)
	}
	t.Logf("pseudo-gradient custody objects: %d of %d bytes (%d in all), dense %d bytes each (%d in all): %.1f%% of dense, %.1fx less",
		files, size, uint64(files)*size, dense, uint64(files)*dense, 100*float64(size)/float64(dense), float64(dense)/float64(size))
}

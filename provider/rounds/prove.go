package rounds

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/chain"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// committedGlobalPath is where a worker puts the committed G_{round+1} it disagrees
// with, fetched from custody: its own aggregate stays at GlobalPath.
func (j Job) committedGlobalPath(round uint64) string {
	return j.GlobalPath(round) + "-committed"
}

// proveAggregation fetches the committed G_{round+1} (root committed) from custody,
// finds the first chunk that is not the aggregate of G_round and the entered
// pseudo-gradients this worker holds (dense or compressed, each checked against its
// commitment by Aggregate), and sends its proof (x/verify MsgProveRoundFault, kind AGGREGATION). It
// returns whether the chain took the proof; a refused one (another worker proved it
// first, or the challenge window closed) is logged.
func (r *Role) proveAggregation(ctx context.Context, j Job, round uint64, entered []uint32, committed []byte) (bool, error) {
	if r.opts.Custody == nil {
		return false, fmt.Errorf("the committed global state of round %d of job %d is in custody and this sidecar cannot fetch from custody", round+1, j.ID)
	}
	want, err := merkle.HashFromBytes(committed)
	if err != nil {
		return false, fmt.Errorf("committed global root: %w", err)
	}
	path := j.committedGlobalPath(round + 1)
	if err := FetchGlobal(ctx, r.opts.Custody, j.ID, round+1, path); err != nil {
		return false, fmt.Errorf("fetching the committed global state of round %d: %w", round+1, err)
	}
	defer os.Remove(path)
	next, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	if g, err := diloco.DecodeGlobal(next); err != nil || g.Root() != want {
		return false, errors.Join(err, fmt.Errorf("custody object of the global state of round %d is not the committed one (%s)", round+1, want))
	}
	global, err := os.ReadFile(j.GlobalPath(round))
	if err != nil {
		return false, err
	}
	pgs := make([][]byte, len(entered))
	for i, w := range entered {
		if pgs[i], err = os.ReadFile(j.PseudoGradientPath(round, w)); err != nil {
			return false, err
		}
	}
	msg, err := dispute.AggregationFault(r.opts.Operator, j.ID, round, diloco.NewLayout(j.Config), j.Sync, global, next, entered, pgs)
	if err != nil {
		return false, fmt.Errorf("building the aggregation proof of round %d: %w", round, err)
	}
	if msg == nil {
		// Every chunk recomputes the same: the roots differ in the header only, which
		// the chain checks itself when the global is committed.
		return false, fmt.Errorf("the committed global state of round %d differs from this sidecar's aggregate in no weights or momentum chunk", round+1)
	}
	_, err = r.opts.Submit(ctx, msg)
	var txErr *chain.TxError
	if errors.As(err, &txErr) {
		r.log.Warn("the chain refused this sidecar's aggregation proof", "job", j.ID, "round", round, "chunk", msg.Chunk, "err", err)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("proving the aggregation of round %d wrong: %w", round, err)
	}
	r.log.Info("aggregation proven wrong", "job", j.ID, "round", round, "chunk", msg.Chunk, "momentum", msg.Momentum,
		"kind", verifytypes.ROUND_FAULT_AGGREGATION.String(), "rejected_root", want.String())
	return true, nil
}

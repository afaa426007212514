package rounds

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/pieces"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// A compressed pseudo-gradient (top_k jobs) is a function of the worker's end state, G_r
// and its error buffer e_in, which is the e_out of its previous entered round under the
// same lease (zero for its first) and is never served. The checker rebuilds it instead:
// checking worker c's round r, it compresses G_r − end with the e_in it rebuilt for c's
// previous entered round, exactly as the worker must (rebuildErrorBuffer), and keeps the
// e_out it gets for c's next round. An e_in it does not have (it joined later, missed the
// round, or could not fetch its files then) it rebuilds by replaying c's entered rounds
// since the last one whose buffer it kept, or since c's first under the lease, with their
// committed globals and end states (replayErrorBuffers), a few rounds per check. So it
// can open both buffers' chunks when c's header names the rebuilt roots and prove the
// first wrong record (dispute.CompressedPseudoGradientFault). A header whose error_in is
// not what the previous header's error_out says is proven from the two headers alone.
// What stays unproven: an error_out root that is not the rebuilt one (only the worker can
// open its chunks); it is logged.

// maxErrorBufferReplay is how many of a worker's earlier rounds one check replays at most
// to rebuild its error buffer: each costs a download of the worker's end state (and of G_q
// when this sidecar has not got it), about five dense pseudo-gradients, and the round
// waits for the check. A longer history goes on at the worker's next round's check.
const maxErrorBufferReplay = 4

// checkedErrorBufferPath is the error buffer worker leaves after round under lease, as
// this sidecar rebuilt it when it checked or replayed that round: the e_in of the
// worker's next entered round. A worker keeps at most two on disk (its last entered
// round's and the current one's, so a round checked again after an exclusion still has
// its e_in).
func (j Job) checkedErrorBufferPath(worker uint32, lease, round uint64) string {
	return filepath.Join(j.Dir, fmt.Sprintf("checked-errbuf-w%d-l%d-r%d", worker, lease, round))
}

// compressedFault checks worker c's compressed pseudo-gradient file pg of round g.Round
// against its end state and the rebuilt error buffer, and returns the proof of the first
// wrong chunk, or nil; prev is c's previous entered round under its lease (nil: none).
func (r *Role) compressedFault(ctx context.Context, j Job, g *diloco.GlobalState, global, end, pg []byte, c markettypes.RoundCommit, prev *markettypes.RoundCommit) (*verifytypes.MsgProveRoundFault, error) {
	l := diloco.NewLayout(j.Config)
	in, out, err := diloco.CompressedErrorRoots(pg[:diloco.ChunkSize])
	if err != nil {
		return nil, err
	}
	var prevFile []byte
	wantIn := l.ZeroErrorBufferRoot()
	errIn := make([]int64, l.Elems())
	if prev != nil {
		if errIn, err = r.errorBufferAfter(ctx, j, c, *prev); err != nil {
			return nil, fmt.Errorf("worker %d's error buffer after its round %d: %w", c.Worker, prev.Round, err)
		}
		if prevFile, err = r.previousPseudoGradient(ctx, j, c, *prev); err != nil {
			return nil, fmt.Errorf("the pseudo-gradient of the worker's round %d: %w", prev.Round, err)
		}
		if _, wantIn, err = diloco.CompressedErrorRoots(prevFile[:diloco.ChunkSize]); err != nil {
			return nil, fmt.Errorf("the pseudo-gradient of the worker's round %d: %w", prev.Round, err)
		}
	}
	if in != wantIn {
		return dispute.CompressedPseudoGradientFault(r.opts.Operator, j.ID, g.Round, c.Worker, l, j.Sync, global, end, pg, prevFile, nil, nil)
	}
	sent, errOut, err := r.rebuildErrorBuffer(j, g, end, c, prev, errIn)
	if err != nil {
		return nil, err
	}
	rebuilt, err := sent.Root()
	if err != nil {
		return nil, err
	}
	switch {
	case rebuilt == merkle.RootOfBytes(pg, diloco.ChunkSize):
		return nil, nil
	case in != sent.ErrIn:
		return nil, fmt.Errorf("worker %d's error_in %s is the error_out its round %d named, but this sidecar rebuilt %s: that round's error_out was wrong, and only the worker can open it", c.Worker, in, prev.Round, sent.ErrIn)
	case out != sent.ErrOut:
		header, err := dispute.OpenFileChunks(pg, 0)
		if err != nil {
			return nil, err
		}
		encIn := diloco.EncodeErrorBuffer(errIn)
		return nil, &fileQueryNeeded{commit: c, file: verifytypes.ROUND_FILE_ERROR_OUT, correct: diloco.EncodeErrorBuffer(errOut), header: &header[0],
			prove: func(opened verifytypes.FileChunk) (*verifytypes.MsgProveRoundFault, error) {
				return dispute.ErrorOutChunkFault(r.opts.Operator, j.ID, g.Round, c.Worker, l, j.Sync, global, end, pg, prevFile, encIn, opened)
			}}
	}
	msg, err := dispute.CompressedPseudoGradientFault(r.opts.Operator, j.ID, g.Round, c.Worker, l, j.Sync, global, end, pg, prevFile,
		diloco.EncodeErrorBuffer(errIn), diloco.EncodeErrorBuffer(errOut))
	if msg == nil && err == nil {
		err = fmt.Errorf("worker %d's compressed pseudo-gradient is not the rebuilt one, yet every record is", c.Worker)
	}
	return msg, err
}

// rebuildErrorBuffer compresses G_c.Round − worker c's end state with its error buffer
// errIn, exactly as the worker must (diloco.Compress), keeps the error_out it gets as
// c.Round's buffer (keepErrorBuffer; prev is c's previous entered round, nil: none) and
// returns the compressed pseudo-gradient and that error_out. A check and a replay both
// rebuild through it.
func (r *Role) rebuildErrorBuffer(j Job, g *diloco.GlobalState, end []byte, c markettypes.RoundCommit, prev *markettypes.RoundCommit, errIn []int64) (*diloco.PseudoGradient, []int64, error) {
	local, err := exact.Decode(end)
	if err != nil {
		return nil, nil, err
	}
	dense, err := diloco.NewPseudoGradient(g, c.Worker, local)
	if err != nil {
		return nil, nil, err
	}
	sent, errOut, err := dense.Compress(errIn)
	if err != nil {
		return nil, nil, err
	}
	if err := r.keepErrorBuffer(j, c, prev, errOut); err != nil {
		return nil, nil, err
	}
	return sent, errOut, nil
}

// errorBufferAfter is worker c's error buffer after prev, its previous entered round: the
// one this sidecar kept when it checked prev, else rebuilt now (replayErrorBuffers).
func (r *Role) errorBufferAfter(ctx context.Context, j Job, c, prev markettypes.RoundCommit) ([]int64, error) {
	path := j.checkedErrorBufferPath(c.Worker, c.LeaseId, prev.Round)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return r.replayErrorBuffers(ctx, j, c, prev)
	}
	return readErrBuf(path, diloco.NewLayout(j.Config).Elems())
}

// replayErrorBuffers rebuilds worker c's error buffer after prev, which this sidecar has
// not kept: it walks c's entered rounds under its lease back from prev to the last one
// whose buffer it kept (or past the first, whose error_in is zero) and replays them oldest
// first, each with the committed G_q and the worker's end state, both fetched as a check
// fetches them and checked against their roots on chain (the round's global_root, the
// commit's end_root). One call replays at most maxErrorBufferReplay rounds and then
// fails naming how far it got: the worker's next check goes on from the buffer kept. A
// fetch that fails fails the call the same way, and that check tries it again.
func (r *Role) replayErrorBuffers(ctx context.Context, j Job, c, prev markettypes.RoundCommit) ([]int64, error) {
	todo := []markettypes.RoundCommit{prev} // newest first
	var kept *markettypes.RoundCommit
	for kept == nil {
		before, err := r.previousEntered(ctx, j, todo[len(todo)-1])
		if err != nil {
			return nil, fmt.Errorf("the worker's entered rounds before %d: %w", todo[len(todo)-1].Round, err)
		}
		if before == nil {
			break
		}
		if _, err := os.Stat(j.checkedErrorBufferPath(c.Worker, c.LeaseId, before.Round)); err == nil {
			kept = before
			continue
		}
		todo = append(todo, *before)
	}
	slices.Reverse(todo)
	errIn := make([]int64, diloco.NewLayout(j.Config).Elems())
	if kept != nil {
		var err error
		if errIn, err = readErrBuf(j.checkedErrorBufferPath(c.Worker, c.LeaseId, kept.Round), len(errIn)); err != nil {
			return nil, err
		}
	}
	r.log.Info("rebuilding a worker's error buffer from its earlier rounds", "job", j.ID, "round", c.Round, "worker", c.Worker,
		"lease", c.LeaseId, "from_round", todo[0].Round, "to_round", prev.Round, "rounds", len(todo))
	last := kept
	for i, q := range todo {
		if i == r.opts.errorBufferReplay {
			return nil, fmt.Errorf("rebuilt up to its round %d of %d: the rest is replayed at its next check", last.Round, prev.Round)
		}
		g, err := r.committedGlobal(ctx, j, c, q.Round)
		if err != nil {
			return nil, fmt.Errorf("G_%d: %w", q.Round, err)
		}
		end, err := r.endState(ctx, j, q)
		if err != nil {
			return nil, fmt.Errorf("the end state of its round %d: %w", q.Round, err)
		}
		if _, errIn, err = r.rebuildErrorBuffer(j, g, end, q, last, errIn); err != nil {
			return nil, fmt.Errorf("its round %d: %w", q.Round, err)
		}
		if q.Round != prev.Round {
			// Not the carry into c's round (carryOf keeps that one): this end state was
			// fetched only for the replay.
			os.Remove(j.endStatePath(q.Round, q.Worker))
		}
		last = &todo[i]
	}
	return errIn, nil
}

// committedGlobal is G_round as the chain committed it: the file at its path, else put
// there as a worker puts its round's start (putGlobal). c is the commit being checked
// (retry).
func (r *Role) committedGlobal(ctx context.Context, j Job, c markettypes.RoundCommit, round uint64) (*diloco.GlobalState, error) {
	res, err := r.opts.Chain.Round(ctx, &markettypes.QueryRoundRequest{JobId: j.ID, Round: round})
	if err != nil {
		return nil, err
	}
	if err := r.retry(ctx, c, func() error { return r.putGlobal(ctx, j, res.Round) }); err != nil {
		return nil, err
	}
	return j.Global(round)
}

// keepErrorBuffer writes worker c's rebuilt error buffer after c.Round and removes the
// worker's older ones but its previous entered round's.
func (r *Role) keepErrorBuffer(j Job, c markettypes.RoundCommit, prev *markettypes.RoundCommit, errOut []int64) error {
	path := j.checkedErrorBufferPath(c.Worker, c.LeaseId, c.Round)
	if err := pieces.WriteBytesAtomic(path, diloco.EncodeErrorBuffer(errOut)); err != nil {
		return err
	}
	keep := []string{path}
	if prev != nil {
		keep = append(keep, j.checkedErrorBufferPath(c.Worker, c.LeaseId, prev.Round))
	}
	old, _ := filepath.Glob(filepath.Join(j.Dir, fmt.Sprintf("checked-errbuf-w%d-*", c.Worker)))
	for _, p := range old {
		if !slices.Contains(keep, p) {
			os.Remove(p)
		}
	}
	return nil
}

// previousPseudoGradient is worker prev.Worker's committed pseudo-gradient file of
// prev.Round (its header's error_out is the next round's error_in): the file kept here, or
// fetched from custody; either way checked against the commit's root. c is the commit
// being checked: the wait ends when the chain no longer counts it.
func (r *Role) previousPseudoGradient(ctx context.Context, j Job, c, prev markettypes.RoundCommit) ([]byte, error) {
	want, err := merkle.HashFromBytes(prev.PseudoGradientRoot)
	if err != nil {
		return nil, err
	}
	path := j.PseudoGradientPath(prev.Round, prev.Worker)
	read := func() ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if got := merkle.RootOfBytes(b, diloco.ChunkSize); got != want || len(b) < diloco.ChunkSize {
			return nil, fmt.Errorf("%w: %s has root %s, worker %d committed %s", ErrBadPseudoGradient, path, got, prev.Worker, want)
		}
		return b, nil
	}
	var file []byte
	err = r.retry(ctx, c, func() error {
		if file, err = read(); err == nil {
			return nil
		}
		if err := CustodyFetch(r.opts.Custody, j.ID)(ctx, prev.Round, prev.Worker, path); err != nil {
			return err
		}
		file, err = read()
		return err
	})
	return file, err
}

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
// checking worker c's round r, it compresses G_r − end with the e_in it rebuilt when it
// checked c's previous entered round, exactly as the worker must (diloco.Compress), and
// keeps the e_out it gets for c's next round. So it can open both buffers' chunks when
// c's header names the rebuilt roots and prove the first wrong record
// (dispute.CompressedPseudoGradientFault). A header whose error_in is not what the
// previous header's error_out says is proven from the two headers alone. What stays
// unproven: an error_out root that is not the rebuilt one (only the worker can open its
// chunks), and every round of a lease whose history this sidecar lacks (it joined later,
// missed a round itself, or could not check a round of the worker's): those are logged,
// never guessed, and cost no download (the previous round's file is read only with its
// history, when the checker has it on disk already).

// checkedErrorBufferPath is the error buffer worker leaves after round under lease, as
// this sidecar rebuilt it when it checked that round: the e_in of the worker's next
// entered round. A worker keeps at most two on disk (its last entered round's and the
// current one's, so a round checked again after an exclusion still has its e_in).
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
		path := j.checkedErrorBufferPath(c.Worker, c.LeaseId, prev.Round)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			r.logNoErrorHistory(j, c, prev.Round)
			return nil, nil
		}
		if errIn, err = readErrBuf(path, l.Elems()); err != nil {
			return nil, err
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
	local, err := exact.Decode(end)
	if err != nil {
		return nil, err
	}
	dense, err := diloco.NewPseudoGradient(g, c.Worker, local)
	if err != nil {
		return nil, err
	}
	sent, errOut, err := dense.Compress(errIn)
	if err != nil {
		return nil, err
	}
	if err := r.keepErrorBuffer(j, c, prev, errOut); err != nil {
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
		return nil, fmt.Errorf("worker %d's error_out %s is not the rebuilt %s: only the worker can open its chunks to prove it", c.Worker, out, sent.ErrOut)
	}
	msg, err := dispute.CompressedPseudoGradientFault(r.opts.Operator, j.ID, g.Round, c.Worker, l, j.Sync, global, end, pg, prevFile,
		diloco.EncodeErrorBuffer(errIn), diloco.EncodeErrorBuffer(errOut))
	if msg == nil && err == nil {
		err = fmt.Errorf("worker %d's compressed pseudo-gradient is not the rebuilt one, yet every record is", c.Worker)
	}
	return msg, err
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

// logNoErrorHistory says, once per lease, that this sidecar does not check worker c's
// compressed pseudo-gradients: it has not rebuilt the error buffer of c's round prevRound.
func (r *Role) logNoErrorHistory(j Job, c markettypes.RoundCommit, prevRound uint64) {
	r.mu.Lock()
	logged := r.noErrorHistory[c.LeaseId]
	r.noErrorHistory[c.LeaseId] = true
	r.mu.Unlock()
	if !logged {
		r.log.Warn("this sidecar has not rebuilt the worker's error buffer (it did not check its earlier round): its compressed pseudo-gradients go unchecked under this lease",
			"job", j.ID, "round", c.Round, "worker", c.Worker, "lease", c.LeaseId, "previous_round", prevRound)
	}
}

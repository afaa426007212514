package simulation

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/pkg/traindata"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/shardregistry/simulation/simdata"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// trainingData is the stream a worker of a reference job trains on, as a prover holds
// it: the built-in corpus, or the data pieces of the worker's assigned shards rebuilt
// from the simulated datasets' deterministic bytes. An error means the referee could not
// adjudicate the worker's checkpoints (no such dataset, no shard for the worker).
func trainingData(ctx sdk.Context, shards types.ShardKeeper, job markettypes.Job, worker uint32) (traindata.Stream, error) {
	if job.Spec.DatasetId == "" {
		return types.BuiltinData(), nil
	}
	ds, err := shards.GetDataset(ctx, job.Spec.DatasetId)
	if err != nil {
		return traindata.Stream{}, err
	}
	assigned, err := shards.WorkerShards(ctx, job.Id, worker, 0)
	if err != nil {
		return traindata.Stream{}, err
	}
	layout, err := types.DatasetLayout(ds, assigned)
	if err != nil {
		return traindata.Stream{}, err
	}
	var stream []byte
	for _, sh := range assigned {
		pieces := append([]shardtypes.Piece(nil), sh.Pieces...)
		sort.Slice(pieces, func(i, j int) bool { return pieces[i].Index < pieces[j].Index })
		data := 1
		if ds.Encoding.IsReedSolomon() {
			data = int(ds.Encoding.DataPieces)
		}
		for _, p := range pieces[:data] {
			b, err := simdata.PieceBytes(ds, sh, p.Index)
			if err != nil {
				return traindata.Stream{}, err
			}
			stream = append(stream, b...)
		}
	}
	return traindata.NewStream(layout, stream)
}

// honestRun is the exact workload of one job and worker stream, trained from the
// job's freshly initialised model: every state and its hash.
type honestRun struct {
	cfg    exact.Config
	seed   []byte
	data   traindata.Stream
	states []*exact.State
	hashes []merkle.Hash
}

var (
	runsMu sync.Mutex
	runs   = map[string]*honestRun{}
)

// maxCachedRuns bounds the cache of honest runs; it is a pure function's memo, so
// dropping it changes nothing but time.
const maxCachedRuns = 256

// runFor trains the job's reference model on data for n steps, memoized by seed, data and
// n. Simulated jobs have a dozen steps at most, so every state is kept.
func runFor(job markettypes.Job, data traindata.Stream, n uint64) (*honestRun, error) {
	h := sha256.New()
	h.Write(job.Seed)
	for _, s := range data.Segments {
		h.Write(s.Root[:])
	}
	key := fmt.Sprintf("%x/%d", h.Sum(nil), n)
	runsMu.Lock()
	defer runsMu.Unlock()
	if r, ok := runs[key]; ok {
		return r, nil
	}
	s, err := types.InitialState(job)
	if err != nil {
		return nil, err
	}
	r := &honestRun{cfg: s.Config, seed: job.Seed, data: data, states: []*exact.State{s}, hashes: []merkle.Hash{s.Root()}}
	for s.Step < n {
		if s, err = exact.Run(s, data.Bytes, job.Seed, 1, nil); err != nil {
			return nil, err
		}
		r.states = append(r.states, s)
		r.hashes = append(r.hashes, s.Root())
	}
	if len(runs) >= maxCachedRuns {
		runs = map[string]*honestRun{}
	}
	runs[key] = r
	return r, nil
}

// honest is the honest trace over [a, b].
func (r *honestRun) honest(a, b uint64) trace.Trace {
	return trace.New(a, append([]merkle.Hash(nil), r.hashes[a:b+1]...))
}

// saltOf names a liar: its role, its address and the checkpoint it lies about.
func saltOf(role, addr string, leaseID, index uint64) []byte {
	b := []byte(role + "/" + addr)
	b = binary.BigEndian.AppendUint64(b, leaseID)
	return binary.BigEndian.AppendUint64(b, index)
}

// lie is a liar's trace over [a, b] (b > a): honest up to step k − 1 and made-up hashes
// from step k on, k in (a, b] fixed by the salt. Different liars' made-up hashes differ,
// so two liars agree exactly where both are still honest.
func lie(hashes []merkle.Hash, a, b uint64, salt []byte) trace.Trace {
	sum := sha256.Sum256(salt)
	k := a + 1 + binary.BigEndian.Uint64(sum[:8])%(b-a)
	out := append([]merkle.Hash(nil), hashes[a:b+1]...)
	for i := k; i <= b; i++ {
		out[i-a] = sha256.Sum256(append(append([]byte("depinchain/sim/lie/v1"), salt...), out[i-a][:]...))
	}
	return trace.New(a, out)
}

// opaque is the trace of a workload nobody can recompute on-chain (a container job, or a
// reference job whose data the referee cannot see): hashes derived from the lease.
func opaque(leaseID, a, b uint64) trace.Trace {
	var hs []merkle.Hash
	for i := a; i <= b; i++ {
		var buf [16]byte
		binary.BigEndian.PutUint64(buf[:8], leaseID)
		binary.BigEndian.PutUint64(buf[8:], i)
		hs = append(hs, sha256.Sum256(append([]byte("depinchain/sim/opaque/v1"), buf[:]...)))
	}
	return trace.New(a, hs)
}

// party is the trace an account committed to for a checkpoint, and whether it is honest.
type party struct {
	trace  trace.Trace
	honest bool
}

// recognize finds which of the traces the simulation could have committed has root.
func recognize(root []byte, candidates ...party) (party, bool) {
	for _, c := range candidates {
		r := c.trace.Root()
		if bytes.Equal(r[:], root) {
			return c, true
		}
	}
	return party{}, false
}

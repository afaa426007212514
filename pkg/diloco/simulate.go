package diloco

import (
	"fmt"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/traindata"
)

// DefaultShardBytes is the shard size Simulate cuts a stream into when no
// shard list is given.
const DefaultShardBytes = 256

// SimOptions describe a single-process run of a training-together job.
type SimOptions struct {
	Config exact.Config
	Sync   SyncSpec
	// Seed is the job seed: initial weights, batch windows, data assignment.
	Seed    []byte
	Workers int
	Rounds  int
	// Stream is the training data; nil means the built-in corpus.
	Stream []byte
	// Shards is the assignment unit list over Stream; nil means
	// CorpusShards(len(Stream), DefaultShardBytes).
	Shards []Shard
	// Dropouts lists, per round, the workers that miss its deadline: they
	// are left out of that round's average and their result is discarded
	// (their Adam moments and error buffer stay those of the last round
	// they entered).
	Dropouts map[uint64][]int
	// Joiners lists, per round, the workers whose slot a new lease took
	// before it: they start that round from WorkerStart(nil) of the global
	// (no carry: zero Adam moments and error buffer), as a replacement
	// that fetched G_r from custody does.
	Joiners map[uint64][]int
	// Initial, when set, gives round 0's weights instead of exact.Init of
	// the seed (a fine-tuning job's imported or pretrained weights; only
	// its weights are used). Its config must be Config's.
	Initial *exact.State
	// ExecWorkers is the exact executor's goroutine count (0: GOMAXPROCS).
	ExecWorkers int
}

// Simulate runs Workers workers for Rounds rounds in one process with
// pkg/exact and returns the global state at the start of every round and
// after the last: Rounds+1 states, [0] the initial one. In round r each
// worker that does not drop out starts from WorkerStart(its carry), trains
// sync.every inner steps (exact.StepBatch over its WorkerData of round r,
// the job seed), and contributes its pseudo-gradient (compressed with
// error feedback when sync.top_k > 0); Aggregate makes the next global
// state. A worker the round's assignment gives no shard sits the round out
// like a dropout (the sidecar does the same). It is the reference a multi-sidecar run must match bit for bit.
func Simulate(o SimOptions) ([]*GlobalState, error) {
	sync, err := o.Sync.Sync()
	if err != nil {
		return nil, err
	}
	if o.Workers < 1 || o.Workers > MaxWorkers || o.Rounds < 0 {
		return nil, fmt.Errorf("%w: %d workers, %d rounds", ErrInvalid, o.Workers, o.Rounds)
	}
	stream := o.Stream
	if stream == nil {
		stream = traindata.BuiltinCorpus()
	}
	shards := o.Shards
	if shards == nil {
		shards = CorpusShards(uint64(len(stream)), DefaultShardBytes)
	}
	var g *GlobalState
	if o.Initial != nil {
		if o.Initial.Config.Hyper() != o.Config.WithDefaults().Hyper() {
			return nil, fmt.Errorf("%w: initial state has a different config", ErrInvalid)
		}
		g, err = GlobalFromState(o.Initial, sync)
	} else {
		g, err = InitGlobal(o.Config, sync, o.Seed)
	}
	if err != nil {
		return nil, err
	}
	out := []*GlobalState{g}
	carry := make([]*exact.State, o.Workers)
	errBufs := make([][]int64, o.Workers)
	ex := &exact.Executor{Workers: o.ExecWorkers}
	for r := uint64(0); r < uint64(o.Rounds); r++ {
		dropped := map[int]bool{}
		for _, w := range o.Dropouts[r] {
			dropped[w] = true
		}
		for _, w := range o.Joiners[r] {
			if w < 0 || w >= o.Workers {
				return nil, fmt.Errorf("%w: round %d: joiner %d of %d workers", ErrInvalid, r, w, o.Workers)
			}
			carry[w], errBufs[w] = nil, nil
		}
		assigned, err := Assign(o.Seed, r, shards, o.Workers)
		if err != nil {
			return nil, err
		}
		var pgs []*PseudoGradient
		for w := range o.Workers {
			if dropped[w] || len(assigned[w]) == 0 {
				continue // a slot the round gives no shard sits it out, as a dropout
			}
			data, err := WorkerData(stream, o.Seed, r, shards, o.Workers, w)
			if err != nil {
				return nil, err
			}
			s := g.WorkerStart(carry[w])
			for range sync.Every {
				batch, err := exact.StepBatch(s.Config, o.Seed, s.Step, data)
				if err != nil {
					return nil, fmt.Errorf("round %d worker %d: %w", r, w, err)
				}
				if s, _, err = ex.Step(s, batch); err != nil {
					return nil, err
				}
			}
			pg, err := NewPseudoGradient(g, uint32(w), s)
			if err != nil {
				return nil, err
			}
			if sync.TopK > 0 {
				if pg, errBufs[w], err = pg.Compress(errBufs[w]); err != nil {
					return nil, err
				}
			}
			carry[w] = s
			pgs = append(pgs, pg)
		}
		if len(pgs) == 0 {
			return nil, fmt.Errorf("%w: round %d: every worker dropped out", ErrInvalid, r)
		}
		if g, err = Aggregate(g, pgs); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

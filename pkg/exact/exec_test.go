package exact

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// stepRoots runs n steps with the given worker count and returns h_1..h_n.
func stepRoots(t testing.TB, cfg Config, n, workers int) []merkle.Hash {
	t.Helper()
	s, err := Init(cfg, testSeed)
	require.NoError(t, err)
	ex := &Executor{Workers: workers}
	var roots []merkle.Hash
	for range n {
		b, err := StepBatch(s.Config, testSeed, s.Step, testCorpus)
		require.NoError(t, err)
		var info StepInfo
		s, info, err = ex.Step(s, b)
		require.NoError(t, err)
		roots = append(roots, info.Root)
	}
	return roots
}

func TestResultsDoNotDependOnWorkersOrGOMAXPROCS(t *testing.T) {
	cfg := tinyConfig()
	want := stepRoots(t, cfg, 3, 1)
	require.Equal(t, want, stepRoots(t, cfg, 3, 2))
	require.Equal(t, want, stepRoots(t, cfg, 3, 7))
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	require.Equal(t, want, stepRoots(t, cfg, 3, 0))
	runtime.GOMAXPROCS(2)
	require.Equal(t, want, stepRoots(t, cfg, 3, 0))
}

// The loss falls on a tiny model trained on a short text.
func TestTrainingLearns(t *testing.T) {
	cfg := tinyConfig()
	cfg.Train.LR = 1e-2
	s, err := Init(cfg, testSeed)
	require.NoError(t, err)
	var first, last int64
	for i := range 60 {
		b, err := StepBatch(s.Config, testSeed, s.Step, testCorpus)
		require.NoError(t, err)
		var info StepInfo
		s, info, err = Step(s, b)
		require.NoError(t, err)
		if i == 0 {
			first = info.Loss
		}
		last = info.Loss
	}
	require.Less(t, LossNats(last), LossNats(first)-1.5, "loss %f -> %f", LossNats(first), LossNats(last))
}

// randomConfig draws a small valid config.
func randomConfig(r *rand.Rand) Config {
	heads := 1 + r.IntN(3)
	mb := 1 + r.IntN(2)
	return Config{
		Model: ModelConfig{Layers: 1 + r.IntN(2), DModel: heads * (1 + r.IntN(6)), Heads: heads, DFF: 1 + r.IntN(16),
			Context: 1 + r.IntN(7), Vocab: 256},
		Train: TrainConfig{Batch: mb * (1 + r.IntN(3)), MicroBatch: mb, LR: []float64{1e-3, 1e-2, 0.1}[r.IntN(3)],
			WarmupSteps: r.IntN(3), WeightDecay: []float64{0, 0.1}[r.IntN(2)], Beta2: []float64{0, 0.999}[r.IntN(2)]},
	}
}

// Property: for random small configs, steps are identical for 1 and 3
// workers, every state round-trips through Encode/Decode, and the
// per-operator outputs evaluated chunk by chunk from exactly their
// declared inputs equal the full executor's.
func TestPropertyRandomConfigs(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 34))
	for i := range 12 {
		cfg := randomConfig(r)
		require.NoError(t, cfg.Validate(), "%+v", cfg)
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			a := stepRoots(t, cfg, 2, 1)
			require.Equal(t, a, stepRoots(t, cfg, 2, 3), "%+v", cfg)
			s := trained(t, cfg, 2)
			d, err := Decode(s.Encode())
			require.NoError(t, err)
			require.Equal(t, s.Root(), d.Root())
			require.Equal(t, a[1], s.Root())
			checkChunkEvaluation(t, s, 2)
		})
	}
}

// checkChunkEvaluation runs one step of s with an observer and, for up to
// perOp chunks of every operator output (first, last, random), recomputes
// the chunk with EvalChunk from a SparseSource holding exactly the
// rectangles ChunkNeeds declares (everything else poisoned), and compares.
func checkChunkEvaluation(t *testing.T, s *State, perOp int) {
	t.Helper()
	g := TrainGraph(s.Config)
	b, err := StepBatch(s.Config, testSeed, s.Step, testCorpus)
	require.NoError(t, err)
	inputs, err := StepInputs(g, s, b)
	require.NoError(t, err)
	keep := map[int]bool{}
	for i := range g.Tensors {
		keep[i] = true
	}
	env, err := (&Executor{Workers: 2, Keep: keep}).Run(g, inputs)
	require.NoError(t, err)
	for id, tt := range inputs {
		env[id] = &Tensor{Spec: &g.Tensors[id], Data: tt.Data}
	}
	r := rand.New(rand.NewPCG(uint64(s.Step), 99))
	const poison = 1_234_567
	for i := range g.Ops {
		op := &g.Ops[i]
		out := env[op.Output]
		full := out.Encode()
		n := out.Spec.Chunks()
		chunks := []int{0, n - 1}
		for range perOp {
			chunks = append(chunks, r.IntN(n))
		}
		for _, c := range chunks {
			src := g.NewSparseSource(op)
			provide := func(ns []Need) {
				for _, nd := range ns {
					in := env[op.Inputs[nd.Input]]
					for row := nd.Row0; row < nd.Row1; row++ {
						if src.Row(nd.Input, row) == nil {
							p := make([]int64, in.Spec.Cols())
							for j := range p {
								p[j] = poison
							}
							src.Set(nd.Input, row, 0, p)
						}
						src.Set(nd.Input, row, nd.Col0, in.Row(row)[nd.Col0:nd.Col1])
					}
				}
			}
			ns, err := g.ChunkNeeds(op, c, nil)
			require.NoError(t, err)
			provide(ns)
			if op.Kind == KindEmbed { // token rows depend on the window bytes
				ns, err = g.ChunkNeeds(op, c, src)
				require.NoError(t, err)
				provide(ns)
			}
			got, err := g.EvalChunk(op, c, src)
			require.NoError(t, err, "op %d %s", op.Index, op.Kind)
			lo := c * ChunkSize
			require.Equal(t, full[lo:min(lo+ChunkSize, len(full))], got, "op %d (%s → %s) chunk %d", op.Index, op.Kind, out.Spec.Name, c)
		}
	}
}

func TestChunkEvaluationOfEveryOperator(t *testing.T) {
	cfg := Config{Model: ModelConfig{Layers: 1, DModel: 24, Heads: 3, DFF: 600, Context: 20, Vocab: 256},
		Train: TrainConfig{Batch: 4, MicroBatch: 2, LR: 1e-2, WarmupSteps: 1, WeightDecay: 0.1}}
	s := trained(t, cfg, 1)
	checkChunkEvaluation(t, s, 3)
	g := TrainGraph(s.Config)
	_, err := g.EvalChunk(&g.Ops[0], 1<<20, nil)
	require.ErrorContains(t, err, "out of range")
}

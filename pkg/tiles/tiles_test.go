package tiles

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
)

var (
	testSeed   = []byte("tiles-test-seed")
	testCorpus = []byte(strings.Repeat("the quick brown fox jumps over the lazy dog; exact arithmetic is reproducible. ", 64))
)

// smallConfig has two micro-batches and tensors of several chunks (d_ff
// 600: the MLP's [T, 600] activations span chunks unaligned with rows).
func smallConfig() exact.Config {
	return exact.Config{
		Model: exact.ModelConfig{Layers: 1, DModel: 24, Heads: 3, DFF: 600, Context: 20, Vocab: exact.Vocab},
		Train: exact.TrainConfig{Batch: 4, MicroBatch: 2, LR: 1e-2, WarmupSteps: 1, WeightDecay: 0.1},
	}.WithDefaults()
}

// fixture is a pre-state after one step (so Adam's moments are not zero)
// and the batch of its next step.
type fixture struct {
	step  *Step
	pre   *exact.State
	batch [][]byte
}

func newFixture(t testing.TB, cfg exact.Config) fixture {
	t.Helper()
	s, err := exact.Init(cfg, testSeed)
	require.NoError(t, err)
	s, err = exact.Run(s, testCorpus, testSeed, 1, nil)
	require.NoError(t, err)
	b, err := exact.StepBatch(cfg, testSeed, s.Step, testCorpus)
	require.NoError(t, err)
	return fixture{NewStep(cfg), s, b}
}

func (f fixture) party(t testing.TB, ex exact.Executor, batch [][]byte) *Party {
	t.Helper()
	if batch == nil {
		batch = f.batch
	}
	p, err := NewParty(f.step, ex, f.pre, batch)
	require.NoError(t, err)
	return p
}

func TestCommitMatchesTheExactStep(t *testing.T) {
	f := newFixture(t, smallConfig())
	p := f.party(t, exact.Executor{}, nil)
	recs, next, err := (&exact.Executor{}).StepRecords(f.pre, f.batch)
	require.NoError(t, err)
	require.Equal(t, next.Root(), p.C.Roots[f.step.Store()], "the store's root is h_{i+1}")
	require.Equal(t, next.Root(), p.Next.Root())
	nLoads := len(f.step.Graph.Inputs)
	require.Equal(t, nLoads+len(recs)+1, f.step.Len())
	for i, r := range recs {
		require.Equal(t, r.OutputRoot, p.C.Roots[nLoads+i], "op %d", i)
		for j, w := range f.step.InputEntries(nLoads + i) {
			require.Equal(t, r.InputRoots[j], p.C.Roots[w], "op %d input %d is its writer's output", i, j)
		}
	}
	require.Equal(t, f.pre.Tensor("tok_emb.w").Root(), p.C.Roots[f.step.Writer(f.step.Graph.ID("tok_emb.w"))])
	for e := range f.step.Len() {
		require.Equal(t, RecordLeaf(e, f.step.Entries[e].Kind, p.C.Roots[e]), p.C.Leaves[e])
		_, err := f.step.VerifyRecord(p.C.Root, p.RecordOpening(e))
		require.NoError(t, err)
	}
	require.NoError(t, f.step.CheckRecord(0, KindLoad))
	require.Error(t, f.step.CheckRecord(0, exact.KindMatmul))
}

func TestDescentFindsTheLeftmostDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n := 1 + r.IntN(300)
		a := make([]merkle.Hash, n)
		for i := range a {
			a[i][0], a[i][1] = byte(i), byte(i>>8)
		}
		b := append([]merkle.Hash(nil), a...)
		first := r.IntN(n)
		for i := first; i < n; i++ {
			if i == first || r.IntN(3) == 0 {
				b[i][2] = 1
			}
		}
		d, err := NewDescent(uint64(n), merkle.RootFromLeafHashes(a), merkle.RootFromLeafHashes(b))
		require.NoError(t, err)
		rounds := d.Rounds()
		moves := 0
		for !d.Done() {
			pl, pr := Children(a, d.Lo, d.Hi)
			cl, cr := Children(b, d.Lo, d.Hi)
			_, err := d.Next(cl, cr, cl, cr)
			require.Error(t, err, "children that do not hash to the provider's node are refused")
			d, err = d.Next(pl, pr, cl, cr)
			require.NoError(t, err)
			moves++
		}
		require.Equal(t, uint64(first), d.Lo)
		require.LessOrEqual(t, moves, rounds)
		require.Equal(t, a[first], d.Provider)
		require.Equal(t, b[first], d.Challenger)
	}
	_, err := NewDescent(3, merkle.Hash{1}, merkle.Hash{1})
	require.ErrorIs(t, err, ErrNoDisagreement)
}

// checkEveryOperator recomputes sampled elements of every operator's output
// from openings of the honest inputs and compares with the executor.
func checkEveryOperator(t *testing.T, f fixture, samples int) {
	t.Helper()
	p := f.party(t, exact.Executor{}, nil)
	r := rand.New(rand.NewPCG(3, 4))
	kinds := map[string]bool{}
	in, err := exact.StepInputs(f.step.Graph, f.pre, f.batch)
	require.NoError(t, err)
	all := map[int]bool{}
	for id := range f.step.Graph.Tensors {
		all[id] = true
	}
	env, err := (&exact.Executor{Keep: all}).Run(f.step.Graph, in)
	require.NoError(t, err)
	for e, en := range f.step.Entries {
		if en.Op == nil {
			continue
		}
		kinds[en.Kind] = true
		var ins []*exact.Tensor
		for _, id := range en.Op.Inputs {
			ins = append(ins, env[id])
		}
		out := env[en.Op.Output]
		roots := make([]merkle.Hash, len(ins))
		for i, w := range f.step.InputEntries(e) {
			roots[i] = p.C.Roots[w]
		}
		bound := f.step.ElementBound(e)
		n := out.Spec.Elems()
		elems := []int{0, n - 1}
		for range samples {
			elems = append(elems, r.IntN(n))
		}
		for _, el := range elems {
			opens, err := f.step.ElementOpenings(e, el, ins)
			require.NoError(t, err)
			got, cost, err := f.step.EvalElement(e, roots, el, opens)
			require.NoError(t, err, "entry %d (%s) element %d", e, en.Kind, el)
			require.Equal(t, out.Data[el], got, "entry %d (%s %s) element %d", e, en.Kind, out.Spec.Name, el)
			require.LessOrEqual(t, cost.Bytes, bound.Bytes, "entry %d (%s)", e, en.Kind)
			require.LessOrEqual(t, cost.Elems, bound.Elems, "entry %d (%s)", e, en.Kind)
		}
	}
	for _, k := range []string{exact.KindQExp, exact.KindQMant, exact.KindMatmul, exact.KindTranspose, exact.KindEmbed,
		exact.KindRMSScale, exact.KindRMSApply, exact.KindRMSBackward, exact.KindSplitHeads, exact.KindMergeHeads,
		exact.KindSoftmax, exact.KindSoftmaxBack, exact.KindCELoss, exact.KindCEGrad, exact.KindSum, exact.KindAdd,
		exact.KindReLU, exact.KindReLUBack, exact.KindEmbedGradTok, exact.KindEmbedGradPos, exact.KindSchedule,
		exact.KindAdamM, exact.KindAdamV, exact.KindAdamW, exact.KindLossMean} {
		require.True(t, kinds[k], "the step has a %s operator", k)
	}
}

func TestElementRefereeOfEveryOperatorKind(t *testing.T) {
	checkEveryOperator(t, newFixture(t, smallConfig()), 3)
}

// TestElementRefereeAtSaturation drives the arithmetic to its edges:
// weights at ±(2^31 − 1) and ±1 alternately, Adam's m at the bounds and v at
// 0 and its maximum, so matmuls requantize to their bounds, normalisations
// see huge and tiny rows, softmax rows have one dominant logit, AdamW's
// update saturates and rounding ties occur; the element referee must agree
// with the executor everywhere.
func TestElementRefereeAtSaturation(t *testing.T) {
	f := newFixture(t, smallConfig())
	f.pre = f.pre.Clone()
	for _, tn := range f.pre.Tensors {
		lo, hi := tn.Spec.DType.Range()
		for i := range tn.Data {
			switch {
			case strings.HasSuffix(tn.Spec.Name, ".v"):
				tn.Data[i] = []int64{0, hi, 1}[i%3]
			case i%4 == 0:
				tn.Data[i] = hi
			case i%4 == 1:
				tn.Data[i] = lo
			case i%4 == 2:
				tn.Data[i] = 1
			default:
				tn.Data[i] = -1
			}
		}
	}
	checkEveryOperator(t, f, 2)
}

func TestRefereeRefusesBadOpenings(t *testing.T) {
	f := newFixture(t, smallConfig())
	p := f.party(t, exact.Executor{}, nil)
	var e int
	for i, en := range f.step.Entries {
		if en.Kind == exact.KindMatmul {
			e = i
			break
		}
	}
	ins, _, err := f.step.Tensors(&exact.Executor{}, f.pre, f.batch, e)
	require.NoError(t, err)
	roots := make([]merkle.Hash, len(ins))
	for i, w := range f.step.InputEntries(e) {
		roots[i] = p.C.Roots[w]
	}
	opens, err := f.step.ElementOpenings(e, 5, ins)
	require.NoError(t, err)
	_, _, err = f.step.EvalElement(e, roots, 5, opens[1:])
	require.ErrorContains(t, err, "not opened")
	bad := append([]Opening(nil), opens...)
	bad[0].Data = append([]byte(nil), bad[0].Data...)
	bad[0].Data[0] ^= 1
	_, _, err = f.step.EvalElement(e, roots, 5, bad)
	require.ErrorIs(t, err, merkle.ErrRootMismatch)
	_, _, err = f.step.EvalElement(e, roots, 5, append(opens, opens[0]))
	require.ErrorContains(t, err, "twice")
	wrong := append([]merkle.Hash(nil), roots...)
	wrong[0] = merkle.Hash{9}
	_, _, err = f.step.EvalElement(e, wrong, 5, opens)
	require.Error(t, err)
	_, _, err = f.step.EvalElement(0, roots, 5, opens)
	require.ErrorContains(t, err, "not an operator")
}

func TestLoadAndStoreChunks(t *testing.T) {
	f := newFixture(t, smallConfig())
	p := f.party(t, exact.Executor{}, nil)
	enc := f.pre.Encode()
	for e, en := range f.step.Entries {
		if en.Kind != KindLoad {
			continue
		}
		ls, err := f.step.LoadOf(e)
		require.NoError(t, err)
		_, out, err := f.step.Tensors(&exact.Executor{}, f.pre, f.batch, e)
		require.NoError(t, err)
		for c := range out.Spec.Chunks() {
			want, _, err := out.ChunkProof(c)
			require.NoError(t, err)
			var got []byte
			switch ls.Source {
			case LoadStep:
				got = StepChunk(f.pre.Step)
			case LoadWindow:
				got, err = WindowChunk(f.step.Config, ls.Micro, c, f.batch)
				require.NoError(t, err)
			case LoadState:
				fc, n, err := StateChunk(f.step.Config, ls.Name, c)
				require.NoError(t, err)
				got = enc[fc*exact.ChunkSize : fc*exact.ChunkSize+n]
			}
			require.Equal(t, want, got, "load %d (%s) chunk %d", e, out.Spec.Name, c)
		}
	}
	next := p.Next.Encode()
	st := f.step.Store()
	roots := make([]merkle.Hash, 0)
	for _, w := range f.step.InputEntries(st) {
		roots = append(roots, p.C.Roots[w])
	}
	for j := range int(merkle.ChunkCount(int64(len(next)), exact.ChunkSize)) {
		src, err := NextStateSource(f.step.Config, j)
		require.NoError(t, err)
		in, c := src.Tensor, src.Chunk
		if in < 0 {
			in, c = f.step.LossInput(), 0
		}
		o, err := p.StoreInputChunk(in, c)
		require.NoError(t, err)
		got, _, err := f.step.StoreChunk(j, roots, o, f.pre.Step+1)
		require.NoError(t, err)
		require.Equal(t, next[j*exact.ChunkSize:min((j+1)*exact.ChunkSize, len(next))], got, "state chunk %d", j)
	}
}

// --- the game ----------------------------------------------------------------

// tamper makes an executor change one element of operator op's output
// (a cheater that is wrong in exactly one place; later operators compute
// honestly from the wrong value).
func tamper(op, elem int) exact.Executor {
	return exact.Executor{Observer: func(o *exact.Op, out *exact.Tensor) {
		if o.Index == op {
			if out.Data[elem] > 0 {
				out.Data[elem]--
			} else {
				out.Data[elem]++
			}
		}
	}}
}

type outcome struct {
	providerWins bool
	entry        int
	kind         string
	moves        int
	worst        Cost
}

// play runs phases 2 and 3 between two parties as the chain would, the
// referee using the agreed pre-state f.pre and the job's data f.batch.
func play(t *testing.T, f fixture, prov, chal *Party) outcome {
	t.Helper()
	s := f.step
	var o outcome
	note := func(c Cost) {
		o.moves++
		if c.Bytes > o.worst.Bytes {
			o.worst = c
		}
	}
	d, err := NewDescent(uint64(s.Len()), prov.C.Root, chal.C.Root)
	require.NoError(t, err)
	for !d.Done() {
		pl, pr := prov.C.Children(d.Lo, d.Hi)
		cl, cr := chal.C.Children(d.Lo, d.Hi)
		d, err = d.Next(pl, pr, cl, cr)
		require.NoError(t, err)
		note(NodeRevealCost)
		note(NodeRevealCost)
	}
	e := int(d.Lo)
	o.entry, o.kind = e, s.Entries[e].Kind
	// Both open record e: a record inconsistent with the graph cannot be
	// opened, and its party loses by timeout.
	if RecordLeaf(e, s.Entries[e].Kind, prov.C.Roots[e]) != d.Provider {
		return o
	}
	if RecordLeaf(e, s.Entries[e].Kind, chal.C.Roots[e]) != d.Challenger {
		o.providerWins = true
		return o
	}
	od, err := NewDescent(s.OutputChunks(e), prov.C.Roots[e], chal.C.Roots[e])
	require.NoError(t, err)
	for !od.Done() {
		pl, pr, err := prov.OutputChildren(e, od.Lo, od.Hi)
		require.NoError(t, err)
		cl, cr, err := chal.OutputChildren(e, od.Lo, od.Hi)
		require.NoError(t, err)
		od, err = od.Next(pl, pr, cl, cr)
		require.NoError(t, err)
		note(NodeRevealCost)
		note(NodeRevealCost)
	}
	c := int(od.Lo)
	switch en := s.Entries[e]; {
	case en.Kind == KindLoad:
		ls, err := s.LoadOf(e)
		require.NoError(t, err)
		var want []byte
		switch ls.Source {
		case LoadStep:
			want = StepChunk(f.pre.Step)
		case LoadWindow:
			want, err = WindowChunk(s.Config, ls.Micro, c, f.batch)
			require.NoError(t, err)
		case LoadState:
			fc, n, err := StateChunk(s.Config, ls.Name, c)
			require.NoError(t, err)
			enc := f.pre.Encode()
			want = enc[fc*exact.ChunkSize : fc*exact.ChunkSize+n]
		}
		note(Cost{Bytes: int64(len(want))})
		o.providerWins = merkle.LeafHash(want) == od.Provider
	case en.Kind == KindStore:
		roots, cost, err := s.AgreedInputRoots(chal.C.Root, e, chal.InputOpenings(e))
		require.NoError(t, err)
		src, err := NextStateSource(s.Config, c)
		require.NoError(t, err)
		in, ch := src.Tensor, src.Chunk
		if in < 0 {
			in, ch = s.LossInput(), 0
		}
		op, err := chal.StoreInputChunk(in, ch)
		require.NoError(t, err)
		want, c2, err := s.StoreChunk(c, roots, op, f.pre.Step+1)
		require.NoError(t, err)
		cost.add(c2)
		note(cost)
		o.providerWins = merkle.LeafHash(want) == od.Provider
	default:
		chunk, proof, err := prov.OutputChunk(e, c)
		require.NoError(t, err)
		require.Equal(t, od.Provider, merkle.LeafHash(chunk), "the provider reveals the chunk of its leaf")
		note(Cost{Bytes: int64(len(chunk)) + 32*int64(len(proof))})
		i, err := chal.FirstDifference(e, c, chunk)
		require.NoError(t, err)
		if i < 0 { // nothing to point at: the challenger times out
			o.providerWins = true
			return o
		}
		roots, cost, err := s.AgreedInputRoots(chal.C.Root, e, chal.InputOpenings(e))
		require.NoError(t, err)
		opens, err := chal.ElementOpenings(e, c*ElemsPerChunk(s.Spec(e))+i)
		require.NoError(t, err)
		right, _, c2, err := s.JudgeElement(e, c, chunk, i, roots, opens)
		require.NoError(t, err)
		cost.add(c2)
		note(cost)
		o.providerWins = right
	}
	return o
}

// opIndex finds the first operator of kind whose output name matches.
func opIndex(t *testing.T, s *Step, kind string, match func(string) bool) int {
	for _, op := range s.Graph.Ops {
		if op.Kind == kind && match(s.Graph.Tensors[op.Output].Name) {
			return op.Index
		}
	}
	t.Fatalf("no %s operator", kind)
	return -1
}

func TestOneWrongElementIsCaught(t *testing.T) {
	f := newFixture(t, smallConfig())
	honest := f.party(t, exact.Executor{}, nil)
	any := func(string) bool { return true }
	isGrad := func(n string) bool { return strings.Contains(n, ".g.") || strings.HasPrefix(n, "mb0.g") }
	for _, tc := range []struct {
		name string
		op   int
	}{
		{"forward matmul", opIndex(t, f.step, exact.KindMatmul, func(n string) bool { return !isGrad(n) })},
		{"attention softmax", opIndex(t, f.step, exact.KindSoftmax, any)},
		{"normalisation", opIndex(t, f.step, exact.KindRMSApply, any)},
		{"backward matmul", opIndex(t, f.step, exact.KindMatmul, func(n string) bool { return strings.HasSuffix(n, ".dW") })},
		{"AdamW update", opIndex(t, f.step, exact.KindAdamW, any)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &f.step.Graph.Tensors[f.step.Graph.Ops[tc.op].Output]
			elem := spec.Elems() / 2
			cheat := f.party(t, tamper(tc.op, elem), nil)
			o := play(t, f, cheat, honest)
			require.False(t, o.providerWins, "a cheating provider loses")
			require.Equal(t, f.step.Writer(spec.ID), o.entry, "the game narrows to the tampered operator")
			o = play(t, f, honest, cheat)
			require.True(t, o.providerWins, "a challenger lying at the operator level loses")
			require.Equal(t, f.step.Writer(spec.ID), o.entry)
		})
	}
	t.Run("data token", func(t *testing.T) {
		batch := make([][]byte, len(f.batch))
		for i, w := range f.batch {
			batch[i] = append([]byte(nil), w...)
		}
		batch[3][7] ^= 0x20
		cheat := f.party(t, exact.Executor{}, batch)
		o := play(t, f, cheat, honest)
		require.False(t, o.providerWins)
		require.Equal(t, KindLoad, o.kind)
		o = play(t, f, honest, cheat)
		require.True(t, o.providerWins, "a challenger lying about the data loses")
	})
	t.Run("pre-state weight", func(t *testing.T) {
		pre := f.pre.Clone()
		pre.Tensor("l0.mlp_in.w").Data[100]++
		lying, err := NewParty(f.step, exact.Executor{}, pre, f.batch)
		require.NoError(t, err)
		o := play(t, f, honest, lying)
		require.True(t, o.providerWins, "a challenger lying about the inputs loses")
		require.Equal(t, KindLoad, o.kind)
		o = play(t, f, lying, honest)
		require.False(t, o.providerWins)
	})
	t.Run("state file", func(t *testing.T) {
		// Every operator right, the next state's header (the step) wrong.
		cheat := f.party(t, exact.Executor{}, nil)
		bad := cheat.Next.Clone()
		bad.Step++
		cheat.Next = bad
		roots := append([]merkle.Hash(nil), cheat.C.Roots...)
		roots[f.step.Store()] = bad.Root()
		c, err := f.step.NewCommitment(roots)
		require.NoError(t, err)
		cheat.C = c
		o := play(t, f, cheat, honest)
		require.False(t, o.providerWins)
		require.Equal(t, KindStore, o.kind)
		o = play(t, f, honest, cheat)
		require.True(t, o.providerWins)
	})
}

func TestInconsistentRecordsLose(t *testing.T) {
	f := newFixture(t, smallConfig())
	honest := f.party(t, exact.Executor{}, nil)
	// A record with the right root under the wrong kind: its leaf differs,
	// the descent stops there, and its party cannot open it.
	e := f.step.Writer(f.step.Graph.ID("tok_emb.w")) + 5
	for _, lyingProvider := range []bool{true, false} {
		liar := f.party(t, exact.Executor{}, nil)
		leaves := append([]merkle.Hash(nil), liar.C.Leaves...)
		leaves[e] = RecordLeaf(e, exact.KindSoftmax, liar.C.Roots[e])
		liar.C = &Commitment{Roots: liar.C.Roots, Leaves: leaves, Root: merkle.RootFromLeafHashes(leaves)}
		var o outcome
		if lyingProvider {
			o = play(t, f, liar, honest)
		} else {
			o = play(t, f, honest, liar)
		}
		require.Equal(t, e, o.entry)
		require.Equal(t, !lyingProvider, o.providerWins)
	}
}

func TestWorstCaseIsBoundedForLargeModels(t *testing.T) {
	gas := func(c Cost) uint64 { return uint64(2*c.Bytes + 50*c.Hashes + c.Elems) }
	for _, tc := range []struct {
		name string
		cfg  exact.Config
	}{
		{"small", smallConfig()},
		{"1.2B", exact.Config{
			Model: exact.ModelConfig{Layers: 24, DModel: 2048, Heads: 16, DFF: 8192, Context: 1024, Vocab: exact.Vocab},
			Train: exact.TrainConfig{Batch: 8, MicroBatch: 4, LR: 1e-4},
		}.WithDefaults()},
	} {
		s := NewStep(tc.cfg)
		w := s.WorstCase(gas)
		t.Logf("%s: %d params, %d entries, worst move %s (entry %d): %d bytes, %d elems, gas %d; rounds %d + %d",
			tc.name, tc.cfg.ParamCount(), s.Len(), w.Kind, w.Entry, w.Cost.Bytes, w.Cost.Elems, gas(w.Cost), w.RecordRounds, w.ChunkRounds)
		require.Less(t, gas(w.Cost), uint64(10_000_000))
	}
}

// An element the provider encoded outside its dtype's range is wrong, not undecidable.
func TestJudgeElementOutOfRangeClaim(t *testing.T) {
	f := newFixture(t, smallConfig())
	p := f.party(t, exact.Executor{}, nil)
	var e int
	for i, en := range f.step.Entries {
		if en.Kind == exact.KindQMant { // i16: -32768 is not a value
			e = i
			break
		}
	}
	ins, _, err := f.step.Tensors(&exact.Executor{}, f.pre, f.batch, e)
	require.NoError(t, err)
	roots := make([]merkle.Hash, len(ins))
	for i, w := range f.step.InputEntries(e) {
		roots[i] = p.C.Roots[w]
	}
	chunk, _, err := p.OutputChunk(e, 0)
	require.NoError(t, err)
	bad := append([]byte(nil), chunk...)
	bad[0], bad[1] = 0x00, 0x80
	opens, err := f.step.ElementOpenings(e, 0, ins)
	require.NoError(t, err)
	right, _, _, err := f.step.JudgeElement(e, 0, bad, 0, roots, opens)
	require.NoError(t, err)
	require.False(t, right)
	right, _, _, err = f.step.JudgeElement(e, 0, chunk, 0, roots, opens)
	require.NoError(t, err)
	require.True(t, right)
}

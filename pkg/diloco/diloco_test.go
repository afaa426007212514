package diloco

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
)

var testSeed = []byte("diloco-test-seed")

// tinyConfig is a model small enough for many rounds in a unit test; its
// layout has partial last chunks (d_model 24), so padding is exercised.
func tinyConfig() exact.Config {
	return exact.Config{
		Model: exact.ModelConfig{Layers: 1, DModel: 24, Heads: 2, DFF: 40, Context: 16, Vocab: 256},
		Train: exact.TrainConfig{Batch: 2, LR: 0.01, WarmupSteps: 2, WeightDecay: 0.01},
	}
}

func testSync(t testing.TB, spec SyncSpec) Sync {
	t.Helper()
	s, err := spec.Sync()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSyncSpecRoundTrips: a job's stored integer Sync turns back into the SyncSpec
// that gives it, so Simulate reproduces the job.
func TestSyncSpecRoundTrips(t *testing.T) {
	for _, spec := range []SyncSpec{
		{Every: 8, OuterLR: 0.7, OuterMomentum: 0.9, TopK: 64},
		{Every: 1, OuterLR: 1, OuterMomentum: 0},
		{Every: MaxEvery, OuterLR: 0x1p-30, OuterMomentum: MaxOuterMomentum, TopK: ChunkElems},
	} {
		s, err := spec.Sync()
		if err != nil {
			t.Fatal(err)
		}
		back, err := s.Spec().Sync()
		if err != nil || back != s {
			t.Fatalf("%+v: Sync %+v, Spec().Sync() %+v (%v)", spec, s, back, err)
		}
	}
}

func TestSyncSpecValidateNamesEveryField(t *testing.T) {
	good := SyncSpec{Every: 100, OuterLR: 0.7, OuterMomentum: 0.9}
	s, err := good.Sync()
	if err != nil {
		t.Fatal(err)
	}
	if s.OuterLR != 751619277 || s.OuterMomentum != 966367642 || s.Every != 100 {
		t.Fatalf("fixed point: %+v", s)
	}
	dec, err := DecodeSync(s.Encode())
	if err != nil || dec != s {
		t.Fatalf("round trip: %+v %v", dec, err)
	}
	bad := SyncSpec{Every: 0, OuterLR: 1.5, OuterMomentum: 1, TopK: ChunkElems + 1}
	err = bad.Validate()
	if !errors.Is(err, ErrInvalidSync) {
		t.Fatalf("want ErrInvalidSync, got %v", err)
	}
	for _, want := range []string{"sync.every: must be in [1, 1048576], got 0", "sync.outer_lr: must be in (0, 1], got 1.5",
		"sync.outer_momentum: must be in [0, 0.999], got 1", "sync.top_k: must be in [0, 1024]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if err := (SyncSpec{Every: 1, OuterLR: 1e-12}).Validate(); err == nil || !strings.Contains(err.Error(), "sync.outer_lr: 1e-12 is below the resolution") {
		t.Fatalf("tiny outer_lr: %v", err)
	}
	if _, err := DecodeSync(Sync{Every: 1, OuterLR: 1<<30 + 1}.Encode()); err == nil {
		t.Fatal("decoded an outer_lr above 1")
	}
	if s.RoundStart(3) != 300 || s.RoundOf(299) != 2 || s.RoundOf(300) != 3 {
		t.Fatal("round schedule")
	}
}

// randSection fills a section vector of l with values in [-r, r] and zero
// padding.
func randSection(rng *rand.Rand, l Layout, r int64) []int64 {
	v := make([]int64, l.Elems())
	for k := range l.Chunks {
		for i := range l.Valid(k) {
			v[k*ChunkElems+i] = rng.Int64N(2*r+1) - r
		}
	}
	return v
}

func randRound(t testing.TB, rng *rand.Rand, cfg exact.Config, sync Sync, workers []uint32, r int64) (*GlobalState, []*PseudoGradient) {
	l := NewLayout(cfg)
	g := &GlobalState{Config: l.Config, Sync: sync, Round: 7, Weights: randSection(rng, l, exact.Max32), Momentum: randSection(rng, l, r)}
	root := g.Root()
	var pgs []*PseudoGradient
	for _, w := range workers {
		pgs = append(pgs, &PseudoGradient{Config: l.Config, Sync: sync, Round: 7, Worker: w, Base: root, Delta: randSection(rng, l, r)})
	}
	return g, pgs
}

func TestAggregateByHand(t *testing.T) {
	sync := testSync(t, SyncSpec{Every: 1, OuterLR: 0.25, OuterMomentum: 0.5})
	w, u := []int64{1000, 0}, []int64{200, 0}
	// sums 61 (mean 20.33 → 20) and -3 over 2 (−1.5 → −1, ties toward +∞)
	aggregateElems(sync, w[:1], u[:1], []int64{61}, 3)
	aggregateElems(sync, w[1:], u[1:], []int64{-3}, 2)
	// u' = 0.5·200 + 20 = 120; step = 0.5·120 + 20 = 80; w' = 1000 − 0.25·80 = 980
	// u' = −1; step = RS(−0.5) + (−1) = 0 − 1 = −1; w' = 0 − RS(−0.25) = 0
	if w[0] != 980 || u[0] != 120 || w[1] != 0 || u[1] != -1 {
		t.Fatalf("got w %v u %v", w, u)
	}
	// Saturation: the weights stay in the s32 range.
	w2, u2 := []int64{-exact.Max32}, []int64{0}
	aggregateElems(testSync(t, SyncSpec{Every: 1, OuterLR: 1}), w2, u2, []int64{exact.Max32}, 1)
	if w2[0] != -exact.Max32 || u2[0] != exact.Max32 {
		t.Fatalf("saturation: w %d u %d", w2[0], u2[0])
	}
}

func TestAggregateChunkwiseEqualsWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cfg := tinyConfig()
	l := NewLayout(cfg)
	for _, sc := range []struct {
		spec    SyncSpec
		workers []uint32
	}{
		{SyncSpec{Every: 10, OuterLR: 0.7, OuterMomentum: 0.9}, []uint32{0}},
		{SyncSpec{Every: 10, OuterLR: 0.7, OuterMomentum: 0.9}, []uint32{0, 1, 2}},
		{SyncSpec{Every: 10, OuterLR: 1, OuterMomentum: 0}, []uint32{1, 4, 5, 9, 11}},
		{SyncSpec{Every: 10, OuterLR: 0.1, OuterMomentum: 0.999}, []uint32{2, 3}},
	} {
		sync := testSync(t, sc.spec)
		g, pgs := randRound(t, rng, cfg, sync, sc.workers, exact.Max32)
		before := g.Encode()
		next, err := Aggregate(g, pgs)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, g.Encode()) {
			t.Fatal("Aggregate modified its input")
		}
		enc := next.Encode()
		if next.Round != g.Round+1 {
			t.Fatalf("round %d", next.Round)
		}
		for k := range l.Chunks {
			gw, gu := g.GlobalChunks(k)
			var ds [][]byte
			for _, p := range pgs {
				ds = append(ds, p.DeltaChunk(k))
			}
			nw, nu, err := AggregateChunk(sync, l.Valid(k), gw, gu, ds)
			if err != nil {
				t.Fatalf("chunk %d: %v", k, err)
			}
			if !bytes.Equal(nw, enc[(1+k)*ChunkSize:(2+k)*ChunkSize]) || !bytes.Equal(nu, enc[(1+l.Chunks+k)*ChunkSize:(2+l.Chunks+k)*ChunkSize]) {
				t.Fatalf("%+v workers %v: chunk %d differs from the whole aggregation", sc.spec, sc.workers, k)
			}
		}
		dec, err := DecodeGlobal(enc)
		if err != nil || dec.Root() != next.Root() {
			t.Fatalf("decode: %v", err)
		}
	}
}

func TestAggregateRejectsBadInputUnchanged(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cfg := tinyConfig()
	sync := testSync(t, SyncSpec{Every: 10, OuterLR: 0.7, OuterMomentum: 0.9})
	g, pgs := randRound(t, rng, cfg, sync, []uint32{0, 1, 2}, 1000)
	before := g.Encode()
	mut := func(f func(p *PseudoGradient)) []*PseudoGradient {
		cp := *pgs[1]
		f(&cp)
		return []*PseudoGradient{pgs[0], &cp, pgs[2]}
	}
	for name, c := range map[string]struct {
		pgs  []*PseudoGradient
		want string
	}{
		"none":         {nil, "0 pseudo-gradients"},
		"duplicate":    {[]*PseudoGradient{pgs[0], pgs[0]}, "strictly ascending"},
		"unordered":    {[]*PseudoGradient{pgs[1], pgs[0]}, "strictly ascending"},
		"other round":  {mut(func(p *PseudoGradient) { p.Round++ }), "is of round 8"},
		"other base":   {mut(func(p *PseudoGradient) { p.Base[0] ^= 1 }), "computed from global root"},
		"other sync":   {mut(func(p *PseudoGradient) { p.Sync.OuterLR++ }), "different config or sync"},
		"short delta":  {mut(func(p *PseudoGradient) { p.Delta = p.Delta[:10] }), "elements"},
		"other config": {mut(func(p *PseudoGradient) { p.Config.Train.LR = 0.5 }), "different config"},
	} {
		if _, err := Aggregate(g, c.pgs); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want error containing %q, got %v", name, c.want, err)
		}
		if !bytes.Equal(before, g.Encode()) {
			t.Fatalf("%s: global state changed", name)
		}
	}
}

func TestAggregateChunkRejects(t *testing.T) {
	sync := testSync(t, SyncSpec{Every: 10, OuterLR: 0.7})
	z := make([]byte, ChunkSize)
	pad := make([]byte, ChunkSize)
	pad[ChunkSize-1] = 1 // element 1023 non-zero
	min32 := make([]byte, ChunkSize)
	copy(min32, []byte{0, 0, 0, 0x80}) // -2^31, outside the symmetric range
	for name, c := range map[string]struct {
		valid   int
		w, u    []byte
		ds      [][]byte
		sync    Sync
		wantErr string
	}{
		"no deltas":    {1024, z, z, nil, sync, "0 pseudo-gradients"},
		"short chunk":  {1024, z[:100], z, [][]byte{z}, sync, "weights chunk is 100 bytes"},
		"padding":      {1023, z, z, [][]byte{pad}, sync, "padding element 1023"},
		"out of range": {1024, z, min32, [][]byte{z}, sync, "momentum chunk"},
		"bad valid":    {1025, z, z, [][]byte{z}, sync, "valid element count"},
		"bad sync":     {1024, z, z, [][]byte{z}, Sync{Every: 1}, "sync.outer_lr"},
	} {
		if _, _, err := AggregateChunk(c.sync, c.valid, c.w, c.u, c.ds); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: want %q, got %v", name, c.wantErr, err)
		}
	}
}

func FuzzAggregateChunk(f *testing.F) {
	f.Add(1024, 2, []byte{1, 2, 3}, uint64(751619277))
	f.Fuzz(func(t *testing.T, valid, n int, seed []byte, lr uint64) {
		rng := rand.New(rand.NewPCG(uint64(len(seed)), lr))
		chunk := func() []byte {
			b := make([]byte, ChunkSize)
			for i := range b {
				b[i] = byte(rng.UintN(256))
			}
			if rng.IntN(2) == 0 { // a well-formed chunk half of the time
				v := make([]int64, ChunkElems)
				for i := range max(0, min(valid, ChunkElems)) {
					v[i] = rng.Int64N(2*exact.Max32+1) - exact.Max32
				}
				b = encodeSection(nil, v)
			}
			return b
		}
		var ds [][]byte
		for range n % 8 {
			ds = append(ds, chunk())
		}
		sync := Sync{Every: 1, OuterLR: int64(lr % (1<<30 + 2)), OuterMomentum: int64(lr>>32) % (1 << 30)}
		nw, nu, err := AggregateChunk(sync, valid, chunk(), chunk(), ds)
		if err != nil {
			return
		}
		// Accepted input gives chunks AggregateChunk accepts again: right
		// length, in range, zero padding.
		if _, _, err := AggregateChunk(sync, valid, nw, nu, [][]byte{make([]byte, ChunkSize)}); err != nil {
			t.Fatalf("output not a valid chunk: %v", err)
		}
	})
}

func TestGlobalAndPseudoGradientFilesRejectTampering(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cfg := tinyConfig()
	sync := testSync(t, SyncSpec{Every: 10, OuterLR: 0.7, OuterMomentum: 0.9})
	g, pgs := randRound(t, rng, cfg, sync, []uint32{3}, 1<<20)
	ge, pe := g.Encode(), pgs[0].EncodeDense()
	if d, err := DecodeGlobal(ge); err != nil || d.Root() != g.Root() {
		t.Fatalf("global round trip: %v", err)
	}
	if p, err := DecodePseudoGradient(pe); err != nil || merkle.RootOfBytes(p.EncodeDense(), ChunkSize) != mustRoot(t, pgs[0]) || p.Worker != 3 {
		t.Fatalf("pseudo-gradient round trip: %v", err)
	}
	l := NewLayout(cfg)
	padChunk := 0 // a chunk with padding
	for l.Valid(padChunk) == ChunkElems {
		padChunk++
	}
	for name, c := range map[string]struct {
		b      []byte
		decode func([]byte) error
		want   string
	}{
		"global magic":     {flip(ge, 0), decG, "bad magic"},
		"global reserved":  {flip(ge, headerLen+5), decG, "not canonical"},
		"global truncated": {ge[:len(ge)-4], decG, "want"},
		"global padding":   {flip(ge, (1+padChunk)*ChunkSize+4*l.Valid(padChunk)+1), decG, "padding element"},
		"global as pg":     {ge, decP, "not a dense pseudo-gradient"},
		"pg as global":     {pe, decG, "not a global state"},
		"pg config":        {flip(pe, offConfig+8), decP, "config"},
		"pg sync":          {flip(pe, offSync+15), decP, "sync.outer_lr"},
		"pg chunk count":   {flip(pe, offChunks), decP, "section chunks"},
		"pg padding":       {flip(pe, (1+padChunk)*ChunkSize+4*l.Valid(padChunk)), decP, "padding element"},
		"pg version":       {flip(pe, offVersion), decP, "version"},
	} {
		if err := c.decode(c.b); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want %q, got %v", name, c.want, err)
		}
	}
}

func mustRoot(t testing.TB, p *PseudoGradient) merkle.Hash {
	t.Helper()
	r, err := p.Root()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x01
	return c
}

func decG(b []byte) error { _, err := DecodeGlobal(b); return err }
func decP(b []byte) error { _, err := DecodePseudoGradient(b); return err }

func TestPseudoGradientIsExactDifferenceAndWorkerStartKeepsMoments(t *testing.T) {
	cfg := tinyConfig()
	sync := testSync(t, SyncSpec{Every: 3, OuterLR: 0.7, OuterMomentum: 0.9})
	g, err := InitGlobal(cfg, sync, testSeed)
	if err != nil {
		t.Fatal(err)
	}
	start := g.WorkerStart(nil)
	init, _ := exact.Init(cfg, testSeed)
	if start.Root() != init.Root() {
		t.Fatal("round 0 worker start must be the job's initial state")
	}
	s, err := exact.Run(start, traindata.BuiltinCorpus(), testSeed, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := NewPseudoGradient(g, 0, s)
	if err != nil {
		t.Fatal(err)
	}
	l := NewLayout(cfg)
	for _, tp := range l.Tensors {
		gw, lw := init.Tensor(tp.Name+".w").Data, s.Tensor(tp.Name+".w").Data
		for i := range gw {
			if pg.Delta[tp.FirstChunk*ChunkElems+i] != gw[i]-lw[i] {
				t.Fatalf("%s[%d]: delta %d, want %d", tp.Name, i, pg.Delta[tp.FirstChunk*ChunkElems+i], gw[i]-lw[i])
			}
		}
	}
	if _, err := NewPseudoGradient(g, 0, start); err == nil || !strings.Contains(err.Error(), "round 0 ends at step 3") {
		t.Fatalf("pseudo-gradient of a state at the wrong step: %v", err)
	}
	next, err := Aggregate(g, []*PseudoGradient{pg})
	if err != nil {
		t.Fatal(err)
	}
	ws := next.WorkerStart(s)
	if ws.Step != 3 || ws.Loss != 0 {
		t.Fatalf("worker start at step %d loss %d", ws.Step, ws.Loss)
	}
	for _, tp := range l.Tensors {
		if !equal(ws.Tensor(tp.Name+".m").Data, s.Tensor(tp.Name+".m").Data) || !equal(ws.Tensor(tp.Name+".v").Data, s.Tensor(tp.Name+".v").Data) {
			t.Fatalf("%s: moments not carried", tp.Name)
		}
		if !equal(ws.Tensor(tp.Name+".w").Data, next.Weights[tp.FirstChunk*ChunkElems:tp.FirstChunk*ChunkElems+tp.Elems]) {
			t.Fatalf("%s: weights are not the global ones", tp.Name)
		}
	}
	if _, err := exact.Decode(ws.Encode()); err != nil {
		t.Fatalf("worker start state does not decode: %v", err)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAssignDisjointCoveringAndRendezvous(t *testing.T) {
	shards := CorpusShards(uint64(len(traindata.BuiltinCorpus())), 200)
	a4, err := Assign(testSeed, 3, shards, 4)
	if err != nil {
		t.Fatal(err)
	}
	owner := map[int]int{}
	for w, idx := range a4 {
		if len(idx) == 0 {
			t.Fatalf("worker %d has no shard", w)
		}
		for _, i := range idx {
			if o, ok := owner[i]; ok {
				t.Fatalf("shard %d assigned to %d and %d", i, o, w)
			}
			owner[i] = w
		}
	}
	if len(owner) != len(shards) {
		t.Fatalf("%d of %d shards assigned", len(owner), len(shards))
	}
	again, _ := Assign(testSeed, 3, shards, 4)
	next, _ := Assign(testSeed, 4, shards, 4)
	if !same(a4, again) || same(a4, next) {
		t.Fatal("assignment must be deterministic and change with the round")
	}
	// One more slot only takes shards; nobody else's move.
	a5, _ := Assign(testSeed, 3, shards, 5)
	for w, idx := range a5[:4] {
		for _, i := range idx {
			if owner[i] != w {
				t.Fatalf("shard %d moved from worker %d to %d when a slot was added", i, owner[i], w)
			}
		}
	}
	// The workers' streams never overlap in the corpus.
	corpus := traindata.BuiltinCorpus()
	used := make([]int, len(corpus))
	for w := range 4 {
		d, err := WorkerData(corpus, testSeed, 3, shards, 4, w)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, i := range a4[w] {
			for b := shards[i].Start; b < shards[i].End; b++ {
				used[b]++
			}
			n += int(shards[i].End - shards[i].Start)
		}
		if len(d) != n {
			t.Fatalf("worker %d: %d bytes, shards hold %d", w, len(d), n)
		}
	}
	for b, c := range used {
		if c != 1 {
			t.Fatalf("byte %d used by %d workers", b, c)
		}
	}
	for name, c := range map[string]struct {
		shards  []Shard
		workers int
		want    string
	}{
		"dup id":     {[]Shard{{"a", 0, 1}, {"a", 1, 2}}, 2, "appears twice"},
		"empty id":   {[]Shard{{"", 0, 1}}, 2, "no id"},
		"empty":      {[]Shard{{"a", 5, 5}}, 2, "empty range"},
		"no workers": {shards, 0, "0 workers"},
	} {
		if _, err := Assign(testSeed, 0, c.shards, c.workers); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want %q, got %v", name, c.want, err)
		}
	}
	if _, err := WorkerData(corpus, testSeed, 0, shards[:1], 4, 3); err == nil || !strings.Contains(err.Error(), "has no data") {
		// shard 0 goes to one slot; with 4 slots at least 3 have nothing
		if _, err2 := WorkerData(corpus, testSeed, 0, shards[:1], 4, 0); err2 == nil || !strings.Contains(err2.Error(), "has no data") {
			t.Fatalf("a worker without shards must be told: %v / %v", err, err2)
		}
	}
}

func same(a, b [][]int) bool {
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}

func TestCompressionRoundTripAndErrorFeedback(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	cfg := tinyConfig()
	l := NewLayout(cfg)
	sync := testSync(t, SyncSpec{Every: 10, OuterLR: 0.7, OuterMomentum: 0.9, TopK: 16})
	_, pgs := randRound(t, rng, cfg, sync, []uint32{2}, 1<<20)
	dense := pgs[0]
	var errBuf []int64
	total := make([]int64, l.Elems()) // Σ delta over rounds
	sentTotal := make([]int64, l.Elems())
	for round := range 5 {
		p := *dense
		p.Round = uint64(round)
		p.Delta = randSection(rng, l, 1<<20)
		for i, x := range p.Delta {
			total[i] += x
		}
		c, newErr, err := p.Compress(errBuf)
		if err != nil {
			t.Fatal(err)
		}
		for k := range l.Chunks {
			nz := 0
			for _, x := range c.Delta[k*ChunkElems : (k+1)*ChunkElems] {
				if x != 0 {
					nz++
				}
			}
			if nz > 16 {
				t.Fatalf("chunk %d sends %d > top_k elements", k, nz)
			}
		}
		for i, x := range c.Delta {
			sentTotal[i] += x
		}
		// Error feedback loses nothing: what was sent so far plus what is
		// carried is everything the worker produced (no saturation here).
		for i := range total {
			if sentTotal[i]+newErr[i] != total[i] {
				t.Fatalf("round %d element %d: sent %d + carried %d ≠ produced %d", round, i, sentTotal[i], newErr[i], total[i])
			}
		}
		errBuf = newErr
		cf, err := c.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		enc := cf.Encode()
		if len(enc) != ChunkSize+l.Chunks*RecordBytes(16) {
			t.Fatalf("compressed file is %d bytes", len(enc))
		}
		dec, err := DecodeCompressed(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !equal(dec.Delta, c.Delta) || dec.ErrIn != c.ErrIn || dec.ErrOut != ErrorBufferRoot(newErr) || mustRoot(t, dec) != mustRoot(t, c) || mustRoot(t, c) != merkle.RootOfBytes(enc, ChunkSize) {
			t.Fatal("compressed round trip")
		}
		for k := range l.Chunks {
			d, err := DecompressChunk(cf.Records[k], 16, l.Valid(k))
			if err != nil || !bytes.Equal(d, dec.DeltaChunk(k)) {
				t.Fatalf("chunk %d: %v", k, err)
			}
		}
	}
	if _, err := dense.Root(); err == nil || !strings.Contains(err.Error(), "more than top_k") {
		t.Fatalf("an uncompressed pseudo-gradient under top_k must not have a root: %v", err)
	}
	// The largest magnitudes win, ties to the lower index.
	d := make([]int64, ChunkElems)
	d[5], d[900], d[7], d[3] = -50, 50, 49, 50
	rec, sent, _ := CompressChunk(d, make([]int64, ChunkElems), 2)
	if sent[3] != 50 || sent[5] != -50 || sent[900] != 0 || len(rec) != 12 {
		t.Fatalf("tie-breaking: sent[3]=%d sent[5]=%d sent[900]=%d", sent[3], sent[5], sent[900])
	}
	bad := func(mod func(r []byte)) []byte { r := append([]byte(nil), rec...); mod(r); return r }
	for name, c := range map[string]struct {
		rec   []byte
		valid int
		want  string
	}{
		"unordered":     {bad(func(r []byte) { r[0], r[6] = r[6], r[0] }), 1024, "not ascending"},
		"short":         {rec[:6], 1024, "record of 6 bytes"},
		"padding":       {rec, 4, "padding index 5"},
		"non-canonical": {mustRecord(t, []int{3, 9}, []int64{50, 0}), 1024, "not canonical"},
	} {
		if _, err := DecompressChunk(c.rec, 2, c.valid); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want %q, got %v", name, c.want, err)
		}
	}
}

func mustRecord(t *testing.T, idx []int, vals []int64) []byte {
	var r []byte
	for i := range idx {
		r = append(r, byte(idx[i]), byte(idx[i]>>8))
		v := uint32(vals[i])
		r = append(r, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	return r
}

func simRoots(t *testing.T, o SimOptions) []merkle.Hash {
	t.Helper()
	gs, err := Simulate(o)
	if err != nil {
		t.Fatal(err)
	}
	var out []merkle.Hash
	for _, g := range gs {
		out = append(out, g.Root())
	}
	return out
}

func TestSimulateDeterministicAcrossGOMAXPROCS(t *testing.T) {
	for _, topk := range []int{0, 32} {
		o := SimOptions{Config: tinyConfig(), Sync: SyncSpec{Every: 3, OuterLR: 0.7, OuterMomentum: 0.9, TopK: topk},
			Seed: testSeed, Workers: 3, Rounds: 2, Dropouts: map[uint64][]int{1: {0}}}
		prev := runtime.GOMAXPROCS(1)
		one := simRoots(t, o)
		runtime.GOMAXPROCS(2)
		two := simRoots(t, o)
		runtime.GOMAXPROCS(prev)
		if len(one) != 3 {
			t.Fatalf("%d states", len(one))
		}
		for r := range one {
			if one[r] != two[r] {
				t.Fatalf("top_k %d round %d: GOMAXPROCS 1 and 2 disagree", topk, r)
			}
		}
	}
}

func TestSimulateDropoutIsLeftOutOfTheAverage(t *testing.T) {
	cfg := tinyConfig()
	spec := SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9}
	o := SimOptions{Config: cfg, Sync: spec, Seed: testSeed, Workers: 3, Rounds: 1, Dropouts: map[uint64][]int{0: {1}}}
	gs, err := Simulate(o)
	if err != nil {
		t.Fatal(err)
	}
	// By hand: workers 0 and 2 train on their own data; 1 is not averaged.
	sync := testSync(t, spec)
	g, _ := InitGlobal(cfg, sync, testSeed)
	shards := CorpusShards(uint64(len(traindata.BuiltinCorpus())), DefaultShardBytes)
	var pgs []*PseudoGradient
	for _, w := range []int{0, 2} {
		data, err := WorkerData(traindata.BuiltinCorpus(), testSeed, 0, shards, 3, w)
		if err != nil {
			t.Fatal(err)
		}
		s, err := exact.Run(g.WorkerStart(nil), data, testSeed, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		pg, err := NewPseudoGradient(g, uint32(w), s)
		if err != nil {
			t.Fatal(err)
		}
		pgs = append(pgs, pg)
	}
	want, err := Aggregate(g, pgs)
	if err != nil {
		t.Fatal(err)
	}
	if gs[1].Root() != want.Root() {
		t.Fatal("Simulate with a dropout differs from the average of the other two workers")
	}
	o.Dropouts = nil
	if simRoots(t, o)[1] == want.Root() {
		t.Fatal("the dropout made no difference")
	}
	o.Dropouts = map[uint64][]int{0: {0, 1, 2}}
	if _, err := Simulate(o); err == nil || !strings.Contains(err.Error(), "every worker dropped out") {
		t.Fatalf("all dropped: %v", err)
	}
}

func TestSimulateHeldOutLossFalls(t *testing.T) {
	cfg := tinyConfig()
	corpus := traindata.BuiltinCorpus()
	split := len(corpus) * 9 / 10
	gs, err := Simulate(SimOptions{Config: cfg, Sync: SyncSpec{Every: 10, OuterLR: 0.7, OuterMomentum: 0.9},
		Seed: testSeed, Workers: 3, Rounds: 4, Stream: corpus[:split]})
	if err != nil {
		t.Fatal(err)
	}
	first, err := HeldOutBitsPerByte(gs[0].Model(), corpus[split:], 64)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := HeldOutBitsPerByte(gs[len(gs)-1].Model(), corpus[split:], 64)
	t.Logf("held-out bits per byte: round 0 %.3f, round 4 %.3f", first, last)
	if last >= first-0.5 {
		t.Fatalf("held-out bits per byte did not fall: %.3f → %.3f", first, last)
	}
}

// TestOneWorkerPlainAveragingIsPlainTraining: with one worker, outer_lr 1
// and no momentum the outer step sets the global weights to the worker's
// (w − (w − local) = local) and the worker keeps its Adam moments, so R
// rounds of `every` steps are exactly R·every steps of ordinary training
// on the same data — bit for bit.
func TestOneWorkerPlainAveragingIsPlainTraining(t *testing.T) {
	cfg := tinyConfig()
	corpus := traindata.BuiltinCorpus()
	gs, err := Simulate(SimOptions{Config: cfg, Sync: SyncSpec{Every: 3, OuterLR: 1, OuterMomentum: 0}, Seed: testSeed, Workers: 1, Rounds: 4})
	if err != nil {
		t.Fatal(err)
	}
	s0, _ := exact.Init(cfg, testSeed)
	plain, err := exact.Run(s0, corpus, testSeed, 12, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !equal(gs[4].Weights, NewLayout(cfg).Weights(plain)) {
		t.Fatal("one worker with plain averaging differs from plain training")
	}
}

func TestSimulateInitialWeights(t *testing.T) {
	cfg := tinyConfig()
	o := SimOptions{Config: cfg, Sync: SyncSpec{Every: 1, OuterLR: 1}, Seed: testSeed, Workers: 1, Rounds: 0}
	other, _ := exact.Init(cfg, []byte("other seed"))
	o.Initial = other
	gs, err := Simulate(o)
	if err != nil {
		t.Fatal(err)
	}
	if !equal(gs[0].Weights, NewLayout(cfg).Weights(other)) {
		t.Fatal("round 0 does not start from the initial weights")
	}
	wrong := tinyConfig()
	wrong.Train.LR = 0.5
	o.Initial, _ = exact.Init(wrong, testSeed)
	if _, err := Simulate(o); err == nil || !strings.Contains(err.Error(), "different config") {
		t.Fatalf("initial state of another config: %v", err)
	}
}

// A joiner starts its first round from WorkerStart(nil): a slot that dropped out of
// round 1 and joins round 2 with a new lease contributes what a fresh worker trained
// from G_2 would, not what its old carry would have.
func TestSimulateJoinerStartsWithoutCarry(t *testing.T) {
	cfg := tinyConfig()
	spec := SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9}
	o := SimOptions{Config: cfg, Sync: spec, Seed: testSeed, Workers: 2, Rounds: 3, Dropouts: map[uint64][]int{1: {1}}}
	gs, err := Simulate(o)
	if err != nil {
		t.Fatal(err)
	}
	o.Joiners = map[uint64][]int{2: {1}}
	joined, err := Simulate(o)
	if err != nil {
		t.Fatal(err)
	}
	if joined[2].Root() != gs[2].Root() || joined[3].Root() == gs[3].Root() {
		t.Fatal("a joiner must change only the rounds from the one it joins on")
	}
	// By hand: worker 0 keeps its carry from rounds 0 and 1, worker 1 starts fresh.
	g := joined[2]
	shards := CorpusShards(uint64(len(traindata.BuiltinCorpus())), DefaultShardBytes)
	var carry0 *exact.State
	{
		// Worker 0's carry after round 1 is its end state of round 1: rerun its two rounds.
		g0 := gs[0]
		for r := uint64(0); r < 2; r++ {
			data, err := WorkerData(traindata.BuiltinCorpus(), testSeed, r, shards, 2, 0)
			if err != nil {
				t.Fatal(err)
			}
			if carry0, err = exact.Run(g0.WorkerStart(carry0), data, testSeed, 2, nil); err != nil {
				t.Fatal(err)
			}
			g0 = gs[r+1]
		}
	}
	var pgs []*PseudoGradient
	for w, c := range []*exact.State{carry0, nil} {
		data, err := WorkerData(traindata.BuiltinCorpus(), testSeed, 2, shards, 2, w)
		if err != nil {
			t.Fatal(err)
		}
		s, err := exact.Run(g.WorkerStart(c), data, testSeed, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		pg, err := NewPseudoGradient(g, uint32(w), s)
		if err != nil {
			t.Fatal(err)
		}
		pgs = append(pgs, pg)
	}
	want, err := Aggregate(g, pgs)
	if err != nil {
		t.Fatal(err)
	}
	if joined[3].Root() != want.Root() {
		t.Fatal("Simulate with a joiner differs from a fresh worker's contribution")
	}
	o.Joiners = map[uint64][]int{2: {2}}
	if _, err := Simulate(o); err == nil || !strings.Contains(err.Error(), "joiner 2 of 2 workers") {
		t.Fatalf("a joiner outside the workers: %v", err)
	}
}

// A slot the round's assignment gives no shard sits the round out exactly as a dropout
// does: with two shards over three workers one slot has none in every round.
func TestSimulateSlotWithoutShardsSitsTheRoundOut(t *testing.T) {
	corpus := traindata.BuiltinCorpus()
	shards := CorpusShards(uint64(len(corpus)), 4096)[:2]
	o := SimOptions{Config: tinyConfig(), Sync: SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9},
		Seed: testSeed, Workers: 3, Rounds: 2, Stream: corpus, Shards: shards}
	idle := map[uint64][]int{}
	for r := range uint64(2) {
		a, err := Assign(testSeed, r, shards, 3)
		if err != nil {
			t.Fatal(err)
		}
		for w, s := range a {
			if len(s) == 0 {
				idle[r] = append(idle[r], w)
			}
		}
		if len(idle[r]) == 0 {
			t.Fatalf("round %d: every slot of three has one of two shards", r)
		}
	}
	got := simRoots(t, o)
	o.Dropouts = idle
	if want := simRoots(t, o); !slices.Equal(got, want) {
		t.Fatalf("the slots without shards (%v) are not left out like dropouts", idle)
	}
}

package diloco

import (
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/traindata"
)

// BenchmarkDiLoCoBandwidth: bytes each worker exchanges (sent + received)
// per outer step, divided by what synchronous data parallelism exchanges
// over the same `every` inner steps: a ring all-reduce of the full float32
// gradient every step sends and receives 2(N-1)/N·P·4 bytes each. Measured
// on the actual file sizes of issue 12's example model (3.3 M parameters)
// at every = 100 and N = 4, for three ways of moving pseudo-gradients:
//
//   - fetch-all: each worker publishes its pseudo-gradient once and fetches
//     the other N-1 to compute (and be able to dispute) the aggregation
//     itself — the protocol of docs/training-together.md;
//   - one-aggregator: workers upload theirs and download the new weights;
//   - ring: a ring all-reduce of the pseudo-gradients.
//
// dense and top-k (32 and 64 kept per 1024 elements) files. Goal ≤ 0.01.
// Also the reference model's (the multi-sidecar tests') top-k 64 file ÷ its dense
// file: with 29 section chunks the 4 KiB header weighs more there.
func BenchmarkDiLoCoBandwidth(b *testing.B) {
	cfg := exact.Config{Model: exact.ModelConfig{Layers: 4, DModel: 256, Heads: 8, DFF: 1024, Context: 128, Vocab: 256},
		Train: exact.TrainConfig{Batch: 16, LR: 1e-3}}
	const every, n = 100, 4
	P := float64(cfg.ParamCount())
	dp := float64(every) * 2 * 2 * float64(n-1) / n * P * 4 // sent + received over `every` steps
	rng := rand.New(rand.NewPCG(1, 2))
	l := NewLayout(cfg)
	ref := NewLayout(exact.ReferenceConfig().WithDefaults())
	for b.Loop() {
		for _, topk := range []int{0, 32, 64} {
			size := pseudoGradientFileBytes(b, rng, l, every, topk)
			weights := float64(ChunkSize + l.Elems()*4)
			name := "dense"
			if topk > 0 {
				name = "top" + strconv.Itoa(topk)
			}
			b.ReportMetric(n*size/dp, name+"-fetch-all/dp")
			b.ReportMetric((size+weights)/dp, name+"-one-aggregator/dp")
			if topk == 0 {
				b.ReportMetric(2*2*float64(n-1)/n*size/dp, "dense-ring/dp")
			}
			b.ReportMetric(size/(P*4), name+"-pg-bytes/dense-param-bytes")
		}
		b.ReportMetric(pseudoGradientFileBytes(b, rng, ref, every, 64)/pseudoGradientFileBytes(b, rng, ref, every, 0), "reference-top64-pg-bytes/dense-pg-bytes")
	}
}

// pseudoGradientFileBytes is the size of the committed file of a random pseudo-gradient
// of l: dense, or compressed at topk.
func pseudoGradientFileBytes(b *testing.B, rng *rand.Rand, l Layout, every, topk int) float64 {
	sync := testSync(b, SyncSpec{Every: every, OuterLR: 0.7, OuterMomentum: 0.9, TopK: topk})
	p := &PseudoGradient{Config: l.Config, Sync: sync, Delta: randSection(rng, l, 1<<20)}
	if topk == 0 {
		return float64(len(p.EncodeDense()))
	}
	cp, _, err := p.Compress(nil)
	if err != nil {
		b.Fatal(err)
	}
	c, err := cp.Compressed()
	if err != nil {
		b.Fatal(err)
	}
	return float64(len(c.Encode()))
}

// BenchmarkDiLoCoQuality: held-out bits per byte of N = 4 workers after
// H inner steps each (R = H/every rounds), divided by the same of one worker
// trained on the same tokens, on the reference model (L1 D32 C32 B4, 30 K
// parameters) and the built-in corpus, 90 % train / 10 % held out, at the
// horizons H = 400 and 800 (DILOCO_QUALITY_STEPS sets the longest, a
// multiple of 400). Both readings of "one worker on the same tokens" are
// measured, each at the better of the learning rates the runs use (the
// baseline gets its own best, not the workers'):
//
//   - single: the data-parallel equivalent, batch 4·B for H steps (the
//     stricter one here: batch 16 for 400 steps beats batch 4 for 1600);
//   - single-batch-B: batch B for 4·H steps.
//
// From scratch, over three job seeds run in parallel (initial weights, data
// assignment and batch order all differ), the mean and the worst ratio:
//
//   - scratch-old: lr 0.01, every 50, outer_lr 0.7, outer_momentum 0.9 (the
//     DiLoCo paper's outer settings): far off the goal (mean 1.19 at 400
//     steps, 1.26 at 800, where it has stalled);
//   - scratch-tuned: lr 0.005, every 5, outer_lr 1, outer_momentum 0 (plain
//     averaging), the best of a sweep of the job-spec knobs (every 2–50,
//     outer_lr 0.7–1, outer_momentum 0–0.9, lr 0.0025–0.02;
//     docs/training-together.md). Why: early in training each worker's Adam
//     normalises a batch-B gradient whose noise dominates its second moment,
//     so the average of the workers' updates is shorter than one batch-4·B
//     step and the trajectories drift apart; outer momentum or a larger
//     inner lr, which would lengthen it, make it unstable (lr 0.02 stalls
//     both sides near 3.5 bpb), while a halved lr costs the baseline nothing
//     and keeps the workers together, and frequent averaging more so. It
//     meets the goal at 800 steps (mean 1.03, worst 1.05; 1.02 against
//     batch B) and just misses it at 400 (1.05, worst 1.06); at every 50
//     nothing tried does (best 1.10 at 800).
//
// Warm: both from the same model pretrained 400 steps at batch 4·B (DiLoCo's
// own protocol: its rounds start from a pretrained model), lr 0.01, every 50,
// outer_lr 0.7, outer_momentum 0.9, dense and with top-k 64 compression, for
// 400 steps, job seed diloco-quality. 400 steps of pretraining: after 200
// the model is still in its fastest-falling phase and the ratio varied from
// 1.03 to 1.11 with the pretraining data order; after 400 it was 1.03–1.04.
//
// Goal ≤ 1.05. Run with -benchtime 1x.
func BenchmarkDiLoCoQuality(b *testing.B) {
	const workers, pretrain, warmSteps, horizon = 4, 400, 400, 400
	steps := 2 * horizon
	if v := os.Getenv("DILOCO_QUALITY_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n%horizon != 0 {
			b.Fatalf("DILOCO_QUALITY_STEPS=%q: want a positive multiple of %d", v, horizon)
		}
		steps = n
	}
	seeds := []string{"diloco-quality", "diloco-quality-2", "diloco-quality-3"}
	type scratchRun struct {
		name string
		lr   float64
		sync SyncSpec
	}
	scratch := []scratchRun{
		{"scratch-old", 0.01, SyncSpec{Every: 50, OuterLR: 0.7, OuterMomentum: 0.9}},
		{"scratch-tuned", 0.005, SyncSpec{Every: 5, OuterLR: 1}},
	}
	baselineLRs := []float64{0.01, 0.005}
	withLR := func(lr float64, batch int) exact.Config {
		c := exact.ReferenceConfig()
		c.Train.LR, c.Train.Batch, c.Train.MicroBatch = lr, batch, 0
		return c.WithDefaults()
	}
	cfg := exact.ReferenceConfig()
	big := withLR(cfg.Train.LR, workers*cfg.Train.Batch)
	corpus := traindata.BuiltinCorpus()
	split := len(corpus) * 9 / 10
	train, heldOut := corpus[:split], corpus[split:]
	bpb := func(s *exact.State) (float64, error) { return HeldOutBitsPerByte(s, heldOut, 1000) }
	// diloco runs the workers of seed's job from initial (nil: Init of the
	// seed) for n inner steps each and returns the global model's held-out
	// bits per byte after every horizon steps.
	diloco := func(c exact.Config, sync SyncSpec, seed []byte, initial *exact.State, n int) ([]float64, error) {
		gs, err := Simulate(SimOptions{Config: c, Sync: sync, Seed: seed, Workers: workers, Rounds: n / sync.Every, Stream: train, Initial: initial})
		if err != nil {
			return nil, err
		}
		var out []float64
		for h := horizon; h <= n; h += horizon {
			v, err := bpb(gs[h/sync.Every].Model())
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	// single trains one worker n steps from start (round 0's start: zero
	// moments, step 0) and returns its held-out bits per byte after every n/k
	// steps (k evaluations).
	single := func(start *exact.State, seed []byte, n, k int) ([]float64, error) {
		var out []float64
		s := start
		for range k {
			var err error
			if s, err = exact.Run(s, train, seed, uint64(n/k), nil); err != nil {
				return nil, err
			}
			v, err := bpb(s)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	// seedResult is one seed's scratch runs: bits per byte per horizon.
	type seedResult struct {
		dp, batchB []float64            // the best baseline of each reading
		runs       map[string][]float64 // by scratchRun name
	}
	runSeed := func(seed []byte) (seedResult, error) {
		k := steps / horizon
		res := seedResult{runs: map[string][]float64{}}
		for _, lr := range baselineLRs {
			for _, base := range []struct {
				batch, mul int
				best       *[]float64
			}{{workers * cfg.Train.Batch, 1, &res.dp}, {cfg.Train.Batch, workers, &res.batchB}} {
				s, err := exact.Init(withLR(lr, base.batch), seed)
				if err != nil {
					return res, err
				}
				v, err := single(s, seed, base.mul*steps, k)
				if err != nil {
					return res, err
				}
				if *base.best == nil {
					*base.best = v
				}
				for i := range v {
					(*base.best)[i] = min((*base.best)[i], v[i])
				}
			}
		}
		for _, r := range scratch {
			v, err := diloco(withLR(r.lr, cfg.Train.Batch), r.sync, seed, nil, steps)
			if err != nil {
				return res, err
			}
			res.runs[r.name] = v
		}
		return res, nil
	}
	for b.Loop() {
		results, errs := make([]seedResult, len(seeds)), make([]error, len(seeds))
		var wg sync.WaitGroup
		for i, sd := range seeds {
			wg.Go(func() { results[i], errs[i] = runSeed([]byte(sd)) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
		for i := range steps / horizon {
			h := "-" + strconv.Itoa((i+1)*horizon)
			b.ReportMetric(results[0].dp[i], "scratch-single-bpb"+h)
			b.ReportMetric(results[0].batchB[i], "scratch-single-batch-B-bpb"+h)
			for _, r := range scratch {
				var mean, worst, meanB float64
				for _, res := range results {
					v := res.runs[r.name][i]
					mean += v / res.dp[i] / float64(len(seeds))
					worst = max(worst, v/res.dp[i])
					meanB += v / res.batchB[i] / float64(len(seeds))
				}
				b.ReportMetric(results[0].runs[r.name][i], r.name+"-bpb"+h)
				b.ReportMetric(mean, r.name+"-bpb/single"+h)
				b.ReportMetric(worst, r.name+"-bpb/single-worst"+h)
				b.ReportMetric(meanB, r.name+"-bpb/single-batch-B"+h)
			}
		}

		seed := []byte(seeds[0])
		s0, err := exact.Init(big, seed)
		if err != nil {
			b.Fatal(err)
		}
		pre, err := exact.Run(s0, train, []byte("diloco-quality-pretrain"), pretrain, nil)
		if err != nil {
			b.Fatal(err)
		}
		warmBase, err := single(asStart(b, pre, big), seed, warmSteps, 1)
		if err != nil {
			b.Fatal(err)
		}
		preBPB, err := bpb(pre)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(preBPB, "warm-pretrained-bpb")
		b.ReportMetric(warmBase[0], "warm-single-bpb")
		for _, topk := range []int{0, 64} {
			v, err := diloco(cfg, SyncSpec{Every: 50, OuterLR: 0.7, OuterMomentum: 0.9, TopK: topk}, seed, asStart(b, pre, cfg), warmSteps)
			if err != nil {
				b.Fatal(err)
			}
			name := "warm-dense"
			if topk > 0 {
				name = "warm-top" + strconv.Itoa(topk)
			}
			b.ReportMetric(v[0], name+"-bpb")
			b.ReportMetric(v[0]/warmBase[0], name+"-bpb/single")
		}
	}
}

// asStart is weights's weights under config c, with zero moments at step 0,
// as a round-0 worker starts from a global.
func asStart(b *testing.B, weights *exact.State, c exact.Config) *exact.State {
	g, err := GlobalFromState(weights, Sync{Every: 1, OuterLR: 1 << QOuter})
	if err != nil {
		b.Fatal(err)
	}
	s := g.Model()
	s.Config = c
	return s
}

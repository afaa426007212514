package exact

import "testing"

// BenchmarkStep is one Go training step of a small model (1.4 GMAC).
func BenchmarkStep(b *testing.B) {
	cfg := Config{Model: ModelConfig{Layers: 2, DModel: 128, Heads: 4, DFF: 512, Context: 64, Vocab: 256},
		Train: TrainConfig{Batch: 16, LR: 1e-3}}
	s, err := Init(cfg, testSeed)
	if err != nil {
		b.Fatal(err)
	}
	batch, err := StepBatch(s.Config, testSeed, 0, testCorpus)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cfg.MACsPerStep()), "MACs/step")
	for b.Loop() {
		if _, _, err := Step(s, batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvalChunk is what a tile referee pays for one 4 KiB chunk of the
// largest weight-gradient matmul of that model (512 outputs, K = 1024).
func BenchmarkEvalChunk(b *testing.B) {
	cfg := Config{Model: ModelConfig{Layers: 1, DModel: 128, Heads: 4, DFF: 512, Context: 64, Vocab: 256},
		Train: TrainConfig{Batch: 16, LR: 1e-3}}
	s, _ := Init(cfg, testSeed)
	g := TrainGraph(s.Config)
	op := &g.Ops[g.lastUse[g.ID("mb0.g.l0.mlp_in.dyT.q")]]
	src := g.NewSparseSource(op)
	ns, err := g.ChunkNeeds(op, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range ns {
		for r := n.Row0; r < n.Row1; r++ {
			src.Set(n.Input, r, n.Col0, make([]int64, n.Col1-n.Col0))
		}
	}
	for b.Loop() {
		if _, err := g.EvalChunk(op, 0, src); err != nil {
			b.Fatal(err)
		}
	}
}

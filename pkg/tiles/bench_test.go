package tiles_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/tiles"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// BenchmarkTileDispute plays phases 2–3 of a dispute over a real step of four model
// sizes (29.7 K to 101 M parameters, 3,400× apart) between an honest challenger and a provider wrong
// in one element of a weight-gradient matmul, and prints the table `make bench` shows:
// rounds per phase, transactions, gas (types.TileMoveGas at default params, ante
// handler included, store access not), the worst message ÷ the block gas limit (its
// bound types.MoveGasBound, store access included), and the defender's wall
// time to build each phase's commitment (phase 2: execute the step hashing every
// output; phase 3: re-execute to the disputed operator and hash its output's chunks).
// Phase 1 is the 32-step checkpoint's bisection (5 rounds of 2 moves, ~35 K gas each).
func BenchmarkTileDispute(b *testing.B) {
	configs := []struct {
		name string
		cfg  exact.Config
	}{
		{"S", exact.ReferenceConfig()},
		{"M", exact.Config{Model: exact.ModelConfig{Layers: 2, DModel: 128, Heads: 4, DFF: 512, Context: 64, Vocab: exact.Vocab},
			Train: exact.TrainConfig{Batch: 4, MicroBatch: 2, LR: 1e-3}}},
		{"L", exact.Config{Model: exact.ModelConfig{Layers: 4, DModel: 384, Heads: 6, DFF: 1536, Context: 128, Vocab: exact.Vocab},
			Train: exact.TrainConfig{Batch: 2, MicroBatch: 2, LR: 1e-3}}},
		// 101 M parameters; a short context and one window keep its step (~10^10
		// MACs) to about a minute on two cores.
		{"XL", exact.Config{Model: exact.ModelConfig{Layers: 8, DModel: 1024, Heads: 8, DFF: 4096, Context: 16, Vocab: exact.Vocab},
			Train: exact.TrainConfig{Batch: 1, MicroBatch: 1, LR: 1e-4}}},
	}
	params := verifytypes.DefaultParams()
	gas := func(c tiles.Cost) uint64 { return verifytypes.TileMoveGas(params, c) }
	bound := func(c tiles.Cost) uint64 { return verifytypes.MoveGasBound(params, c) }
	corpus := []byte(strings.Repeat("It was the best of times, it was the worst of times; exact sums do not care about order. ", 200))
	var rows []string
	for _, tc := range configs {
		b.Run(tc.name, func(b *testing.B) {
			cfg := tc.cfg.WithDefaults()
			pre, err := exact.Init(cfg, []byte("bench"))
			if err != nil {
				b.Fatal(err)
			}
			batch, err := exact.StepBatch(cfg, []byte("bench"), 0, corpus)
			if err != nil {
				b.Fatal(err)
			}
			step := tiles.NewStep(cfg)
			op := -1
			for _, o := range step.Graph.Ops {
				if o.Kind == exact.KindMatmul && strings.HasSuffix(step.Graph.Tensors[o.Output].Name, ".dW") {
					op = o.Index // the last weight gradient: deep in the step
				}
			}
			elem := step.Graph.Tensors[step.Graph.Ops[op].Output].Elems() / 3
			tamper := exact.Executor{Observer: func(o *exact.Op, out *exact.Tensor) {
				if o.Index == op {
					out.Data[elem] += 1 << 20
				}
			}}
			for b.Loop() {
				t0 := time.Now()
				prov, err := tiles.NewParty(step, tamper, pre, batch)
				if err != nil {
					b.Fatal(err)
				}
				commit2 := time.Since(t0)
				chal, err := tiles.NewParty(step, exact.Executor{}, pre, batch)
				if err != nil {
					b.Fatal(err)
				}
				var txs, total, worst uint64
				move := func(c tiles.Cost) {
					g := gas(c)
					txs, total, worst = txs+1, total+g, max(worst, bound(c))
				}
				move(tiles.Cost{Bytes: 32, Hashes: 1})                                                       // challenger's records
				move(tiles.Cost{Bytes: 32 + 32*int64(merkle.MaxProofDepth(uint64(step.Len()))), Hashes: 20}) // provider's, store proof
				d, err := tiles.NewDescent(uint64(step.Len()), prov.C.Root, chal.C.Root)
				if err != nil {
					b.Fatal(err)
				}
				r2 := 0
				for !d.Done() {
					pl, pr := prov.C.Children(d.Lo, d.Hi)
					cl, cr := chal.C.Children(d.Lo, d.Hi)
					if d, err = d.Next(pl, pr, cl, cr); err != nil {
						b.Fatal(err)
					}
					move(tiles.NodeRevealCost)
					move(tiles.NodeRevealCost)
					r2++
				}
				e := int(d.Lo)
				move(tiles.Cost{Bytes: 32, Hashes: 2})
				move(tiles.Cost{Bytes: 32, Hashes: 2})
				t1 := time.Now()
				if _, _, err := prov.OutputChildren(e, 0, step.OutputChunks(e)); err != nil && step.OutputChunks(e) > 1 {
					b.Fatal(err)
				}
				commit3 := time.Since(t1)
				od, err := tiles.NewDescent(step.OutputChunks(e), prov.C.Roots[e], chal.C.Roots[e])
				if err != nil {
					b.Fatal(err)
				}
				r3 := 0
				for !od.Done() {
					pl, pr, _ := prov.OutputChildren(e, od.Lo, od.Hi)
					cl, cr, _ := chal.OutputChildren(e, od.Lo, od.Hi)
					if od, err = od.Next(pl, pr, cl, cr); err != nil {
						b.Fatal(err)
					}
					move(tiles.NodeRevealCost)
					move(tiles.NodeRevealCost)
					r3++
				}
				c := int(od.Lo)
				chunk, _, err := prov.OutputChunk(e, c)
				if err != nil {
					b.Fatal(err)
				}
				move(tiles.Cost{Bytes: int64(len(chunk)), Hashes: int64(len(chunk))/64 + 1})
				i, err := chal.FirstDifference(e, c, chunk)
				if err != nil || i < 0 {
					b.Fatalf("no difference in chunk %d of entry %d: %v", c, e, err)
				}
				roots, rc, err := step.AgreedInputRoots(chal.C.Root, e, chal.InputOpenings(e))
				if err != nil {
					b.Fatal(err)
				}
				opens, err := chal.ElementOpenings(e, c*tiles.ElemsPerChunk(step.Spec(e))+i)
				if err != nil {
					b.Fatal(err)
				}
				right, _, ec, err := step.JudgeElement(e, c, chunk, i, roots, opens)
				if err != nil || right {
					b.Fatalf("referee: right %v, %v", right, err)
				}
				move(tiles.Cost{Bytes: rc.Bytes + ec.Bytes, Hashes: rc.Hashes + ec.Hashes, Elems: ec.Elems})
				w := step.WorstCase(bound)
				b.ReportMetric(float64(total), "gas/dispute")
				b.ReportMetric(float64(worst)/verifytypes.BlockGasLimit, "worst/blockgas")
				rows = append(rows, fmt.Sprintf("| %s | %d | %d | 5 | %d | %d | %d | %d | %.4f | %.4f | %s | %s |",
					tc.name, cfg.ParamCount(), step.Len(), r2, r3, 10+txs, total, float64(worst)/verifytypes.BlockGasLimit,
					float64(bound(w.Cost))/verifytypes.BlockGasLimit, commit2.Round(time.Millisecond), commit3.Round(time.Millisecond)))
			}
		})
	}
	fmt.Println("| model | params | entries | phase 1 rounds | phase 2 rounds | phase 3 rounds | txs (incl. phase 1) | phase 2–3 gas | worst msg ÷ block gas | worst possible ÷ block gas | defender phase 2 commit | defender phase 3 commit |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range rows {
		fmt.Println(r)
	}
}

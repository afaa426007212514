// Package diloco is the protocol core of training together (issue 18):
// many workers train one exact transformer (pkg/exact) in DiLoCo rounds —
// `every` inner AdamW steps each on its own data, then an outer
// Nesterov-momentum step on the average of their pseudo-gradients — with
// every value an exact integer, so any party recomputes any part of a round
// bit for bit. docs/training-together.md is the specification and says what
// is wired to the chain: this package is the reference the chain (x/market's
// round 0, x/verify's round fault referee), the sidecar and the provers share.
//
//	sync, _ := SyncSpec{Every: 100, OuterLR: 0.7, OuterMomentum: 0.9}.Sync()
//	g, _ := InitGlobal(cfg, sync, seed)                     // round 0: Init's weights, zero momentum
//	data, _ := WorkerData(stream, seed, g.Round, shards, n, w) // rendezvous assignment, disjoint
//	s := g.WorkerStart(carry)                                // global weights + the worker's own Adam moments
//	... `every` exact steps on data ...
//	pg, _ := NewPseudoGradient(g, w, s)                      // global − local, exact; pg.Root() is committed
//	pg, errBuf, _ = pg.Compress(errBuf)                      // optional top-k with error feedback
//	next, _ := Aggregate(g, pgsOfWorkersThatEntered)         // average, outer Nesterov step
//
// Everything is laid out in "sections": the trainable weights of the
// config, each tensor starting on a 4 KiB chunk, int32 at FracW. Weights,
// outer momentum, pseudo-gradients and error buffers share the layout, so
// chunk k of the next global state depends on chunk k of the inputs only:
// [AggregateChunk] is what the referee runs on Merkle-proven chunks; proof.go
// names the chunks every one-chunk round fault opens and what it recomputes.
// [Simulate] runs a whole job in one process — the reference a
// multi-sidecar run must reproduce bit for bit.
package diloco

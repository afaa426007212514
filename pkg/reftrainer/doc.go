// Package reftrainer is the deterministic reference training workload of
// depinchain: a small byte-level neural language model whose training step a
// provider runs off-chain and the chain's referee re-executes, bit for bit,
// when a dispute has been narrowed down to a single step (a one-step proof in
// the style of Arbitrum's one-step referee or Gensyn's Verde).
//
// # Why fixed point
//
// A referee can only settle a dispute if every honest validator, on any CPU,
// operating system or compiler release, computes exactly the same post-step
// state hash. Floating point does not give that guarantee in practice: fused
// multiply-add contraction, x87 extended precision, vectorised reductions and
// libm differences all change low-order bits, and a single flipped bit changes
// the hash. The whole step path therefore uses integer arithmetic only:
//
//   - Every weight, activation and gradient is a Q16.16 fixed-point number
//     stored in an int32 (value = raw / 65536).
//   - Products are formed exactly in int64; sums of products are kept in int64
//     accumulators with saturating addition, and rounded once at the end.
//   - Rounding is always round-half-away-from-zero (see roundShift and
//     divRound), and every narrowing to int32 saturates instead of wrapping.
//   - exp and ln, needed by softmax and the loss, are evaluated by range
//     reduction and fixed-degree polynomials in Q2.30 (expQ16, lnQ16).
//   - Loops run in a fixed order; the non-test code of this package uses no
//     maps, goroutines, floating point or unsafe.
//
// # Model
//
// A data byte b becomes token b % Vocab; with Vocab = 96 that is a bijection
// on printable ASCII (0x20..0x7F). Each training example is a window of
// Context+1 tokens: the first Context tokens are embedded (E, Vocab×Embed),
// concatenated into x, passed through one ReLU hidden layer
// h = relu(W1·x + b1) and an output layer logits = W2·h + b2, and scored
// with softmax cross-entropy against the last token. Gradients of the batch
// are summed and one step of plain SGD is applied to W2, b2, W1, b1 and E.
//
// # Work metering
//
// Config.MACsPerStep is the exact number of multiply-accumulates one Step
// performs (the tests count them as the step runs), so the chain can charge
// gas = MACs × gas-per-MAC before or while re-executing a step and can cap
// model size × batch size with a single parameter. Step reports its work to a
// Meter as it goes.
//
// # Data selection
//
// The examples of step i are chosen by BatchWindows from SHA-256 of a domain
// separator, the job seed, i and the example index, so neither the provider
// nor a challenger can steer which data a disputed step uses.
package reftrainer

package reftrainer

import (
	"fmt"
	"math"
)

// Meter receives the work of a Step as it is performed. The chain plugs its
// gas meter in (ConsumeMACs may panic when gas runs out, which aborts the
// step without touching the input state); the provider passes nil.
type Meter interface {
	ConsumeMACs(n uint64)
}

// StepMetrics describes one training step.
type StepMetrics struct {
	// MeanLoss is the batch-mean softmax cross-entropy, in nats, Q16.16,
	// measured with the weights before the update.
	MeanLoss int32
}

// macTally counts MACs where they happen, so the total a Step reports is
// the work actually done rather than a separate estimate.
type macTally struct {
	n uint64
}

// flush hands the MACs counted so far to meter.
func (t *macTally) flush(meter Meter) {
	if meter != nil && t.n > 0 {
		meter.ConsumeMACs(t.n)
	}
	t.n = 0
}

// dot returns bias + Σ a[i]·b[i] in Q16.16. The products are summed exactly
// (Q32.32, saturating) and rounded once at the end, so the result does not
// depend on intermediate rounding.
func (t *macTally) dot(bias int32, a, b []int32) int32 {
	acc := int64(bias) << FracBits
	for i, x := range a {
		acc = addSat64(acc, int64(x)*int64(b[i]))
	}
	t.n += uint64(len(a))
	return saturate32(roundShift(acc, FracBits))
}

func (t *macTally) exp(x int32) int32 {
	t.n += expMACs
	return expQ16(x)
}

func (t *macTally) ln(x int32) int32 {
	t.n += lnMACs
	return lnQ16(x)
}

// gradients holds the batch-summed gradient of every weight in Q32.32, the
// exact scale of a product of two Q16.16 numbers, so nothing is rounded until
// the update. The fields mirror State's weight slices.
type gradients struct {
	embedding, hiddenWeights, hiddenBias, outputWeights, outputBias []int64
}

// scratch holds the per-window activations, reused across the batch.
type scratch struct {
	context []int   // input token ids, oldest first
	x       []int32 // concatenated embeddings, Context·Embed
	preAct  []int32 // hidden pre-activations W1·x + b1
	hidden  []int32 // relu(preAct)
	logits  []int32
	expo    []int32 // e^(logit - max logit)
	dLogits []int32 // softmax - one-hot target: dLoss/dLogit
	dHidden []int64 // dLoss/dHidden, Q32.32
	dPreAct []int32 // dLoss/dPreAct, Q16.16
	dX      []int64 // dLoss/dx, Q32.32
}

// Step trains one SGD step of s on batch and returns the new state (Step
// incremented) and the batch's loss. batch must hold Config.BatchSize
// windows of Config.Context+1 bytes each, normally Batch(data,
// BatchWindows(cfg, jobSeed, s.Step, len(data))). s and batch are not
// modified. Exactly Config.MACsPerStep MACs are reported to meter (which may
// be nil): one ConsumeMACs call after each window and one for the update.
func Step(s *State, batch [][]byte, meter Meter) (*State, StepMetrics, error) {
	if err := s.Validate(); err != nil {
		return nil, StepMetrics{}, err
	}
	if s.Step == math.MaxUint64 {
		return nil, StepMetrics{}, fmt.Errorf("%w: step counter exhausted", ErrInvalidState)
	}
	cfg := s.Config
	if len(batch) != int(cfg.BatchSize) {
		return nil, StepMetrics{}, fmt.Errorf("%w: batch has %d windows, config wants BatchSize = %d", ErrInvalidData, len(batch), cfg.BatchSize)
	}
	windowLen := int(cfg.Context) + 1
	for i, w := range batch {
		if len(w) != windowLen {
			return nil, StepMetrics{}, fmt.Errorf("%w: window %d has %d bytes, want Context+1 = %d", ErrInvalidData, i, len(w), windowLen)
		}
	}

	vocab, embed, hidden := int(cfg.Vocab), int(cfg.Embed), int(cfg.Hidden)
	inputs := int(cfg.Context) * embed
	g := gradients{
		embedding:     make([]int64, len(s.Embedding)),
		hiddenWeights: make([]int64, len(s.HiddenWeights)),
		hiddenBias:    make([]int64, len(s.HiddenBias)),
		outputWeights: make([]int64, len(s.OutputWeights)),
		outputBias:    make([]int64, len(s.OutputBias)),
	}
	sc := scratch{
		context: make([]int, cfg.Context),
		x:       make([]int32, inputs),
		preAct:  make([]int32, hidden),
		hidden:  make([]int32, hidden),
		logits:  make([]int32, vocab),
		expo:    make([]int32, vocab),
		dLogits: make([]int32, vocab),
		dHidden: make([]int64, hidden),
		dPreAct: make([]int32, hidden),
		dX:      make([]int64, inputs),
	}
	var tally macTally
	var lossSum int64
	for _, window := range batch {
		lossSum += int64(accumulateWindow(s, window, &g, &sc, &tally))
		tally.flush(meter)
	}

	next := s.clone()
	next.Step++
	lr, batchSize := int64(cfg.LearningRate), int64(cfg.BatchSize)
	applySGD(next.Embedding, g.embedding, lr, batchSize, &tally)
	applySGD(next.HiddenWeights, g.hiddenWeights, lr, batchSize, &tally)
	applySGD(next.HiddenBias, g.hiddenBias, lr, batchSize, &tally)
	applySGD(next.OutputWeights, g.outputWeights, lr, batchSize, &tally)
	applySGD(next.OutputBias, g.outputBias, lr, batchSize, &tally)
	tally.flush(meter)

	// Each loss is an int32, so the int64 sum of at most MaxBatchSize of
	// them cannot overflow.
	return next, StepMetrics{MeanLoss: saturate32(divRound(lossSum, batchSize))}, nil
}

// accumulateWindow runs the forward and backward pass of one window with the
// weights of s, adds its gradients to g and returns its loss in Q16.16.
func accumulateWindow(s *State, window []byte, g *gradients, sc *scratch, tally *macTally) int32 {
	cfg := s.Config
	vocab, embed, hidden := int(cfg.Vocab), int(cfg.Embed), int(cfg.Hidden)
	inputs := len(sc.x)

	// Forward: x = concat(E[context]), h = relu(W1·x + b1), logits = W2·h + b2.
	for c := range sc.context {
		tok := int(window[c]) % vocab
		sc.context[c] = tok
		copy(sc.x[c*embed:(c+1)*embed], s.Embedding[tok*embed:(tok+1)*embed])
	}
	target := int(window[len(window)-1]) % vocab
	for j := range hidden {
		sc.preAct[j] = tally.dot(s.HiddenBias[j], s.HiddenWeights[j*inputs:(j+1)*inputs], sc.x)
		sc.hidden[j] = max(sc.preAct[j], 0)
	}
	maxLogit := int32(math.MinInt32)
	for v := range vocab {
		sc.logits[v] = tally.dot(s.OutputBias[v], s.OutputWeights[v*hidden:(v+1)*hidden], sc.hidden)
		maxLogit = max(maxLogit, sc.logits[v])
	}

	// Softmax, shifted by the max logit so every exponent is <= 0 and
	// e^0 = One exactly: the sum is in [One, vocab·One], far from overflow.
	var sum int64
	for v := range vocab {
		sc.expo[v] = tally.exp(subQ16(sc.logits[v], maxLogit))
		sum += int64(sc.expo[v])
	}
	// 1/sum in Q32.32 keeps ~24 significant bits for the normalisation.
	reciprocal := divRound(int64(1)<<(2*FracBits+FracBits), sum)
	tally.n++
	// dLoss/dLogit = softmax probability - one-hot target.
	for v := range vocab {
		sc.dLogits[v] = saturate32(roundShift(int64(sc.expo[v])*reciprocal, 2*FracBits))
	}
	tally.n += uint64(vocab)
	sc.dLogits[target] -= One

	// Cross-entropy -ln p[target] = ln(sum) - (logit[target] - max), computed
	// from the sum rather than the rounded probability so it stays finite.
	loss := saturate32(int64(tally.ln(int32(sum))) - int64(subQ16(sc.logits[target], maxLogit)))

	// Backward through the output layer: dW2 += dLogits ⊗ h, dh = W2ᵀ·dLogits.
	clear(sc.dHidden)
	for v := range vocab {
		d := int64(sc.dLogits[v])
		weights := s.OutputWeights[v*hidden : (v+1)*hidden]
		grad := g.outputWeights[v*hidden : (v+1)*hidden]
		for j, w := range weights {
			grad[j] = addSat64(grad[j], d*int64(sc.hidden[j]))
			sc.dHidden[j] = addSat64(sc.dHidden[j], int64(w)*d)
		}
		tally.n += 2 * uint64(hidden)
		g.outputBias[v] = addSat64(g.outputBias[v], d<<FracBits)
	}

	// Through the ReLU: the gradient passes only where the unit was active.
	for j := range hidden {
		sc.dPreAct[j] = 0
		if sc.preAct[j] > 0 {
			sc.dPreAct[j] = saturate32(roundShift(sc.dHidden[j], FracBits))
		}
		g.hiddenBias[j] = addSat64(g.hiddenBias[j], int64(sc.dPreAct[j])<<FracBits)
	}

	// Backward through the hidden layer: dW1 += dPreAct ⊗ x, dx = W1ᵀ·dPreAct.
	// Inactive units are processed too (with a zero delta) so the MAC count
	// does not depend on the data.
	clear(sc.dX)
	for j := range hidden {
		d := int64(sc.dPreAct[j])
		weights := s.HiddenWeights[j*inputs : (j+1)*inputs]
		grad := g.hiddenWeights[j*inputs : (j+1)*inputs]
		for k, w := range weights {
			grad[k] = addSat64(grad[k], d*int64(sc.x[k]))
			sc.dX[k] = addSat64(sc.dX[k], int64(w)*d)
		}
		tally.n += 2 * uint64(inputs)
	}

	// Scatter dx back to the embedding rows of the context tokens; a token
	// that occurs twice receives both contributions.
	for c, tok := range sc.context {
		row := g.embedding[tok*embed : (tok+1)*embed]
		for d := range row {
			row[d] = addSat64(row[d], sc.dX[c*embed+d])
		}
	}
	return loss
}

// gradFracBits is the precision gradients are reduced to before the update.
// Q8.24 keeps lr·gradient within int64 (lr <= 2^20, |gradient| <= 2^39)
// while rounding the product lr·gradient/batch only once.
const gradFracBits = 24

// maxGradQ24 clamps a batch gradient to the Q16.16 range, ±32768.
const maxGradQ24 = int64(1) << (gradFracBits + 15)

// applySGD performs w -= lr · g / batchSize for each weight, with g the
// batch-summed Q32.32 gradient: one MAC per weight.
func applySGD(w []int32, g []int64, lr, batchSize int64, tally *macTally) {
	den := batchSize << gradFracBits
	for i := range w {
		grad := min(max(roundShift(g[i], 2*FracBits-gradFracBits), -maxGradQ24), maxGradQ24)
		w[i] = saturate32(int64(w[i]) - divRound(lr*grad, den))
	}
	tally.n += uint64(len(w))
}

// Run trains steps steps from s on data: step i uses the windows
// BatchWindows(s.Config, jobSeed, i, len(data)) selects. After each step it
// calls onStep (if non-nil) with the new state's step number and hash and the
// step's metrics: the provider's per-step hash trace h_1, h_2, .... It
// returns the final state; on error, it returns the state after the last
// completed step (s itself if none) together with the error.
func Run(s *State, data []byte, jobSeed []byte, steps uint64, onStep func(step uint64, h [32]byte, m StepMetrics) error) (*State, error) {
	if err := s.Validate(); err != nil {
		return s, err
	}
	cur := s
	for range steps {
		windows, err := BatchWindows(cur.Config, jobSeed, cur.Step, uint64(len(data)))
		if err != nil {
			return cur, err
		}
		batch, err := Batch(data, windows)
		if err != nil {
			return cur, err
		}
		next, metrics, err := Step(cur, batch, nil)
		if err != nil {
			return cur, err
		}
		cur = next
		if onStep != nil {
			if err := onStep(cur.Step, cur.Hash(), metrics); err != nil {
				return cur, err
			}
		}
	}
	return cur, nil
}

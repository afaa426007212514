package exact

import (
	"fmt"
	"sync"
)

// ParamSpec is one trainable weight matrix.
type ParamSpec struct {
	Name       string
	Rows, Cols int
	// Linear marks a matrix used as a contraction operand (y = x·Wᵀ);
	// embeddings are gathered instead.
	Linear bool
	// Residual marks the projections into the residual stream, whose
	// initial scale is divided by √(2·layers).
	Residual bool
}

// Params lists the weights in canonical order: tok_emb, pos_emb, then per
// layer i attn_qkv, attn_out, mlp_in, mlp_out, then head. Every matrix is
// rows × cols row-major; a linear layer's matrix is out × in, so each row
// is one output channel with its input dimension contiguous.
func Params(c Config) []ParamSpec {
	m := c.Model
	d, f, v := m.DModel, m.DFF, m.Vocab
	ps := []ParamSpec{{Name: "tok_emb", Rows: v, Cols: d}, {Name: "pos_emb", Rows: m.Context, Cols: d}}
	for i := range m.Layers {
		l := fmt.Sprintf("l%d.", i)
		ps = append(ps,
			ParamSpec{Name: l + "attn_qkv", Rows: 3 * d, Cols: d, Linear: true},
			ParamSpec{Name: l + "attn_out", Rows: d, Cols: d, Linear: true, Residual: true},
			ParamSpec{Name: l + "mlp_in", Rows: f, Cols: d, Linear: true},
			ParamSpec{Name: l + "mlp_out", Rows: d, Cols: f, Linear: true, Residual: true},
		)
	}
	return append(ps, ParamSpec{Name: "head", Rows: v, Cols: d, Linear: true})
}

// attnScale is 1/√(head_dim) at Q30: DIV(2^45, ISqrt(head_dim·2^30)).
func attnScale(headDim int) int64 {
	return DIV(1<<45, ISqrt(int64(headDim)<<30))
}

// modelBuilder builds the forward and backward passes over a builder.
type modelBuilder struct {
	*builder
	cfg    Config
	hyp    Hyper
	params []ParamSpec
	w      map[string]int       // param name -> weight tensor
	wq     map[string]quantized // forward operand (rows = output channels)
	wtq    map[string]quantized // backward operand Wᵀ (rows = input channels)
}

func newModelBuilder(cfg Config) *modelBuilder {
	cfg = cfg.WithDefaults()
	return &modelBuilder{builder: newBuilder(cfg), cfg: cfg, hyp: cfg.Hyper(), params: Params(cfg),
		w: map[string]int{}, wq: map[string]quantized{}, wtq: map[string]quantized{}}
}

// prologue quantizes every linear weight (and, when backward is set, its
// transpose) once per step.
func (mb *modelBuilder) prologue(backward bool) {
	mb.phase, mb.micro = PhasePrologue, -1
	for _, p := range mb.params {
		if !p.Linear {
			continue
		}
		w := mb.w[p.Name]
		mb.wq[p.Name] = mb.quantize(w)
		if backward {
			mb.wtq[p.Name] = mb.quantize(mb.transpose(w, p.Name+".wT"))
		}
	}
}

// layerSaved are the forward tensors the backward pass of a layer reads.
type layerSaved struct {
	x, s1, h1, q, k, v, p, att, xmid, s2, h2, u, r int
}

type forwardOut struct {
	layers        []layerSaved
	xL, sf, hf    int
	logits        int
	window, x0    int
	batch, seqLen int
}

// forward appends the forward pass over window ([batch, seqLen+1] bytes);
// tensor names start with pre.
func (mb *modelBuilder) forward(pre string, window, batch, seqLen int) forwardOut {
	m := mb.cfg.Model
	d, h, dh := m.DModel, m.Heads, mb.cfg.HeadDim()
	T := batch * seqLen
	G := batch * h
	scale := attnScale(dh)
	fo := forwardOut{window: window, batch: batch, seqLen: seqLen}
	x := mb.op(KindEmbed, mb.tensor(pre+"x0", I32, FracAct, T, d), nil, window, mb.w["tok_emb"], mb.w["pos_emb"])
	fo.x0 = x
	norm := func(name string, x int) (s, y int) {
		s = mb.op(KindRMSScale, mb.tensor(name+".scale", I64, 0, T, 3), []Attr{{"eps", mb.hyp.NormEps}}, x)
		y = mb.op(KindRMSApply, mb.tensor(name, I32, FracAct, T, d), nil, x, s)
		return s, y
	}
	for i := range m.Layers {
		l := fmt.Sprintf("%sl%d.", pre, i)
		pn := fmt.Sprintf("l%d.", i)
		var ls layerSaved
		ls.x = x
		ls.s1, ls.h1 = norm(l+"ln1", x)
		qkv := mb.matmul(l+"qkv", mb.quantize(ls.h1), mb.wq[pn+"attn_qkv"], FracAct, Max32)
		split := func(part int, name string) int {
			return mb.op(KindSplitHeads, mb.tensor(l+name, I32, FracAct, G, seqLen, dh),
				[]Attr{{"heads", int64(h)}, {"part", int64(part)}, {"parts", 3}, {"seq", int64(seqLen)}}, qkv)
		}
		ls.q, ls.k, ls.v = split(0, "q"), split(1, "k"), split(2, "v")
		scores := mb.matmul(l+"scores", mb.quantize(ls.q), mb.quantize(ls.k), FracAct, Max32)
		ls.p = mb.op(KindSoftmax, mb.tensor(l+"probs", I32, FracProb, G, seqLen, seqLen), []Attr{{"scale", scale}}, scores)
		vT := mb.transpose(ls.v, l+"vT")
		o := mb.matmul(l+"o", mb.quantize(ls.p), mb.quantize(vT), FracAct, Max32)
		ls.att = mb.op(KindMergeHeads, mb.tensor(l+"att", I32, FracAct, T, d), []Attr{{"heads", int64(h)}}, o)
		ao := mb.matmul(l+"attn_proj", mb.quantize(ls.att), mb.wq[pn+"attn_out"], FracAct, Max32)
		ls.xmid = mb.add(l+"xmid", x, ao)
		ls.s2, ls.h2 = norm(l+"ln2", ls.xmid)
		ls.u = mb.matmul(l+"mlp_pre", mb.quantize(ls.h2), mb.wq[pn+"mlp_in"], FracAct, Max32)
		ls.r = mb.unary(KindReLU, l+"mlp_act", ls.u, nil)
		mo := mb.matmul(l+"mlp_proj", mb.quantize(ls.r), mb.wq[pn+"mlp_out"], FracAct, Max32)
		x = mb.add(l+"xout", ls.xmid, mo)
		fo.layers = append(fo.layers, ls)
	}
	fo.xL = x
	fo.sf, fo.hf = norm(pre+"lnf", x)
	fo.logits = mb.matmul(pre+"logits", mb.quantize(fo.hf), mb.wq["head"], FracAct, Max32)
	return fo
}

// linearBackward appends dx = dy·W and dW = dyᵀ·x for y = x·Wᵀ.
func (mb *modelBuilder) linearBackward(name, param string, dy, x int) (dx, dW int) {
	dx = mb.matmul(name+".dx", mb.quantize(dy), mb.wtq[param], FracGrad, Max32)
	dyT := mb.transpose(dy, name+".dyT")
	xT := mb.transpose(x, name+".xT")
	dW = mb.matmul(name+".dW", mb.quantize(dyT), mb.quantize(xT), FracGrad, MaxGradPart)
	return dx, dW
}

// backward appends the backward pass from dlogits and returns each
// parameter's gradient tensor (this micro-batch's part).
func (mb *modelBuilder) backward(pre string, fo forwardOut, dlogits int) map[string]int {
	m := mb.cfg.Model
	d, h, dh := m.DModel, m.Heads, mb.cfg.HeadDim()
	T, G, S := fo.batch*fo.seqLen, fo.batch*h, fo.seqLen
	scale := attnScale(dh)
	grads := map[string]int{}
	rmsBack := func(name string, dy, y, s int) int {
		return mb.op(KindRMSBackward, mb.tensor(name, I32, FracGrad, T, d), nil, dy, y, s)
	}
	var dhf int
	dhf, grads["head"] = mb.linearBackward(pre+"g.head", "head", dlogits, fo.hf)
	dx := rmsBack(pre+"g.lnf", dhf, fo.hf, fo.sf)
	for i := m.Layers - 1; i >= 0; i-- {
		l := fmt.Sprintf("%sg.l%d.", pre, i)
		pn := fmt.Sprintf("l%d.", i)
		ls := fo.layers[i]
		// MLP: x_out = xmid + mlp_out(relu(mlp_in(ln2(xmid)))).
		var dr, du, dh2 int
		dr, grads[pn+"mlp_out"] = mb.linearBackward(l+"mlp_proj", pn+"mlp_out", dx, ls.r)
		du = mb.op(KindReLUBack, mb.tensor(l+"mlp_pre", I32, FracGrad, T, m.DFF), nil, dr, ls.u)
		dh2, grads[pn+"mlp_in"] = mb.linearBackward(l+"mlp_in", pn+"mlp_in", du, ls.h2)
		dxmid := mb.add(l+"xmid", dx, rmsBack(l+"ln2", dh2, ls.h2, ls.s2))
		// Attention: xmid = x + attn_out(merge(softmax(q·kᵀ)·v)).
		var datt int
		datt, grads[pn+"attn_out"] = mb.linearBackward(l+"attn_proj", pn+"attn_out", dxmid, ls.att)
		dO := mb.op(KindSplitHeads, mb.tensor(l+"o", I32, FracGrad, G, S, dh),
			[]Attr{{"heads", int64(h)}, {"part", 0}, {"parts", 1}, {"seq", int64(S)}}, datt)
		dP := mb.matmul(l+"probs", mb.quantize(dO), mb.quantize(ls.v), FracGrad, Max32)
		dS := mb.op(KindSoftmaxBack, mb.tensor(l+"scores", I32, FracGrad, G, S, S), []Attr{{"scale", scale}}, ls.p, dP)
		kT := mb.transpose(ls.k, l+"kT")
		dq := mb.matmul(l+"q", mb.quantize(dS), mb.quantize(kT), FracGrad, Max32)
		dST := mb.transpose(dS, l+"scoresT")
		qT := mb.transpose(ls.q, l+"qT")
		dk := mb.matmul(l+"k", mb.quantize(dST), mb.quantize(qT), FracGrad, Max32)
		pT := mb.transpose(ls.p, l+"probsT")
		dOT := mb.transpose(dO, l+"oT")
		dv := mb.matmul(l+"v", mb.quantize(pT), mb.quantize(dOT), FracGrad, Max32)
		dqkv := mb.op(KindMergeHeads, mb.tensor(l+"qkv", I32, FracGrad, T, 3*d), []Attr{{"heads", int64(h)}}, dq, dk, dv)
		var dh1 int
		dh1, grads[pn+"attn_qkv"] = mb.linearBackward(l+"qkv", pn+"attn_qkv", dqkv, ls.h1)
		dx = mb.add(l+"x", dxmid, rmsBack(l+"ln1", dh1, ls.h1, ls.s1))
	}
	dxT := mb.transpose(dx, pre+"g.x0T")
	grads["tok_emb"] = mb.op(KindEmbedGradTok, mb.tensor(pre+"g.tok_emb.dW", I64, FracGrad, m.Vocab, d), nil, fo.window, dxT)
	grads["pos_emb"] = mb.op(KindEmbedGradPos, mb.tensor(pre+"g.pos_emb.dW", I64, FracGrad, m.Context, d), nil, dxT)
	return grads
}

// StateTensorNames are the state's tensors in canonical order: for each
// parameter p of Params, "p.w" (i32, Q28), "p.m" (i32, Q28) and "p.v"
// (i64, Q56).
func StateTensorNames(c Config) []string {
	var names []string
	for _, p := range Params(c) {
		names = append(names, p.Name+".w", p.Name+".m", p.Name+".v")
	}
	return names
}

// stateTensorSpec returns dtype, frac and shape of state tensor suffix
// ("w", "m" or "v") of p.
func stateTensorSpec(p ParamSpec, suffix string) (DType, int, []int) {
	switch suffix {
	case "w", "m":
		return I32, FracW, []int{p.Rows, p.Cols}
	}
	return I64, FracV, []int{p.Rows, p.Cols}
}

// TrainGraph is the graph of one training step of cfg (which must be
// valid). Its inputs are "step" ([1] i64), "mb<k>.window" ([micro_batch,
// context+1] u8) for each micro-batch k and the state tensors; its results
// are "next.<p>.w|m|v" and "loss" ([1] i64, Q30, the step's mean loss).
// The last few graphs are cached (by config); a Graph must not be
// modified.
func TrainGraph(cfg Config) *Graph {
	key := cfg.WithDefaults().Hyper()
	graphCache.Lock()
	g, ok := graphCache.m[key]
	graphCache.Unlock()
	if ok {
		return g
	}
	g = buildTrainGraph(cfg)
	graphCache.Lock()
	defer graphCache.Unlock()
	if len(graphCache.m) >= maxCachedGraphs {
		clear(graphCache.m) // configs are few in practice; a bound is what matters
	}
	graphCache.m[key] = g
	return g
}

const maxCachedGraphs = 16

var graphCache = struct {
	sync.Mutex
	m map[Hyper]*Graph
}{m: map[Hyper]*Graph{}}

func buildTrainGraph(cfg Config) *Graph {
	mb := newModelBuilder(cfg)
	cfg, hyp := mb.cfg, mb.hyp
	step := mb.input("step", I64, 0, 1)
	nMicro := cfg.MicroBatches()
	windows := make([]int, nMicro)
	for k := range windows {
		windows[k] = mb.input(fmt.Sprintf("mb%d.window", k), U8, 0, cfg.Train.MicroBatch, cfg.Model.Context+1)
	}
	state := map[string]int{}
	for _, p := range mb.params {
		for _, sfx := range []string{"w", "m", "v"} {
			dt, frac, shape := stateTensorSpec(p, sfx)
			state[p.Name+"."+sfx] = mb.input(p.Name+"."+sfx, dt, frac, shape...)
		}
		mb.w[p.Name] = state[p.Name+".w"]
	}
	mb.prologue(true)
	acc := map[string]int{}
	lossAcc := -1
	for k := range nMicro {
		mb.phase, mb.micro = PhaseMicro, k
		pre := fmt.Sprintf("mb%d.", k)
		fo := mb.forward(pre, windows[k], cfg.Train.MicroBatch, cfg.Model.Context)
		T := cfg.Train.MicroBatch * cfg.Model.Context
		lossTok := mb.op(KindCELoss, mb.tensor(pre+"loss_tok", I64, FracProb, T), nil, fo.logits, fo.window)
		loss := mb.op(KindSum, mb.tensor(pre+"loss", I64, FracProb, 1), nil, lossTok)
		dlogits := mb.op(KindCEGrad, mb.tensor(pre+"g.logits", I32, FracGrad, T, cfg.Model.Vocab), nil, fo.logits, fo.window)
		grads := mb.backward(pre, fo, dlogits)
		if k == 0 {
			acc, lossAcc = grads, loss
			continue
		}
		mb.phase = PhaseAccum
		for _, p := range mb.params {
			acc[p.Name] = mb.add(fmt.Sprintf("acc%d.%s.grad", k, p.Name), acc[p.Name], grads[p.Name])
		}
		lossAcc = mb.add(fmt.Sprintf("acc%d.loss", k), lossAcc, loss)
	}
	mb.phase, mb.micro = PhaseUpdate, -1
	n := cfg.TokensPerStep()
	sched := mb.op(KindSchedule, mb.tensor("sched", I64, 0, schedLen), []Attr{
		{"lr", hyp.LR}, {"min_lr", hyp.MinLR}, {"warmup", hyp.WarmupSteps}, {"decay", hyp.DecaySteps},
		{"weight_decay", hyp.WeightDecay}, {"beta1", hyp.Beta1}, {"beta2", hyp.Beta2}}, step)
	for _, p := range mb.params {
		dt, frac, shape := stateTensorSpec(p, "m")
		m2 := mb.op(KindAdamM, mb.tensor("next."+p.Name+".m", dt, frac, shape...),
			[]Attr{{"tokens", n}, {"c1", one30 - hyp.Beta1}}, state[p.Name+".m"], acc[p.Name])
		dt, frac, shape = stateTensorSpec(p, "v")
		v2 := mb.op(KindAdamV, mb.tensor("next."+p.Name+".v", dt, frac, shape...),
			[]Attr{{"tokens", n}, {"c2", one30 - hyp.Beta2}}, state[p.Name+".v"], acc[p.Name])
		dt, frac, shape = stateTensorSpec(p, "w")
		w2 := mb.op(KindAdamW, mb.tensor("next."+p.Name+".w", dt, frac, shape...),
			[]Attr{{"eps", hyp.Eps}}, state[p.Name+".w"], m2, v2, sched)
		mb.g.Outputs = append(mb.g.Outputs, w2, m2, v2)
	}
	mb.g.Outputs = append(mb.g.Outputs, mb.op(KindLossMean, mb.tensor("loss", I64, FracProb, 1), []Attr{{"tokens", n}}, lossAcc))
	return mb.finish()
}

// ForwardGraph is the inference graph for batch sequences of seqLen ≤
// context tokens: inputs "window" ([batch, seqLen+1] u8: the tokens and,
// shifted by one, their targets) and the weights "<p>.w"; outputs "logits"
// ([batch·seqLen, vocab] i32, Q16) and "loss_tok" ([batch·seqLen] i64, Q30,
// the per-token loss against the targets).
func ForwardGraph(cfg Config, batch, seqLen int) *Graph {
	mb := newModelBuilder(cfg)
	window := mb.input("window", U8, 0, batch, seqLen+1)
	for _, p := range mb.params {
		dt, frac, shape := stateTensorSpec(p, "w")
		mb.w[p.Name] = mb.input(p.Name+".w", dt, frac, shape...)
	}
	mb.prologue(false)
	mb.phase, mb.micro = PhaseMicro, 0
	fo := mb.forward("", window, batch, seqLen)
	lossTok := mb.op(KindCELoss, mb.tensor("loss_tok", I64, FracProb, batch*seqLen), nil, fo.logits, window)
	mb.g.Outputs = []int{fo.logits, lossTok}
	return mb.finish()
}

// schedLen is the length of the schedule tensor: [δ = lr_t·wd (Q30),
// a = lr_t/(1-β1^t) (Q50), k2 = 1/√(1-β2^t) (Q24), lr_t (Q40)].
const schedLen = 4

type cost struct{ macs, elements int64 }

// graphCost counts the training graph's matmul MACs and other operators'
// output elements without building the whole graph (CheckLimits runs on
// untrusted configs): a one-micro-batch graph of the same shape is built
// and its micro phase scaled by the micro-batch count; the accum phase
// adds every gradient and the loss once per further micro-batch. The
// tests check the result against the full graph.
func graphCost(cfg Config) cost {
	cfg = cfg.WithDefaults()
	nMicro := int64(cfg.MicroBatches())
	one := cfg
	one.Train.Batch = cfg.Train.MicroBatch
	g := buildTrainGraph(one)
	var micro, other cost
	for i := range g.Ops {
		op := &g.Ops[i]
		c := &other
		if op.Phase == PhaseMicro {
			c = &micro
		}
		out := &g.Tensors[op.Output]
		if op.Kind == KindMatmul {
			c.macs += int64(out.Elems()) * int64(g.Tensors[op.Inputs[0]].Cols())
		} else {
			c.elements += int64(out.Elems())
		}
	}
	accum := (nMicro - 1) * (cfg.ParamCount() + 1)
	return cost{macs: other.macs + nMicro*micro.macs, elements: other.elements + nMicro*micro.elements + accum}
}

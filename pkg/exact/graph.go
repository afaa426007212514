package exact

import (
	"encoding/json"
	"fmt"
)

// Operator kinds. docs/exact-arithmetic.md defines each one's output
// element as a function of its inputs.
const (
	KindQExp         = "qexp"
	KindQMant        = "qmant"
	KindMatmul       = "matmul"
	KindTranspose    = "transpose"
	KindEmbed        = "embed"
	KindRMSScale     = "rms_scale"
	KindRMSApply     = "rms_apply"
	KindRMSBackward  = "rms_backward"
	KindSplitHeads   = "split_heads"
	KindMergeHeads   = "merge_heads"
	KindSoftmax      = "softmax"
	KindSoftmaxBack  = "softmax_backward"
	KindCELoss       = "ce_loss"
	KindCEGrad       = "ce_grad"
	KindSum          = "sum"
	KindAdd          = "add"
	KindReLU         = "relu"
	KindReLUBack     = "relu_backward"
	KindEmbedGradTok = "embed_grad_tok"
	KindEmbedGradPos = "embed_grad_pos"
	KindSchedule     = "schedule"
	KindAdamM        = "adam_m"
	KindAdamV        = "adam_v"
	KindAdamW        = "adam_w"
	KindLossMean     = "loss_mean"
)

// Phases of a training step's operators. A data-parallel runner executes
// the prologue everywhere, the micro phase of its own micro-batches, sums
// the micro-batch gradients and losses exactly across processes in place of
// the accum phase, and then runs the update phase everywhere.
const (
	PhasePrologue = "prologue"
	PhaseMicro    = "micro"
	PhaseAccum    = "accum"
	PhaseUpdate   = "update"
)

// Attr is one integer attribute of an operator.
type Attr struct {
	Key string `json:"k"`
	Val int64  `json:"v"`
}

// Op is one operator of the graph: it reads Inputs (tensor ids, in order)
// and writes the single tensor Output.
type Op struct {
	Index  int    `json:"index"`
	Kind   string `json:"kind"`
	Inputs []int  `json:"inputs"`
	Output int    `json:"output"`
	Attrs  []Attr `json:"attrs"`
	Phase  string `json:"phase"`
	// Micro is the micro-batch of a micro or accum operator, -1 otherwise.
	Micro int `json:"micro"`
}

// Attr returns the attribute key; it panics if absent (graphs are built by
// this package, so that is a bug).
func (o *Op) Attr(key string) int64 {
	for _, a := range o.Attrs {
		if a.Key == key {
			return a.Val
		}
	}
	panic(fmt.Sprintf("exact: op %d (%s) has no attribute %q", o.Index, o.Kind, key))
}

// Graph is an ordered operator list over named tensors.
type Graph struct {
	Config  Config
	Tensors []TensorSpec
	Ops     []Op
	byName  map[string]int
	// Inputs are the tensors no operator writes: the step counter, the
	// micro-batch windows and the state tensors.
	Inputs []int
	// Outputs are the graph's results, never freed by an executor: the
	// next state tensors and the loss (training), logits and loss_tok
	// (forward).
	Outputs []int
	// keep[t] marks inputs and outputs.
	keep []bool
	// lastUse[t] is the index of the last operator reading tensor t (-1 if
	// none), so executors can free intermediates.
	lastUse []int
}

// Tensor returns the spec of the tensor named name, or nil.
func (g *Graph) Tensor(name string) *TensorSpec {
	id, ok := g.byName[name]
	if !ok {
		return nil
	}
	return &g.Tensors[id]
}

// ID returns the id of the tensor named name; it panics if absent.
func (g *Graph) ID(name string) int {
	id, ok := g.byName[name]
	if !ok {
		panic(fmt.Sprintf("exact: graph has no tensor %q", name))
	}
	return id
}

type jsonTensor struct {
	ID    int    `json:"id"`
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	Frac  int    `json:"frac"`
}

// MarshalJSON renders the graph's tensors and operators; the PyTorch
// implementation builds the same list, and the tests compare the two.
func (g *Graph) MarshalJSON() ([]byte, error) {
	ts := make([]jsonTensor, len(g.Tensors))
	for i, t := range g.Tensors {
		ts[i] = jsonTensor{t.ID, t.Name, t.DType.String(), t.Shape, t.Frac}
	}
	return json.Marshal(struct {
		Tensors []jsonTensor `json:"tensors"`
		Ops     []Op         `json:"ops"`
	}{ts, g.Ops})
}

// builder appends tensors and operators to a graph.
type builder struct {
	g     *Graph
	phase string
	micro int
}

func newBuilder(cfg Config) *builder {
	return &builder{g: &Graph{Config: cfg, byName: map[string]int{}}, micro: -1}
}

func (b *builder) tensor(name string, dt DType, frac int, shape ...int) int {
	if _, dup := b.g.byName[name]; dup {
		panic("exact: duplicate tensor " + name)
	}
	id := len(b.g.Tensors)
	b.g.Tensors = append(b.g.Tensors, TensorSpec{ID: id, Name: name, DType: dt, Shape: append([]int(nil), shape...), Frac: frac})
	b.g.byName[name] = id
	return id
}

func (b *builder) input(name string, dt DType, frac int, shape ...int) int {
	id := b.tensor(name, dt, frac, shape...)
	b.g.Inputs = append(b.g.Inputs, id)
	return id
}

func (b *builder) spec(id int) *TensorSpec { return &b.g.Tensors[id] }

func (b *builder) op(kind string, out int, attrs []Attr, inputs ...int) int {
	if attrs == nil {
		attrs = []Attr{}
	}
	b.g.Ops = append(b.g.Ops, Op{Index: len(b.g.Ops), Kind: kind, Inputs: inputs, Output: out, Attrs: attrs, Phase: b.phase, Micro: b.micro})
	return out
}

func (b *builder) finish() *Graph {
	g := b.g
	g.lastUse = make([]int, len(g.Tensors))
	for i := range g.lastUse {
		g.lastUse[i] = -1
	}
	for _, op := range g.Ops {
		for _, in := range op.Inputs {
			g.lastUse[in] = op.Index
		}
	}
	g.keep = make([]bool, len(g.Tensors))
	for _, id := range append(append([]int(nil), g.Inputs...), g.Outputs...) {
		g.keep[id] = true
	}
	return g
}

// quantized is a contraction operand: int16 mantissas and per-row
// exponents.
type quantized struct{ q, e int }

// quantize appends qexp and qmant for dense tensor x.
func (b *builder) quantize(x int) quantized {
	s := b.spec(x)
	name, frac, shape, rows := s.Name, s.Frac, s.Shape, s.Rows()
	e := b.op(KindQExp, b.tensor(name+".e", I8, 0, rows), []Attr{{"frac", int64(frac)}}, x)
	q := b.op(KindQMant, b.tensor(name+".q", I16, 0, shape...), []Attr{{"frac", int64(frac)}}, x, e)
	return quantized{q, e}
}

// matmul appends C = A·Bᵀ: A is [G,]M×K, B is [G,]N×K, C is [G,]M×N.
func (b *builder) matmul(name string, a, bb quantized, frac int, bound int64) int {
	as, bs := b.spec(a.q).Shape, b.spec(bb.q).Shape
	var shape []int
	dt := I32
	if bound != Max32 {
		dt = I64
	}
	if len(as) == 3 {
		shape = []int{as[0], as[1], bs[1]}
	} else {
		shape = []int{as[0], bs[0]}
	}
	out := b.tensor(name, dt, frac, shape...)
	return b.op(KindMatmul, out, []Attr{{"frac", int64(frac)}, {"bound", bound}}, a.q, a.e, bb.q, bb.e)
}

// transpose appends the transpose of the last two dimensions.
func (b *builder) transpose(x int, name string) int {
	s := b.spec(x)
	shape := append([]int(nil), s.Shape...)
	n := len(shape)
	shape[n-1], shape[n-2] = shape[n-2], shape[n-1]
	return b.op(KindTranspose, b.tensor(name, s.DType, s.Frac, shape...), nil, x)
}

func (b *builder) unary(kind, name string, x int, attrs []Attr) int {
	s := b.spec(x)
	return b.op(kind, b.tensor(name, s.DType, s.Frac, s.Shape...), attrs, x)
}

func (b *builder) add(name string, x, y int) int {
	s := b.spec(x)
	bound := int64(Max32)
	if s.DType == I64 {
		bound = 1<<62 - 1
	}
	return b.op(KindAdd, b.tensor(name, s.DType, s.Frac, s.Shape...), []Attr{{"bound", bound}}, x, y)
}

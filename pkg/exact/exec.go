package exact

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Observer sees each operator's output right after the operator ran (the
// tensor must not be modified or retained after the call returns unless
// copied; the executor may free it later).
type Observer func(op *Op, out *Tensor)

// Executor runs a graph's operators in order, each one's output rows split
// over Workers goroutines (GOMAXPROCS when 0). Every output element is a
// pure function of the inputs, so the result does not depend on Workers.
type Executor struct {
	Workers  int
	Observer Observer
	// Keep retains these tensors (by id) even after their last reader;
	// graph results (tensors nobody reads) are always kept.
	Keep map[int]bool
}

// Run executes g with the given input tensors (by id: every id in
// g.Inputs must be present) and returns the environment: every kept tensor
// by id (nil where freed).
func (e *Executor) Run(g *Graph, inputs map[int]*Tensor) ([]*Tensor, error) {
	env := make([]*Tensor, len(g.Tensors))
	for _, id := range g.Inputs {
		t, ok := inputs[id]
		if !ok {
			return nil, fmt.Errorf("exact: input %q missing", g.Tensors[id].Name)
		}
		spec := &g.Tensors[id]
		if len(t.Data) != spec.Elems() {
			return nil, fmt.Errorf("exact: input %q has %d elements, want %d", spec.Name, len(t.Data), spec.Elems())
		}
		env[id] = &Tensor{Spec: spec, Data: t.Data}
	}
	workers := e.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		out := &Tensor{Spec: &g.Tensors[op.Output]}
		out.Data = make([]int64, out.Spec.Elems())
		ins := make([]*Tensor, len(op.Inputs))
		for j, id := range op.Inputs {
			if env[id] == nil {
				return nil, fmt.Errorf("exact: op %d (%s) reads %q, which is not available", op.Index, op.Kind, g.Tensors[id].Name)
			}
			ins[j] = env[id]
		}
		runOp(op, ins, out, workers)
		env[op.Output] = out
		if e.Observer != nil {
			e.Observer(op, out)
		}
		for _, id := range op.Inputs {
			if g.lastUse[id] == i && !e.Keep[id] && !g.keep[id] {
				env[id] = nil
			}
		}
	}
	return env, nil
}

// fullSource serves rows of whole tensors.
type fullSource []*Tensor

func (s fullSource) Row(i, r int) []int64 { return s[i].Row(r) }

func newKctx(op *Op, ins []*TensorSpec, out *TensorSpec, src Source) *kctx {
	return &kctx{op: op, in: ins, out: out, src: src}
}

func specsOf(ts []*Tensor) []*TensorSpec {
	s := make([]*TensorSpec, len(ts))
	for i, t := range ts {
		s[i] = t.Spec
	}
	return s
}

// runOp evaluates the whole output, in blocks of rows (or of columns when
// the output view has fewer rows than workers) handed out to workers.
func runOp(op *Op, ins []*Tensor, out *Tensor, workers int) {
	kn := kernelFor(op.Kind)
	k := newKctx(op, specsOf(ins), out.Spec, fullSource(ins))
	rows, cols := out.Spec.Rows(), out.Spec.Cols()
	type block struct{ r0, r1, c0, c1 int }
	var blocks []block
	target := 4 * workers
	switch {
	case workers == 1 || out.Spec.Elems() < 1024 || op.Kind == KindSum || op.Kind == KindSchedule || op.Kind == KindLossMean:
		blocks = []block{{0, rows, 0, cols}}
	case rows >= target:
		step := (rows + target - 1) / target
		for r := 0; r < rows; r += step {
			blocks = append(blocks, block{r, min(r+step, rows), 0, cols})
		}
	default:
		step := (cols + target - 1) / target
		for r := range rows {
			for c := 0; c < cols; c += step {
				blocks = append(blocks, block{r, r + 1, c, min(c+step, cols)})
			}
		}
	}
	if len(blocks) == 1 {
		b := blocks[0]
		kn.eval(k, b.r0, b.r1, b.c0, b.c1, out.Data[b.r0*cols+b.c0:], cols)
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, len(blocks)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(blocks) {
					return
				}
				b := blocks[i]
				kn.eval(k, b.r0, b.r1, b.c0, b.c1, out.Data[b.r0*cols+b.c0:], cols)
			}
		}()
	}
	wg.Wait()
}

// segment is a run of output elements inside one row of the output view.
type segment struct{ row, c0, c1 int }

// chunkSegments splits chunk index of spec's encoding into row segments.
func chunkSegments(spec *TensorSpec, chunk int) ([]segment, error) {
	if chunk < 0 || chunk >= spec.Chunks() {
		return nil, fmt.Errorf("exact: chunk %d of %q out of range [0, %d)", chunk, spec.Name, spec.Chunks())
	}
	per := ChunkSize / spec.DType.Size()
	e0, e1 := chunk*per, min((chunk+1)*per, spec.Elems())
	cols := spec.Cols()
	var segs []segment
	for e := e0; e < e1; {
		r, c := e/cols, e%cols
		n := min(cols-c, e1-e)
		segs = append(segs, segment{r, c, c + n})
		e += n
	}
	return segs, nil
}

func (g *Graph) opSpecs(op *Op) ([]*TensorSpec, *TensorSpec) {
	ins := make([]*TensorSpec, len(op.Inputs))
	for i, id := range op.Inputs {
		ins[i] = &g.Tensors[id]
	}
	return ins, &g.Tensors[op.Output]
}

// ChunkNeeds lists the input rectangles (merged per row segment, possibly
// overlapping) that chunk number chunk of op's output reads. src may be nil;
// for operators whose addresses depend on data (embed reads the token
// rows its window bytes name), call it again with a Source holding the
// first answer's rectangles to get the rest.
func (g *Graph) ChunkNeeds(op *Op, chunk int, src Source) ([]Need, error) {
	ins, out := g.opSpecs(op)
	segs, err := chunkSegments(out, chunk)
	if err != nil {
		return nil, err
	}
	k := newKctx(op, ins, out, src)
	kn := kernelFor(op.Kind)
	var ns []Need
	for _, s := range segs {
		ns = append(ns, kn.needs(k, s.row, s.row+1, s.c0, s.c1)...)
	}
	return ns, nil
}

// EvalChunk computes chunk number chunk of op's output encoding from src,
// which must serve every rectangle ChunkNeeds lists. It runs the same
// kernel code as the full executor.
func (g *Graph) EvalChunk(op *Op, chunk int, src Source) ([]byte, error) {
	ins, out := g.opSpecs(op)
	segs, err := chunkSegments(out, chunk)
	if err != nil {
		return nil, err
	}
	k := newKctx(op, ins, out, src)
	kn := kernelFor(op.Kind)
	var buf []byte
	for _, s := range segs {
		vals := make([]int64, s.c1-s.c0)
		kn.eval(k, s.row, s.row+1, s.c0, s.c1, vals, len(vals))
		buf = EncodeValues(buf, out.DType, vals)
	}
	return buf, nil
}

// SparseSource is a Source holding only some rows (or parts of rows) of an
// operator's inputs, e.g. the slices a referee received with Merkle proofs.
// Rows not set read as nil; columns not set read as zero.
type SparseSource struct {
	specs []*TensorSpec
	rows  map[[2]int][]int64
}

// NewSparseSource returns an empty source for op's inputs.
func (g *Graph) NewSparseSource(op *Op) *SparseSource {
	ins, _ := g.opSpecs(op)
	return &SparseSource{specs: ins, rows: map[[2]int][]int64{}}
}

// Set stores vals as columns [col, col+len(vals)) of row row of input.
func (s *SparseSource) Set(input, row, col int, vals []int64) {
	key := [2]int{input, row}
	r, ok := s.rows[key]
	if !ok {
		r = make([]int64, s.specs[input].Cols())
		s.rows[key] = r
	}
	copy(r[col:], vals)
}

// Row implements Source.
func (s *SparseSource) Row(input, row int) []int64 { return s.rows[[2]int{input, row}] }

// RegionNeeds lists the input rectangles that columns [c0, c1) of row row
// of op's output view read (see ChunkNeeds; src may be nil, and embed's
// token rows need a second call with the first answer's rows in src).
// A tile referee that recomputes single elements uses it.
func (g *Graph) RegionNeeds(op *Op, row, c0, c1 int, src Source) ([]Need, error) {
	ins, out := g.opSpecs(op)
	if err := checkRegion(out, row, c0, c1); err != nil {
		return nil, err
	}
	return kernelFor(op.Kind).needs(newKctx(op, ins, out, src), row, row+1, c0, c1), nil
}

// EvalRegion computes columns [c0, c1) of row row of op's output view from
// src with the kernel the full executor runs.
func (g *Graph) EvalRegion(op *Op, row, c0, c1 int, src Source) ([]int64, error) {
	ins, out := g.opSpecs(op)
	if err := checkRegion(out, row, c0, c1); err != nil {
		return nil, err
	}
	vals := make([]int64, c1-c0)
	kernelFor(op.Kind).eval(newKctx(op, ins, out, src), row, row+1, c0, c1, vals, len(vals))
	return vals, nil
}

func checkRegion(out *TensorSpec, row, c0, c1 int) error {
	if row < 0 || row >= out.Rows() || c0 < 0 || c1 > out.Cols() || c0 >= c1 {
		return fmt.Errorf("exact: region row %d, columns [%d, %d) outside %q (%d×%d)", row, c0, c1, out.Name, out.Rows(), out.Cols())
	}
	return nil
}

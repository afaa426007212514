package tiles

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
)

// Opening is one 4 KiB chunk of an operator's input (by input position),
// with its inclusion proof against that input's root.
type Opening struct {
	Input int
	Chunk int
	Data  []byte
	Proof []merkle.Hash
}

// Cost is what a referee check reads and computes, for gas: bytes of data
// and proofs, hashes computed, and elements read by the kernel (a matmul
// element reads 2K + 2: its multiply-accumulates and exponents).
type Cost struct {
	Bytes, Hashes, Elems int64
}

func (c *Cost) add(o Cost) { c.Bytes += o.Bytes; c.Hashes += o.Hashes; c.Elems += o.Elems }

// chunkHashes is the number of SHA-256 compressions of a leaf of n bytes,
// rounded up to whole 64-byte blocks (what gas charges per hash).
func chunkHashes(n int) int64 { return int64(n+1+8)/64 + 1 }

// VerifyChunk checks data as chunk index of a tensor (or file) of size
// bytes against root, and returns its cost.
func VerifyChunk(root merkle.Hash, size int64, index int, data []byte, proof []merkle.Hash) (Cost, error) {
	n := merkle.ChunkCount(size, exact.ChunkSize)
	if index < 0 || uint64(index) >= n {
		return Cost{}, fmt.Errorf("tiles: chunk %d out of range [0, %d)", index, n)
	}
	want := min(int64(exact.ChunkSize), size-int64(index)*exact.ChunkSize)
	if int64(len(data)) != want {
		return Cost{}, fmt.Errorf("tiles: chunk %d has %d bytes, want %d", index, len(data), want)
	}
	c := Cost{Bytes: int64(len(data)) + 32*int64(len(proof)), Hashes: chunkHashes(len(data)) + int64(len(proof))}
	if err := merkle.VerifyInclusion(root, uint64(index), n, merkle.LeafHash(data), proof); err != nil {
		return c, fmt.Errorf("tiles: chunk %d: %w", index, err)
	}
	return c, nil
}

// chunksOf lists the chunks of spec's encoding that rectangle n covers.
func chunksOf(spec *exact.TensorSpec, n exact.Need, into map[int]bool) {
	cols, sz := spec.Cols(), spec.DType.Size()
	for r := n.Row0; r < n.Row1; r++ {
		e0, e1 := r*cols+n.Col0, r*cols+n.Col1-1
		for c := e0 * sz / exact.ChunkSize; c <= e1*sz/exact.ChunkSize; c++ {
			into[c] = true
		}
	}
}

// element is row, col of an output view from a flat element index.
func element(spec *exact.TensorSpec, elem int) (row, col int, err error) {
	if elem < 0 || elem >= spec.Elems() {
		return 0, 0, fmt.Errorf("tiles: element %d out of range [0, %d) of %q", elem, spec.Elems(), spec.Name)
	}
	return elem / spec.Cols(), elem % spec.Cols(), nil
}

// regionNeeds returns the input chunks (by input) that element elem of
// entry e's output reads; src resolves data-dependent addresses.
func (s *Step) regionNeeds(op *exact.Op, row, col int, src exact.Source) (map[int]map[int]bool, int64, error) {
	ns, err := s.Graph.RegionNeeds(op, row, col, col+1, src)
	if err != nil {
		return nil, 0, err
	}
	chunks := map[int]map[int]bool{}
	var elems int64
	for _, n := range ns {
		if chunks[n.Input] == nil {
			chunks[n.Input] = map[int]bool{}
		}
		chunksOf(&s.Graph.Tensors[op.Inputs[n.Input]], n, chunks[n.Input])
		elems += int64(n.Row1-n.Row0) * int64(n.Col1-n.Col0)
	}
	return chunks, elems, nil
}

// EvalElement is the operator referee: it verifies every opening against
// inputRoots (the agreed roots of entry e's inputs, by input position),
// checks that they cover everything element elem of e's output reads, and
// recomputes that element with exact's kernel.
func (s *Step) EvalElement(e int, inputRoots []merkle.Hash, elem int, opens []Opening) (int64, Cost, error) {
	var cost Cost
	op := s.Entries[e].Op
	if op == nil {
		return 0, cost, fmt.Errorf("tiles: entry %d is a %s, not an operator", e, s.Entries[e].Kind)
	}
	if len(inputRoots) != len(op.Inputs) {
		return 0, cost, fmt.Errorf("tiles: %d input roots for %d inputs", len(inputRoots), len(op.Inputs))
	}
	out := &s.Graph.Tensors[op.Output]
	row, col, err := element(out, elem)
	if err != nil {
		return 0, cost, err
	}
	src := s.Graph.NewSparseSource(op)
	have := map[[2]int]bool{}
	for i, o := range opens {
		if o.Input < 0 || o.Input >= len(op.Inputs) {
			return 0, cost, fmt.Errorf("tiles: opening %d: input %d out of range", i, o.Input)
		}
		if have[[2]int{o.Input, o.Chunk}] {
			return 0, cost, fmt.Errorf("tiles: opening %d: chunk %d of input %d given twice", i, o.Chunk, o.Input)
		}
		spec := &s.Graph.Tensors[op.Inputs[o.Input]]
		c, err := VerifyChunk(inputRoots[o.Input], int64(spec.Bytes()), o.Chunk, o.Data, o.Proof)
		cost.add(c)
		if err != nil {
			return 0, cost, fmt.Errorf("opening %d (input %d): %w", i, o.Input, err)
		}
		have[[2]int{o.Input, o.Chunk}] = true
		setChunk(src, o.Input, spec, o.Chunk, o.Data)
	}
	needs, elems, err := s.regionNeeds(op, row, col, src)
	if err != nil {
		return 0, cost, err
	}
	for in, cs := range needs {
		for c := range cs {
			if !have[[2]int{in, c}] {
				return 0, cost, fmt.Errorf("tiles: element %d of entry %d reads chunk %d of input %d, which was not opened", elem, e, c, in)
			}
		}
	}
	cost.Elems += elems
	vals, err := s.Graph.EvalRegion(op, row, col, col+1, src)
	if err != nil {
		return 0, cost, err
	}
	return vals[0], cost, nil
}

// setChunk stores a chunk's values into src, row segment by row segment.
func setChunk(src *exact.SparseSource, input int, spec *exact.TensorSpec, chunk int, data []byte) {
	sz, cols := spec.DType.Size(), spec.Cols()
	vals := make([]int64, len(data)/sz)
	if err := exact.DecodeValues(vals, spec.DType, data); err != nil {
		// Out-of-range encodings decode to an error; such a chunk cannot be
		// the agreed tensor's (every writer is range-checked), so leave it
		// unset: the coverage check then fails on it.
		return
	}
	e := chunk * exact.ChunkSize / sz
	for i := 0; i < len(vals); {
		r, c := (e+i)/cols, (e+i)%cols
		n := min(cols-c, len(vals)-i)
		src.Set(input, r, c, vals[i:i+n])
		i += n
	}
}

// ElementOpenings builds the openings EvalElement needs for element elem of
// entry e's output from the input tensors (what Tensors returns).
func (s *Step) ElementOpenings(e, elem int, ins []*exact.Tensor) ([]Opening, error) {
	op := s.Entries[e].Op
	if op == nil {
		return nil, fmt.Errorf("tiles: entry %d is not an operator", e)
	}
	row, col, err := element(&s.Graph.Tensors[op.Output], elem)
	if err != nil {
		return nil, err
	}
	src := s.Graph.NewSparseSource(op)
	for i, t := range ins {
		for r := range t.Spec.Rows() {
			src.Set(i, r, 0, t.Row(r))
		}
	}
	needs, _, err := s.regionNeeds(op, row, col, src)
	if err != nil {
		return nil, err
	}
	var opens []Opening
	for in, cs := range needs {
		for c := range cs {
			data, proof, err := ins[in].ChunkProof(c)
			if err != nil {
				return nil, err
			}
			opens = append(opens, Opening{Input: in, Chunk: c, Data: data, Proof: proof})
		}
	}
	sort.Slice(opens, func(i, j int) bool {
		if opens[i].Input != opens[j].Input {
			return opens[i].Input < opens[j].Input
		}
		return opens[i].Chunk < opens[j].Chunk
	})
	return opens, nil
}

// ChunkElement decodes element i of a revealed output chunk.
func ChunkElement(spec *exact.TensorSpec, chunk []byte, i int) (int64, error) {
	sz := spec.DType.Size()
	if i < 0 || (i+1)*sz > len(chunk) {
		return 0, fmt.Errorf("tiles: element %d outside a chunk of %d bytes", i, len(chunk))
	}
	v := make([]int64, 1)
	if err := exact.DecodeValues(v, spec.DType, chunk[i*sz:(i+1)*sz]); err != nil {
		return 0, err
	}
	return v[0], nil
}

// ElemsPerChunk is how many elements of spec one chunk holds.
func ElemsPerChunk(spec *exact.TensorSpec) int { return exact.ChunkSize / spec.DType.Size() }

// --- loads and the store -----------------------------------------------------

// StateChunk is the pre-state file chunk holding chunk c of state tensor
// name, and how many of its bytes belong to the tensor (the rest is zero
// padding, or the file ends).
func StateChunk(cfg exact.Config, name string, c int) (fileChunk int, n int, err error) {
	_, ts, _ := exact.StateLayout(cfg)
	for _, t := range ts {
		if t.Name == name {
			if c < 0 || int64(c)*exact.ChunkSize >= t.Bytes {
				return 0, 0, fmt.Errorf("tiles: chunk %d outside state tensor %q", c, name)
			}
			return int(t.Offset/exact.ChunkSize) + c, int(min(exact.ChunkSize, t.Bytes-int64(c)*exact.ChunkSize)), nil
		}
	}
	return 0, 0, fmt.Errorf("tiles: no state tensor %q", name)
}

// StepChunk is the (only) chunk of the step counter's tensor at step.
func StepChunk(step uint64) []byte { return binary.LittleEndian.AppendUint64(nil, step) }

// WindowSpan says that bytes [Start, End) of window Window of the batch
// are Len bytes of a micro-batch window tensor's chunk, at offset At.
type WindowSpan struct {
	Window     int
	Start, End int
	At         int
}

// WindowSpans maps chunk c of micro-batch k's window tensor to the batch
// windows it holds.
func WindowSpans(cfg exact.Config, k, c int) ([]WindowSpan, error) {
	cfg = cfg.WithDefaults()
	wl, mbs := cfg.Model.Context+1, cfg.Train.MicroBatch
	total := wl * mbs
	if k < 0 || k >= cfg.MicroBatches() || c < 0 || c*exact.ChunkSize >= total {
		return nil, fmt.Errorf("tiles: chunk %d of micro-batch %d's windows out of range", c, k)
	}
	var spans []WindowSpan
	for off, end := c*exact.ChunkSize, min((c+1)*exact.ChunkSize, total); off < end; {
		w, start := off/wl, off%wl
		n := min(wl-start, end-off)
		spans = append(spans, WindowSpan{Window: k*mbs + w, Start: start, End: start + n, At: off - c*exact.ChunkSize})
		off += n
	}
	return spans, nil
}

// WindowChunk assembles chunk c of micro-batch k's window tensor from the
// batch's windows (the referee's from proven data, a party's from its
// batch).
func WindowChunk(cfg exact.Config, k, c int, batch [][]byte) ([]byte, error) {
	spans, err := WindowSpans(cfg, k, c)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, sp := range spans {
		if sp.Window >= len(batch) || len(batch[sp.Window]) < sp.End {
			return nil, fmt.Errorf("tiles: window %d missing", sp.Window)
		}
		out = append(out, batch[sp.Window][sp.Start:sp.End]...)
	}
	return out, nil
}

// StoreSource says where chunk j of the next state file comes from: the
// header (Tensor = -1: StateHeader of the next step and loss), or chunk
// Chunk of state tensor Tensor (StateTensorNames order), padded with zeros
// to Len bytes.
type StoreSource struct {
	Tensor int
	Chunk  int
	Len    int
}

// NextStateSource locates chunk j of the next state file of cfg.
func NextStateSource(cfg exact.Config, j int) (StoreSource, error) {
	header, ts, size := exact.StateLayout(cfg)
	n := int(merkle.ChunkCount(size, exact.ChunkSize))
	if j < 0 || j >= n {
		return StoreSource{}, fmt.Errorf("tiles: state chunk %d out of range [0, %d)", j, n)
	}
	l := int(min(exact.ChunkSize, size-int64(j)*exact.ChunkSize))
	if int64(j)*exact.ChunkSize < int64((header+exact.ChunkSize-1)/exact.ChunkSize*exact.ChunkSize) {
		return StoreSource{Tensor: -1, Chunk: j, Len: l}, nil
	}
	off := int64(j) * exact.ChunkSize
	for i := len(ts) - 1; i >= 0; i-- {
		if off >= ts[i].Offset {
			return StoreSource{Tensor: i, Chunk: int((off - ts[i].Offset) / exact.ChunkSize), Len: l}, nil
		}
	}
	return StoreSource{}, fmt.Errorf("tiles: state chunk %d precedes every tensor", j)
}

// NextStateChunk builds chunk j of the next state file: from the header of
// (step, loss), or from the given tensor chunk (nil when src is the header).
func NextStateChunk(cfg exact.Config, src StoreSource, step uint64, loss int64, tensorChunk []byte) []byte {
	if src.Tensor < 0 {
		h := exact.StateHeader(cfg, step, loss)
		return h[src.Chunk*exact.ChunkSize : src.Chunk*exact.ChunkSize+src.Len]
	}
	out := make([]byte, src.Len)
	copy(out, tensorChunk)
	return out
}

// StoreInput is the graph tensor of the store's input i (next state tensors
// in StateTensorNames order, then the loss).
func (s *Step) StoreInput(i int) int {
	if i < len(s.outputs) {
		return s.outputs[i]
	}
	return s.loss
}

// LossInput is the store input index of the loss.
func (s *Step) LossInput() int { return len(s.outputs) }

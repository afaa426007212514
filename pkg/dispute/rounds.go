package dispute

import (
	"bytes"
	"fmt"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/merkle"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Round fault proofs (MsgProveRoundFault): each builder scans a round's files, as a
// party that fetched them from custody holds them, for the first chunk pkg/diloco
// recomputes differently, and returns the one-chunk proof of it — or nil when every chunk
// is right. The files must be the ones whose roots x/market holds; the chain checks every
// opening against those roots.

// OpenFileChunks returns chunks idx of file (4 KiB Merkle chunks) with their proofs.
func OpenFileChunks(file []byte, idx ...uint64) ([]verifytypes.FileChunk, error) {
	leaves := merkle.LeafHashesOfBytes(file, diloco.ChunkSize)
	out := make([]verifytypes.FileChunk, 0, len(idx))
	for _, i := range idx {
		proof, err := merkle.InclusionProof(leaves, i)
		if err != nil {
			return nil, err
		}
		lo := i * diloco.ChunkSize
		out = append(out, verifytypes.FileChunk{Index: i, Data: file[lo:min(uint64(len(file)), lo+diloco.ChunkSize)], Proof: merkle.HashesToBytes(proof)})
	}
	return out, nil
}

func chunkOf(file []byte, i uint64) []byte {
	lo := i * diloco.ChunkSize
	if lo >= uint64(len(file)) {
		return nil
	}
	return file[lo:min(uint64(len(file)), lo+diloco.ChunkSize)]
}

// PseudoGradientFault scans a worker's dense pseudo-gradient file of round r against
// G_r's file and its end state's file, and returns the proof of the first wrong chunk.
// (Compressed pseudo-gradients need the error buffers too: see the x/verify README.)
func PseudoGradientFault(prover string, jobID, round uint64, worker uint32, l diloco.Layout, global, end, pg []byte) (*verifytypes.MsgProveRoundFault, error) {
	for k := range l.Chunks {
		sc, err := l.StateWeightsChunk(k)
		if err != nil {
			return nil, err
		}
		want, err := diloco.PseudoGradientChunk(chunkOf(global, diloco.WeightsChunk(k)), chunkOf(end, sc), l.Valid(k))
		if err != nil {
			return nil, fmt.Errorf("chunk %d: %w", k, err)
		}
		if bytes.Equal(want, chunkOf(pg, diloco.WeightsChunk(k))) {
			continue
		}
		msg := &verifytypes.MsgProveRoundFault{Prover: prover, JobId: jobID, Round: round, Worker: worker, Kind: verifytypes.ROUND_FAULT_PSEUDO_GRADIENT, Chunk: uint64(k)}
		if msg.Global, err = OpenFileChunks(global, diloco.WeightsChunk(k)); err != nil {
			return nil, err
		}
		if msg.Source, err = OpenFileChunks(end, sc); err != nil {
			return nil, err
		}
		if msg.Claimed, err = OpenFileChunks(pg, diloco.WeightsChunk(k)); err != nil {
			return nil, err
		}
		return msg, nil
	}
	return nil, nil
}

// AggregationFault scans round r's committed next global state against G_r and the
// pseudo-gradient files of the workers that entered (ascending) — dense, or compressed
// when sync.TopK > 0 — and returns the proof of the first wrong weights or momentum chunk
// (AggregationProof).
func AggregationFault(prover string, jobID, round uint64, l diloco.Layout, sync diloco.Sync, global, next []byte, entered []uint32, pgs [][]byte) (*verifytypes.MsgProveRoundFault, error) {
	if len(entered) != len(pgs) {
		return nil, fmt.Errorf("dispute: %d entered workers, %d pseudo-gradient files", len(entered), len(pgs))
	}
	for k := range l.Chunks {
		deltas := make([][]byte, len(pgs))
		for i, pg := range pgs {
			var err error
			if deltas[i], err = deltaChunk(l, sync, pg, k); err != nil {
				return nil, fmt.Errorf("dispute: worker %d's pseudo-gradient chunk %d (its fault, not the aggregator's): %w", entered[i], k, err)
			}
		}
		w, u, err := diloco.AggregateChunk(sync, l.Valid(k), chunkOf(global, diloco.WeightsChunk(k)), chunkOf(global, l.MomentumChunk(k)), deltas)
		if err != nil {
			return nil, fmt.Errorf("chunk %d: %w", k, err)
		}
		switch {
		case !bytes.Equal(w, chunkOf(next, diloco.WeightsChunk(k))):
			return AggregationProof(prover, jobID, round, l, sync, global, next, entered, pgs, k, false)
		case !bytes.Equal(u, chunkOf(next, l.MomentumChunk(k))):
			return AggregationProof(prover, jobID, round, l, sync, global, next, entered, pgs, k, true)
		}
	}
	return nil, nil
}

// AggregationProof is the proof about section chunk k of round r's committed next global
// state (its weights chunk, or its momentum chunk): G_r's weights and momentum chunk k, the
// claimed chunk of next, and every entered worker's chunks holding its chunk k — Δ chunk
// 1+k of a dense file, the chunks of record k (diloco.RecordChunks) of a compressed one.
// The chain convicts the aggregator when the chunk is wrong and refuses the proof as
// consistent when it is right; AggregationFault finds a wrong one.
func AggregationProof(prover string, jobID, round uint64, l diloco.Layout, sync diloco.Sync, global, next []byte, entered []uint32, pgs [][]byte, k int, momentum bool) (*verifytypes.MsgProveRoundFault, error) {
	if len(entered) != len(pgs) {
		return nil, fmt.Errorf("dispute: %d entered workers, %d pseudo-gradient files", len(entered), len(pgs))
	}
	if k < 0 || k >= l.Chunks {
		return nil, fmt.Errorf("dispute: section chunk %d of %d", k, l.Chunks)
	}
	at := diloco.WeightsChunk(k)
	if momentum {
		at = l.MomentumChunk(k)
	}
	msg := &verifytypes.MsgProveRoundFault{Prover: prover, JobId: jobID, Round: round, Kind: verifytypes.ROUND_FAULT_AGGREGATION, Chunk: uint64(k), Momentum: momentum}
	var err error
	if msg.Global, err = OpenFileChunks(global, diloco.WeightsChunk(k), l.MomentumChunk(k)); err != nil {
		return nil, err
	}
	if msg.Claimed, err = OpenFileChunks(next, at); err != nil {
		return nil, err
	}
	for i, pg := range pgs {
		cs, err := OpenFileChunks(pg, pseudoGradientChunks(sync, k)...)
		if err != nil {
			return nil, fmt.Errorf("dispute: worker %d's pseudo-gradient: %w", entered[i], err)
		}
		msg.PseudoGradients = append(msg.PseudoGradients, verifytypes.WorkerChunks{Worker: entered[i], Chunks: cs})
	}
	return msg, nil
}

// pseudoGradientChunks is the chunks of a pseudo-gradient file that hold section chunk k:
// chunk 1+k of a dense file, record k's chunks of a compressed one.
func pseudoGradientChunks(sync diloco.Sync, k int) []uint64 {
	if sync.TopK == 0 {
		return []uint64{diloco.WeightsChunk(k)}
	}
	return diloco.RecordChunks(int(sync.TopK), k)
}

// deltaChunk is section chunk k of a pseudo-gradient file as diloco.AggregateChunk takes
// it: the dense chunk, or record k decompressed.
func deltaChunk(l diloco.Layout, sync diloco.Sync, pg []byte, k int) ([]byte, error) {
	at := pseudoGradientChunks(sync, k)
	if sync.TopK == 0 {
		return chunkOf(pg, at[0]), nil
	}
	chunks := make([][]byte, len(at))
	for i, c := range at {
		chunks[i] = chunkOf(pg, c)
	}
	record, err := diloco.RecordFromChunks(int(sync.TopK), k, chunks)
	if err != nil {
		return nil, err
	}
	return diloco.DecompressChunk(record, int(sync.TopK), l.Valid(k))
}

// StartFault scans a worker's start state file of round r (start) against G_r's file
// and its carry state's file (nil: none, zero moments) and returns the proof of the first
// wrong chunk, or nil when the start is G_r's WorkerStart of the carry.
func StartFault(prover string, jobID, round uint64, worker uint32, l diloco.Layout, sync diloco.Sync, global, carry, start []byte) (*verifytypes.MsgProveRoundFault, error) {
	for c := range l.StateChunks() {
		claimed, err := OpenFileChunks(start, c)
		if err != nil {
			return nil, err
		}
		msg, err := StartChunkFault(prover, jobID, round, worker, l, sync, global, carry, claimed[0])
		if msg != nil || err != nil {
			return msg, err
		}
	}
	return nil, nil
}

// StartChunkFault is the proof that claimed, one chunk of a worker's start state of
// round r opened against its start_root, is not G_r's WorkerStart of the carry (carry:
// the carry state's file, nil for none), or nil when it is. A challenger that does not
// hold the worker's start state has the worker open the chunk in a file query.
func StartChunkFault(prover string, jobID, round uint64, worker uint32, l diloco.Layout, sync diloco.Sync, global, carry []byte, claimed verifytypes.FileChunk) (*verifytypes.MsgProveRoundFault, error) {
	c := claimed.Index
	src, k, err := l.StartSourceOf(c)
	if err != nil {
		return nil, err
	}
	var source []byte
	switch {
	case src == diloco.StartWeights:
		source = chunkOf(global, diloco.WeightsChunk(k))
	case src == diloco.StartMoments && carry != nil:
		source = chunkOf(carry, c)
	}
	want, err := l.StartChunk(sync, round, c, source)
	if err != nil {
		return nil, fmt.Errorf("state chunk %d: %w", c, err)
	}
	if bytes.Equal(want, claimed.Data) {
		return nil, nil
	}
	msg := &verifytypes.MsgProveRoundFault{Prover: prover, JobId: jobID, Round: round, Worker: worker, Kind: verifytypes.ROUND_FAULT_START,
		Chunk: c, Claimed: []verifytypes.FileChunk{claimed}}
	switch {
	case src == diloco.StartWeights:
		msg.Global, err = OpenFileChunks(global, diloco.WeightsChunk(k))
	case src == diloco.StartMoments && carry != nil:
		msg.Source, err = OpenFileChunks(carry, c)
	}
	if err != nil {
		return nil, err
	}
	return msg, nil
}

// CompressedPseudoGradientFault is PseudoGradientFault for a job with top_k: pg is the
// compressed file, prev the worker's pseudo-gradient file of its last entered round under
// the same lease (nil for none), errIn and errOut the encoded error buffers
// (diloco.EncodeErrorBuffer) whose roots pg's header names. A header whose error_in is not
// what prev left is the fault (proven at chunk 0, from the headers alone: errIn and errOut
// may then be nil); else the first record or error-buffer chunk that is not the
// compression of its inputs.
func CompressedPseudoGradientFault(prover string, jobID, round uint64, worker uint32, l diloco.Layout, sync diloco.Sync, global, end, pg, prev, errIn, errOut []byte) (*verifytypes.MsgProveRoundFault, error) {
	in, out, err := diloco.CompressedErrorRoots(chunkOf(pg, 0))
	if err != nil {
		return nil, err
	}
	wantIn := l.ZeroErrorBufferRoot()
	if prev != nil {
		if _, wantIn, err = diloco.CompressedErrorRoots(chunkOf(prev, 0)); err != nil {
			return nil, fmt.Errorf("previous pseudo-gradient: %w", err)
		}
	}
	p := compressedProof{prover: prover, jobID: jobID, round: round, worker: worker, l: l, topK: int(sync.TopK), global: global, end: end, pg: pg, prev: prev}
	if in != wantIn {
		return p.build(0, nil, nil)
	}
	if merkle.RootOfBytes(errIn, diloco.ChunkSize) != in || merkle.RootOfBytes(errOut, diloco.ChunkSize) != out {
		return nil, fmt.Errorf("dispute: the error buffers given are not the ones the pseudo-gradient's header names")
	}
	for k := range l.Chunks {
		opened, err := OpenFileChunks(errOut, uint64(k))
		if err != nil {
			return nil, err
		}
		msg, err := p.chunkFault(k, errIn, opened[0])
		if msg != nil || err != nil {
			return msg, err
		}
	}
	return nil, nil
}

// ErrorOutChunkFault is the proof that errOut, chunk k of the error buffer a worker's
// compressed pseudo-gradient pg names as its error_out (opened by the worker in a file
// query: only it holds the buffer it named), or record k of pg, is not the compression
// of its inputs; nil when both are. errIn is the encoded error_in buffer (the one pg's
// header names, rebuilt by the challenger), prev as for CompressedPseudoGradientFault.
func ErrorOutChunkFault(prover string, jobID, round uint64, worker uint32, l diloco.Layout, sync diloco.Sync, global, end, pg, prev, errIn []byte, errOut verifytypes.FileChunk) (*verifytypes.MsgProveRoundFault, error) {
	if errOut.Index >= uint64(l.Chunks) {
		return nil, fmt.Errorf("dispute: error buffer chunk %d of %d", errOut.Index, l.Chunks)
	}
	p := compressedProof{prover: prover, jobID: jobID, round: round, worker: worker, l: l, topK: int(sync.TopK), global: global, end: end, pg: pg, prev: prev}
	return p.chunkFault(int(errOut.Index), errIn, errOut)
}

// compressedProof builds PSEUDO_GRADIENT proofs over one worker's compressed file.
type compressedProof struct {
	prover                string
	jobID, round          uint64
	worker                uint32
	l                     diloco.Layout
	topK                  int
	global, end, pg, prev []byte
}

// chunkFault is the proof of section chunk k when record k of pg or errOut (chunk k of
// the named error_out, opened) is not the compression of its inputs, else nil.
func (p compressedProof) chunkFault(k int, errIn []byte, errOut verifytypes.FileChunk) (*verifytypes.MsgProveRoundFault, error) {
	sc, err := p.l.StateWeightsChunk(k)
	if err != nil {
		return nil, err
	}
	rec, next, err := diloco.CompressedChunk(chunkOf(p.global, diloco.WeightsChunk(k)), chunkOf(p.end, sc), chunkOf(errIn, uint64(k)), p.topK, p.l.Valid(k))
	if err != nil {
		return nil, fmt.Errorf("chunk %d: %w", k, err)
	}
	start := diloco.ChunkSize + k*diloco.RecordBytes(p.topK)
	if bytes.Equal(rec, p.pg[start:start+diloco.RecordBytes(p.topK)]) && bytes.Equal(next, errOut.Data) {
		return nil, nil
	}
	return p.build(k, errIn, &errOut)
}

// build is the proof of section chunk k: the header alone when errOut is nil (a wrong
// error_in root), else with record k and both error buffers' chunk k.
func (p compressedProof) build(k int, errIn []byte, errOut *verifytypes.FileChunk) (*verifytypes.MsgProveRoundFault, error) {
	sc, err := p.l.StateWeightsChunk(k)
	if err != nil {
		return nil, err
	}
	msg := &verifytypes.MsgProveRoundFault{Prover: p.prover, JobId: p.jobID, Round: p.round, Worker: p.worker, Kind: verifytypes.ROUND_FAULT_PSEUDO_GRADIENT, Chunk: uint64(k)}
	if msg.Global, err = OpenFileChunks(p.global, diloco.WeightsChunk(k)); err != nil {
		return nil, err
	}
	if msg.Source, err = OpenFileChunks(p.end, sc); err != nil {
		return nil, err
	}
	open1 := func(file []byte, i uint64) (*verifytypes.FileChunk, error) {
		cs, err := OpenFileChunks(file, i)
		if err != nil {
			return nil, err
		}
		return &cs[0], nil
	}
	if msg.Header, err = open1(p.pg, 0); err != nil {
		return nil, err
	}
	if p.prev != nil {
		if msg.PreviousHeader, err = open1(p.prev, 0); err != nil {
			return nil, err
		}
	}
	if errOut == nil {
		return msg, nil
	}
	if msg.Claimed, err = OpenFileChunks(p.pg, diloco.RecordChunks(p.topK, k)...); err != nil {
		return nil, err
	}
	if msg.ErrorIn, err = open1(errIn, uint64(k)); err != nil {
		return nil, err
	}
	msg.ErrorOut = errOut
	return msg, nil
}

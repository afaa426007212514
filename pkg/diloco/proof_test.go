package diloco

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
)

func fileChunk(b []byte, c uint64) []byte {
	return b[c*ChunkSize : min(uint64(len(b)), (c+1)*ChunkSize)]
}

// Every chunk of a round-start state is recomputed from its source: the
// global file's weights chunk, the carry state's chunk (zeros without one)
// or the fixed header; a state built from a different carry differs exactly
// in moment chunks.
func TestStartChunksComeFromTheirSources(t *testing.T) {
	cfg := tinyConfig()
	sync := testSync(t, SyncSpec{Every: 3, OuterLR: 0.7, OuterMomentum: 0.9})
	g, err := InitGlobal(cfg, sync, testSeed)
	if err != nil {
		t.Fatal(err)
	}
	carry, err := exact.Run(g.WorkerStart(nil), traindata.BuiltinCorpus(), testSeed, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Round = 1
	l := NewLayout(cfg)
	gf, cf := g.Encode(), carry.Encode()
	seen := map[StartSource]int{}
	for _, c := range []*exact.State{carry, nil} {
		start := g.WorkerStart(c).Encode()
		if uint64(len(merkle.LeafHashesOfBytes(start, ChunkSize))) != l.StateChunks() {
			t.Fatal("StateChunks disagrees with the state file")
		}
		for ch := range l.StateChunks() {
			src, k, err := l.StartSourceOf(ch)
			if err != nil {
				t.Fatal(err)
			}
			seen[src]++
			var source []byte
			switch src {
			case StartWeights:
				source = fileChunk(gf, WeightsChunk(k))
			case StartMoments:
				if c != nil {
					source = fileChunk(cf, ch)
				}
			}
			want, err := l.StartChunk(sync, g.Round, ch, source)
			if err != nil {
				t.Fatalf("chunk %d: %v", ch, err)
			}
			if !bytes.Equal(want, fileChunk(start, ch)) {
				t.Fatalf("carry %v: start chunk %d (source %d) is not its source's", c != nil, ch, src)
			}
		}
	}
	if seen[StartFixed] == 0 || seen[StartWeights] == 0 || seen[StartMoments] == 0 {
		t.Fatalf("sources seen %v", seen)
	}
	if _, err := l.StartChunk(sync, 1, 0, []byte{1}); err == nil {
		t.Fatal("a header chunk with a source was accepted")
	}
	if _, _, err := l.StartSourceOf(l.StateChunks()); err == nil {
		t.Fatal("a chunk past the state was accepted")
	}
}

// Dense and compressed pseudo-gradient chunks, records and error-buffer
// chunks are recomputed from the chunks a fault opens, and the committed
// root is the chunk root of the served file (custody and adjudication use
// one root).
func TestPseudoGradientChunksAndRecordsFromOpenings(t *testing.T) {
	cfg := tinyConfig()
	for _, topK := range []int{0, 5, 700} {
		sync := testSync(t, SyncSpec{Every: 3, OuterLR: 0.7, OuterMomentum: 0.9, TopK: topK})
		g, err := InitGlobal(cfg, sync, testSeed)
		if err != nil {
			t.Fatal(err)
		}
		end, err := exact.Run(g.WorkerStart(nil), traindata.BuiltinCorpus(), testSeed, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		pg, err := NewPseudoGradient(g, 2, end)
		if err != nil {
			t.Fatal(err)
		}
		l := NewLayout(cfg)
		gf, ef := g.Encode(), end.Encode()
		if topK == 0 {
			file := pg.EncodeDense()
			for k := range l.Chunks {
				sc, err := l.StateWeightsChunk(k)
				if err != nil {
					t.Fatal(err)
				}
				got, err := PseudoGradientChunk(fileChunk(gf, WeightsChunk(k)), fileChunk(ef, sc), l.Valid(k))
				if err != nil || !bytes.Equal(got, fileChunk(file, WeightsChunk(k))) {
					t.Fatalf("dense chunk %d: %v", k, err)
				}
			}
			continue
		}
		errIn := randSection(rand.New(rand.NewPCG(1, uint64(topK))), l, 1<<20)
		cp, errOut, err := pg.Compress(errIn)
		if err != nil {
			t.Fatal(err)
		}
		c, err := cp.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		file := c.Encode()
		root, _ := cp.Root()
		if root != merkle.RootOfBytes(file, ChunkSize) || uint64(len(merkle.LeafHashesOfBytes(file, ChunkSize))) != l.CompressedFileChunks(topK) {
			t.Fatal("compressed root is not the file's chunk root")
		}
		back, err := DecodeCompressed(file)
		if err != nil || back.ErrIn != ErrorBufferRoot(errIn) || back.ErrOut != ErrorBufferRoot(errOut) {
			t.Fatalf("header error-buffer roots: %v", err)
		}
		inFile, outFile := encodeSection(nil, errIn), encodeSection(nil, errOut)
		straddles := false
		for k := range l.Chunks {
			span := RecordChunks(topK, k)
			straddles = straddles || len(span) > 1
			var chunks [][]byte
			for _, ch := range span {
				chunks = append(chunks, fileChunk(file, ch))
			}
			rec, err := RecordFromChunks(topK, k, chunks)
			if err != nil || !bytes.Equal(rec, c.Records[k]) {
				t.Fatalf("record %d from chunks %v: %v", k, span, err)
			}
			sc, _ := l.StateWeightsChunk(k)
			gotRec, gotErr, err := CompressedChunk(fileChunk(gf, WeightsChunk(k)), fileChunk(ef, sc), fileChunk(inFile, uint64(k)), topK, l.Valid(k))
			if err != nil || !bytes.Equal(gotRec, rec) || !bytes.Equal(gotErr, fileChunk(outFile, uint64(k))) {
				t.Fatalf("compressed chunk %d: %v", k, err)
			}
		}
		if !straddles && RecordBytes(topK) < ChunkSize {
			t.Logf("top_k %d: no record straddles a chunk boundary in this layout", topK)
		}
		if _, err := RecordFromChunks(topK, 0, nil); err == nil {
			t.Fatal("a record from no chunks was accepted")
		}
	}
}

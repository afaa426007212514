package manifest

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"github.com/klauspost/reedsolomon"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// Options of Build.
type Options struct {
	// ShardSize is the most bytes of samples a shard holds; shards hold whole samples.
	ShardSize int64
	// ChunkSize is the Merkle leaf size of the pieces (DefaultChunkSize when 0).
	ChunkSize uint32
	Encoding  types.Encoding
	// SampleBytes is the sample size of a single-file input (DefaultSampleBytes when 0);
	// a negative value makes every line (up to and including '\n') one sample.
	SampleBytes int64
	ID, Name    string
	// Workers is the number of shards processed in parallel (GOMAXPROCS when 0).
	Workers int
	// Params bound what is accepted (types.DefaultParams() when nil): the output is
	// checked as the chain will check it.
	Params *types.Params
}

// PiecesDir is the folder, under Build's output folder, that holds the piece files.
const PiecesDir = "pieces"

// ManifestFile is the name of the manifest Build writes in its output folder.
const ManifestFile = "manifest.json"

// PieceFile is the path of a piece file relative to the output folder.
func PieceFile(shard, piece uint32) string {
	return filepath.Join(PiecesDir, fmt.Sprintf("s%06d-p%03d.piece", shard, piece))
}

// shardJob is one shard's bytes on their way to an encoding worker.
type shardJob struct {
	index       uint32
	data        []byte
	sampleStart uint64
	sampleEnd   uint64
	files       []string
}

// Build reads input (a folder: one sample per regular file, in lexical path order; or a
// file: fixed-size samples, or lines), packs whole samples into shards of at most
// opts.ShardSize bytes, encodes each shard into its pieces, writes them under
// outDir/pieces, hashes each into its Merkle root and writes outDir/manifest.json.
// Shards are processed by opts.Workers goroutines; at most 2×Workers shards are held in
// memory at once.
func Build(input, outDir string, opts Options) (*Manifest, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	info, err := os.Stat(input)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(outDir, PiecesDir), 0o755); err != nil {
		return nil, err
	}
	m := &Manifest{
		Version: FormatVersion, ID: opts.ID, Name: opts.Name, ChunkSize: opts.ChunkSize,
		Encoding: EncodingToJSON(opts.Encoding), Source: Source{Path: input},
	}
	var produce func(emit func(shardJob) error) error
	if info.IsDir() {
		m.Source.Kind = "folder"
		produce = func(emit func(shardJob) error) error { return packFolder(input, opts.ShardSize, emit) }
	} else {
		m.Source.Kind = "file"
		m.Source.SampleBytes = max(opts.SampleBytes, 0)
		produce = func(emit func(shardJob) error) error { return packFile(input, opts.ShardSize, opts.SampleBytes, emit) }
	}

	jobs := make(chan shardJob, opts.Workers)
	var (
		mu       sync.Mutex
		shards   = map[uint32]Shard{}
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	for range opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			enc, encErr := newEncoder(opts.Encoding) // nil for replicas
			if encErr != nil {
				fail(encErr)
			}
			for job := range jobs {
				if encErr != nil {
					continue // drain: the producer stops at the next shard
				}
				s, err := encodeShard(enc, opts, outDir, job)
				if err != nil {
					fail(err)
					continue
				}
				mu.Lock()
				shards[s.Index] = s
				mu.Unlock()
			}
		}()
	}
	perr := produce(func(job shardJob) error {
		mu.Lock()
		err := firstErr
		mu.Unlock()
		if err != nil {
			return err
		}
		jobs <- job
		return nil
	})
	close(jobs)
	wg.Wait()
	if perr != nil {
		return nil, perr
	}
	if firstErr != nil {
		return nil, firstErr
	}
	if len(shards) == 0 {
		return nil, fmt.Errorf("%s holds no samples", input)
	}
	m.Shards = make([]Shard, len(shards))
	for i := range m.Shards {
		m.Shards[i] = shards[uint32(i)]
		m.TotalSize += m.Shards[i].Size
	}
	m.SampleCount = m.Shards[len(m.Shards)-1].SampleEnd
	chain, err := m.ChainShards()
	if err != nil {
		return nil, err
	}
	root := types.ManifestRoot(opts.Encoding, opts.ChunkSize, m.TotalSize, chain)
	m.ManifestRoot = root.Hex()
	if err := m.Validate(*opts.Params); err != nil {
		return nil, fmt.Errorf("the built manifest would be rejected: %w", err)
	}
	if err := m.Write(filepath.Join(outDir, ManifestFile)); err != nil {
		return nil, err
	}
	return m, nil
}

func (o *Options) fill() error {
	if o.Params == nil {
		p := types.DefaultParams()
		o.Params = &p
	}
	if o.ChunkSize == 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.SampleBytes == 0 {
		o.SampleBytes = DefaultSampleBytes
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	p := *o.Params
	switch {
	case o.ShardSize <= 0:
		return fmt.Errorf("shard size must be positive, got %d", o.ShardSize)
	case uint64(o.ShardSize) > p.MaxShardSize:
		return fmt.Errorf("shard size %d exceeds the chain's max_shard_size %d", o.ShardSize, p.MaxShardSize)
	case o.ChunkSize < p.MinChunkSize || o.ChunkSize > p.MaxChunkSize:
		return fmt.Errorf("chunk size must be within [%d, %d], got %d", p.MinChunkSize, p.MaxChunkSize, o.ChunkSize)
	}
	if o.ID != "" {
		if err := types.ValidateDatasetID(o.ID); err != nil {
			return err
		}
	}
	return o.Encoding.Validate(p)
}

// newEncoder returns a Reed-Solomon encoder for enc, or nil for replicas.
func newEncoder(enc types.Encoding) (reedsolomon.Encoder, error) {
	if !enc.IsReedSolomon() {
		return nil, nil
	}
	return reedsolomon.New(int(enc.DataPieces), int(enc.ParityPieces))
}

// EncodePieces cuts a shard's bytes into its pieces: under Reed-Solomon k+m, k data
// pieces of ceil(len/k) bytes (the last zero-padded) and m parity pieces; under
// replicas, the shard itself. It may use data's spare capacity.
func EncodePieces(enc types.Encoding, data []byte) ([][]byte, error) {
	rs, err := newEncoder(enc)
	if err != nil {
		return nil, err
	}
	return piecesOf(rs, data)
}

// piecesOf cuts a shard into its pieces: k data pieces (the last zero-padded) plus m
// parity pieces, or the shard itself for replicas (enc nil).
func piecesOf(enc reedsolomon.Encoder, data []byte) ([][]byte, error) {
	if enc == nil {
		return [][]byte{data}, nil
	}
	pieces, err := enc.Split(data)
	if err != nil {
		return nil, err
	}
	if err := enc.Encode(pieces); err != nil {
		return nil, err
	}
	return pieces, nil
}

// encodeShard turns one shard into its pieces: encode, write, hash.
func encodeShard(enc reedsolomon.Encoder, opts Options, outDir string, job shardJob) (Shard, error) {
	s := Shard{Index: job.index, SampleStart: job.sampleStart, SampleEnd: job.sampleEnd, Size: uint64(len(job.data)), Files: job.files}
	pieces, err := piecesOf(enc, job.data)
	if err != nil {
		return s, fmt.Errorf("shard %d: encoding: %w", job.index, err)
	}
	for i, piece := range pieces {
		rel := PieceFile(job.index, uint32(i))
		if err := os.WriteFile(filepath.Join(outDir, rel), piece, 0o644); err != nil {
			return s, err
		}
		root := merkle.RootOfBytes(piece, int(opts.ChunkSize))
		s.Pieces = append(s.Pieces, Piece{
			Index: uint32(i), Root: root.Hex(), CID: types.PieceCID(root[:]), Size: uint64(len(piece)),
			Chunks: types.ChunkCount(uint64(len(piece)), opts.ChunkSize), File: rel,
		})
	}
	return s, nil
}

// packer fills shards with whole samples and hands each full shard on.
type packer struct {
	shardSize int64
	emit      func(shardJob) error
	cur       shardJob
	next      uint32
	samples   uint64
}

// add appends one sample (already read) to the current shard, starting a new one first
// when it would not fit.
func (p *packer) add(sample []byte, file string) error {
	if int64(len(sample)) > p.shardSize {
		name := file
		if name == "" {
			name = fmt.Sprintf("sample %d", p.samples)
		}
		return fmt.Errorf("%s is %d bytes, larger than the shard size %d: shards hold whole samples, raise --shard-size", name, len(sample), p.shardSize)
	}
	if int64(len(p.cur.data)+len(sample)) > p.shardSize {
		if err := p.flush(); err != nil {
			return err
		}
	}
	if p.cur.data == nil {
		p.cur = shardJob{index: p.next, data: make([]byte, 0, p.shardSize), sampleStart: p.samples, sampleEnd: p.samples}
	}
	p.cur.data = append(p.cur.data, sample...)
	p.cur.sampleEnd++
	p.samples++
	if file != "" {
		p.cur.files = append(p.cur.files, file)
	}
	return nil
}

func (p *packer) flush() error {
	if len(p.cur.data) == 0 {
		return nil
	}
	job := p.cur
	p.cur = shardJob{}
	p.next++
	return p.emit(job)
}

// packFolder makes every regular file under root one sample, in lexical path order.
func packFolder(root string, shardSize int64, emit func(shardJob) error) error {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	p := &packer{shardSize: shardSize, emit: emit}
	for _, path := range files {
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		if info.Size() > shardSize {
			return fmt.Errorf("%s is %d bytes, larger than the shard size %d: shards hold whole samples, raise --shard-size", rel, info.Size(), shardSize)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := p.add(data, filepath.ToSlash(rel)); err != nil {
			return err
		}
	}
	return p.flush()
}

// packFile cuts a file into samples of sampleBytes bytes (the last may be shorter), or
// into lines when sampleBytes is negative.
func packFile(path string, shardSize, sampleBytes int64, emit func(shardJob) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	p := &packer{shardSize: shardSize, emit: emit}
	r := bufio.NewReaderSize(f, 1<<20)
	if sampleBytes < 0 {
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				if aerr := p.add(line, ""); aerr != nil {
					return aerr
				}
			}
			if errors.Is(err, io.EOF) {
				return p.flush()
			}
			if err != nil {
				return err
			}
		}
	}
	if sampleBytes > shardSize {
		return fmt.Errorf("samples of %d bytes do not fit in shards of %d bytes: raise --shard-size", sampleBytes, shardSize)
	}
	// Read whole shards at once: as many whole samples as fit.
	perShard := (shardSize / sampleBytes) * sampleBytes
	for {
		buf := make([]byte, perShard)
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			samples := uint64(n) / uint64(sampleBytes)
			if int64(n)%sampleBytes != 0 {
				samples++
			}
			job := shardJob{index: p.next, data: buf[:n], sampleStart: p.samples, sampleEnd: p.samples + samples}
			p.samples += samples
			p.next++
			if eerr := emit(job); eerr != nil {
				return eerr
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// decodeRoot parses a piece's hex root.
func decodeRoot(p Piece) (merkle.Hash, error) {
	b, err := hex.DecodeString(p.Root)
	if err != nil {
		return merkle.Hash{}, err
	}
	return merkle.HashFromBytes(b)
}

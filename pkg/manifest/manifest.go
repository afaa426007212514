// Package manifest builds, reads and uses dataset manifests for x/shardregistry, off
// chain: it cuts a folder of sample files or a token file into shards of whole samples,
// Reed-Solomon encodes them (github.com/klauspost/reedsolomon) or keeps them whole for
// replication, hashes every piece into its RFC 6962 Merkle root with pkg/merkle,
// writes the pieces and a manifest.json, rebuilds shards from enough pieces, and answers
// storage challenges. The chain never runs this code; it shares its definitions
// (types.ManifestRoot, types.Encoding) so what Build writes is what the chain checks.
package manifest

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// FormatVersion is the manifest.json format this package reads and writes.
const FormatVersion = 1

// Defaults of Build's options.
const (
	DefaultChunkSize   = 4096
	DefaultSampleBytes = 2048
)

// Manifest is manifest.json: everything the chain registers, plus where the pieces are.
type Manifest struct {
	Version      int          `json:"version"`
	ID           string       `json:"id,omitempty"`
	Name         string       `json:"name,omitempty"`
	ChunkSize    uint32       `json:"chunk_size"`
	Encoding     EncodingJSON `json:"encoding"`
	TotalSize    uint64       `json:"total_size"`
	SampleCount  uint64       `json:"sample_count"`
	ManifestRoot string       `json:"manifest_root"`
	Source       Source       `json:"source"`
	Shards       []Shard      `json:"shards"`
}

// EncodingJSON is the encoding as written in manifest.json.
type EncodingJSON struct {
	// Kind is "reed-solomon" or "replicas".
	Kind     string `json:"kind"`
	Data     uint32 `json:"data,omitempty"`
	Parity   uint32 `json:"parity,omitempty"`
	Replicas uint32 `json:"replicas,omitempty"`
}

// Source says what the dataset was built from.
type Source struct {
	// Kind is "folder" (one sample per file) or "file" (fixed-size samples, or lines).
	Kind string `json:"kind"`
	Path string `json:"path"`
	// SampleBytes is the sample size of a file source; 0 means one sample per line.
	SampleBytes int64 `json:"sample_bytes,omitempty"`
}

// Shard is one shard of the manifest.
type Shard struct {
	Index       uint32 `json:"index"`
	SampleStart uint64 `json:"sample_start"`
	SampleEnd   uint64 `json:"sample_end"`
	Size        uint64 `json:"size"`
	// Files are the sample files of a folder source, in sample order.
	Files  []string `json:"files,omitempty"`
	Pieces []Piece  `json:"pieces"`
}

// Piece is one piece of a shard.
type Piece struct {
	Index  uint32 `json:"index"`
	Root   string `json:"root"`
	CID    string `json:"cid"`
	Size   uint64 `json:"size"`
	Chunks uint64 `json:"chunks"`
	// File is the piece's path relative to the manifest's folder.
	File string `json:"file"`
}

// EncodingFromJSON converts the manifest's encoding to the chain's.
func EncodingFromJSON(e EncodingJSON) (types.Encoding, error) {
	switch e.Kind {
	case "reed-solomon":
		return types.Encoding{Kind: types.ENCODING_KIND_REED_SOLOMON, DataPieces: e.Data, ParityPieces: e.Parity}, nil
	case "replicas":
		return types.Encoding{Kind: types.ENCODING_KIND_REPLICAS, Replicas: e.Replicas}, nil
	}
	return types.Encoding{}, fmt.Errorf("encoding kind must be \"reed-solomon\" or \"replicas\", got %q", e.Kind)
}

// EncodingToJSON converts the chain's encoding to the manifest's.
func EncodingToJSON(e types.Encoding) EncodingJSON {
	if e.IsReedSolomon() {
		return EncodingJSON{Kind: "reed-solomon", Data: e.DataPieces, Parity: e.ParityPieces}
	}
	return EncodingJSON{Kind: "replicas", Replicas: e.Replicas}
}

// ParseEncoding reads "--rs 4+2" style ("4+2") or a replica count.
func ParseEncoding(rs string, replicas uint32) (types.Encoding, error) {
	switch {
	case rs != "" && replicas != 0:
		return types.Encoding{}, fmt.Errorf("choose either Reed-Solomon (--rs k+m) or replication (--replicas n), not both")
	case rs != "":
		var k, m uint32
		if n, err := fmt.Sscanf(rs, "%d+%d", &k, &m); err != nil || n != 2 || fmt.Sprintf("%d+%d", k, m) != strings.TrimSpace(rs) {
			return types.Encoding{}, fmt.Errorf("--rs %q: want data+parity pieces, e.g. 4+2", rs)
		}
		return types.Encoding{Kind: types.ENCODING_KIND_REED_SOLOMON, DataPieces: k, ParityPieces: m}, nil
	case replicas != 0:
		return types.Encoding{Kind: types.ENCODING_KIND_REPLICAS, Replicas: replicas}, nil
	}
	return types.Encoding{}, fmt.Errorf("choose an encoding: --rs k+m (e.g. 4+2) or --replicas n")
}

// ChainEncoding is the manifest's encoding in the chain's terms.
func (m *Manifest) ChainEncoding() (types.Encoding, error) { return EncodingFromJSON(m.Encoding) }

// ChainShards converts the manifest's shards to the chain's, decoding the piece roots.
func (m *Manifest) ChainShards() ([]types.Shard, error) {
	shards := make([]types.Shard, len(m.Shards))
	for i, s := range m.Shards {
		cs := types.Shard{DatasetId: m.ID, Index: s.Index, SampleStart: s.SampleStart, SampleEnd: s.SampleEnd, SizeBytes: s.Size}
		for _, p := range s.Pieces {
			root, err := hex.DecodeString(p.Root)
			if err != nil {
				return nil, fmt.Errorf("shard %d piece %d: root %q is not hex: %w", s.Index, p.Index, p.Root, err)
			}
			cs.Pieces = append(cs.Pieces, types.Piece{Index: p.Index, Root: root, SizeBytes: p.Size, ChunkCount: p.Chunks})
		}
		shards[i] = cs
	}
	return shards, nil
}

// RegisterMsg is the MsgRegisterDataset for this manifest. id and name override the
// manifest's when not empty.
func (m *Manifest) RegisterMsg(owner, id, name string) (*types.MsgRegisterDataset, error) {
	if id == "" {
		id = m.ID
	}
	if name == "" {
		name = m.Name
	}
	if id == "" {
		return nil, fmt.Errorf("the dataset needs an id: set \"id\" in the manifest or pass one")
	}
	enc, err := m.ChainEncoding()
	if err != nil {
		return nil, err
	}
	root, err := hex.DecodeString(m.ManifestRoot)
	if err != nil {
		return nil, fmt.Errorf("manifest_root %q is not hex: %w", m.ManifestRoot, err)
	}
	shards, err := m.ChainShards()
	if err != nil {
		return nil, err
	}
	for i := range shards {
		shards[i].DatasetId = ""
	}
	return &types.MsgRegisterDataset{
		Owner: owner, DatasetId: id, Name: name, ManifestRoot: root, Encoding: enc,
		ChunkSize: m.ChunkSize, TotalSize: m.TotalSize, Shards: shards,
	}, nil
}

// Validate checks the manifest as the chain would under params (sizes, piece counts,
// roots, manifest root), so a bad file is caught before anything is signed.
func (m *Manifest) Validate(params types.Params) error {
	if m.Version != FormatVersion {
		return fmt.Errorf("manifest version %d is not supported (want %d)", m.Version, FormatVersion)
	}
	id := m.ID
	if id == "" {
		id = "unregistered" // the id is chosen at registration; it is not part of the root
	}
	msg, err := m.RegisterMsg("", id, "")
	if err != nil {
		return err
	}
	stats, err := types.ValidateManifest(params, msg.DatasetId, msg.Encoding, msg.ChunkSize, msg.TotalSize, msg.Shards, msg.ManifestRoot)
	if err != nil {
		return err
	}
	if stats.SampleCount != m.SampleCount {
		return fmt.Errorf("sample_count is %d, the shards hold %d samples", m.SampleCount, stats.SampleCount)
	}
	for _, s := range m.Shards {
		for _, p := range s.Pieces {
			root, _ := hex.DecodeString(p.Root)
			if p.CID != "" && p.CID != types.PieceCID(root) {
				return fmt.Errorf("shard %d piece %d: cid %s does not name root %s", s.Index, p.Index, p.CID, p.Root)
			}
		}
	}
	return nil
}

// Load reads a manifest.json, rejecting unknown fields.
func Load(path string) (*Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if m.Version != FormatVersion {
		return nil, fmt.Errorf("%s: manifest version %d is not supported (want %d)", path, m.Version, FormatVersion)
	}
	return &m, nil
}

// Write writes the manifest as indented JSON.
func (m *Manifest) Write(path string) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

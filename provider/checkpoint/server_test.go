package checkpoint_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/trainer"
)

// servedCheckpoint is a checkpoint retained by a catalog behind a test server.
type servedCheckpoint struct {
	ref     checkpoint.Ref
	state   []byte
	trace   []merkle.Hash
	entry   checkpoint.Entry
	catalog *checkpoint.Catalog
	server  *httptest.Server
	client  *checkpoint.Client
}

// serveCheckpoint writes a checkpoint of steps 20..25 whose state spans
// three and a half chunks, commits it and serves it.
func serveCheckpoint(t *testing.T) *servedCheckpoint {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	return serveState(t, randomBytes(rng, 3*checkpoint.ChunkSize+checkpoint.ChunkSize/2))
}

// serveState serves state as the checkpoint of steps 20..25.
func serveState(t *testing.T, state []byte) *servedCheckpoint {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	s := &servedCheckpoint{ref: checkpoint.Ref{LeaseID: 4, Index: 2}}
	s.state = state
	for range 5 {
		s.trace = append(s.trace, merkle.Hash(sha256.Sum256(randomBytes(rng, 8))))
	}
	s.trace = append(s.trace, sha256.Sum256(s.state))
	dir, err := trainer.WriteCheckpoint(t.TempDir(), 25, s.state, s.trace)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := trainer.ReadCheckpoint(dir, 25)
	if err != nil {
		t.Fatal(err)
	}
	commitment, err := checkpoint.Commit(cp, checkpoint.HashOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.entry = checkpoint.Entry{Ref: s.ref, JobID: 9, Dir: dir, Commitment: commitment}
	s.catalog = checkpoint.NewCatalog(time.Hour)
	if err := s.catalog.Add(s.entry); err != nil {
		t.Fatal(err)
	}
	s.server = httptest.NewServer(checkpoint.NewHandler(s.catalog))
	t.Cleanup(s.server.Close)
	s.client = &checkpoint.Client{BaseURL: s.server.URL, HTTP: s.server.Client()}
	return s
}

func (s *servedCheckpoint) get(t *testing.T, path string, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.server.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := s.server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func (s *servedCheckpoint) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	resp := s.get(t, path, nil)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", path, resp.Status, body)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func TestServerMetadata(t *testing.T) {
	s := serveCheckpoint(t)
	var m checkpoint.Metadata
	s.getJSON(t, "/checkpoints/4/2", &m)
	c := s.entry.Commitment
	if m.LeaseID != 4 || m.Index != 2 || m.JobID != 9 || m.StartStep != 20 || m.EndStep != 25 ||
		!bytes.Equal(m.StartHash, s.trace[0][:]) || !bytes.Equal(m.FinalHash, s.trace[5][:]) ||
		!bytes.Equal(m.StateRoot, c.State.Root[:]) || m.StateSize != int64(len(s.state)) ||
		m.ChunkSize != trace.CheckpointChunkSize || m.Chunks != 4 || !bytes.Equal(m.TraceRoot, c.TraceRoot[:]) {
		t.Fatalf("metadata %+v", m)
	}
	got, err := s.client.Metadata(context.Background(), s.ref)
	if err != nil || !bytes.Equal(got.StateRoot, m.StateRoot) {
		t.Fatalf("Client.Metadata = %+v, %v", got, err)
	}
}

func TestServerState(t *testing.T) {
	s := serveCheckpoint(t)
	resp := s.get(t, "/checkpoints/4/2/state", nil)
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(body, s.state) {
		t.Fatalf("full state: %s, %d bytes, %v", resp.Status, len(body), err)
	}
	etag := resp.Header.Get("ETag")
	if etag != `"`+s.entry.Commitment.State.Root.Hex()+`"` {
		t.Fatalf("ETag %s", etag)
	}

	resp = s.get(t, "/checkpoints/4/2/state", http.Header{"Range": {"bytes=1000-1999"}, "If-Range": {etag}})
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, s.state[1000:2000]) {
		t.Fatalf("range: %s, %d bytes", resp.Status, len(body))
	}
	// A resumed download of other content gets the whole new file.
	resp = s.get(t, "/checkpoints/4/2/state", http.Header{"Range": {"bytes=1000-1999"}, "If-Range": {`"stale"`}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("If-Range with another ETag: %s", resp.Status)
	}
}

func TestServerChunkProofs(t *testing.T) {
	s := serveCheckpoint(t)
	root := s.entry.Commitment.State.Root
	for i := uint64(0); i < 4; i++ {
		var cp checkpoint.ChunkProof
		s.getJSON(t, fmt.Sprintf("/checkpoints/4/2/chunks/%d", i), &cp)
		end := min(int(i+1)*checkpoint.ChunkSize, len(s.state))
		if cp.Index != i || cp.Chunks != 4 || !bytes.Equal(cp.Data, s.state[int(i)*checkpoint.ChunkSize:end]) {
			t.Fatalf("chunk %d: index %d of %d, %d bytes", i, cp.Index, cp.Chunks, len(cp.Data))
		}
		proof := make([]merkle.Hash, len(cp.Proof))
		for j, p := range cp.Proof {
			proof[j] = merkle.Hash(p)
		}
		if err := merkle.VerifyInclusion(root, i, 4, merkle.LeafHash(cp.Data), proof); err != nil {
			t.Fatalf("chunk %d proof: %v", i, err)
		}
		data, err := s.client.Chunk(context.Background(), s.ref, i, root, 4)
		if err != nil || !bytes.Equal(data, cp.Data) {
			t.Fatalf("Client.Chunk(%d): %v", i, err)
		}
	}
	if _, err := s.client.Chunk(context.Background(), s.ref, 1, merkle.Hash{1}, 4); !errors.Is(err, checkpoint.ErrVerification) {
		t.Fatalf("chunk against another root: %v", err)
	}
}

func TestServerTrace(t *testing.T) {
	s := serveCheckpoint(t)
	resp := s.get(t, "/checkpoints/4/2/trace", nil)
	trace, err := trace.Read(resp.Body, 20)
	if err != nil || trace.Root() != s.entry.Commitment.TraceRoot {
		t.Fatalf("trace file: %v", err)
	}
	traceRoot := s.entry.Commitment.TraceRoot
	for step := uint64(20); step <= 25; step++ {
		var tp checkpoint.TraceProof
		s.getJSON(t, fmt.Sprintf("/checkpoints/4/2/trace/%d", step), &tp)
		proof := make([]merkle.Hash, len(tp.Proof))
		for j, p := range tp.Proof {
			proof[j] = merkle.Hash(p)
		}
		if tp.Step != step || !bytes.Equal(tp.Hash, s.trace[step-20][:]) {
			t.Fatalf("h_%d: %+v", step, tp)
		}
		if err := merkle.VerifyInclusion(traceRoot, step-20, 6, merkle.LeafHash(tp.Hash), proof); err != nil {
			t.Fatalf("h_%d proof: %v", step, err)
		}
		h, err := s.client.TraceHash(context.Background(), s.ref, step, traceRoot, 20, 25)
		if err != nil || h != s.trace[step-20] {
			t.Fatalf("Client.TraceHash(%d) = %s, %v", step, h, err)
		}
	}
	if _, err := s.client.TraceHash(context.Background(), s.ref, 21, traceRoot, 19, 25); !errors.Is(err, checkpoint.ErrVerification) {
		t.Fatalf("trace hash claimed for a wider range: %v", err)
	}
}

func TestServerErrors(t *testing.T) {
	s := serveCheckpoint(t)
	for path, want := range map[string]int{
		"/checkpoints/4/3":          http.StatusNotFound,
		"/checkpoints/x/2":          http.StatusBadRequest,
		"/checkpoints/4/2/chunks/4": http.StatusNotFound,
		"/checkpoints/4/2/chunks/-": http.StatusBadRequest,
		"/checkpoints/4/2/trace/19": http.StatusNotFound,
		"/checkpoints/4/2/trace/26": http.StatusNotFound,
	} {
		resp := s.get(t, path, nil)
		var body struct{ Error string }
		if err := json.NewDecoder(resp.Body).Decode(&body); resp.StatusCode != want || err != nil || body.Error == "" {
			t.Errorf("GET %s: %s (error %q, %v), want %d with a JSON error", path, resp.Status, body.Error, err, want)
		}
	}
	// A state changed on disk after it was committed is refused.
	if err := os.WriteFile(filepath.Join(s.entry.Dir, trainer.StateFileName), []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if resp := s.get(t, "/checkpoints/4/2/chunks/0", nil); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("changed state: %s", resp.Status)
	}
}

func TestClientDownloadState(t *testing.T) {
	s := serveCheckpoint(t)
	root := s.entry.Commitment.State.Root
	dst := filepath.Join(t.TempDir(), "state")
	got, err := s.client.DownloadState(context.Background(), s.ref, root, dst, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if got != s.entry.Commitment.State {
		t.Fatalf("DownloadState = %+v, want %+v", got, s.entry.Commitment.State)
	}
	if data, err := os.ReadFile(dst); err != nil || !bytes.Equal(data, s.state) {
		t.Fatalf("downloaded file: %v", err)
	}

	other := filepath.Join(t.TempDir(), "state")
	if _, err := s.client.DownloadState(context.Background(), s.ref, merkle.Hash{1}, other, 1<<30); !errors.Is(err, checkpoint.ErrVerification) {
		t.Fatalf("download against another root: %v", err)
	}
	if _, err := s.client.DownloadState(context.Background(), s.ref, root, other, checkpoint.ChunkSize); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("download over the size limit: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(other)); len(entries) != 0 {
		t.Fatalf("failed downloads left %v behind", entries)
	}
}

// StateHeader proves chunk 0 of an exact state against its root and reads
// step and loss from it; against another root, or for a state that is not
// an exact one, it fails with ErrVerification.
func TestClientStateHeader(t *testing.T) {
	st, err := exact.Init(exact.ReferenceConfig(), []byte("seed"))
	if err != nil {
		t.Fatal(err)
	}
	st.Step, st.Loss = 25, 3<<30
	s := serveState(t, st.Encode())
	ctx := context.Background()
	h, err := s.client.StateHeader(ctx, s.ref, st.Root())
	if err != nil {
		t.Fatal(err)
	}
	if h.Step != 25 || exact.LossNats(h.Loss) != 3 {
		t.Fatalf("header says step %d loss %v, want 25 and 3 nats", h.Step, exact.LossNats(h.Loss))
	}
	if _, err := s.client.StateHeader(ctx, s.ref, merkle.Hash{1}); !errors.Is(err, checkpoint.ErrVerification) {
		t.Fatalf("against another root: %v, want ErrVerification", err)
	}
	other := serveCheckpoint(t)
	if _, err := other.client.StateHeader(ctx, other.ref, other.entry.Commitment.State.Root); !errors.Is(err, checkpoint.ErrVerification) {
		t.Fatalf("a state that is not exact: %v, want ErrVerification", err)
	}
}

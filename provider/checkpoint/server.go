package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strconv"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
)

// The JSON documents the server returns. Hashes, chunk data and proofs are
// base64, as the chain's REST API writes bytes, so a verifier can compare a
// root with the one the chain returns without converting it.

// Metadata describes a retained checkpoint: GET /checkpoints/{lease}/{index}.
type Metadata struct {
	LeaseID   uint64 `json:"lease_id"`
	Index     uint64 `json:"index"`
	JobID     uint64 `json:"job_id"`
	StartStep uint64 `json:"start_step"`
	EndStep   uint64 `json:"end_step"`
	StartHash []byte `json:"start_hash"`
	FinalHash []byte `json:"final_hash"`
	StateRoot []byte `json:"state_root"`
	StateSize int64  `json:"state_size"`
	ChunkSize int    `json:"chunk_size"`
	Chunks    uint64 `json:"chunks"`
	TraceRoot []byte `json:"trace_root"`
}

// ChunkProof is one chunk of a state file with its inclusion proof against
// state_root: GET /checkpoints/{lease}/{index}/chunks/{i}.
type ChunkProof struct {
	Index  uint64   `json:"index"`
	Chunks uint64   `json:"chunks"`
	Data   []byte   `json:"data"`
	Proof  [][]byte `json:"proof"`
}

// TraceProof is h_step with its inclusion proof against trace_root, whose
// leaves are h_start_step..h_end_step: GET /checkpoints/{lease}/{index}/trace/{step}.
type TraceProof struct {
	Step      uint64   `json:"step"`
	StartStep uint64   `json:"start_step"`
	EndStep   uint64   `json:"end_step"`
	Hash      []byte   `json:"hash"`
	Proof     [][]byte `json:"proof"`
}

// NewHandler returns the HTTP API over the checkpoints c retains:
//
//	GET /checkpoints/{lease}/{index}              Metadata
//	GET /checkpoints/{lease}/{index}/state        the state file (Range requests supported; ETag is state_root)
//	GET /checkpoints/{lease}/{index}/chunks/{i}   ChunkProof
//	GET /checkpoints/{lease}/{index}/trace        the trace file
//	GET /checkpoints/{lease}/{index}/trace/{step} TraceProof
//
// Errors are JSON objects {"error": "..."}. A chunk proof re-reads the whole
// state file (merkle.ProofFromReaderAt keeps nothing between calls), so it
// suits spot checks; downloading a whole state is one /state request.
func NewHandler(c *Catalog) http.Handler {
	s := &server{catalog: c}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathPrefix+"{lease}/{index}", s.metadata)
	mux.HandleFunc("GET "+PathPrefix+"{lease}/{index}/state", s.state)
	mux.HandleFunc("GET "+PathPrefix+"{lease}/{index}/chunks/{chunk}", s.chunk)
	mux.HandleFunc("GET "+PathPrefix+"{lease}/{index}/trace", s.trace)
	mux.HandleFunc("GET "+PathPrefix+"{lease}/{index}/trace/{step}", s.traceStep)
	return mux
}

type server struct {
	catalog *Catalog
}

// httpError is an error with the status code it answers with.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) error {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var he *httpError
	if errors.As(err, &he) {
		status = he.status
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status line is out; a failed write means the client went away.
	_ = json.NewEncoder(w).Encode(v)
}

func pathUint(r *http.Request, name string) (uint64, error) {
	v, err := strconv.ParseUint(r.PathValue(name), 10, 64)
	if err != nil {
		return 0, errorf(http.StatusBadRequest, "%s must be a decimal integer, got %q", name, r.PathValue(name))
	}
	return v, nil
}

// entry returns the retained checkpoint the request's path names.
func (s *server) entry(r *http.Request) (Entry, error) {
	lease, err := pathUint(r, "lease")
	if err != nil {
		return Entry{}, err
	}
	index, err := pathUint(r, "index")
	if err != nil {
		return Entry{}, err
	}
	ref := Ref{LeaseID: lease, Index: index}
	e, ok := s.catalog.Lookup(ref)
	if !ok {
		return Entry{}, errorf(http.StatusNotFound, "%s is not retained here", ref)
	}
	return e, nil
}

// openState opens e's state file and checks it still has the committed size.
func openState(e Entry) (*os.File, error) {
	f, err := os.Open(e.statePath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errorf(http.StatusGone, "the state of %s was removed", e.Ref)
	}
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if info.Size() != e.Commitment.State.Size {
		f.Close()
		return nil, fmt.Errorf("the state of %s is %d bytes on disk, %d when committed", e.Ref, info.Size(), e.Commitment.State.Size)
	}
	return f, nil
}

func (s *server) metadata(w http.ResponseWriter, r *http.Request) {
	e, err := s.entry(r)
	if err != nil {
		writeError(w, err)
		return
	}
	c := e.Commitment
	writeJSON(w, http.StatusOK, Metadata{
		LeaseID:   e.LeaseID,
		Index:     e.Index,
		JobID:     e.JobID,
		StartStep: c.StartStep,
		EndStep:   c.EndStep,
		StartHash: c.StartHash[:],
		FinalHash: c.FinalHash[:],
		StateRoot: c.State.Root[:],
		StateSize: c.State.Size,
		ChunkSize: ChunkSize,
		Chunks:    c.State.Chunks,
		TraceRoot: c.TraceRoot[:],
	})
}

func (s *server) state(w http.ResponseWriter, r *http.Request) {
	e, err := s.entry(r)
	if err != nil {
		writeError(w, err)
		return
	}
	f, err := openState(e)
	if err != nil {
		writeError(w, err)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		writeError(w, err)
		return
	}
	// The root names the content exactly, so it is the strongest ETag
	// there is, and lets a resumed download check with If-Range that it
	// continues the same bytes.
	w.Header().Set("ETag", `"`+e.Commitment.State.Root.Hex()+`"`)
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", info.ModTime(), f)
}

func (s *server) chunk(w http.ResponseWriter, r *http.Request) {
	e, err := s.entry(r)
	if err != nil {
		writeError(w, err)
		return
	}
	index, err := pathUint(r, "chunk")
	if err != nil {
		writeError(w, err)
		return
	}
	if chunks := e.Commitment.State.Chunks; index >= chunks {
		writeError(w, errorf(http.StatusNotFound, "chunk %d of %s does not exist: it has %d chunks", index, e.Ref, chunks))
		return
	}
	f, err := openState(e)
	if err != nil {
		writeError(w, err)
		return
	}
	defer f.Close()
	data, proof, err := merkle.ProofFromReaderAt(f, e.Commitment.State.Size, ChunkSize, index)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ChunkProof{
		Index:  index,
		Chunks: e.Commitment.State.Chunks,
		Data:   data,
		Proof:  merkle.HashesToBytes(proof),
	})
}

func (s *server) trace(w http.ResponseWriter, r *http.Request) {
	e, err := s.entry(r)
	if err != nil {
		writeError(w, err)
		return
	}
	f, err := os.Open(e.tracePath())
	if err != nil {
		writeError(w, err)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	http.ServeContent(w, r, "", info.ModTime(), f)
}

func (s *server) traceStep(w http.ResponseWriter, r *http.Request) {
	e, err := s.entry(r)
	if err != nil {
		writeError(w, err)
		return
	}
	step, err := pathUint(r, "step")
	if err != nil {
		writeError(w, err)
		return
	}
	c := e.Commitment
	if step < c.StartStep || step > c.EndStep {
		writeError(w, errorf(http.StatusNotFound, "step %d is outside %s's trace [%d, %d]", step, e.Ref, c.StartStep, c.EndStep))
		return
	}
	trace, err := trace.ReadFile(e.tracePath(), c.StartStep)
	if err != nil {
		writeError(w, err)
		return
	}
	if trace.Root() != c.TraceRoot {
		writeError(w, fmt.Errorf("the trace of %s changed on disk since it was committed", e.Ref))
		return
	}
	hash, proof, err := trace.Open(step)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, TraceProof{Step: step, StartStep: c.StartStep, EndStep: c.EndStep, Hash: hash[:], Proof: proof})
}

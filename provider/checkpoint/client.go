package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
)

// ErrVerification is wrapped by every error about data that does not match
// the root a caller committed to.
var ErrVerification = errors.New("checkpoint: verification failed")

// Client downloads checkpoints from a provider's server and verifies them
// against roots the caller takes from the chain, never from the server.
type Client struct {
	// BaseURL is the provider's endpoint, e.g. https://gpu1.example.com:8443.
	BaseURL string
	// HTTP is the client used; nil means http.DefaultClient.
	HTTP *http.Client
	// Authorize signs each request (pkg/reqauth): a provider serves checkpoint states
	// only to signed requests of the job's owner and the bonded (RestrictStates). Nil
	// sends them unsigned, which gets the metadata, the trace and the header chunk.
	Authorize func(*http.Request) error
}

func (c *Client) url(ref Ref, suffix string) string {
	return URI(c.BaseURL, ref) + suffix
}

// get issues a GET and returns the response if its status is 200 or 206.
func (c *Client) get(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if c.Authorize != nil {
		if err := c.Authorize(req); err != nil {
			return nil, err
		}
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var body struct {
			Error string `json:"error"`
		}
		msg := resp.Status
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(raw, &body) == nil && body.Error != "" {
			msg += ": " + body.Error
		} else if text := strings.TrimSpace(string(raw)); text != "" {
			msg += ": " + text // plain text: the authentication layer's answer
		}
		return nil, fmt.Errorf("GET %s: %s", url, msg)
	}
	return resp, nil
}

// getJSON fetches url into v, reading at most limit bytes.
func (c *Client) getJSON(ctx context.Context, url string, limit int64, v any) error {
	resp, err := c.get(ctx, url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, limit)).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

// Metadata fetches the description of ref. Nothing in it is verified: use
// it to learn sizes, and check roots against the chain.
func (c *Client) Metadata(ctx context.Context, ref Ref) (Metadata, error) {
	var m Metadata
	err := c.getJSON(ctx, c.url(ref, ""), 64<<10, &m)
	return m, err
}

// DownloadState fetches the state file of ref into dst and verifies every
// chunk against stateRoot while it arrives: the file is hashed into its
// Merkle root as it is written, and only a file whose root equals stateRoot
// is renamed into place. At most maxBytes are accepted, so a server cannot
// fill the disk. It returns the file's commitment.
func (c *Client) DownloadState(ctx context.Context, ref Ref, stateRoot merkle.Hash, dst string, maxBytes int64) (StateCommitment, error) {
	resp, err := c.get(ctx, c.url(ref, "/state"))
	if err != nil {
		return StateCommitment{}, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > maxBytes {
		return StateCommitment{}, fmt.Errorf("the state of %s is %d bytes, more than the %d accepted", ref, resp.ContentLength, maxBytes)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".partial-*")
	if err != nil {
		return StateCommitment{}, err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	defer tmp.Close()

	body := &countingReader{r: io.LimitReader(resp.Body, maxBytes+1)}
	root, chunks, err := merkle.ParallelStreamRoot(io.TeeReader(body, tmp), ChunkSize, defaultWorkers())
	if err != nil {
		return StateCommitment{}, fmt.Errorf("downloading the state of %s: %w", ref, err)
	}
	if body.read > maxBytes {
		return StateCommitment{}, fmt.Errorf("the state of %s is more than the %d bytes accepted", ref, maxBytes)
	}
	if root != stateRoot {
		return StateCommitment{}, fmt.Errorf("%w: the state of %s (%d bytes) has root %s, want %s", ErrVerification, ref, body.read, root, stateRoot)
	}
	if err := tmp.Sync(); err != nil {
		return StateCommitment{}, err
	}
	if err := tmp.Close(); err != nil {
		return StateCommitment{}, err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return StateCommitment{}, err
	}
	return StateCommitment{Root: root, Size: body.read, Chunks: chunks}, nil
}

// Chunk fetches chunk index of ref's state and verifies its proof against
// stateRoot for a state of chunks chunks. The caller must know chunks (from
// Metadata): the same proof can verify at another position of a tree of
// another size, so the server's say-so in the response is not used.
func (c *Client) Chunk(ctx context.Context, ref Ref, index uint64, stateRoot merkle.Hash, chunks uint64) ([]byte, error) {
	var cp ChunkProof
	// The chunk, base64-encoded, and a proof of at most 64 hashes.
	limit := int64(ChunkSize)*4/3 + 16<<10
	if err := c.getJSON(ctx, c.url(ref, fmt.Sprintf("/chunks/%d", index)), limit, &cp); err != nil {
		return nil, err
	}
	proof, err := hashesFromBytes(cp.Proof)
	if err != nil {
		return nil, fmt.Errorf("%w: chunk %d of %s: %w", ErrVerification, index, ref, err)
	}
	if err := merkle.VerifyInclusion(stateRoot, index, chunks, merkle.LeafHash(cp.Data), proof); err != nil {
		return nil, fmt.Errorf("%w: chunk %d of %s: %w", ErrVerification, index, ref, err)
	}
	return cp.Data, nil
}

// TraceHash fetches h_step of ref and verifies its proof against traceRoot,
// the root over h_startStep..h_endStep.
func (c *Client) TraceHash(ctx context.Context, ref Ref, step uint64, traceRoot merkle.Hash, startStep, endStep uint64) (merkle.Hash, error) {
	if step < startStep || step > endStep {
		return merkle.Hash{}, fmt.Errorf("step %d is outside the trace [%d, %d]", step, startStep, endStep)
	}
	var tp TraceProof
	if err := c.getJSON(ctx, c.url(ref, fmt.Sprintf("/trace/%d", step)), 16<<10, &tp); err != nil {
		return merkle.Hash{}, err
	}
	hash, err := merkle.HashFromBytes(tp.Hash)
	if err != nil {
		return merkle.Hash{}, fmt.Errorf("%w: h_%d of %s: %w", ErrVerification, step, ref, err)
	}
	proof, err := hashesFromBytes(tp.Proof)
	if err != nil {
		return merkle.Hash{}, fmt.Errorf("%w: h_%d of %s: %w", ErrVerification, step, ref, err)
	}
	if err := merkle.VerifyInclusion(traceRoot, step-startStep, endStep-startStep+1, merkle.LeafHash(hash[:]), proof); err != nil {
		return merkle.Hash{}, fmt.Errorf("%w: h_%d of %s: %w", ErrVerification, step, ref, err)
	}
	return hash, nil
}

func hashesFromBytes(bs [][]byte) ([]merkle.Hash, error) {
	hashes := make([]merkle.Hash, len(bs))
	for i, b := range bs {
		h, err := merkle.HashFromBytes(b)
		if err != nil {
			return nil, err
		}
		hashes[i] = h
	}
	return hashes, nil
}

// StateHeader fetches chunk 0 of ref's state, an exact-workload state, and
// verifies it against stateRoot before it returns the header the chunk
// holds (config, step and the loss of the step that produced the state).
// The size of the tree the proof is checked against comes from the proven
// config, not from the server. The chain vouches for the result: the root
// is h_end of the checkpoint's trace, which a referee recomputes.
func (c *Client) StateHeader(ctx context.Context, ref Ref, stateRoot merkle.Hash) (exact.Header, error) {
	var cp ChunkProof
	limit := int64(ChunkSize)*4/3 + 16<<10
	if err := c.getJSON(ctx, c.url(ref, "/chunks/0"), limit, &cp); err != nil {
		return exact.Header{}, err
	}
	h, err := exact.DecodeHeader(cp.Data)
	if err != nil {
		return exact.Header{}, fmt.Errorf("%w: chunk 0 of %s: %w", ErrVerification, ref, err)
	}
	proof, err := hashesFromBytes(cp.Proof)
	if err != nil {
		return exact.Header{}, fmt.Errorf("%w: chunk 0 of %s: %w", ErrVerification, ref, err)
	}
	if err := merkle.VerifyInclusion(stateRoot, 0, h.Chunks, merkle.LeafHash(cp.Data), proof); err != nil {
		return exact.Header{}, fmt.Errorf("%w: chunk 0 of %s: %w", ErrVerification, ref, err)
	}
	return h, nil
}

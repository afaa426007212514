// Package logs serves a lease's trainer logs on the sidecar's public port
// to the job's owner and auditors, and reads them as a client.
//
// GET /logs/{lease}?stream=stdout|stderr&offset=N returns the log's bytes
// from offset N up to its last complete line (at most MaxChunk bytes) and
// the offset to ask for next in X-Log-Next. A reader that resumes from
// that offset, across its own restarts or the sidecar's (the log is a file
// the trainer appends to), neither loses nor repeats a line.
//
// A request is signed by the reader's account key over (chain id, lease,
// unix time): headers X-Depin-Reader (bech32 address), X-Depin-Pubkey
// (base64 compressed secp256k1 key), X-Depin-Time and X-Depin-Signature
// (base64). Unsigned or badly signed requests get 401; a signature older
// or newer than MaxSkew, too; a valid reader who is neither the job's
// owner nor one of the lease's auditors gets 403.
package logs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cosmos/cosmos-sdk/crypto/keys/secp256k1"
	"github.com/cosmos/cosmos-sdk/types/bech32"
)

// PathPrefix is where the sidecar serves logs.
const PathPrefix = "/logs/"

// MaxChunk bounds one response.
const MaxChunk = 1 << 20

// MaxSkew is how far a signature's time may be from the server's clock.
const MaxSkew = 5 * time.Minute

// Header names of a signed request.
const (
	HeaderReader    = "X-Depin-Reader"
	HeaderPubkey    = "X-Depin-Pubkey"
	HeaderTime      = "X-Depin-Time"
	HeaderSignature = "X-Depin-Signature"
	HeaderNext      = "X-Log-Next"
)

// Message is the bytes a reader signs.
func Message(chainID string, lease uint64, unix int64) []byte {
	return fmt.Appendf(nil, "depinchain/logs/v1\n%s\n%d\n%d", chainID, lease, unix)
}

// Chain answers who may read a lease's logs.
type Chain interface {
	// Readers returns the lease's job owner and its auditors (bech32), or
	// an error wrapping ErrUnknownLease.
	Readers(ctx context.Context, lease uint64) ([]string, error)
}

// ErrUnknownLease is returned by Chain for a lease it does not know.
var ErrUnknownLease = errors.New("unknown lease")

// Server serves the logs of the leases under WorkDir (lease-<id>/logs/).
type Server struct {
	ChainID string
	WorkDir string
	Chain   Chain
	Now     func() time.Time
}

// Dir is where a lease's trainer writes its logs under workDir; the
// leases role lays it out so.
func Dir(workDir string, lease uint64) string {
	return filepath.Join(workDir, fmt.Sprintf("lease-%d", lease), "logs")
}

// Stream file names, as provider/runtime writes them.
var streams = map[string]string{"stdout": "trainer.stdout.log", "stderr": "trainer.stderr.log"}

func fail(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf(format, args...)})
}

// ServeHTTP implements http.Handler for GET /logs/{lease}.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		fail(w, http.StatusMethodNotAllowed, "GET only")
		return
	}
	lease, err := strconv.ParseUint(r.URL.Path[len(PathPrefix):], 10, 64)
	if err != nil {
		fail(w, http.StatusNotFound, "no such log: %s", r.URL.Path)
		return
	}
	reader, err := s.authenticate(r, lease)
	if err != nil {
		fail(w, http.StatusUnauthorized, "the logs of lease %d are served only to requests signed by the job's owner or auditors: %v", lease, err)
		return
	}
	readers, err := s.Chain.Readers(r.Context(), lease)
	if errors.Is(err, ErrUnknownLease) {
		fail(w, http.StatusNotFound, "lease %d: %v", lease, err)
		return
	} else if err != nil {
		fail(w, http.StatusBadGateway, "who may read lease %d: %v", lease, err)
		return
	}
	allowed := false
	for _, a := range readers {
		if sameAccount(a, reader) {
			allowed = true
		}
	}
	if !allowed {
		fail(w, http.StatusForbidden, "%s is neither the owner nor an auditor of lease %d's job", reader, lease)
		return
	}
	stream := r.URL.Query().Get("stream")
	if stream == "" {
		stream = "stdout"
	}
	name, ok := streams[stream]
	if !ok {
		fail(w, http.StatusBadRequest, "stream %q: want stdout or stderr", stream)
		return
	}
	offset, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	if offset < 0 {
		fail(w, http.StatusBadRequest, "negative offset")
		return
	}
	data, err := readLines(filepath.Join(Dir(s.WorkDir, lease), name), offset)
	if err != nil {
		fail(w, http.StatusInternalServerError, "%v", err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set(HeaderNext, strconv.FormatInt(offset+int64(len(data)), 10))
	_, _ = w.Write(data)
}

// readLines returns the complete lines of the file from offset on (at most
// MaxChunk bytes, and whole lines unless one line is longer than that).
// A file not written yet is empty.
func readLines(path string, offset int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, MaxChunk)
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	buf = buf[:n]
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		return buf[:i+1], nil
	} else if n == MaxChunk {
		return buf, nil
	}
	return nil, nil
}

func (s *Server) authenticate(r *http.Request, lease uint64) (string, error) {
	reader, pk, ts, sig := r.Header.Get(HeaderReader), r.Header.Get(HeaderPubkey), r.Header.Get(HeaderTime), r.Header.Get(HeaderSignature)
	if reader == "" || pk == "" || ts == "" || sig == "" {
		return "", errors.New("the request is not signed")
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", fmt.Errorf("%s: %w", HeaderTime, err)
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	if d := now().Sub(time.Unix(unix, 0)); d > MaxSkew || d < -MaxSkew {
		return "", fmt.Errorf("the signature's time is %s away from the provider's clock (at most %s)", d.Round(time.Second), MaxSkew)
	}
	keyBytes, err := base64.StdEncoding.DecodeString(pk)
	if err != nil || len(keyBytes) != secp256k1.PubKeySize {
		return "", errors.New("the public key is not a base64 compressed secp256k1 key")
	}
	key := &secp256k1.PubKey{Key: keyBytes}
	_, addr, err := bech32.DecodeAndConvert(reader)
	if err != nil || !bytes.Equal(addr, key.Address()) {
		return "", fmt.Errorf("the public key is not %s's", reader)
	}
	sigBytes, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || !key.VerifySignature(Message(s.ChainID, lease, unix), sigBytes) {
		return "", errors.New("the signature does not verify (wrong key, lease or chain id?)")
	}
	return reader, nil
}

// sameAccount compares two bech32 addresses by their bytes.
func sameAccount(a, b string) bool {
	_, x, err1 := bech32.DecodeAndConvert(a)
	_, y, err2 := bech32.DecodeAndConvert(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

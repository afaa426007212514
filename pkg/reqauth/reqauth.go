// Package reqauth authenticates HTTP requests between depinchain's parties — the owner's
// CLI, sidecars, storage holders — by a signature from a key of an on-chain account,
// with no secret in the URL: the client signs (chain id, method, path and query, time,
// nonce) with its secp256k1 account key and sends the signature, its public key and its
// address in headers; the server checks that the key is the address's, that the
// signature verifies, that the time is within MaxSkew of its clock and that the nonce
// was not seen within the window (a captured request cannot be replayed). What the
// address may read is the server's decision (e.g. the job's owner, bonded providers).
package reqauth

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cosmos/cosmos-sdk/crypto/keys/secp256k1"
	"github.com/cosmos/cosmos-sdk/types/bech32"
)

// Header names of a signed request.
const (
	HeaderSigner    = "X-Depin-Signer"
	HeaderPubkey    = "X-Depin-Pubkey"
	HeaderTime      = "X-Depin-Time"
	HeaderNonce     = "X-Depin-Nonce"
	HeaderSignature = "X-Depin-Signature"
)

// MaxSkew is how far a request's time may be from the server's clock; a request is
// valid (once) for at most 2 × MaxSkew.
const MaxSkew = 2 * time.Minute

// ErrUnauthenticated: the request carries no valid signature.
var ErrUnauthenticated = errors.New("unauthenticated request")

// Signer signs msg with an account key and returns the signature and the compressed
// secp256k1 public key (a keyring's Sign in SIGN_MODE_DIRECT does).
type Signer func(msg []byte) (sig, pubkey []byte, err error)

// Message is the bytes a request's signature covers.
func Message(chainID, method, pathAndQuery string, unix int64, nonce string) []byte {
	return fmt.Appendf(nil, "depinchain/reqauth/v1\n%s\n%s\n%s\n%d\n%s", chainID, method, pathAndQuery, unix, nonce)
}

func pathAndQuery(r *http.Request) string {
	p := r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		p += "?" + r.URL.RawQuery
	}
	return p
}

// Sign adds the signature headers to req as signer (the bech32 address of sign's key)
// on chain chainID at time now.
func Sign(req *http.Request, chainID, signer string, sign Signer, now time.Time) error {
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		return err
	}
	nonce := hex.EncodeToString(n[:])
	unix := now.Unix()
	sig, pk, err := sign(Message(chainID, req.Method, pathAndQuery(req), unix, nonce))
	if err != nil {
		return fmt.Errorf("signing the request: %w", err)
	}
	req.Header.Set(HeaderSigner, signer)
	req.Header.Set(HeaderPubkey, base64.StdEncoding.EncodeToString(pk))
	req.Header.Set(HeaderTime, strconv.FormatInt(unix, 10))
	req.Header.Set(HeaderNonce, nonce)
	req.Header.Set(HeaderSignature, base64.StdEncoding.EncodeToString(sig))
	return nil
}

// Verifier checks signed requests for one chain. It remembers the nonces it accepted
// for 2 × MaxSkew; use one Verifier per server.
type Verifier struct {
	ChainID string
	// Now is the server's clock (time.Now when nil).
	Now func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time // signer + nonce → when accepted
}

// Verify returns the bech32 address that signed r, or an error wrapping
// ErrUnauthenticated that says what is wrong.
func (v *Verifier) Verify(r *http.Request) (string, error) {
	fail := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("%w: %s", ErrUnauthenticated, fmt.Sprintf(format, args...))
	}
	signer, pk, ts, nonce, sig := r.Header.Get(HeaderSigner), r.Header.Get(HeaderPubkey), r.Header.Get(HeaderTime),
		r.Header.Get(HeaderNonce), r.Header.Get(HeaderSignature)
	if signer == "" || pk == "" || ts == "" || nonce == "" || sig == "" {
		return fail("the request is not signed (headers %s, %s, %s, %s, %s)", HeaderSigner, HeaderPubkey, HeaderTime, HeaderNonce, HeaderSignature)
	}
	if len(nonce) > 64 {
		return fail("%s is longer than 64 characters", HeaderNonce)
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fail("%s: %v", HeaderTime, err)
	}
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	if d := now.Sub(time.Unix(unix, 0)); d > MaxSkew || d < -MaxSkew {
		return fail("the request's time is %s away from the server's clock (at most %s)", d.Round(time.Second), MaxSkew)
	}
	keyBytes, err := base64.StdEncoding.DecodeString(pk)
	if err != nil || len(keyBytes) != secp256k1.PubKeySize {
		return fail("%s is not a base64 compressed secp256k1 key", HeaderPubkey)
	}
	key := &secp256k1.PubKey{Key: keyBytes}
	_, addr, err := bech32.DecodeAndConvert(signer)
	if err != nil || !bytes.Equal(addr, key.Address()) {
		return fail("the public key is not %s's", signer)
	}
	sigBytes, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || !key.VerifySignature(Message(v.ChainID, r.Method, pathAndQuery(r), unix, nonce), sigBytes) {
		return fail("the signature does not verify (wrong key, chain id, method or path?)")
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen == nil {
		v.seen = map[string]time.Time{}
	}
	for k, at := range v.seen {
		if now.Sub(at) > 2*MaxSkew {
			delete(v.seen, k)
		}
	}
	key2 := signer + "/" + nonce
	if _, dup := v.seen[key2]; dup {
		return fail("the request was already used (replayed nonce)")
	}
	v.seen[key2] = now
	return signer, nil
}

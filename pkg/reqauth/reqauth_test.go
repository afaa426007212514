package reqauth

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cosmos/cosmos-sdk/crypto/keys/secp256k1"
	"github.com/cosmos/cosmos-sdk/types/bech32"
)

func signer(t *testing.T) (string, Signer) {
	t.Helper()
	key := secp256k1.GenPrivKey()
	addr, err := bech32.ConvertAndEncode("depin", key.PubKey().Address())
	if err != nil {
		t.Fatal(err)
	}
	return addr, func(msg []byte) ([]byte, []byte, error) {
		sig, err := key.Sign(msg)
		return sig, key.PubKey().Bytes(), err
	}
}

func signed(t *testing.T, method, url, addr string, sign Signer, at time.Time) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := Sign(req, "depin-1", addr, sign, at); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v := &Verifier{ChainID: "depin-1", Now: func() time.Time { return now }}
	addr, sign := signer(t)
	other, _ := signer(t)

	req := signed(t, "GET", "http://h/pieces/ckpt-1-0/0/2?x=1", addr, sign, now)
	if got, err := v.Verify(req); err != nil || got != addr {
		t.Fatalf("a good request: %q %v", got, err)
	}
	for name, tc := range map[string]struct {
		req  func() *http.Request
		want string
	}{
		"replayed": {func() *http.Request { return req }, "replayed"},
		"unsigned": {func() *http.Request { r, _ := http.NewRequest("GET", "http://h/pieces/x/0/0", nil); return r }, "not signed"},
		"too old":  {func() *http.Request { return signed(t, "GET", "http://h/p", addr, sign, now.Add(-3*time.Minute)) }, "away from the server's clock"},
		"another path": {func() *http.Request {
			r := signed(t, "GET", "http://h/pieces/ckpt-1-0/0/2", addr, sign, now)
			r.URL.Path = "/pieces/ckpt-1-0/0/1"
			return r
		}, "does not verify"},
		"another chain": {func() *http.Request {
			r, _ := http.NewRequest("GET", "http://h/p", nil)
			_ = Sign(r, "other-chain", addr, sign, now)
			return r
		}, "does not verify"},
		"someone else's address": {func() *http.Request {
			r := signed(t, "GET", "http://h/p", addr, sign, now)
			r.Header.Set(HeaderSigner, other)
			return r
		}, "is not"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := v.Verify(tc.req())
			if !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want ErrUnauthenticated with %q", err, tc.want)
			}
		})
	}
}

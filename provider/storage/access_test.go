package storage

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cosmos/cosmos-sdk/crypto/keys/secp256k1"
	"github.com/cosmos/cosmos-sdk/types/bech32"

	"github.com/depinchain/depinchain/pkg/reqauth"
)

type allowList map[string]bool

func (a allowList) MayRead(_ context.Context, reader, _ string) error {
	if a[reader] {
		return nil
	}
	return fmt.Errorf("%s %w", reader, ErrNotAReader)
}

// Custody pieces are served only to signed requests of allowed readers; dataset pieces
// stay public.
func TestRestrictCustodyPieces(t *testing.T) {
	key := secp256k1.GenPrivKey()
	addr, err := bech32.ConvertAndEncode("depin", key.PubKey().Address())
	if err != nil {
		t.Fatal(err)
	}
	sign := func(msg []byte) ([]byte, []byte, error) {
		sig, err := key.Sign(msg)
		return sig, key.PubKey().Bytes(), err
	}
	served := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "piece") })
	readers := allowList{}
	srv := httptest.NewServer(RestrictCustodyPieces(served, &reqauth.Verifier{ChainID: "c"}, readers))
	defer srv.Close()
	get := func(path string, signed bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if signed {
			if err := reqauth.Sign(req, "c", addr, sign, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		buf := make([]byte, 512)
		n, _ := res.Body.Read(buf)
		return res.StatusCode, string(buf[:n])
	}
	if code, _ := get("/pieces/corpus-v1/0/1", false); code != http.StatusOK {
		t.Fatalf("a dataset piece, unsigned: %d", code)
	}
	if code, body := get("/pieces/ckpt-4-2/0/1", false); code != http.StatusUnauthorized || !strings.Contains(body, "not signed") {
		t.Fatalf("a custody piece, unsigned: %d %s", code, body)
	}
	if code, body := get("/pieces/ckpt-4-2/0/1", true); code != http.StatusForbidden || !strings.Contains(body, "may not read") {
		t.Fatalf("a custody piece, signed by a stranger: %d %s", code, body)
	}
	readers[addr] = true
	if code, body := get("/pieces/ckpt-4-2/0/1", true); code != http.StatusOK || body != "piece" {
		t.Fatalf("a custody piece, signed by a reader: %d %s", code, body)
	}
}

package checkpoint

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cosmos/cosmos-sdk/crypto/keys/secp256k1"
	"github.com/cosmos/cosmos-sdk/types/bech32"

	"github.com/depinchain/depinchain/pkg/reqauth"
)

// readersOf allows each listed reader the states of its leases.
type readersOf map[string]uint64

func (r readersOf) MayReadState(_ context.Context, reader string, lease uint64) error {
	if l, ok := r[reader]; ok && l == lease {
		return nil
	}
	return fmt.Errorf("%s %w", reader, ErrNotAStateReader)
}

// A checkpoint's state (whole, or any chunk but the header chunk 0) is served only to
// signed requests of a reader of its lease; metadata, the trace and chunk 0 stay public.
func TestRestrictStates(t *testing.T) {
	key := secp256k1.GenPrivKey()
	addr, err := bech32.ConvertAndEncode("depin", key.PubKey().Address())
	if err != nil {
		t.Fatal(err)
	}
	sign := func(req *http.Request) error {
		return reqauth.Sign(req, "c", addr, func(msg []byte) ([]byte, []byte, error) {
			sig, err := key.Sign(msg)
			return sig, key.PubKey().Bytes(), err
		}, time.Now())
	}
	served := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "served "+r.URL.Path) })
	readers := readersOf{}
	srv := httptest.NewServer(RestrictStates(served, &reqauth.Verifier{ChainID: "c"}, readers))
	defer srv.Close()
	get := func(path string, signed bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if signed {
			if err := sign(req); err != nil {
				t.Fatal(err)
			}
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	for _, public := range []string{"/checkpoints/4/2", "/checkpoints/4/2/trace", "/checkpoints/4/2/trace/7", "/checkpoints/4/2/chunks/0"} {
		if code, _ := get(public, false); code != http.StatusOK {
			t.Errorf("%s, unsigned: %d, want it public", public, code)
		}
	}
	restricted := []string{"/checkpoints/4/2/state", "/checkpoints/4/2/chunks/1", "/checkpoints/4/2/chunks/117"}
	for _, path := range restricted {
		if code, body := get(path, false); code != http.StatusUnauthorized || !strings.Contains(body, "not signed") {
			t.Errorf("%s, unsigned: %d %s", path, code, body)
		}
		if code, body := get(path, true); code != http.StatusForbidden || !strings.Contains(body, "may not read the states") {
			t.Errorf("%s, signed by a stranger: %d %s", path, code, body)
		}
	}
	readers[addr] = 5 // a reader of another lease
	if code, _ := get(restricted[0], true); code != http.StatusForbidden {
		t.Errorf("a reader of lease 5 reads lease 4's state: %d", code)
	}
	readers[addr] = 4
	for _, path := range restricted {
		if code, body := get(path, true); code != http.StatusOK || body != "served "+path {
			t.Errorf("%s, signed by a reader: %d %s", path, code, body)
		}
	}
	// The client signs through Authorize; without it the server refuses.
	c := Client{BaseURL: srv.URL}
	if _, err := c.get(context.Background(), srv.URL+restricted[0]); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "not signed") {
		t.Errorf("an unsigned client: %v", err)
	}
	c.Authorize = sign
	res, err := c.get(context.Background(), srv.URL+restricted[0])
	if err != nil {
		t.Fatalf("a signing client: %v", err)
	}
	res.Body.Close()
}

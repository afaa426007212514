package reqauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Restrict answers like every restricted server: unprotected requests pass, protected
// ones 401 unsigned, 403 when the policy forbids, 503 when it cannot decide, 200 when
// it allows, the policy asked about the signer and the object the request names.
func TestRestrict(t *testing.T) {
	addr, sign := signer(t)
	var decision error
	var asked []string
	h := Restrict(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }), &Verifier{ChainID: "depin-1"},
		func(r *http.Request) (string, bool) {
			object, ok := strings.CutPrefix(r.URL.Path, "/private/")
			return object, ok
		},
		func(_ context.Context, signer, object string) error {
			asked = append(asked, signer+" "+object)
			return decision
		})
	serve := func(req *http.Request) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	public, _ := http.NewRequest(http.MethodGet, "http://x/public/a", nil)
	if code, _ := serve(public); code != http.StatusOK {
		t.Fatalf("an unprotected request: %d", code)
	}
	unsigned, _ := http.NewRequest(http.MethodGet, "http://x/private/a", nil)
	if code, body := serve(unsigned); code != http.StatusUnauthorized || !strings.Contains(body, "not signed") {
		t.Fatalf("unsigned: %d %s", code, body)
	}
	for _, c := range []struct {
		decision error
		code     int
	}{
		{fmt.Errorf("no: %w", ErrForbidden), http.StatusForbidden},
		{errors.New("the chain is down"), http.StatusServiceUnavailable},
		{nil, http.StatusOK},
	} {
		decision = c.decision
		if code, body := serve(signed(t, http.MethodGet, "http://x/private/a", addr, sign, time.Now())); code != c.code {
			t.Fatalf("policy %v: %d %s, want %d", c.decision, code, body, c.code)
		}
	}
	if len(asked) != 3 || asked[0] != addr+" a" {
		t.Fatalf("the policy was asked %q", asked)
	}
}

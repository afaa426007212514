package reqauth

import (
	"context"
	"errors"
	"net/http"
)

// ErrForbidden: the signer may not read what it asked for.
var ErrForbidden = errors.New("forbidden")

// Restrict wraps next: a request for something protected names (it returns the object
// asked for and true) is served only when it is signed (401 otherwise) by a signer that
// allow accepts for that object (403 when allow's error wraps ErrForbidden, 503 when it
// could not decide, e.g. the chain could not be asked). Everything else is served as it
// is. Every server of depinchain's restricted data (custody pieces, checkpoint states)
// puts its policy in allow and uses this, so they answer alike.
func Restrict(next http.Handler, v *Verifier, protected func(*http.Request) (string, bool), allow func(ctx context.Context, signer, object string) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		object, ok := protected(req)
		if !ok {
			next.ServeHTTP(w, req)
			return
		}
		signer, err := v.Verify(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if err := allow(req.Context(), signer, object); err != nil {
			status := http.StatusForbidden
			if !errors.Is(err, ErrForbidden) {
				status = http.StatusServiceUnavailable
			}
			http.Error(w, err.Error(), status)
			return
		}
		next.ServeHTTP(w, req)
	})
}

package fetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/depinchain/depinchain/pkg/custody"
)

type memFile struct{ b []byte }

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if need := int(off) + len(p); need > len(m.b) {
		m.b = append(m.b, make([]byte, need-len(m.b))...)
	}
	return copy(m.b[off:], p), nil
}

// holders serves a 4+2 object's pieces: holder "h<i>" serves piece i, except that bad
// holders serve flipped bytes and down ones 503.
func setup(t *testing.T, bad, down map[int]bool) (Object, []byte, Fetcher) {
	t.Helper()
	state := make([]byte, 3*custody.BlockSize+12345)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range state {
		state[i] = byte(r.Uint32())
	}
	l, err := custody.NewLayout(uint64(len(state)), 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	bufs := make([]*bytes.Buffer, l.Pieces())
	outs := make([]io.Writer, l.Pieces())
	for i := range bufs {
		bufs[i] = new(bytes.Buffer)
		outs[i] = bufs[i]
	}
	roots, err := custody.Encode(bytes.NewReader(state), l, outs, 0)
	if err != nil {
		t.Fatal(err)
	}
	o := Object{DatasetID: "ckpt-1-0", Layout: l, Roots: roots, Holders: make([][]string, l.Pieces())}
	endpoints := map[string]string{}
	for i := range bufs {
		data := bufs[i].Bytes()
		if bad[i] {
			data = append([]byte(nil), data...)
			data[len(data)/2] ^= 1
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if down[i] || !strings.HasSuffix(req.URL.Path, "/pieces/ckpt-1-0/0/"+string(rune('0'+i))) || req.Header.Get("X-Test-Auth") != "yes" {
				http.Error(w, "no", http.StatusServiceUnavailable)
				return
			}
			w.Write(data) //nolint:errcheck
		}))
		t.Cleanup(srv.Close)
		h := "h" + string(rune('0'+i))
		endpoints[h] = srv.URL
		o.Holders[i] = []string{h}
	}
	var read int64
	f := Fetcher{
		Endpoint:  func(_ context.Context, h string) (string, error) { return endpoints[h], nil },
		Authorize: func(r *http.Request) error { r.Header.Set("X-Test-Auth", "yes"); return nil },
		Progress:  func(n int64, _ bool) { read += n },
	}
	return o, state, f
}

func TestRebuildSkipsBadAndDownHolders(t *testing.T) {
	o, state, f := setup(t, map[int]bool{1: true}, map[int]bool{0: true})
	var out memFile
	if err := f.Rebuild(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.b, state) {
		t.Fatal("rebuilt state differs")
	}
}

func TestRebuildFailsBelowK(t *testing.T) {
	o, _, f := setup(t, map[int]bool{1: true}, map[int]bool{0: true, 4: true})
	var out memFile
	err := f.Rebuild(context.Background(), o, &out)
	if !errors.Is(err, ErrNotEnoughHolders) || !strings.Contains(err.Error(), "ckpt-1-0 needs") {
		t.Fatalf("3 of 6 pieces intact: %v", err)
	}
	if o.Live() != 6 {
		t.Fatalf("live %d", o.Live())
	}
}

// TestRebuildPieceSkipsBadAndDownHolders repairs every piece of the object while holder
// 1 serves flipped bytes, byte for byte, and streams each piece from its holder with
// Piece, refusing the flipped one.
func TestRebuildPieceSkipsBadAndDownHolders(t *testing.T) {
	o, _, f := setup(t, map[int]bool{1: true}, nil)
	_, _, good := setup(t, nil, nil)
	want := make([][]byte, o.Layout.Pieces())
	for i := range want {
		var p memFile
		if err := good.Piece(context.Background(), o, uint32(i), []string{"h" + string(rune('0'+i))}, &p); err != nil {
			t.Fatalf("piece %d from an honest holder: %v", i, err)
		}
		want[i] = p.b
	}
	for target := range o.Layout.Pieces() {
		var out memFile
		if err := f.RebuildPiece(context.Background(), o, target, &out); err != nil {
			t.Fatalf("piece %d: %v", target, err)
		}
		if !bytes.Equal(out.b, want[target]) {
			t.Fatalf("piece %d: rebuilt bytes differ", target)
		}
	}
	var p memFile
	if err := f.Piece(context.Background(), o, 1, []string{"h1"}, &p); !errors.Is(err, custody.ErrRootMismatch) || !errors.Is(err, ErrNotEnoughHolders) {
		t.Fatalf("piece 1 from the holder serving flipped bytes: %v", err)
	}
	// With holder 0 down too and piece 2 the target, three are left of the four needed.
	o, _, f = setup(t, map[int]bool{1: true}, map[int]bool{0: true})
	if err := f.RebuildPiece(context.Background(), o, 2, &p); !errors.Is(err, ErrNotEnoughHolders) {
		t.Fatalf("piece 2 from 3 usable pieces: %v", err)
	}
}

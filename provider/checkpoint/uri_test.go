package checkpoint_test

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/trainer"
)

// A URI the sidecar puts on chain parses back to its server and checkpoint,
// under any base path; anything else is refused with the URI named.
func TestCheckpointURIRoundTrip(t *testing.T) {
	for _, base := range []string{"http://127.0.0.1:9000", "https://gpu1.example.com/depin/", "https://gpu1.example.com/a/b"} {
		ref := checkpoint.Ref{LeaseID: 12, Index: 3}
		uri := checkpoint.URI(base, ref)
		gotBase, gotRef, err := checkpoint.ParseURI(uri)
		if err != nil {
			t.Fatalf("%s: %v", uri, err)
		}
		if want := strings.TrimRight(base, "/"); gotRef != ref || gotBase != want {
			t.Fatalf("%s parsed to %q %v, want %q %v", uri, gotBase, gotRef, want, ref)
		}
	}
	if _, ref, err := checkpoint.ParseURI("https://h.example.com/checkpoints/4/5?x=1#y"); err != nil || ref != (checkpoint.Ref{LeaseID: 4, Index: 5}) {
		t.Fatalf("query and fragment: %v %v", ref, err)
	}
	for _, bad := range []string{"https://h.example.com/ckpt/1/0", "https://h.example.com/checkpoints/x/0", "https://h.example.com/checkpoints/1/-1", "https://h.example.com/checkpoints/1", "::"} {
		if _, _, err := checkpoint.ParseURI(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// A defender opens what it committed: the committed trace when one was
// written beside the trainer's, else the trainer's own.
func TestReadCommittedTracePrefersTheCommittedOne(t *testing.T) {
	out := t.TempDir()
	state := []byte("state at step 2")
	h2 := merkle.Hash(sha256.Sum256(state))
	honest := []merkle.Hash{{1}, h2}
	dir, err := trainer.WriteCheckpoint(out, 2, state, honest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := checkpoint.ReadCommittedTrace(dir, 1)
	if err != nil || got.Root() != trace.New(1, honest).Root() {
		t.Fatalf("without a committed trace: %v %v", got, err)
	}
	committed := trace.New(1, []merkle.Hash{{1}, {9}})
	if err := checkpoint.WriteCommittedTrace(dir, committed); err != nil {
		t.Fatal(err)
	}
	got, err = checkpoint.ReadCommittedTrace(dir, 1)
	if err != nil || got.Root() != committed.Root() {
		t.Fatalf("with a committed trace: %v %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, trainer.TraceFileName)); err != nil {
		t.Fatalf("the trainer's trace is gone: %v", err)
	}
}

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/testutil/localnet"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// The sample printed at the end: fixed prompt, length, temperature and sampler
// seed, so the same final state gives the same text on every machine.
const (
	samplePrompt      = "A "
	sampleTokens      = 240
	sampleTemperature = "0.6"
	sampleSeed        = "64656d6f" // "demo"
)

// verifiedState is a checkpoint's state as downloaded and checked against the chain.
type verifiedState struct {
	path  string
	size  int64
	state *exact.State
}

func (v verifiedState) stateStep() uint64 {
	if v.state == nil {
		return 0
	}
	return v.state.Step
}

// fetchVerifiedState downloads checkpoint cp's state from the provider's checkpoint
// server named by its on-chain URI into dir, accepting it only if its Merkle root
// equals the state_root committed on chain (checkpoint.Client checks while it
// downloads), and decodes it: the step and the loss in its header are then the ones
// the provider committed to. authorize signs the requests as the job's owner: a
// provider serves states only to the parties the chain names.
func fetchVerifiedState(ctx context.Context, cp verifytypes.Checkpoint, cfg exact.Config, dir string, authorize func(*http.Request) error) (verifiedState, error) {
	base, ref, err := checkpoint.ParseURI(cp.Uri)
	if err != nil {
		return verifiedState{}, err
	}
	root, err := merkle.HashFromBytes(cp.StateRoot)
	if err != nil {
		return verifiedState{}, fmt.Errorf("checkpoint %d's state_root: %w", cp.Index, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return verifiedState{}, err
	}
	dst := filepath.Join(dir, "state")
	c := &checkpoint.Client{BaseURL: base, Authorize: authorize}
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	com, err := c.DownloadState(dctx, ref, root, dst, cfg.StateBytes())
	if err != nil {
		if dctx.Err() != nil && ctx.Err() == nil {
			return verifiedState{}, fmt.Errorf("the download of checkpoint %d's state from %s did not finish within 1m0s: %w", cp.Index, cp.Uri, err)
		}
		return verifiedState{}, fmt.Errorf("checkpoint %d's state: %w", cp.Index, err)
	}
	raw, err := os.ReadFile(dst)
	if err != nil {
		return verifiedState{}, err
	}
	st, err := exact.Decode(raw)
	if err != nil {
		return verifiedState{}, fmt.Errorf("checkpoint %d's state: %w", cp.Index, err)
	}
	if st.Step != cp.EndStep {
		return verifiedState{}, fmt.Errorf("checkpoint %d's state is at step %d, the chain says %d", cp.Index, st.Step, cp.EndStep)
	}
	return verifiedState{path: dst, size: com.Size, state: st}, nil
}

// heldOutWindows are the text the demo scores every verified state on: the first
// heldOutWindowCount windows of context+1 bytes of pkg/traindata's built-in corpus
// (English prose about training language models), which the fortunes job never
// trains on. The same windows at every checkpoint make the losses comparable,
// where the header's loss is one training batch's.
func heldOutWindows(cfg exact.Config) [][]byte {
	text := traindata.BuiltinCorpus()
	w := cfg.Model.Context + 1
	var out [][]byte
	for off := 0; off+w <= len(text) && len(out) < heldOutWindowCount; off += w {
		out = append(out, text[off:off+w])
	}
	return out
}

const heldOutWindowCount = 128

// rootOfFile is the Merkle root of a state file, as the chain's state_root is.
func rootOfFile(path string) (merkle.Hash, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return merkle.Hash{}, err
	}
	return exact.StateRoot(raw), nil
}

// sample runs `depinchaind workload sample` on a state, narrating the command.
func sample(ctx context.Context, s *story, n *localnet.Node, statePath, specPath string) (string, error) {
	args := []string{"workload", "sample", "--state", statePath, "--spec", specPath, "--prompt", samplePrompt,
		"--tokens", fmt.Sprint(sampleTokens), "--temperature", sampleTemperature, "--seed", sampleSeed}
	s.detail("$ depinchaind workload sample --state %s --spec %s --prompt %q --tokens %d --temperature %s --seed %s",
		s.rel(statePath), s.rel(specPath), samplePrompt, sampleTokens, sampleTemperature, sampleSeed)
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(sctx, n.Binary, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if sctx.Err() != nil && ctx.Err() == nil {
			return "", fmt.Errorf("depinchaind workload sample did not finish within 2m0s")
		}
		return "", fmt.Errorf("depinchaind workload sample: %w\n%s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

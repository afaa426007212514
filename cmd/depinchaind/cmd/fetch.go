package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/cosmos/cosmos-sdk/client/flags"
	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/depinchain/depinchain/cmd/depinchaind/jobview"
	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/custody/fetch"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/reqauth"
	"github.com/depinchain/depinchain/provider/checkpoint"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// fetchedStateFile and fetchedInfoFile are what `job fetch` writes into --out.
const (
	fetchedStateFile = "state"
	fetchedInfoFile  = "checkpoint.json"
)

// ErrNotOwner: a fetch by a key that does not own the job.
var ErrNotOwner = errors.New("only the job's owner may fetch its checkpoints")

func jobFetchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fetch <job-id> --out DIR --from OWNER-KEY [--checkpoint STEP | --round R]",
		Short: "Rebuild a job's final (or a retained) checkpoint from its custody holders, verify it and write it",
		Long: `For a job whose spec has a custody section: finds the newest final checkpoint (or
the one ending at --checkpoint STEP), downloads any k of its custody pieces in
parallel from the storage holders that proved them on chain, checks every piece
and the rebuilt state against the roots on chain, and writes DIR/state (the
state file) and DIR/checkpoint.json. For a job without custody: downloads the
checkpoint's state from the provider that trained it (its URI on chain), checked
against its state_root as it arrives. For a job that trains in rounds (workers
with sync), what the owner paid for is the global model: without --checkpoint,
fetch rebuilds the newest final global state G_R (or G_ROUND with --round) from its
custody object, checks it against the round's global root on chain, and writes
DIR/global (the file as committed: weights and outer momentum), DIR/state (its
weights as an exact state, for workload sample and the trainers) and
DIR/global.json. Only the job's owner may fetch (--from must be its key). A progress bar (bytes and pieces) is drawn on a terminal.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return fmt.Errorf("job id %q: %w", args[0], err)
			}
			f := cmd.Flags()
			addr, _ := f.GetString(flagGRPCAddr)
			from, _ := f.GetString(flags.FlagFrom)
			out, _ := f.GetString("out")
			step, _ := f.GetUint64("checkpoint")
			var round *uint64
			if f.Changed("round") {
				r, _ := f.GetUint64("round")
				round = &r
			}
			if from == "" {
				return errors.New("--from: the job owner's key")
			}
			if out == "" {
				return errors.New("--out: the folder to write the checkpoint into")
			}
			signer, err := keyringSigner(f, from)
			if err != nil {
				return err
			}
			src, conn, err := jobview.Dial(addr)
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			chainID, err := signedChainID(ctx, f, src)
			if err != nil {
				return err
			}
			// The holders serve pieces of checkpoint states only to signed requests of
			// parties allowed to read them: the owner's key signs every download.
			authorize := func(req *http.Request) error {
				return reqauth.Sign(req, chainID, signer.address, signer.sign, time.Now())
			}
			fe := jobFetch{
				market: src.Market, verify: src.Verify, shards: shardtypes.NewQueryClient(conn),
				fetcher: fetch.Fetcher{Endpoint: endpointOf(src.Staking), Authorize: authorize},
				owner:   signer.address, log: cmd.ErrOrStderr(),
			}
			if isatty.IsTerminal(os.Stderr.Fd()) {
				fe.bar = true
			}
			return fe.run(ctx, id, step, round, out)
		},
	}
	f := cmd.Flags()
	f.String(flagGRPCAddr, "127.0.0.1:9090", "the node's gRPC endpoint (host:port)")
	f.String(flags.FlagFrom, "", "the job owner's key (name)")
	f.String(flags.FlagKeyringBackend, "os", "the keyring's backend (os|file|test)")
	f.String(flags.FlagKeyringDir, "", "the keyring's folder (default: --home)")
	f.String(flags.FlagChainID, "", "the chain id the requests are signed for (default: the node's)")
	f.String("out", "", "the folder to write the checkpoint into")
	f.Uint64("checkpoint", 0, "the step the wanted checkpoint ends at (default: the newest final one)")
	f.Uint64("round", 0, "for a job that trains in rounds: fetch the global model G_ROUND, the start of that round (default: the newest final one)")
	return cmd
}

// endpointOf looks up a holder's registered public URL.
func endpointOf(q stakingexttypes.QueryClient) func(context.Context, string) (string, error) {
	return func(ctx context.Context, holder string) (string, error) {
		res, err := q.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: holder})
		if err != nil {
			return "", fmt.Errorf("provider %s: %w", holder, err)
		}
		return res.Provider.Endpoint, nil
	}
}

// jobFetch is one `job fetch`.
type jobFetch struct {
	market  markettypes.QueryClient
	verify  verifytypes.QueryClient
	shards  fetch.ShardQuerier
	fetcher fetch.Fetcher
	owner   string
	log     io.Writer
	bar     bool
}

// FetchedCheckpoint is DIR/checkpoint.json.
type FetchedCheckpoint struct {
	JobID         uint64 `json:"job_id"`
	LeaseID       uint64 `json:"lease_id"`
	Index         uint64 `json:"index"`
	StartStep     uint64 `json:"start_step"`
	EndStep       uint64 `json:"end_step"`
	StateRoot     string `json:"state_root"`
	StateBytes    uint64 `json:"state_bytes"`
	CustodyObject string `json:"custody_object"`
	Holders       int    `json:"pieces_with_holders"`
	DataPieces    uint32 `json:"data_pieces"`
	ParityPieces  uint32 `json:"parity_pieces"`
}

// run fetches what the flags ask for: for a job that trains in rounds (sync), the
// global model (G_round; nil: the newest final one) unless step names a worker's
// checkpoint; otherwise the checkpoint ending at step (0: the newest final one).
func (f *jobFetch) run(ctx context.Context, jobID, step uint64, round *uint64, out string) error {
	jr, err := f.market.Job(ctx, &markettypes.QueryJobRequest{JobId: jobID})
	if err != nil {
		return fmt.Errorf("job %d: %w", jobID, err)
	}
	job := jr.Job
	if job.Owner != f.owner {
		return fmt.Errorf("%w: job %d belongs to %s, and --from is %s", ErrNotOwner, jobID, job.Owner, f.owner)
	}
	switch {
	case round != nil && job.Spec.Sync == nil:
		return fmt.Errorf("--round: job %d does not train in rounds (its spec has no sync)", jobID)
	case round != nil && step != 0:
		return errors.New("--round and --checkpoint: give one (a round's global model or a worker's checkpoint)")
	case job.Spec.Sync != nil && step == 0:
		return f.global(ctx, job, round, out)
	}
	cp, err := f.checkpoint(ctx, jobID, step, job.Spec.Custody != nil)
	if err != nil {
		return err
	}
	if job.Spec.Custody == nil {
		return f.fromTrainer(ctx, jobID, cp, out)
	}
	obj, err := fetch.Locate(ctx, f.shards, cp.LeaseId, cp.Index)
	if err != nil {
		return err
	}
	if !bytes.Equal(obj.Custody.StateRoot, cp.StateRoot) {
		return fmt.Errorf("custody object %s holds state %x, checkpoint %d/%d has %x", obj.DatasetID, obj.Custody.StateRoot, cp.LeaseId, cp.Index, cp.StateRoot)
	}
	fmt.Fprintf(f.log, "checkpoint %d/%d of job %d (steps %d..%d): %d bytes in %d+%d pieces of %d bytes, %d pieces held\n",
		cp.LeaseId, cp.Index, jobID, cp.StartStep, cp.EndStep, obj.Layout.StateSize, obj.Layout.DataPieces, obj.Layout.ParityPieces, obj.Layout.PieceSize, obj.Live())
	if err := f.rebuild(ctx, obj, cp.StateRoot, filepath.Join(out, fetchedStateFile)); err != nil {
		return err
	}
	info := FetchedCheckpoint{
		JobID: jobID, LeaseID: cp.LeaseId, Index: cp.Index, StartStep: cp.StartStep, EndStep: cp.EndStep,
		StateRoot: fmt.Sprintf("%x", cp.StateRoot), StateBytes: obj.Layout.StateSize, CustodyObject: obj.DatasetID,
		Holders: obj.Live(), DataPieces: obj.Layout.DataPieces, ParityPieces: obj.Layout.ParityPieces,
	}
	if err := writeFetchedInfo(out, fetchedInfoFile, info); err != nil {
		return err
	}
	fmt.Fprintf(f.log, "verified: state root %x; wrote %s\n", cp.StateRoot, filepath.Join(out, fetchedStateFile))
	return nil
}

// rebuild downloads custody object obj from its holders into path (through a
// temporary file beside it) and keeps it only if the rebuilt file's root is want.
func (f *jobFetch) rebuild(ctx context.Context, obj fetch.Object, want []byte, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fetch-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	fetcher := f.fetcher
	if f.bar {
		finish := f.progress(&fetcher, obj)
		defer finish()
	}
	if err := fetcher.Rebuild(ctx, obj, tmp); err != nil {
		return err
	}
	// The data pieces were each checked against their roots, whose tree the chain checked
	// against the object's root; hashing the file once more checks it as written.
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	root, _, err := merkle.ParallelStreamRoot(tmp, custody.ChunkSize, 0)
	if err != nil {
		return err
	}
	if !bytes.Equal(root[:], want) {
		return fmt.Errorf("the file rebuilt from custody object %s has root %x, the chain's is %x", obj.DatasetID, root[:], want)
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// fromTrainer fetches checkpoint cp of a job without custody from the checkpoint
// server of the provider that trained it (its URI on chain), which serves states only
// to signed requests: the owner's key signs. The state is checked against cp's
// state_root as it arrives and written only if it matches.
func (f *jobFetch) fromTrainer(ctx context.Context, jobID uint64, cp verifytypes.Checkpoint, out string) error {
	base, ref, err := checkpoint.ParseURI(cp.Uri)
	if err != nil {
		return err
	}
	root, err := merkle.HashFromBytes(cp.StateRoot)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(f.log, "checkpoint %d/%d of job %d (steps %d..%d): from its trainer at %s (the job keeps no custody)\n",
		cp.LeaseId, cp.Index, jobID, cp.StartStep, cp.EndStep, cp.Uri)
	c := checkpoint.Client{BaseURL: base, Authorize: f.fetcher.Authorize}
	com, err := c.DownloadState(ctx, ref, root, filepath.Join(out, fetchedStateFile), maxFetchedStateBytes)
	if err != nil {
		return err
	}
	info := FetchedCheckpoint{
		JobID: jobID, LeaseID: cp.LeaseId, Index: cp.Index, StartStep: cp.StartStep, EndStep: cp.EndStep,
		StateRoot: fmt.Sprintf("%x", cp.StateRoot), StateBytes: uint64(com.Size),
	}
	if err := writeFetchedInfo(out, fetchedInfoFile, info); err != nil {
		return err
	}
	fmt.Fprintf(f.log, "verified: state root %x; wrote %s\n", root[:], filepath.Join(out, fetchedStateFile))
	return nil
}

// maxFetchedStateBytes bounds a state downloaded from a trainer (the sidecar's bound on
// the states it downloads): a server cannot fill the disk.
const maxFetchedStateBytes = 64 << 30

// writeFetchedInfo writes info (FetchedCheckpoint or FetchedGlobal) as DIR/name.
func writeFetchedInfo(out, name string, info any) error {
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, name), append(data, '\n'), 0o644)
}

// checkpoint is the job's checkpoint to fetch: the final one ending at step, or with
// step 0 the final one that ends last; in custody when custody is set.
func (f *jobFetch) checkpoint(ctx context.Context, jobID, step uint64, custody bool) (verifytypes.Checkpoint, error) {
	leases, err := f.market.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: jobID})
	if err != nil {
		return verifytypes.Checkpoint{}, err
	}
	var best *verifytypes.Checkpoint
	for _, l := range leases.Leases {
		cps, err := f.verify.Checkpoints(ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: l.Id})
		if err != nil {
			return verifytypes.Checkpoint{}, err
		}
		for _, cp := range cps.Checkpoints {
			if cp.Status != verifytypes.CHECKPOINT_STATUS_FINAL || (custody && cp.CustodyId == "") {
				continue
			}
			if (step == 0 || cp.EndStep == step) && (best == nil || cp.EndStep > best.EndStep) {
				best = &cp
			}
		}
	}
	if best == nil {
		where := ""
		if custody {
			where = " in custody"
		}
		if step != 0 {
			return verifytypes.Checkpoint{}, fmt.Errorf("job %d has no final checkpoint%s ending at step %d", jobID, where, step)
		}
		return verifytypes.Checkpoint{}, fmt.Errorf("job %d has no final checkpoint%s yet", jobID, where)
	}
	return *best, nil
}

// progress draws bars of bytes and pieces on stderr while the fetcher reads, and
// returns what finishes them.
func (f *jobFetch) progress(fetcher *fetch.Fetcher, obj fetch.Object) func() {
	need := int64(0)
	for i := range obj.Layout.DataPieces {
		need += int64(obj.Layout.PieceBytes(i))
	}
	bytesBar := progressbar.NewOptions64(need, progressbar.OptionSetWriter(f.log), progressbar.OptionShowBytes(true),
		progressbar.OptionSetDescription("bytes "), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond))
	var mu sync.Mutex
	pieces := 0
	fetcher.Progress = func(n int64, done bool) {
		mu.Lock()
		defer mu.Unlock()
		bytesBar.Add64(n) //nolint:errcheck // drawing only
		if done {
			pieces++
			bytesBar.Describe(fmt.Sprintf("pieces %d/%d ", pieces, obj.Layout.DataPieces))
		}
	}
	return func() { bytesBar.Finish() } //nolint:errcheck // drawing only
}

package leases

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/datasets"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/gpu"
	"github.com/depinchain/depinchain/provider/internal/roletest"
	"github.com/depinchain/depinchain/provider/metrics"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

const (
	operator  = "depin1operator"
	publicURL = "http://provider.example.com:8080"
)

// noGPUs is a host without GPUs: the reference runtime needs none.
type noGPUs struct{}

func (noGPUs) Healthy() []gpu.GPU                             { return nil }
func (noGPUs) UnhealthyLeased(uuids []string) []gpu.Unhealthy { return nil }

// fakeData stands in for the datasets fetcher: it writes the built-in
// corpus as the worker's one data file, or fails with err.
type fakeData struct {
	err   error
	calls []string // "job/worker"
	// weights is what PrepareWhole writes: a whole dataset's one file.
	weights []byte
}

func (d *fakeData) PrepareWhole(_ context.Context, datasetID, dir string) (datasets.Result, error) {
	d.calls = append(d.calls, "whole/"+datasetID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return datasets.Result{}, err
	}
	name := datasets.FileName(0, 0, 0)
	return datasets.Result{Files: []string{name}}, os.WriteFile(filepath.Join(dir, name), d.weights, 0o644)
}

func (d *fakeData) Prepare(_ context.Context, job markettypes.Job, worker uint32, dir string) (datasets.Result, error) {
	d.calls = append(d.calls, fmt.Sprintf("%d/%d", job.Id, worker))
	if d.err != nil {
		return datasets.Result{}, d.err
	}
	name := datasets.FileName(0, 0, 0)
	return datasets.Result{Files: []string{name}}, os.WriteFile(filepath.Join(dir, name), verifytypes.BuiltinData().Bytes, 0o644)
}

type harness struct {
	data    *fakeData
	role    *Role
	db      *db.DB
	chain   *roletest.Chain
	cat     *checkpoint.Catalog
	metrics *metrics.Metrics
}

func newHarness(t *testing.T, hooks Hooks) *harness {
	t.Helper()
	st := roletest.OpenDB(t)
	h := &harness{db: st, chain: roletest.NewChain(), cat: checkpoint.NewCatalog(time.Hour), metrics: metrics.New("test"), data: &fakeData{}}
	var err error
	h.role, err = New(Options{
		Operator: operator, Submit: h.chain.Submit, Chain: h.chain, DB: st, Catalog: h.cat, GPUs: noGPUs{},
		Runtimes: config.Runtimes{Reference: true}, WorkDir: t.TempDir(), PublicURL: publicURL,
		Data: h.data, Metrics: h.metrics, Hooks: hooks,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.role.Close() })
	return h
}

// won puts a reference job of steps steps, a checkpoint every interval, and
// the operator's active lease 1 on it on chain and in the database.
func (h *harness) won(t *testing.T, steps, interval uint64) {
	t.Helper()
	h.chain.Jobs[1] = markettypes.Job{Id: 1, Seed: bytes.Repeat([]byte{5}, 32), State: markettypes.JOB_STATE_LEASED,
		Spec: markettypes.JobSpec{TotalSteps: steps, CheckpointInterval: interval, Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_REFERENCE}}}
	h.chain.LeaseByID[1] = markettypes.Lease{Id: 1, JobId: 1, Provider: operator, State: markettypes.LEASE_STATE_ACTIVE}
	h.handle(t, chain.Event{Height: 3, Message: &markettypes.EventLeaseCreated{LeaseId: 1, JobId: 1, Provider: operator, Gpus: 0}})
}

// handle feeds events to the role in one transaction and returns what it
// asks to do after, not run.
func (h *harness) handle(t *testing.T, evs ...chain.Event) []func() {
	t.Helper()
	return roletest.Deliver(t, h.db, h.role, evs...)
}

func (h *harness) checkpoints(t *testing.T) []db.CheckpointRecord {
	t.Helper()
	var cps []db.CheckpointRecord
	if err := h.db.View(func(tx *db.Tx) (err error) {
		cps, err = tx.Checkpoints(1)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return cps
}

// A won reference lease is trained in process and every checkpoint is
// committed, retained and submitted in order, with its URI on the
// provider's server; a second attempt submits nothing again.
func TestServeTrainsAndSubmitsEveryCheckpoint(t *testing.T) {
	h := newHarness(t, Hooks{})
	h.won(t, 12, 4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.role.serve(ctx, 1); err != nil {
		t.Fatal(err)
	}
	subs := roletest.SentOf[*verifytypes.MsgSubmitCheckpoint](h.chain)
	if len(subs) != 3 {
		t.Fatalf("submitted %d checkpoints, want 3 (12 steps every 4)", len(subs))
	}
	for i, m := range subs {
		ref := checkpoint.Ref{LeaseID: 1, Index: uint64(i)}
		if m.Index != uint64(i) || m.StartStep != uint64(4*i) || m.EndStep != uint64(4*i+4) || m.Uri != checkpoint.URI(publicURL, ref) {
			t.Fatalf("checkpoint %d: %+v", i, m)
		}
		entry, ok := h.cat.Lookup(ref)
		if !ok || !bytes.Equal(entry.Commitment.State.Root[:], m.StateRoot) || !bytes.Equal(entry.Commitment.TraceRoot[:], m.TraceRoot) {
			t.Fatalf("checkpoint %d is not retained as committed", i)
		}
	}
	if i := len(subs) - 1; i > 0 && !bytes.Equal(subs[i].FinalHash, h.chain.Cps[[2]uint64{1, uint64(i)}].FinalHash) {
		t.Fatal("the fake chain has another final hash than submitted")
	}
	cps := h.checkpoints(t)
	if len(cps) != 3 || cps[2].Status != db.CheckpointSubmitted || cps[2].Height != 10 {
		t.Fatalf("records %+v", cps)
	}
	// A restart finds everything on chain: it trains and sends nothing.
	if err := h.role.serve(ctx, 1); err != nil || len(h.chain.Sent()) != 3 {
		t.Fatalf("second attempt: %v, %d messages in all", err, len(h.chain.Sent()))
	}
}

// A dataset-backed lease trains only after its worker's data is in the data
// folder; when the data cannot be had, no trainer starts and the error says
// why.
func TestDatasetLeaseTrainsOnFetchedData(t *testing.T) {
	h := newHarness(t, Hooks{})
	h.won(t, 4, 4)
	job := h.chain.Jobs[1]
	job.Spec.DatasetId, job.Spec.Workers = "fortunes", 3
	h.chain.Jobs[1] = job
	chainLease := h.chain.LeaseByID[1]
	chainLease.Worker = 2
	h.chain.LeaseByID[1] = chainLease

	h.data.err = errors.New("the job's training data cannot be fetched: shard 4 of dataset \"fortunes\": 1 of its 3 pieces could be had intact")
	err := h.role.serve(context.Background(), 1)
	if err == nil || !strings.Contains(err.Error(), "shard 4") || !strings.Contains(err.Error(), "worker 2") {
		t.Fatalf("serve without data: %v", err)
	}
	if len(h.chain.Sent()) != 0 {
		t.Fatalf("sent %v without training data", h.chain.Sent())
	}

	h.data.err = nil
	if err := h.role.serve(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.data.calls, []string{"1/2", "1/2"}) {
		t.Fatalf("prepare calls %v", h.data.calls)
	}
	if subs := roletest.SentOf[*verifytypes.MsgSubmitCheckpoint](h.chain); len(subs) != 1 {
		t.Fatalf("submitted %d checkpoints, want 1", len(subs))
	}

	// Without a fetcher the lease fails for good.
	h.role.opts.Data = nil
	if err := h.role.prepareData(context.Background(), &lease{job: job}); !errors.Is(err, errPermanent) {
		t.Fatalf("no fetcher: %v", err)
	}
}

// The commit-trace hook (the fraud demo's cheater) decides what is
// committed; what it commits is kept beside the trainer's trace, so the
// defence opens it. The pause hook is reached before each submission.
func TestHooksChangeWhatIsCommitted(t *testing.T) {
	var before []uint64
	fake := merkle.Hash(sha256.Sum256([]byte("made up")))
	h := newHarness(t, Hooks{
		CommitTrace: func(_ markettypes.Job, cp trainer.Checkpoint) (trace.Trace, error) {
			hashes := slices.Clone(cp.Trace.Hashes)
			hashes[len(hashes)-1] = fake
			return trace.New(cp.StartStep(), hashes), nil
		},
		BeforeCheckpoint: func(_ context.Context, leaseID, index uint64) { before = append(before, index) },
	})
	h.won(t, 4, 4)
	if err := h.role.serve(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	subs := roletest.SentOf[*verifytypes.MsgSubmitCheckpoint](h.chain)
	if len(subs) != 1 || !bytes.Equal(subs[0].FinalHash, fake[:]) || !slices.Equal(before, []uint64{0}) {
		t.Fatalf("submitted %+v, pause points %v", subs, before)
	}
	entry, _ := h.cat.Lookup(checkpoint.Ref{LeaseID: 1, Index: 0})
	committed, err := checkpoint.ReadCommittedTrace(entry.Dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if root := committed.Root(); !bytes.Equal(root[:], subs[0].TraceRoot) {
		t.Fatal("the committed trace kept in the folder is not the one on chain")
	}
}

// The last checkpoint's submission fails (here its commitment): the attempt is an
// error, not "every checkpoint submitted", although the trainer wrote it (a lease whose
// last checkpoint never reaches the chain would otherwise sit until its deadline).
func TestAFailedLastSubmissionIsAnError(t *testing.T) {
	h := newHarness(t, Hooks{
		CommitTrace: func(markettypes.Job, trainer.Checkpoint) (trace.Trace, error) {
			return trace.Trace{}, errors.New("no commitment today")
		},
	})
	h.won(t, 4, 4)
	if err := h.role.serve(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "no commitment today") {
		t.Fatalf("serve: %v, want the submission's error", err)
	}
	if subs := roletest.SentOf[*verifytypes.MsgSubmitCheckpoint](h.chain); len(subs) != 0 {
		t.Fatalf("submitted %d checkpoints", len(subs))
	}
}

// A checkpoint the chain has under the lease's next index but with another
// hash cannot be served: the attempt fails for good, and sends nothing.
func TestAChainCheckpointThatIsNotTheLocalOneIsPermanent(t *testing.T) {
	h := newHarness(t, Hooks{})
	h.won(t, 8, 4)
	// The chain's checkpoint 0 is not what the local folder holds (the
	// folder changed after it was committed).
	other := verifytypes.Checkpoint{LeaseId: 1, Index: 0, EndStep: 4, FinalHash: bytes.Repeat([]byte{7}, 32)}
	dir := t.TempDir()
	state := []byte("state")
	h4 := merkle.Hash(sha256.Sum256(state))
	if _, err := trainer.WriteCheckpoint(dir, 4, state, []merkle.Hash{{1}, {2}, {3}, {4}, h4}); err != nil {
		t.Fatal(err)
	}
	cp, err := trainer.ReadCheckpoint(trainer.CheckpointDir(dir, 4), 4)
	if err != nil {
		t.Fatal(err)
	}
	h.chain.Cps[[2]uint64{1, 0}] = other
	var rec db.LeaseRecord
	if err := h.db.View(func(tx *db.Tx) (err error) { rec, _, err = tx.Lease(1); return err }); err != nil {
		t.Fatal(err)
	}
	err = h.role.submitCheckpoint(context.Background(), rec, 0, cp, nil, nil)
	if !errors.Is(err, errPermanent) || len(h.chain.Sent()) != 0 {
		t.Fatalf("err %v, sent %v", err, h.chain.Sent())
	}
}

// Events: only the operator's leases are recorded; a closed lease is
// closed; the operator's final checkpoint asks for a withdrawal, other
// providers' change nothing.
func TestHandleEventKeepsTheOperatorsLeases(t *testing.T) {
	h := newHarness(t, Hooks{})
	if after := h.handle(t, chain.Event{Height: 3, Message: &markettypes.EventLeaseCreated{LeaseId: 2, JobId: 2, Provider: "depin1other"}}); len(after) != 0 {
		t.Fatal("another provider's lease asked for work")
	}
	h.won(t, 8, 4)
	var rec db.LeaseRecord
	var ok bool
	read := func() {
		if err := h.db.View(func(tx *db.Tx) (err error) { rec, ok, err = tx.Lease(1); return err }); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if !ok || rec.Status != db.LeaseActive || rec.Dir == "" || rec.UpdatedHeight != 3 {
		t.Fatalf("lease record %+v", rec)
	}
	if err := h.db.Update(func(tx *db.Tx) error {
		return tx.PutCheckpoint(db.CheckpointRecord{LeaseID: 1, Index: 0, EndStep: 4, Status: db.CheckpointSubmitted})
	}); err != nil {
		t.Fatal(err)
	}
	if after := h.handle(t, chain.Event{Height: 5, Message: &verifytypes.EventCheckpointFinalized{LeaseId: 7, Index: 0, Released: sdk.NewInt64Coin("udepin", 1)}}); len(after) != 0 {
		t.Fatal("another provider's final checkpoint asked for work")
	}
	after := h.handle(t, chain.Event{Height: 5, Message: &verifytypes.EventCheckpointFinalized{LeaseId: 1, Index: 0, Released: sdk.NewInt64Coin("udepin", 1)}})
	if len(after) != 1 || h.checkpoints(t)[0].Status != db.CheckpointFinalized {
		t.Fatalf("the operator's final checkpoint: %d actions, records %+v", len(after), h.checkpoints(t))
	}
	after[0]()
	if h.role.withdraw.Len() != 1 {
		t.Fatal("a final checkpoint asked for no withdrawal")
	}
	h.handle(t, chain.Event{Height: 9, Message: &markettypes.EventLeaseClosed{LeaseId: 1, JobId: 1, Reason: markettypes.LEASE_CLOSE_REASON_COMPLETED}})
	read()
	if rec.Status != db.LeaseClosed || rec.CloseReason != "LEASE_CLOSE_REASON_COMPLETED" || rec.UpdatedHeight != 9 {
		t.Fatalf("closed lease %+v", rec)
	}
}

// Earnings: every lease with something released is withdrawn in one
// message; nothing released sends nothing.
func TestWithdrawEarnings(t *testing.T) {
	h := newHarness(t, Hooks{})
	h.chain.LeaseByID[1] = markettypes.Lease{Id: 1, Provider: operator, Withdrawable: sdk.NewInt64Coin("udepin", 0)}
	if err := h.role.withdrawEarnings(context.Background()); err != nil || len(h.chain.Sent()) != 0 {
		t.Fatalf("nothing released: %v, sent %v", err, h.chain.Sent())
	}
	h.chain.LeaseByID[2] = markettypes.Lease{Id: 2, Provider: operator, Withdrawable: sdk.NewInt64Coin("udepin", 5)}
	h.chain.LeaseByID[3] = markettypes.Lease{Id: 3, Provider: operator, Withdrawable: sdk.NewInt64Coin("udepin", 7)}
	if err := h.role.withdrawEarnings(context.Background()); err != nil {
		t.Fatal(err)
	}
	w := roletest.SentOf[*markettypes.MsgWithdrawEarnings](h.chain)
	if len(w) != 1 || !slices.Equal(w[0].LeaseIds, []uint64{2, 3}) {
		t.Fatalf("withdrawals %+v", w)
	}
}

// deadlineSeries returns depinprovider_lease_checkpoint_deadline_height by lease.
func (h *harness) deadlineSeries(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := h.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "depinprovider_lease_checkpoint_deadline_height" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "lease" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

func (h *harness) leaseRecord(t *testing.T, id uint64) db.LeaseRecord {
	t.Helper()
	var rec db.LeaseRecord
	if err := h.db.View(func(tx *db.Tx) (err error) {
		rec, _, err = tx.Lease(id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return rec
}

// The checkpoint deadline an operator is alerted on follows the chain: the
// lease's first deadline from its creation event, each later one (moved on by
// every accepted checkpoint, which no event reports) read back from the chain,
// and nothing once the lease closed.
func TestCheckpointDeadlineFollowsTheChain(t *testing.T) {
	h := newHarness(t, Hooks{})
	h.chain.Jobs[1] = markettypes.Job{Id: 1, Seed: bytes.Repeat([]byte{5}, 32), State: markettypes.JOB_STATE_LEASED,
		Spec: markettypes.JobSpec{TotalSteps: 10, CheckpointInterval: 5, Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_REFERENCE}}}
	h.chain.LeaseByID[1] = markettypes.Lease{Id: 1, JobId: 1, Provider: operator, State: markettypes.LEASE_STATE_ACTIVE, CheckpointDeadline: 603}
	h.handle(t, chain.Event{Height: 3, Message: &markettypes.EventLeaseCreated{LeaseId: 1, JobId: 1, Provider: operator, CheckpointDeadline: 603}})
	if got := h.deadlineSeries(t); len(got) != 1 || got["1"] != 603 {
		t.Fatalf("deadline after the lease was won: %v, want lease 1 at 603", got)
	}

	// A checkpoint at height 700 moved the deadline to 1300 on chain.
	lease := h.chain.LeaseByID[1]
	lease.CheckpointDeadline = 1300
	h.chain.LeaseByID[1] = lease
	h.role.refreshDeadlines(context.Background())
	if got := h.deadlineSeries(t); got["1"] != 1300 {
		t.Fatalf("deadline after refresh: %v, want 1300", got)
	}
	if rec := h.leaseRecord(t, 1); rec.CheckpointDeadline != 1300 {
		t.Errorf("database deadline %d, want 1300", rec.CheckpointDeadline)
	}

	// The chain cannot be read: the last known deadline stays.
	delete(h.chain.LeaseByID, 1)
	h.role.refreshDeadlines(context.Background())
	if got := h.deadlineSeries(t); got["1"] != 1300 {
		t.Fatalf("deadline after a failed read: %v, want 1300 kept", got)
	}

	// Closed: the series goes, so no alert fires for a lease that is gone.
	h.handle(t, chain.Event{Height: 1400, Message: &markettypes.EventLeaseClosed{LeaseId: 1, JobId: 1, Provider: operator,
		Reason: markettypes.LEASE_CLOSE_REASON_COMPLETED}})
	if got := h.deadlineSeries(t); len(got) != 0 {
		t.Fatalf("deadline series after the lease closed: %v", got)
	}
}

// A fine-tuning job's weights are fetched whole, imported, and must import to the
// spec's init_state_root before the trainer starts from them; otherwise the lease fails
// for good (its h_0 could never be matched).
func TestInitWeightsAreCheckedAgainstTheSpec(t *testing.T) {
	h := newHarness(t, Hooks{})
	cfg := exact.Config{
		Model: exact.ModelConfig{Layers: 1, DModel: 16, Heads: 2, DFF: 32, Context: 8, Vocab: exact.Vocab},
		Train: exact.TrainConfig{Batch: 2, Optimizer: exact.OptimizerAdamW, LR: 0.001},
	}.WithDefaults()
	pretrained, err := exact.Init(cfg, []byte("someone else's pretraining"))
	if err != nil {
		t.Fatal(err)
	}
	exported := t.TempDir()
	if err := exact.Export(pretrained, exported); err != nil {
		t.Fatal(err)
	}
	if h.data.weights, err = os.ReadFile(filepath.Join(exported, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	imported, err := exact.ImportSafetensors(cfg, filepath.Join(exported, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	root := imported.Root()
	job := markettypes.Job{Id: 9, Seed: []byte("seed"), Spec: markettypes.JobSpec{Workload: markettypes.Workload{
		Kind: markettypes.WORKLOAD_KIND_TRANSFORMER, Transformer: markettypes.NewTransformerConfig(cfg),
		InitWeights: "base-model", InitStateRoot: root[:],
	}}}
	l := &lease{job: job, rec: db.LeaseRecord{Dir: t.TempDir()}}
	if err := h.role.prepareData(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if got, err := exact.ImportSafetensors(cfg, l.weightsFile()); err != nil || got.Root() != root {
		t.Fatalf("the weights file left for the trainer: %v", err)
	}
	if !slices.Contains(h.data.calls, "whole/base-model") {
		t.Fatalf("fetches %v, want the whole weights dataset", h.data.calls)
	}

	job.Spec.Workload.InitStateRoot = bytes.Repeat([]byte{7}, 32)
	l = &lease{job: job, rec: db.LeaseRecord{Dir: t.TempDir()}}
	if err := h.role.prepareData(context.Background(), l); !errors.Is(err, errPermanent) || !strings.Contains(err.Error(), "not the spec's init_state_root") {
		t.Fatalf("weights importing to another root: %v", err)
	}
}

// A challenge opened a block after the submission can reach the follower
// before the submitter records the checkpoint: the record still says
// challenged (a restart marks it disputed in the catalog from that).
func TestAChallengeSeenBeforeTheRecordIsKept(t *testing.T) {
	h := newHarness(t, Hooks{})
	h.won(t, 4, 4)
	submit := h.role.opts.Submit
	h.role.opts.Submit = func(ctx context.Context, msg sdk.Msg) (*chain.TxResult, error) {
		res, err := submit(ctx, msg)
		if m, ok := msg.(*verifytypes.MsgSubmitCheckpoint); ok && err == nil {
			h.handle(t, chain.Event{Height: res.Height + 1, Message: &verifytypes.EventChallengeOpened{
				ChallengeId: 7, LeaseId: m.LeaseId, CheckpointIndex: m.Index, Provider: m.Provider, Challenger: "depin1other"}})
		}
		return res, err
	}
	if err := h.role.serve(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cps := h.checkpoints(t)
	if len(cps) != 1 || cps[0].Status != db.CheckpointChallenged {
		t.Fatalf("checkpoint records %+v: want checkpoint 0 challenged", cps)
	}
	// Another provider's checkpoint is not remembered.
	h.handle(t, chain.Event{Message: &verifytypes.EventCheckpointRejected{LeaseId: 9, Index: 0}})
	if len(h.role.unrecorded) != 0 {
		t.Fatalf("statuses kept for checkpoints without records: %v", h.role.unrecorded)
	}
}

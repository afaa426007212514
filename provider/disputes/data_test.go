package disputes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/internal/roletest"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// datasetJob is referenceJob training on a dataset: its steps read the worker's data
// pieces, which the chain does not have.
func datasetJob(id uint64) markettypes.Job {
	job := referenceJob()
	job.Id, job.Spec.DatasetId = id, "unit-dataset"
	return job
}

// datasetStream is a worker's stream of two data pieces, text that is not the built-in
// corpus.
func datasetStream(t *testing.T) traindata.Stream {
	t.Helper()
	var segs []traindata.Segment
	var all []byte
	for i := range 2 {
		piece := []byte(strings.Repeat(fmt.Sprintf("piece %d of the unit dataset, which is not the built-in corpus. ", i), 300))
		segs = append(segs, traindata.Segment{Root: merkle.RootOfBytes(piece, verifytypes.DataChunkSize), Size: uint64(len(piece)), ChunkSize: verifytypes.DataChunkSize})
		all = append(all, piece...)
	}
	s, err := traindata.NewStream(traindata.NewLayout(segs), all)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeDatasets serves every worker of a dataset job the same stream, or fails.
type fakeDatasets struct {
	stream   traindata.Stream
	err      error
	calls    int
	cacheDir string
}

func (f *fakeDatasets) WorkerStream(_ context.Context, _ markettypes.Job, _ uint32, _ uint64, cacheDir string) (traindata.Stream, error) {
	f.calls++
	f.cacheDir = cacheDir
	return f.stream, f.err
}

// datasetCheckpoint is provider's checkpoint of steps 0..8 of job as exec computed them.
func datasetCheckpoint(job markettypes.Job, lease uint64, provider string, exec *Execution) verifytypes.Checkpoint {
	root := exec.Trace.Root()
	return verifytypes.Checkpoint{LeaseId: lease, JobId: job.Id, Provider: provider, StartStep: 0, EndStep: 8,
		TraceRoot: root[:], FinalHash: exec.Trace.Hashes[8][:], ChallengeDeadline: 100}
}

// A verifier re-executes a dataset job on the worker's data pieces (fetched once for the
// lease's checkpoints): it matches an honest checkpoint, challenges a fabricated one and
// proves the disputed step, or commits its records, with that data. A fetch that fails
// is recorded as a failed check that says so, and no challenge.
func TestVerifierChallengesADatasetCheckpointOnItsWorkersPieces(t *testing.T) {
	h := newHarness(t, true)
	data := &fakeDatasets{stream: datasetStream(t)}
	h.role.opts.Datasets = data
	job := datasetJob(1)
	h.chain.Jobs[1] = job
	start, err := InitialState(job)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := Reexecute(job, data.stream, start, 0, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	onCorpus, err := Reexecute(job, chainData(t, referenceJob(), 0, 0), start, 0, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	if onCorpus.Trace.Root() == exec.Trace.Root() {
		t.Fatal("the dataset's steps are the built-in corpus's: the test cannot tell which data the verifier read")
	}
	cp := datasetCheckpoint(job, 1, other, exec)
	h.chain.Cps[[2]uint64{1, 0}] = cp
	if err := h.role.verifyCheckpoint(context.Background(), checkpoint.Ref{LeaseID: 1}); err != nil {
		t.Fatal(err)
	}
	if rec := h.verification(t, 1, 0); rec.Result != db.VerificationMatched || len(h.chain.Sent()) != 0 {
		t.Fatalf("an honest dataset checkpoint: %+v, sent %v", rec, h.chain.Sent())
	}
	if want := filepath.Join(h.role.opts.WorkDir, datasetCacheDir); data.calls != 1 || data.cacheDir != want {
		t.Fatalf("fetched %d times into %q, want once into %q", data.calls, data.cacheDir, want)
	}

	lie := merkle.Hash{0xab}
	cp.Index, cp.FinalHash = 1, lie[:]
	h.chain.Cps[[2]uint64{1, 1}] = cp
	if err := h.role.verifyCheckpoint(context.Background(), checkpoint.Ref{LeaseID: 1, Index: 1}); err != nil {
		t.Fatal(err)
	}
	rec := h.verification(t, 1, 1)
	challenges := roletest.SentOf[*verifytypes.MsgChallenge](h.chain)
	if root := exec.Trace.Root(); rec.Result != db.VerificationMismatched || rec.ChallengeID != 1 || len(challenges) != 1 || !bytes.Equal(challenges[0].TraceRoot, root[:]) {
		t.Fatalf("a fabricated dataset checkpoint: %+v, challenges %+v", rec, challenges)
	}
	if data.calls != 1 {
		t.Fatalf("the lease's second checkpoint fetched its data again (%d fetches)", data.calls)
	}

	// The one-step proof carries the dataset's chunks that step 3 reads.
	h.chain.ChallengeBy[1] = verifytypes.Challenge{Id: 1, LeaseId: 1, CheckpointIndex: 1, Provider: other, Challenger: operator,
		Lo: 3, Hi: 4, Turn: verifytypes.GAME_TURN_ONE_STEP, Deadline: 50}
	if err := h.role.play(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cfg, err := verifytypes.JobConfig(job)
	if err != nil {
		t.Fatal(err)
	}
	wantChunks, err := verifytypes.StepData(data.stream, cfg, job.Seed, 3)
	if err != nil {
		t.Fatal(err)
	}
	steps := roletest.SentOf[*verifytypes.MsgStep](h.chain)
	if len(steps) != 1 || !reflect.DeepEqual(steps[0].Data, wantChunks) {
		t.Fatalf("one-step proofs %d, want one proving the dataset's chunks of step 3", len(steps))
	}
	// Above max_step_macs: phase 2's records of step 3 on the dataset.
	h.chain.VerifyParamsValue.MaxStepMacs = uint64(exact.ReferenceConfig().MACsPerStep()) - 1
	if err := h.role.play(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	h.requireDatasetRecords(t, 1, job, data.stream, exec)

	// Another job whose pieces cannot be had: the check fails and says why.
	h.chain.Jobs[2] = datasetJob(2)
	h.chain.Cps[[2]uint64{2, 0}] = datasetCheckpoint(datasetJob(2), 2, other, exec)
	data.err = errors.New(`could not fetch dataset "unit-dataset" shard 1: 1 of its 3 pieces could be had intact`)
	sent := len(h.chain.Sent())
	if err := h.role.verifyCheckpoint(context.Background(), checkpoint.Ref{LeaseID: 2}); err != nil {
		t.Fatal(err)
	}
	if rec := h.verification(t, 2, 0); rec.Result != db.VerificationFailed || !strings.Contains(rec.Detail, `could not fetch dataset "unit-dataset" shard 1`) || len(h.chain.Sent()) != sent {
		t.Fatalf("a dataset that cannot be fetched: %+v, sent %d more", rec, len(h.chain.Sent())-sent)
	}

	// A sidecar without a fetcher skips dataset jobs.
	h.role.opts.Datasets = nil
	if result, detail := h.role.unverifiable(job); result != db.VerificationSkipped || !strings.Contains(detail, "no dataset fetcher") {
		t.Fatalf("without a fetcher: %s %q", result, detail)
	}
}

// The defender of a dataset checkpoint executes the disputed step for phases 2–3 on the
// same pieces.
func TestDefenderCommitsRecordsOfADatasetStep(t *testing.T) {
	h := newHarness(t, false)
	data := &fakeDatasets{stream: datasetStream(t)}
	h.role.opts.Datasets = data
	job := datasetJob(1)
	start, err := InitialState(job)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := Reexecute(job, data.stream, start, 0, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.addCheckpointFolder(t, exec)
	h.chain.Jobs[1] = job
	h.chain.Cps[[2]uint64{1, 0}] = datasetCheckpoint(job, 1, operator, exec)
	h.chain.ChallengeBy[4] = verifytypes.Challenge{Id: 4, LeaseId: 1, Provider: operator, Challenger: other,
		Lo: 5, Hi: 6, Turn: verifytypes.GAME_TURN_TILE_PROVIDER, Deadline: 50}
	h.chain.TileGames[4] = verifytypes.TileGame{ChallengeId: 4, Phase: verifytypes.TILE_PHASE_RECORDS}
	if err := h.role.play(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	h.requireDatasetRecords(t, 4, job, data.stream, exec)
}

// requireDatasetRecords checks that the role sent one phase 2 commitment, the record root
// of challenge id's disputed step executed on the dataset's stream from exec's states.
func (h *harness) requireDatasetRecords(t *testing.T, id uint64, job markettypes.Job, stream traindata.Stream, exec *Execution) {
	t.Helper()
	g := dispute.Game{Challenge: h.chain.ChallengeBy[id], Job: job, Data: func() (traindata.Stream, error) { return stream, nil }}
	want, err := dispute.StepParty(g, exec.StateAt)
	if err != nil {
		t.Fatal(err)
	}
	if commits := roletest.SentOf[*verifytypes.MsgCommitRecords](h.chain); len(commits) != 1 || !bytes.Equal(commits[0].RecordRoot, want.C.Root[:]) {
		t.Fatalf("phase 2 commitments %+v, want the record root %s of step %d on the dataset", commits, want.C.Root, h.chain.ChallengeBy[id].Lo)
	}
}

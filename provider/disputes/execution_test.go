package disputes_test

import (
	"bytes"
	"testing"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/provider/disputes"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

func testJob() markettypes.Job {
	return markettypes.Job{Id: 7, Seed: bytes.Repeat([]byte{3}, 32),
		Spec: markettypes.JobSpec{Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_REFERENCE}}}
}

func execution(t *testing.T, start, end uint64) *disputes.Execution {
	t.Helper()
	job := testJob()
	s, err := disputes.InitialState(job)
	if err != nil {
		t.Fatal(err)
	}
	if start > 0 {
		pre, err := disputes.Reexecute(job, verifytypes.BuiltinData(), s, 0, start, nil)
		if err != nil {
			t.Fatal(err)
		}
		s = pre.End
	}
	e, err := disputes.Reexecute(job, verifytypes.BuiltinData(), s, start, end, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The re-executed trace is the chain's: h_i hashes the state StateAt(i)
// rebuilds, and a range started midway continues the trace from step 0.
func TestReexecuteMatchesStates(t *testing.T) {
	whole := execution(t, 0, 12)
	tail := execution(t, 5, 12)
	for step := uint64(5); step <= 12; step++ {
		if whole.Trace.Hashes[step] != tail.Trace.Hashes[step-5] {
			t.Fatalf("h_%d differs between a run from 0 and one from 5", step)
		}
		enc, err := tail.StateAt(step)
		if err != nil {
			t.Fatal(err)
		}
		if exact.StateRoot(enc) != tail.Trace.Hashes[step-5] {
			t.Fatalf("StateAt(%d)'s root is not h_%d", step, step)
		}
	}
	if _, err := tail.StateAt(4); err == nil {
		t.Fatal("StateAt outside the range succeeded")
	}
}

package cmd

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// roundsMarket answers the two queries `job fetch` asks before it downloads anything.
type roundsMarket struct {
	markettypes.QueryClient
	job    markettypes.Job
	rounds []markettypes.Round
}

func (m roundsMarket) Job(context.Context, *markettypes.QueryJobRequest, ...grpc.CallOption) (*markettypes.QueryJobResponse, error) {
	return &markettypes.QueryJobResponse{Job: m.job}, nil
}

func (m roundsMarket) Rounds(context.Context, *markettypes.QueryRoundsRequest, ...grpc.CallOption) (*markettypes.QueryRoundsResponse, error) {
	return &markettypes.QueryRoundsResponse{Rounds: m.rounds}, nil
}

// A fetch the chain's state cannot answer fails before it fetches or writes anything,
// with an error that names the flag or the state at fault.
func TestJobFetchRefusesWhatTheJobDoesNotHave(t *testing.T) {
	sync := &markettypes.SyncSpec{Every: 10}
	syncJob := markettypes.Job{Id: 4, Owner: "owner1", Round: 2, Spec: markettypes.JobSpec{Workers: 2, TotalSteps: 30, Sync: sync}}
	plainJob := markettypes.Job{Id: 5, Owner: "owner1", Spec: markettypes.JobSpec{Workers: 1, TotalSteps: 30}}
	final0 := markettypes.Round{JobId: 4, Round: 0, State: markettypes.ROUND_STATE_FINAL, NextGlobalRoot: make([]byte, 32)}
	window1 := markettypes.Round{JobId: 4, Round: 1, State: markettypes.ROUND_STATE_CHALLENGE, NextGlobalRoot: make([]byte, 32)}
	r := func(n uint64) *uint64 { return &n }
	for _, tc := range []struct {
		name   string
		job    markettypes.Job
		rounds []markettypes.Round
		owner  string
		step   uint64
		round  *uint64
		want   string
	}{
		{"another's job", syncJob, nil, "owner2", 0, nil, "job 4 belongs to owner1, and --from is owner2"},
		{"--round on a job without rounds", plainJob, nil, "owner1", 0, r(1), "--round: job 5 does not train in rounds"},
		{"--round with --checkpoint", syncJob, nil, "owner1", 20, r(1), "--round and --checkpoint: give one"},
		{"--round 0", syncJob, []markettypes.Round{final0}, "owner1", 0, r(0), "--round 0: G_0 is the job's initial state"},
		{"a global still in its window", syncJob, []markettypes.Round{final0, window1}, "owner1", 0, r(2), "job 4 has no final G_2 (round 1's aggregation is not final"},
		{"a round past the job's", syncJob, []markettypes.Round{final0}, "owner1", 0, r(9), "job 4 has no final G_9"},
		{"nothing final yet", syncJob, []markettypes.Round{window1}, "owner1", 0, nil, "job 4 has no final global model yet (it is at round 2 of 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			f := &jobFetch{market: roundsMarket{job: tc.job, rounds: tc.rounds}, owner: tc.owner, log: io.Discard}
			err := f.run(context.Background(), tc.job.Id, tc.step, tc.round, out)
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, tc.name == "another's job", errors.Is(err, ErrNotOwner))
			_, statErr := os.Stat(out)
			require.True(t, os.IsNotExist(statErr), "the refused fetch created %s", out)
		})
	}
}

package keeper_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/x/market/types"
)

func containerSpec(allowOperatorTrainer bool) types.JobSpec {
	s := spec()
	s.Workload = types.Workload{
		Kind: types.WORKLOAD_KIND_CONTAINER, Image: "registry.example/acme/train",
		Digest: "sha256:" + strings.Repeat("ab", 32), AllowOperatorTrainer: allowOperatorTrainer,
		Env: []types.EnvVar{{Name: "MODEL_PATH", Value: "/data/llama"}},
	}
	s.Audit = &types.AuditSpec{}
	return s
}

// A job's regions are matched against the provider's registered region (every
// test provider is in eu-west): a bid from elsewhere is refused and changes nothing.
func TestBidFromOutsideTheJobsRegionsIsRefused(t *testing.T) {
	e := newEnv(t)
	op := e.registerProvider("pv")
	s := spec()
	s.Regions = []string{"us-west", "us-east"}
	jobID := e.submitJobWith(s, jobDeposit)
	e.requireRejected(types.ErrWrongRegion, func() error {
		_, err := e.msg.PlaceBid(e.Ctx, &types.MsgPlaceBid{Provider: op.String(), JobId: jobID, PricePerGpuHour: coin(maxPrice), StepsPerHour: testRate})
		if err != nil {
			require.Contains(t, err.Error(), `is registered in region "eu-west"; job `)
			require.Contains(t, err.Error(), "accepts regions [us-west us-east]")
		}
		return err
	})

	s.Regions = []string{"us-west", "eu-west"}
	jobID = e.submitJobWith(s, jobDeposit)
	e.bid(op, jobID, maxPrice)
	require.True(t, e.hasBid(op, jobID))
}

// A container job runs the owner's image: a bid naming an operator-installed
// trainer (runtime process) is refused unless the workload allows it, and the
// lease records the runtime of the winning bid.
func TestContainerJobRuntimeIsTheOwnersChoice(t *testing.T) {
	e := newEnv(t)
	op := e.registerProvider("pv")
	jobID := e.submitJobWith(containerSpec(false), jobDeposit)
	for _, runtime := range []string{types.RuntimeProcess, types.RuntimeReference, "docker"} {
		e.requireRejected(types.ErrRuntimeNotAllowed, func() error {
			_, err := e.msg.PlaceBid(e.Ctx, &types.MsgPlaceBid{Provider: op.String(), JobId: jobID, PricePerGpuHour: coin(maxPrice), StepsPerHour: testRate, Runtime: runtime})
			return err
		})
	}
	_, err := e.msg.PlaceBid(e.Ctx, &types.MsgPlaceBid{Provider: op.String(), JobId: jobID, PricePerGpuHour: coin(maxPrice), StepsPerHour: testRate, Runtime: types.RuntimeProcess})
	require.ErrorContains(t, err, "only with workload.allow_operator_trainer: true")

	_, err = e.msg.PlaceBid(e.Ctx, &types.MsgPlaceBid{Provider: op.String(), JobId: jobID, PricePerGpuHour: coin(maxPrice), StepsPerHour: testRate, Runtime: types.RuntimeContainer})
	require.NoError(t, err)
	e.closeAuction(jobID)
	leases := e.activeLeasesOfJob(jobID)
	require.Len(t, leases, 1)
	require.Equal(t, types.RuntimeContainer, leases[0].Runtime)

	// The owner allows an operator trainer: a process bid wins and the lease says so.
	jobID = e.submitJobWith(containerSpec(true), jobDeposit)
	op2 := e.registerProvider("pv2")
	_, err = e.msg.PlaceBid(e.Ctx, &types.MsgPlaceBid{Provider: op2.String(), JobId: jobID, PricePerGpuHour: coin(maxPrice), StepsPerHour: testRate, Runtime: types.RuntimeProcess})
	require.NoError(t, err)
	e.closeAuction(jobID)
	leases = e.activeLeasesOfJob(jobID)
	require.Len(t, leases, 1)
	require.Equal(t, types.RuntimeProcess, leases[0].Runtime)
}

// A spec with a bad env or region is refused at submit with a field-level error
// and nothing is charged.
func TestSubmitJobRefusesBadEnvAndRegions(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		change func(*types.JobSpec)
		want   string
	}{
		{func(s *types.JobSpec) { s.Workload.Env = []types.EnvVar{{Name: "DEPIN_DATA_DIR", Value: "/x"}} }, "workload.env.DEPIN_DATA_DIR: not allowed"},
		{func(s *types.JobSpec) { s.Workload.Env = []types.EnvVar{{Name: "CUDA_VISIBLE_DEVICES", Value: "0"}} }, "workload.env.CUDA_VISIBLE_DEVICES: not allowed"},
		{func(s *types.JobSpec) { s.Workload.Env = []types.EnvVar{{Name: "model_path", Value: "x"}} }, `workload.env: "model_path" is not a variable name`},
		{func(s *types.JobSpec) { s.Regions = []string{"us-west", "us-west"} }, `regions[1]: "us-west" is listed twice`},
	} {
		s := containerSpec(false)
		tc.change(&s)
		e.requireRejected(types.ErrInvalidSpec, func() error {
			_, err := e.msg.SubmitJob(e.Ctx, &types.MsgSubmitJob{Owner: e.owner.String(), Spec: s, Deposit: coin(jobDeposit)})
			if err != nil {
				require.Contains(t, err.Error(), tc.want)
			}
			return err
		})
	}
}

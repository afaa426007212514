package keeper_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/testutil/keepers"
	"github.com/depinchain/depinchain/x/market/keeper"
	"github.com/depinchain/depinchain/x/market/types"
)

// transformerSpec is the default job with the exact transformer cfg as its workload.
func transformerSpec(cfg exact.Config) types.JobSpec {
	s := spec()
	s.Workload = types.Workload{Kind: types.WORKLOAD_KIND_TRANSFORMER, Transformer: types.NewTransformerConfig(cfg)}
	return s
}

func smallTransformer() exact.Config {
	return exact.Config{
		Model: exact.ModelConfig{Layers: 2, DModel: 32, Heads: 2, DFF: 64, Context: 16, Vocab: exact.Vocab},
		Train: exact.TrainConfig{Batch: 4, Optimizer: exact.OptimizerAdamW, LR: 0.003, WarmupSteps: 10, WeightDecay: 0.1},
	}
}

func TestSubmitTransformerJob(t *testing.T) {
	e := newEnv(t)
	id := e.submitJobWith(transformerSpec(smallTransformer()), jobDeposit)
	got, err := e.job(id).Spec.ExactConfig()
	require.NoError(t, err)
	require.Equal(t, smallTransformer().Hyper(), got.Hyper(), "the chain keeps the config's integer form")

	// Fine-tuning: the weights' dataset and the root of their import (h_0) are kept.
	ft := transformerSpec(smallTransformer())
	ft.Workload.InitWeights, ft.Workload.InitStateRoot = "base-model", make([]byte, 32)
	ft.Workload.InitStateRoot[0] = 9
	id = e.submitJobWith(ft, jobDeposit)
	require.Equal(t, ft.Workload.InitStateRoot, e.job(id).Spec.Workload.InitStateRoot)
}

// A transformer job the chain could not adjudicate is refused before anything is
// escrowed, with the field and the bound it exceeds named.
func TestSubmitTransformerJobRejections(t *testing.T) {
	e := newEnv(t)
	tooWide := smallTransformer()
	tooWide.Model.DModel, tooWide.Model.DFF, tooWide.Model.Layers, tooWide.Model.Heads = 4096, 16384, 32, 32 // ~6.4 B parameters
	longBatch := smallTransformer()
	longBatch.Train.Batch, longBatch.Model.Context = 1024, 128 // 131,072 tokens per step
	cases := []struct {
		name string
		spec types.JobSpec
		want string
	}{
		{"above max_transformer_params", transformerSpec(tooWide), "workload.model: parameter count is"},
		{"above max_tokens_per_step", transformerSpec(longBatch), "workload.train.batch: tokens per step (batch·context) is 131072, above the limit 65536"},
		{"heads that do not divide d_model", func() types.JobSpec {
			s := transformerSpec(smallTransformer())
			s.Workload.Transformer.Heads = 3
			return s
		}(), "model.d_model: must be divisible by model.heads (32 vs 3)"},
		{"reference with a config", func() types.JobSpec {
			s := transformerSpec(smallTransformer())
			s.Workload.Kind = types.WORKLOAD_KIND_REFERENCE
			return s
		}(), "reference is a fixed configuration"},
		{"init_state_root without the weights", func() types.JobSpec {
			s := transformerSpec(smallTransformer())
			s.Workload.InitStateRoot = make([]byte, 32)
			return s
		}(), "workload.init_weights: required with init_state_root"},
		{"init weights with a short root", func() types.JobSpec {
			s := transformerSpec(smallTransformer())
			s.Workload.InitWeights, s.Workload.InitStateRoot = "base-model", make([]byte, 31)
			return s
		}(), "workload.init_state_root: must be the 32-byte root"},
		{"init weights for the reference model", func() types.JobSpec {
			s := spec()
			s.Workload.InitWeights, s.Workload.InitStateRoot = "base-model", make([]byte, 32)
			return s
		}(), "only a transformer job starts from given weights"},
		{"transformer without a config", func() types.JobSpec {
			s := spec()
			s.Workload.Kind = types.WORKLOAD_KIND_TRANSFORMER
			return s
		}(), "kind transformer needs model and train"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := keepers.RequireRejected(t, types.ErrInvalidSpec, e.snapshot, func() error {
				_, err := e.msg.SubmitJob(e.Ctx, &types.MsgSubmitJob{Owner: e.owner.String(), Spec: tc.spec, Deposit: coin(jobDeposit)})
				return err
			})
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// The v3 migration fills in the transformer bounds and closes the jobs of kind reference
// (the retired MLP) as a cancel would, refunding their escrow; other jobs stay.
func TestMigrate2to3RetiresTheMLPJobs(t *testing.T) {
	e := newEnv(t)
	op := e.registerProvider("gpu-farm")
	leasedMLP, lease := e.leaseJob(op, maxPrice/2)
	mlp := e.submitJob() // still in its auction
	container := spec()
	container.Workload = types.Workload{Kind: types.WORKLOAD_KIND_CONTAINER, Image: "ghcr.io/acme/train:1",
		Digest: "sha256:" + "ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12"}
	kept := e.submitJobWith(container, jobDeposit)
	p := e.params()
	p.MaxTransformerParams, p.MaxTokensPerStep = 0, 0 // as version 2 stored them
	require.NoError(t, e.Market.Params.Set(e.Ctx, p))
	ownerBefore := e.Balance(e.owner)

	require.NoError(t, keeper.NewMigrator(e.Market).Migrate2to3(e.Ctx))

	p = e.params()
	require.Equal(t, uint64(types.DefaultMaxTransformerParams), p.MaxTransformerParams)
	require.Equal(t, uint64(types.DefaultMaxTokensPerStep), p.MaxTokensPerStep)
	for _, id := range []uint64{mlp, leasedMLP} {
		j := e.job(id)
		require.Equal(t, types.JOB_STATE_CANCELLED, j.State, "job %d", id)
		require.Contains(t, j.CloseReason, "retired the MLP")
		require.True(t, j.Escrow.IsZero())
	}
	require.Equal(t, types.LEASE_STATE_CLOSED, e.lease(lease.Id).State)
	require.Equal(t, types.JOB_STATE_OPEN, e.job(kept).State, "a container job is not the MLP's")
	require.True(t, e.Balance(e.owner).GT(ownerBefore), "the escrow went back to the owner")
}

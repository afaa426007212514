package types

import (
	"errors"
	"fmt"

	errorsmod "cosmossdk.io/errors"

	"github.com/depinchain/depinchain/pkg/exact"
)

// NewTransformerConfig is the on-chain form of an exact transformer configuration: its
// integer form (exact.Hyper), which is what every state of the job commits to.
func NewTransformerConfig(c exact.Config) *TransformerConfig {
	h := c.Hyper()
	return &TransformerConfig{
		Layers: uint32(h.Layers), DModel: uint32(h.DModel), Heads: uint32(h.Heads), DFf: uint32(h.DFF),
		Context: uint32(h.Context), Vocab: uint32(h.Vocab), Batch: uint32(h.Batch), MicroBatch: uint32(h.MicroBatch),
		LrQ40: uint64(h.LR), MinLrQ40: uint64(h.MinLR), WarmupSteps: uint64(h.WarmupSteps), DecaySteps: uint64(h.DecaySteps),
		WeightDecayQ30: uint64(h.WeightDecay), Beta1Q30: uint64(h.Beta1), Beta2Q30: uint64(h.Beta2),
		EpsQ28: uint64(h.Eps), InitStdQ28: uint64(h.InitStd), NormEpsQ32: uint64(h.NormEps),
	}
}

// Exact returns the configuration t encodes, or an error naming the first invalid field
// (in the job spec file's spelling, under workload.) when t is not a valid, canonical one.
func (t TransformerConfig) Exact() (exact.Config, error) {
	h := exact.Hyper{
		Layers: int64(t.Layers), DModel: int64(t.DModel), Heads: int64(t.Heads), DFF: int64(t.DFf),
		Context: int64(t.Context), Vocab: int64(t.Vocab), Batch: int64(t.Batch), MicroBatch: int64(t.MicroBatch),
		LR: clampInt64(t.LrQ40), MinLR: clampInt64(t.MinLrQ40), WarmupSteps: clampInt64(t.WarmupSteps), DecaySteps: clampInt64(t.DecaySteps),
		WeightDecay: clampInt64(t.WeightDecayQ30), Beta1: clampInt64(t.Beta1Q30), Beta2: clampInt64(t.Beta2Q30),
		Eps: clampInt64(t.EpsQ28), InitStd: clampInt64(t.InitStdQ28), NormEps: clampInt64(t.NormEpsQ32),
	}
	c, err := h.Config()
	if err != nil {
		return exact.Config{}, fmt.Errorf("workload.transformer: %w", err)
	}
	return c, nil
}

// ConfigProblems turns an exact.Config validation error into the job spec's field names.
func ConfigProblems(err error) string {
	var ce *exact.ConfigError
	if errors.As(err, &ce) {
		return ce.Under("workload.")
	}
	return err.Error()
}

// clampInt64 keeps a uint64 above int64's range negative-free: exact.Hyper.Config refuses
// anything above 2^42 anyway.
func clampInt64(v uint64) int64 {
	if v > 1<<62 {
		return 1 << 62
	}
	return int64(v)
}

// ExactConfig is the exact transformer configuration a job trains: the fixed reference
// configuration for kind reference, the spec's own for kind transformer. Container jobs
// have none.
func (s JobSpec) ExactConfig() (exact.Config, error) {
	switch s.Workload.Kind {
	case WORKLOAD_KIND_REFERENCE:
		return exact.ReferenceConfig(), nil
	case WORKLOAD_KIND_TRANSFORMER:
		if s.Workload.Transformer == nil {
			return exact.Config{}, errorsmod.Wrap(ErrInvalidSpec, "workload: kind transformer needs model and train")
		}
		c, err := s.Workload.Transformer.Exact()
		if err != nil {
			return exact.Config{}, errorsmod.Wrap(ErrInvalidSpec, err.Error())
		}
		return c, nil
	default:
		return exact.Config{}, errorsmod.Wrapf(ErrInvalidSpec, "workload.kind: %s workloads are not exact transformers", s.Workload.Kind)
	}
}

// TransformerLimits are the params' bounds on transformer jobs.
func (p Params) TransformerLimits() exact.Limits {
	return exact.Limits{MaxParams: int64(p.MaxTransformerParams), MaxTokensPerStep: int64(p.MaxTokensPerStep)}
}

// validateInitWeights checks the fine-tuning fields: a transformer workload names both the
// weights dataset and the root of their import (h_0), or neither.
func (w Workload) validateInitWeights() error {
	if w.InitWeights == "" && len(w.InitStateRoot) == 0 {
		return nil
	}
	switch {
	case w.Kind != WORKLOAD_KIND_TRANSFORMER:
		return errorsmod.Wrap(ErrInvalidSpec, "workload.init_weights: only a transformer job starts from given weights (reference is a fixed model)")
	case w.InitWeights == "":
		return errorsmod.Wrap(ErrInvalidSpec, "workload.init_weights: required with init_state_root (the dataset holding the weights)")
	case len(w.InitWeights) > MaxDatasetIDLength:
		return errorsmod.Wrapf(ErrInvalidSpec, "workload.init_weights: longer than %d characters", MaxDatasetIDLength)
	case len(w.InitStateRoot) != 32:
		return errorsmod.Wrapf(ErrInvalidSpec, "workload.init_state_root: must be the 32-byte root of the imported weights (`depinchaind workload run --init-weights` prints it), got %d bytes", len(w.InitStateRoot))
	}
	return nil
}

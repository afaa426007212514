package workload

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/depinchain/depinchain/pkg/exact"
)

func newExportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export --state FILE --out DIR",
		Short: "Write a state as model.safetensors (float32) + a Hugging Face-style config.json",
		Long: `Write the state's weights dequantized to float32 (weight = raw int32 · 2^-28, linear weights
[out, in]) as DIR/model.safetensors and its architecture as DIR/config.json (exact.Export).
pkg/exact/torch/float_model.py loads the pair into a plain PyTorch model; 'workload run
--init-weights DIR/model.safetensors' starts a job from it (the optimizer moments are not
exported: a fine-tuning job starts them at zero). With --spec, the state must be of that
spec's workload.`,
		Example: `depinchaind workload export --state run1/checkpoints/step-50/state --out ./model
python3 pkg/exact/torch/float_model.py predict ./model "The chain "`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			s, statePath, err := stateFromFlags(f)
			if err != nil {
				return err
			}
			out, _ := f.GetString(flagOut)
			if out == "" {
				return fmt.Errorf("--%s is required: the folder for model.safetensors and config.json", flagOut)
			}
			if err := exact.Export(s, out); err != nil {
				return fmt.Errorf("--%s %s: %w", flagOut, out, err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "exported %s (step %d, loss %.6f, root %s, %d parameters)\n", statePath, s.Step, exact.LossNats(s.Loss), s.Root().Hex(), s.Config.ParamCount())
			fmt.Fprintf(w, "wrote %s\nwrote %s\n", filepath.Join(out, exact.SafetensorsFileName), filepath.Join(out, exact.HFConfigFileName))
			return nil
		},
	}
	f := cmd.Flags()
	f.String(flagState, "", "state file (a checkpoint's state) or checkpoint folder (required)")
	f.String(flagOut, "", "output folder (required)")
	f.String(flagSpec, "", "optional job spec: refuse a state of another workload")
	return cmd
}

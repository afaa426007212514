package workload

import (
	"fmt"
	"math"

	"github.com/spf13/cobra"

	"github.com/depinchain/depinchain/pkg/exact"
)

// maxSampleTokens bounds --tokens: every token is one exact forward pass.
const maxSampleTokens = 1 << 16

func newSampleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sample --state FILE --prompt TEXT [--tokens 200] [--temperature 0.8] [--seed HEX]",
		Short: "Generate text from a trained state with the exact forward pass",
		Long: `Generate bytes after --prompt with exact.Generate: the exact model's forward pass over the
last model.context bytes, then a seeded sampler (temperature 0: the most likely byte). The
same state, prompt, temperature and seed give the same text on every machine. --state is a
checkpoint's state file or its folder (DIR/checkpoints/step-N). The prompt and the generated
text go to stdout, the state's step, loss and root to stderr. With --spec, the state must be
of that spec's workload.`,
		Example:      `depinchaind workload sample --state run1/checkpoints/step-50 --prompt "The chain " --tokens 200`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			s, statePath, err := stateFromFlags(f)
			if err != nil {
				return err
			}
			prompt, _ := f.GetString(flagPrompt)
			if prompt == "" {
				return fmt.Errorf("--%s is required: the text to continue", flagPrompt)
			}
			n, _ := f.GetInt(flagTokens)
			if n < 1 || n > maxSampleTokens {
				return fmt.Errorf("--%s: must be in [1, %d], got %d", flagTokens, maxSampleTokens, n)
			}
			temp, _ := f.GetFloat64(flagTemperature)
			if temp != 0 && (math.IsNaN(temp) || temp < 1.0/16 || temp > 16) {
				return fmt.Errorf("--%s: must be 0 (the most likely byte) or in [0.0625, 16], got %g", flagTemperature, temp)
			}
			seedText, _ := f.GetString(flagSeed)
			seed, err := parseSeed(seedText)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "state %s: step %d, loss %.6f, root %s, model %s\n",
				statePath, s.Step, exact.LossNats(s.Loss), s.Root().Hex(), describeModel(s.Config.Model))
			text, err := exact.Generate(s, []byte(prompt), n, exact.GenerateOptions{Seed: seed, Temperature: temp, Workers: workers(cmd)})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s%s\n", prompt, text)
			return nil
		},
	}
	f := cmd.Flags()
	f.String(flagState, "", "state file (a checkpoint's state) or checkpoint folder (required)")
	f.String(flagPrompt, "", "text to continue (required); bytes are tokens")
	f.Int(flagTokens, 200, "bytes to generate")
	f.Float64(flagTemperature, 0.8, "sampling temperature: 0 (argmax) or 1/16..16")
	f.String(flagSeed, DefaultSeedHex, "sampler seed in hex")
	f.String(flagSpec, "", "optional job spec: refuse a state of another workload")
	f.Int(flagWorkers, 0, "goroutines per operator (0: all cores)")
	return cmd
}

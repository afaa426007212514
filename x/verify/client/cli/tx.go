// Package cli holds x/verify's transaction commands. Each reads local files (a per-step
// hash trace, a checkpoint or model state) and computes the Merkle roots and proofs the
// message carries, asking the chain for the game's current position where needed.
package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cosmos/cosmos-sdk/client"
	"github.com/cosmos/cosmos-sdk/client/flags"
	"github.com/cosmos/cosmos-sdk/client/tx"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

const (
	flagTrace  = "trace"
	flagState  = "state"
	flagURI    = "uri"
	flagMetric = "metric"
)

// NewTxCmd returns the verify tx command with its file-reading subcommands.
func NewTxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:                        types.ModuleName,
		Short:                      "Checkpoint commitments and dispute moves",
		DisableFlagParsing:         true,
		SuggestionsMinimumDistance: 2,
		RunE:                       client.ValidateCmd,
	}
	cmd.AddCommand(submitCheckpointCmd(), challengeCmd(), revealCmd(), respondCmd(), stepCmd())
	return cmd
}

func parseUint(name, s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a non-negative integer", name, s)
	}
	return v, nil
}

func requiredFlag(cmd *cobra.Command, name string) (string, error) {
	v, err := cmd.Flags().GetString(name)
	if err == nil && v == "" {
		err = fmt.Errorf("--%s is required", name)
	}
	return v, err
}

func submitCheckpointCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "submit-checkpoint [lease-id] [index] [start-step] --trace [file] --state [file] --uri [url]",
		Short: "Commit a checkpoint: trace root and final hash from the trace file, state root from the checkpoint file",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			leaseID, err := parseUint("lease-id", args[0])
			if err != nil {
				return err
			}
			index, err := parseUint("index", args[1])
			if err != nil {
				return err
			}
			start, err := parseUint("start-step", args[2])
			if err != nil {
				return err
			}
			tracePath, err := requiredFlag(cmd, flagTrace)
			if err != nil {
				return err
			}
			statePath, err := requiredFlag(cmd, flagState)
			if err != nil {
				return err
			}
			uri, err := requiredFlag(cmd, flagURI)
			if err != nil {
				return err
			}
			tr, err := trace.ReadFile(tracePath, start)
			if err != nil {
				return err
			}
			stateFile, err := os.Open(statePath)
			if err != nil {
				return err
			}
			defer stateFile.Close()
			stateRoot, _, err := merkle.StreamRoot(stateFile, trace.CheckpointChunkSize)
			if err != nil {
				return fmt.Errorf("hashing %s: %w", statePath, err)
			}
			finalHash, proof, err := tr.Open(tr.End())
			if err != nil {
				return err
			}
			metricSpecs, err := cmd.Flags().GetStringArray(flagMetric)
			if err != nil {
				return err
			}
			var metrics []types.Metric
			for _, m := range metricSpecs {
				name, value, ok := strings.Cut(m, "=")
				if !ok {
					return fmt.Errorf("--%s %q: want name=value", flagMetric, m)
				}
				metrics = append(metrics, types.Metric{Name: name, Value: value})
			}
			clientCtx, err := client.GetClientTxContext(cmd)
			if err != nil {
				return err
			}
			root := tr.Root()
			msg := &types.MsgSubmitCheckpoint{
				Provider: clientCtx.GetFromAddress().String(), LeaseId: leaseID, Index: index,
				StartStep: start, EndStep: tr.End(), StateRoot: stateRoot[:], TraceRoot: root[:],
				FinalHash: finalHash[:], FinalHashProof: proof, Uri: uri, Metrics: metrics,
			}
			return tx.GenerateOrBroadcastTxCLI(clientCtx, cmd.Flags(), msg)
		},
	}
	cmd.Flags().String(flagTrace, "", "per-step hash trace: one hex hash per line, h_start first (required)")
	cmd.Flags().String(flagState, "", "the checkpoint file whose chunks state_root commits to (required)")
	cmd.Flags().String(flagURI, "", "where challengers can fetch the checkpoint (required)")
	cmd.Flags().StringArray(flagMetric, nil, "a metric as name=value, e.g. loss=2.41 (repeatable)")
	flags.AddTxFlagsToCmd(cmd)
	return cmd
}

func challengeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "challenge [lease-id] [index] --trace [file]",
		Short: "Dispute a pending checkpoint with your own trace of the same steps (posts the challenger bond)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			leaseID, err := parseUint("lease-id", args[0])
			if err != nil {
				return err
			}
			index, err := parseUint("index", args[1])
			if err != nil {
				return err
			}
			tracePath, err := requiredFlag(cmd, flagTrace)
			if err != nil {
				return err
			}
			clientCtx, err := client.GetClientTxContext(cmd)
			if err != nil {
				return err
			}
			cp, err := types.NewQueryClient(clientCtx).Checkpoint(cmd.Context(), &types.QueryCheckpointRequest{LeaseId: leaseID, Index: index})
			if err != nil {
				return err
			}
			tr, err := trace.ReadFile(tracePath, cp.Checkpoint.StartStep)
			if err != nil {
				return err
			}
			if tr.End() != cp.Checkpoint.EndStep {
				return fmt.Errorf("%s covers steps %d..%d but the checkpoint covers %d..%d", tracePath, tr.Start, tr.End(), cp.Checkpoint.StartStep, cp.Checkpoint.EndStep)
			}
			final, proof, err := tr.Open(tr.End())
			if err != nil {
				return err
			}
			root := tr.Root()
			msg := &types.MsgChallenge{
				Challenger: clientCtx.GetFromAddress().String(), LeaseId: leaseID, CheckpointIndex: index,
				TraceRoot: root[:], FinalHash: final[:], FinalHashProof: proof,
			}
			return tx.GenerateOrBroadcastTxCLI(clientCtx, cmd.Flags(), msg)
		},
	}
	cmd.Flags().String(flagTrace, "", "your own per-step hash trace of the checkpoint's steps (required)")
	flags.AddTxFlagsToCmd(cmd)
	return cmd
}

func revealCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reveal [lease-id] [index] [step] --trace [file]",
		Short: "Provider's move: reveal your hash at the game's midpoint with its proof",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			leaseID, err := parseUint("lease-id", args[0])
			if err != nil {
				return err
			}
			index, err := parseUint("index", args[1])
			if err != nil {
				return err
			}
			step, err := parseUint("step", args[2])
			if err != nil {
				return err
			}
			tracePath, err := requiredFlag(cmd, flagTrace)
			if err != nil {
				return err
			}
			clientCtx, err := client.GetClientTxContext(cmd)
			if err != nil {
				return err
			}
			cp, err := types.NewQueryClient(clientCtx).Checkpoint(cmd.Context(), &types.QueryCheckpointRequest{LeaseId: leaseID, Index: index})
			if err != nil {
				return err
			}
			tr, err := trace.ReadFile(tracePath, cp.Checkpoint.StartStep)
			if err != nil {
				return err
			}
			h, proof, err := tr.Open(step)
			if err != nil {
				return err
			}
			msg := &types.MsgRevealHash{
				Provider: clientCtx.GetFromAddress().String(), LeaseId: leaseID, CheckpointIndex: index, Step: step, Hash: h[:], Proof: proof,
			}
			return tx.GenerateOrBroadcastTxCLI(clientCtx, cmd.Flags(), msg)
		},
	}
	cmd.Flags().String(flagTrace, "", "the per-step hash trace this checkpoint committed to (required)")
	flags.AddTxFlagsToCmd(cmd)
	return cmd
}

func respondCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "respond [challenge-id] --trace [file]",
		Short: "Challenger's move: answer the game's midpoint with your own hash and proof",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseUint("challenge-id", args[0])
			if err != nil {
				return err
			}
			tracePath, err := requiredFlag(cmd, flagTrace)
			if err != nil {
				return err
			}
			clientCtx, err := client.GetClientTxContext(cmd)
			if err != nil {
				return err
			}
			q := types.NewQueryClient(clientCtx)
			ch, err := q.Challenge(cmd.Context(), &types.QueryChallengeRequest{ChallengeId: id})
			if err != nil {
				return err
			}
			if ch.Challenge.Turn != types.GAME_TURN_CHALLENGER {
				return fmt.Errorf("challenge %d waits for %s, not the challenger", id, ch.Challenge.Turn)
			}
			cp, err := q.Checkpoint(cmd.Context(), &types.QueryCheckpointRequest{LeaseId: ch.Challenge.LeaseId, Index: ch.Challenge.CheckpointIndex})
			if err != nil {
				return err
			}
			tr, err := trace.ReadFile(tracePath, cp.Checkpoint.StartStep)
			if err != nil {
				return err
			}
			h, proof, err := tr.Open(ch.Challenge.Mid)
			if err != nil {
				return err
			}
			msg := &types.MsgRespond{Challenger: clientCtx.GetFromAddress().String(), ChallengeId: id, Hash: h[:], Proof: proof}
			return tx.GenerateOrBroadcastTxCLI(clientCtx, cmd.Flags(), msg)
		},
	}
	cmd.Flags().String(flagTrace, "", "your per-step hash trace of the checkpoint's steps (required)")
	flags.AddTxFlagsToCmd(cmd)
	return cmd
}

func stepCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "step [challenge-id] --state [file]",
		Short: "One-step proof: re-execute the disputed step on-chain from the agreed pre-state",
		Long: `Sends the reference workload's encoded state at the game's agreed step lo, plus every
training-data chunk that step's batch reads with its Merkle proof; the chain re-executes
the step and decides the game.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseUint("challenge-id", args[0])
			if err != nil {
				return err
			}
			statePath, err := requiredFlag(cmd, flagState)
			if err != nil {
				return err
			}
			preState, err := os.ReadFile(statePath)
			if err != nil {
				return err
			}
			clientCtx, err := client.GetClientTxContext(cmd)
			if err != nil {
				return err
			}
			q := types.NewQueryClient(clientCtx)
			ch, err := q.Challenge(cmd.Context(), &types.QueryChallengeRequest{ChallengeId: id})
			if err != nil {
				return err
			}
			if ch.Challenge.Turn != types.GAME_TURN_ONE_STEP {
				return fmt.Errorf("challenge %d is at %s, not the one-step phase", id, ch.Challenge.Turn)
			}
			cp, err := q.Checkpoint(cmd.Context(), &types.QueryCheckpointRequest{LeaseId: ch.Challenge.LeaseId, Index: ch.Challenge.CheckpointIndex})
			if err != nil {
				return err
			}
			job, err := markettypes.NewQueryClient(clientCtx).Job(cmd.Context(), &markettypes.QueryJobRequest{JobId: cp.Checkpoint.JobId})
			if err != nil {
				return err
			}
			data, err := types.JobTrainingData(job.Job)
			if err != nil {
				return err
			}
			chunks, err := types.StepData(data, types.ReferenceConfig(job.Job.Seed), job.Job.Seed, ch.Challenge.Lo)
			if err != nil {
				return err
			}
			msg := &types.MsgStep{Sender: clientCtx.GetFromAddress().String(), ChallengeId: id, PreState: preState, Data: chunks}
			return tx.GenerateOrBroadcastTxCLI(clientCtx, cmd.Flags(), msg)
		},
	}
	cmd.Flags().String(flagState, "", "the encoded reference-workload state at the game's step lo (required)")
	flags.AddTxFlagsToCmd(cmd)
	return cmd
}

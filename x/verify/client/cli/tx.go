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
	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/dispute"
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
	cmd.AddCommand(submitCheckpointCmd(), challengeCmd(), revealCmd(), respondCmd(), stepCmd(), attestCmd(),
		recordsCmd(), operatorCmd(), tileMoveCmd(), proveParityFaultCmd())
	return cmd
}

// parseUints parses args as non-negative integers, named by names in errors.
func parseUints(args []string, names ...string) ([]uint64, error) {
	vs := make([]uint64, len(names))
	for i, name := range names {
		v, err := parseUint(name, args[i])
		if err != nil {
			return nil, err
		}
		vs[i] = v
	}
	return vs, nil
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
			ids, err := parseUints(args, "lease-id", "index", "start-step")
			if err != nil {
				return err
			}
			leaseID, index, start := ids[0], ids[1], ids[2]
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
	return moveCmd("challenge [lease-id] [index] --trace [file]",
		"Dispute a pending checkpoint with your own trace of the same steps (posts the challenger bond)",
		[]string{"lease-id", "index"}, flagTrace, "your own per-step hash trace of the checkpoint's steps (required)",
		func(cmd *cobra.Command, ids []uint64) error {
			return checkpointMove(cmd, ids, func(sender string, cp types.Checkpoint, tr trace.Trace) (sdk.Msg, error) {
				return dispute.Challenge(sender, cp, tr)
			})
		})
}

func attestCmd() *cobra.Command {
	return moveCmd("attest [lease-id] [index] --trace [file]",
		"As a drawn auditor, attest to a checkpoint: your own trace of its steps has the provider's root",
		[]string{"lease-id", "index"}, flagTrace, "your own per-step hash trace of the checkpoint's steps (required)",
		func(cmd *cobra.Command, ids []uint64) error {
			return checkpointMove(cmd, ids, func(sender string, cp types.Checkpoint, tr trace.Trace) (sdk.Msg, error) {
				return dispute.Attest(sender, cp, tr)
			})
		})
}

func revealCmd() *cobra.Command {
	return moveCmd("reveal [lease-id] [index] [step] --trace [file]",
		"Provider's move: reveal your hash at the game's midpoint with its proof",
		[]string{"lease-id", "index", "step"}, flagTrace, "the per-step hash trace this checkpoint committed to (required)",
		func(cmd *cobra.Command, ids []uint64) error {
			return checkpointMove(cmd, ids, func(sender string, cp types.Checkpoint, tr trace.Trace) (sdk.Msg, error) {
				return dispute.Reveal(sender, cp.LeaseId, cp.Index, ids[2], tr)
			})
		})
}

func respondCmd() *cobra.Command {
	return moveCmd("respond [challenge-id] --trace [file]",
		"Challenger's move: answer the game's midpoint with your own hash and proof",
		[]string{"challenge-id"}, flagTrace, "your per-step hash trace of the checkpoint's steps (required)",
		func(cmd *cobra.Command, ids []uint64) error {
			return gameMove(cmd, ids[0], types.GAME_TURN_CHALLENGER, func(sender string, g dispute.Game) (sdk.Msg, error) {
				tr, err := readTrace(cmd, g.Checkpoint.StartStep)
				if err != nil {
					return nil, err
				}
				return dispute.Respond(sender, g.Challenge, tr)
			})
		})
}

func stepCmd() *cobra.Command {
	cmd := moveCmd("step [challenge-id] --state [file]",
		"One-step proof: re-execute the disputed step on-chain from the agreed pre-state",
		[]string{"challenge-id"}, flagState, "the encoded reference-workload state at the game's step lo (required)",
		func(cmd *cobra.Command, ids []uint64) error {
			statePath, err := requiredFlag(cmd, flagState)
			if err != nil {
				return err
			}
			preState, err := os.ReadFile(statePath)
			if err != nil {
				return err
			}
			return gameMove(cmd, ids[0], types.GAME_TURN_ONE_STEP, func(sender string, g dispute.Game) (sdk.Msg, error) {
				return dispute.OneStep(sender, g, preState)
			})
		})
	cmd.Long = `Sends the reference workload's encoded state at the game's agreed step lo, plus every
training-data chunk that step's batch reads with its Merkle proof; the chain re-executes
the step and decides the game.`
	return cmd
}

// moveCmd declares a command that makes one move of the verification game:
// its positional arguments are the non-negative integers names, its
// evidence is the file --fileFlag names, and run builds and sends the move.
func moveCmd(use, short string, names []string, fileFlag, fileHelp string, run func(cmd *cobra.Command, ids []uint64) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(len(names)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseUints(args, names...)
			if err != nil {
				return err
			}
			return run(cmd, ids)
		},
	}
	cmd.Flags().String(fileFlag, "", fileHelp)
	flags.AddTxFlagsToCmd(cmd)
	return cmd
}

// broadcastMove signs and sends (or generates) the message build returns
// for the --from account.
func broadcastMove(cmd *cobra.Command, build func(clientCtx client.Context, sender string) (sdk.Msg, error)) error {
	clientCtx, err := client.GetClientTxContext(cmd)
	if err != nil {
		return err
	}
	msg, err := build(clientCtx, clientCtx.GetFromAddress().String())
	if err != nil {
		return err
	}
	return tx.GenerateOrBroadcastTxCLI(clientCtx, cmd.Flags(), msg)
}

// gameMove makes the sender's move in challenge id when the game waits at
// turn: it reads the game from the chain and sends what build makes of it.
func gameMove(cmd *cobra.Command, id uint64, turn types.GameTurn, build func(sender string, g dispute.Game) (sdk.Msg, error)) error {
	return broadcastMove(cmd, func(clientCtx client.Context, sender string) (sdk.Msg, error) {
		g, err := dispute.Read(cmd.Context(), types.NewQueryClient(clientCtx), markettypes.NewQueryClient(clientCtx), id)
		if err != nil {
			return nil, err
		}
		if g.Challenge.Turn != turn {
			return nil, fmt.Errorf("challenge %d waits at %s, not %s", id, g.Challenge.Turn, turn)
		}
		return build(sender, g)
	})
}

// checkpointMove makes a move on checkpoint ids[1] of lease ids[0] from the
// --trace file of its steps.
func checkpointMove(cmd *cobra.Command, ids []uint64, build func(sender string, cp types.Checkpoint, tr trace.Trace) (sdk.Msg, error)) error {
	return broadcastMove(cmd, func(clientCtx client.Context, sender string) (sdk.Msg, error) {
		res, err := types.NewQueryClient(clientCtx).Checkpoint(cmd.Context(), &types.QueryCheckpointRequest{LeaseId: ids[0], Index: ids[1]})
		if err != nil {
			return nil, err
		}
		tr, err := readTrace(cmd, res.Checkpoint.StartStep)
		if err != nil {
			return nil, err
		}
		return build(sender, res.Checkpoint, tr)
	})
}

// readTrace reads the --trace file, whose first hash is h_start.
func readTrace(cmd *cobra.Command, start uint64) (trace.Trace, error) {
	path, err := requiredFlag(cmd, flagTrace)
	if err != nil {
		return trace.Trace{}, err
	}
	tr, err := trace.ReadFile(path, start)
	if err != nil {
		return trace.Trace{}, fmt.Errorf("%s: %w", path, err)
	}
	return tr, nil
}

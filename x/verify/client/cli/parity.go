package cli

import (
	"fmt"
	"os"

	"github.com/cosmos/cosmos-sdk/client"
	"github.com/cosmos/cosmos-sdk/client/flags"
	"github.com/cosmos/cosmos-sdk/client/tx"
	"github.com/spf13/cobra"

	"github.com/depinchain/depinchain/pkg/custody/fetch"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
)

const flagPiece = "piece"

// proveParityFaultCmd sends MsgProveParityFault: the caller holds the checkpoint's state
// (`depinchaind job fetch` rebuilds and checks it) and the parity piece's bytes as a
// holder served them; the command finds the first chunk of the piece that is not the
// Reed-Solomon parity of the state and proves it.
func proveParityFaultCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prove-parity-fault [lease-id] [index] [parity-piece] --state [file] --piece [file]",
		Short: "Prove that a checkpoint's registered parity piece is not the Reed-Solomon parity of its state (convicts its trainer)",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseUints(args, "lease-id", "index", "parity-piece")
			if err != nil {
				return err
			}
			if ids[2] > uint64(^uint32(0)) {
				return fmt.Errorf("parity-piece %d is out of range", ids[2])
			}
			statePath, err := requiredFlag(cmd, flagState)
			if err != nil {
				return err
			}
			piecePath, err := requiredFlag(cmd, flagPiece)
			if err != nil {
				return err
			}
			clientCtx, err := client.GetClientTxContext(cmd)
			if err != nil {
				return err
			}
			obj, err := fetch.Locate(cmd.Context(), shardtypes.NewQueryClient(clientCtx), ids[0], ids[1])
			if err != nil {
				return err
			}
			state, err := os.Open(statePath)
			if err != nil {
				return err
			}
			defer state.Close()
			piece, err := os.Open(piecePath)
			if err != nil {
				return err
			}
			defer piece.Close()
			msg, err := fetch.ParityFault(clientCtx.GetFromAddress().String(), obj, state, uint32(ids[2]), piece)
			if err != nil {
				return err
			}
			if msg == nil {
				return fmt.Errorf("parity piece %d of checkpoint %d/%d is the parity of the state: there is no fault to prove", ids[2], ids[0], ids[1])
			}
			return tx.GenerateOrBroadcastTxCLI(clientCtx, cmd.Flags(), msg)
		},
	}
	cmd.Flags().String(flagState, "", "the checkpoint's state file, as `depinchaind job fetch` rebuilt it (required)")
	cmd.Flags().String(flagPiece, "", "the parity piece's bytes as its holder serves them (required)")
	flags.AddTxFlagsToCmd(cmd)
	return cmd
}

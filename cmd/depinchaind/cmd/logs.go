package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cosmos/cosmos-sdk/client/flags"
	"github.com/spf13/cobra"

	"github.com/depinchain/depinchain/cmd/depinchaind/jobview"
	"github.com/depinchain/depinchain/provider/logs"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

func jobLogsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "logs <job-id> --from KEY",
		Short: "Print (or --follow) the trainer logs of a job's leases, read from each lease's provider",
		Long: `Reads GET /logs/<lease> from the public port of each lease's provider (its
registered endpoint), with requests signed by --from over (chain id, lease, time).
Providers serve them to the job's owner and its auditors only. Lines are prefixed
with the lease and worker. --follow polls until the job closes and resumes each
log from the byte offset it reached, so a provider's restart neither loses nor
repeats a line.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return fmt.Errorf("job id %q: %w", args[0], err)
			}
			f := cmd.Flags()
			addr, _ := f.GetString(flagGRPCAddr)
			from, _ := f.GetString(flags.FlagFrom)
			follow, _ := f.GetBool("follow")
			every, _ := f.GetDuration("interval")
			stream, _ := f.GetString("stream")
			if from == "" {
				return errors.New("--from: the owner's or an auditor's key signs the requests")
			}
			src, conn, err := jobview.Dial(addr)
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			chainID, err := signedChainID(ctx, f, src)
			if err != nil {
				return err
			}
			signer, err := keyringSigner(f, from)
			if err != nil {
				return err
			}
			t := &tailer{src: src, chainID: chainID, reader: signer.address, sign: signer.sign, stream: stream,
				out: cmd.OutOrStdout(), warn: cmd.ErrOrStderr(), offsets: map[uint64]int64{}}
			return t.run(ctx, id, follow, every)
		},
	}
	f := cmd.Flags()
	f.String(flagGRPCAddr, "127.0.0.1:9090", "the node's gRPC endpoint (host:port)")
	f.String(flags.FlagFrom, "", "the key (name) that signs the requests: the job's owner or an auditor")
	f.String(flags.FlagKeyringBackend, "os", "the keyring's backend (os|file|test)")
	f.String(flags.FlagKeyringDir, "", "the keyring's folder (default: --home)")
	f.String(flags.FlagChainID, "", "the chain id signed over (default: the node's)")
	f.Bool("follow", false, "keep printing new lines until the job closes")
	f.Duration("interval", time.Second, "how often --follow polls")
	f.String("stream", "stdout", "stdout or stderr")
	return cmd
}

// tailer reads each lease's log from its provider, remembering how far it
// got in each.
type tailer struct {
	src     *jobview.Source
	chainID string
	reader  string
	sign    logs.Signer
	stream  string
	out     io.Writer
	warn    io.Writer
	offsets map[uint64]int64
	warned  map[uint64]string
}

func (t *tailer) run(ctx context.Context, job uint64, follow bool, every time.Duration) error {
	for {
		j, err := t.src.Market.Job(ctx, &markettypes.QueryJobRequest{JobId: job})
		if err != nil {
			return fmt.Errorf("job %d: %w", job, err)
		}
		done := j.Job.State.IsTerminal()
		leases, err := t.src.Market.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: job})
		if err != nil {
			return fmt.Errorf("leases of job %d: %w", job, err)
		}
		for _, l := range leases.Leases {
			if err := t.drain(ctx, l); err != nil {
				var se *logs.StatusError
				if errors.As(err, &se) && (se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden) {
					return fmt.Errorf("lease %d's provider refused %s: %w", l.Id, t.reader, err)
				}
				if !follow {
					return fmt.Errorf("lease %d: %w", l.Id, err)
				}
				if t.warned == nil {
					t.warned = map[uint64]string{}
				}
				if msg := err.Error(); t.warned[l.Id] != msg {
					fmt.Fprintf(t.warn, "lease %d: %v (retrying)\n", l.Id, err)
					t.warned[l.Id] = msg
				}
			}
		}
		if !follow || done {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// drain prints every complete line of lease l's log past the offset
// already printed.
func (t *tailer) drain(ctx context.Context, l markettypes.Lease) error {
	p, err := t.src.Staking.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: l.Provider})
	if err != nil {
		return fmt.Errorf("provider %s: %w", l.Provider, err)
	}
	c := &logs.Client{BaseURL: p.Provider.Endpoint, ChainID: t.chainID, Reader: t.reader, Sign: t.sign,
		HTTP: &http.Client{Timeout: 10 * time.Second}}
	for {
		data, next, err := c.Read(ctx, l.Id, t.stream, t.offsets[l.Id])
		if err != nil {
			return err
		}
		if len(data) == 0 {
			return nil
		}
		prefix := fmt.Sprintf("[lease %d worker %d] ", l.Id, l.Worker)
		for _, line := range strings.SplitAfter(string(data), "\n") {
			if line != "" {
				fmt.Fprint(t.out, prefix+line)
			}
		}
		t.offsets[l.Id] = next
	}
}

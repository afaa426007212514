package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/depinchain/depinchain/cmd/depinchaind/jobview"
)

const flagGRPCAddr = "grpc-addr"

// jobCommand is what a job owner runs to follow a job: its status (once,
// as JSON, or redrawn) and its trainers' logs.
func jobCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Follow a training job: status, progress, verified loss, logs",
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(jobStatusCommand(), jobLogsCommand(), jobFetchCommand())
	return cmd
}

func jobStatusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status <job-id>",
		Short: "Show a job's workers, money, checkpoints (with verified or self-reported loss), disputes, rounds and leases",
		Long: `Reads the chain's public gRPC endpoint and the providers' public checkpoint ports.
A loss is "verified" when it was read from chunk 0 of the checkpoint's state,
Merkle-proven against the state_root on chain (transformer and reference jobs),
and "self-reported" when it is the provider's loss metric (container jobs, or
the provider did not serve a valid proof).

--watch redraws a progress bar per worker (steps, rate, ETA, latest loss) until
the job closes or the command is interrupted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return fmt.Errorf("job id %q: %w", args[0], err)
			}
			addr, _ := cmd.Flags().GetString(flagGRPCAddr)
			output, _ := cmd.Flags().GetString("output")
			watch, _ := cmd.Flags().GetBool("watch")
			every, _ := cmd.Flags().GetDuration("interval")
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: want text or json", output)
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
			out := cmd.OutOrStdout()
			if !watch {
				v, err := src.Job(ctx, id)
				if err != nil {
					return err
				}
				if output == "json" {
					enc := json.NewEncoder(out)
					enc.SetIndent("", "  ")
					return enc.Encode(v)
				}
				return writeStatus(out, v)
			}
			return watchStatus(ctx, out, src, id, every)
		},
	}
	cmd.Flags().String(flagGRPCAddr, "127.0.0.1:9090", "the node's gRPC endpoint (host:port)")
	cmd.Flags().StringP("output", "o", "text", "text or json")
	cmd.Flags().Bool("watch", false, "redraw a progress bar per worker until the job closes")
	cmd.Flags().Duration("interval", 2*time.Second, "how often --watch polls")
	return cmd
}

// watchStatus redraws the job's frame every interval until the job is no
// longer open or leased, or ctx ends.
func watchStatus(ctx context.Context, out io.Writer, src *jobview.Source, id uint64, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		v, err := src.Job(ctx, id)
		if err != nil {
			return err
		}
		// Home the cursor and clear the screen, then draw the frame.
		fmt.Fprint(out, "\x1b[H\x1b[2J"+watchFrame(v))
		if v.State != "JOB_STATE_OPEN" && v.State != "JOB_STATE_LEASED" {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// watchFrame is one redraw of --watch: a header line, for a sync job its latest
// round, and a progress bar per worker with its steps, rate, ETA and latest loss.
func watchFrame(v *jobview.View) string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %d %q  %s  paid %s  pending %s  escrowed %s %s\n", v.ID, v.Name, v.State,
		v.Money.Paid, v.Money.Pending, v.Money.Escrowed, v.Money.Denom)
	if v.Sync != nil && len(v.Rounds) > 0 {
		r := v.Rounds[len(v.Rounds)-1]
		fmt.Fprintf(&b, "round %d of %d  %s  entered %s  missed %s  next global %s\n", r.Round, v.Sync.TotalRounds, r.State,
			slots(r.Entered), slots(r.Missed), orDash(r.NextGlobalRoot))
	}
	for _, w := range v.Workers {
		var sink strings.Builder
		bar := progressbar.NewOptions64(int64(max(w.Total, 1)),
			progressbar.OptionSetWriter(&sink),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionSetElapsedTime(false),
			progressbar.OptionSetDescription(fmt.Sprintf("worker %d", w.Worker)),
		)
		_ = bar.Set64(int64(w.Step))
		fmt.Fprintf(&b, "%s  %s  ETA %s  loss %s\n", strings.TrimSpace(strings.TrimLeft(bar.String(), "\r")),
			rate(w.StepsPerHour), eta(w), loss(w.LatestLoss))
	}
	return b.String()
}

func rate(perHour float64) string {
	if perHour == 0 {
		return "- steps/h"
	}
	return fmt.Sprintf("%.0f steps/h", perHour)
}

// rateVsCommitted is the active lease's checkpointed rate against the rate it committed to.
func rateVsCommitted(w jobview.Worker) string {
	if w.CommittedStepsPerHour == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f / %d steps/h (%.0f%%)", w.CheckpointedStepsPerHour, w.CommittedStepsPerHour,
		100*w.CheckpointedStepsPerHour/float64(w.CommittedStepsPerHour))
}

func eta(w jobview.Worker) string {
	switch {
	case w.Step >= w.Total:
		return "done"
	case w.ETASeconds == 0:
		return "-"
	}
	return (time.Duration(w.ETASeconds) * time.Second).Round(time.Second).String()
}

func loss(p *jobview.LossPoint) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.4f nats @%d (%s)", p.Nats, p.Step, p.Source)
}

// writeStatus prints v as tables.
func writeStatus(out io.Writer, v *jobview.View) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "job %d %q\t%s\t%s\towner %s\n", v.ID, v.Name, v.State, v.Kind, v.Owner)
	if v.CloseReason != "" {
		fmt.Fprintf(tw, "closed:\t%s\n", v.CloseReason)
	}
	m := v.Money
	fmt.Fprintf(tw, "\nmoney (%s)\tdeposited %s\tescrowed %s\tpending %s\tpaid %s\taudit fees %s\tstorage paid %s (escrowed %s)\trefunded %s\n",
		m.Denom, m.Deposited, m.Escrowed, m.Pending, m.Paid, m.AuditFees, m.StoragePaid, m.StorageEscrowed, m.Refunded)
	fmt.Fprintln(tw, "\nWORKER\tSTEP\tRATE\tCHECKPOINTED\tCHECKPOINTED / COMMITTED RATE\tPRICE/STEP\tPAID\tPENDING\tREFUNDED\tETA\tLEASE\tPROVIDER\tNEXT CHECKPOINT BY\tLATEST LOSS")
	for _, w := range v.Workers {
		deadline := "-"
		if w.CheckpointDeadline != 0 {
			deadline = fmt.Sprintf("height %d", w.CheckpointDeadline)
		}
		fmt.Fprintf(tw, "%d\t%d/%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", w.Worker, w.Step, w.Total, rate(w.StepsPerHour),
			w.CheckpointedStep, rateVsCommitted(w), orDash(w.PricePerStep), orDash(w.Paid), orDash(w.Pending), orDash(w.Refunded), eta(w),
			idOrDash(w.LeaseID), orDash(w.Provider), deadline, loss(w.LatestLoss))
	}
	fmt.Fprintln(tw, "\nCHECKPOINT\tWORKER\tSTEPS\tSTATUS\tCHALLENGE UNTIL\tCLAIM\tLOSS\tSOURCE")
	for _, c := range v.Checkpoints {
		l, src := "-", "-"
		if c.Loss != nil {
			l, src = fmt.Sprintf("%.4f", c.Loss.Nats), c.Loss.Source
		}
		if c.LossError != "" {
			src += " (not verified: " + c.LossError + ")"
		}
		fmt.Fprintf(tw, "%d/%d\t%d\t%d-%d\t%s\t%d\t%s\t%s\t%s\n", c.LeaseID, c.Index, c.Worker, c.StartStep, c.EndStep,
			strings.TrimPrefix(c.Status, "CHECKPOINT_STATUS_"), c.ChallengeDeadline, c.Claim, l, src)
	}
	if len(v.Disputes) > 0 {
		fmt.Fprintln(tw, "\nDISPUTE\tCHECKPOINT\tPHASE\tTO MOVE\tROUNDS\tRANGE\tCHALLENGER")
		for _, d := range v.Disputes {
			fmt.Fprintf(tw, "%d\t%d/%d\t%s\t%s\t%d\t%d-%d\t%s\n", d.ID, d.LeaseID, d.Checkpoint, d.Phase, orDash(d.ToMove), d.Rounds, d.Lo, d.Hi, d.Challenger)
		}
	}
	writeCustody(tw, v.Custody)
	writeRounds(tw, v.Sync, v.Rounds)
	if v.BiddingDeadline != 0 {
		fmt.Fprintf(tw, "\nauction open until the end of height %d\n", v.BiddingDeadline)
	}
	if len(v.Bids) > 0 {
		fmt.Fprintln(tw, "\nBID\tPROVIDER\tPRICE/GPU-HOUR\tGPUS\tCOMMITTED RATE\tPRICE/STEP\tRUNTIME\tAT")
		for _, b := range v.Bids {
			status, at := b.Status, fmt.Sprintf("height %d", b.CreatedHeight)
			if b.Status == jobview.BidWon {
				status, at = fmt.Sprintf("%s: lease %d (worker %d)", b.Status, b.LeaseID, b.Worker), "leased at "+at
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d steps/h\t%s\t%s\t%s\n", status, b.Provider, b.PricePerGPUHour, b.GPUs,
				b.StepsPerHour, orDash(b.PricePerStep), orDash(b.Runtime), at)
		}
	}
	fmt.Fprintln(tw, "\nLEASE\tWORKER\tPROVIDER\tSTATE\tFROM STEP\tCLAIMED TO\tCOMMITTED\tPRICE/STEP\tSTARTED AT\tPAID\tPENDING\tREFUNDED\tCLOSED")
	for _, l := range v.Leases {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d\t%d\t%d steps/h\t%s\theight %d\t%s\t%s\t%s\t%s\n", l.ID, l.Worker, l.Provider,
			strings.TrimPrefix(l.State, "LEASE_STATE_"), l.ResumeStep, l.ClaimedStep, l.StepsPerHour, orDash(l.PricePerStep),
			l.StartHeight, l.Paid, l.Pending, l.Refunded, orDash(l.CloseReason))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func idOrDash(id uint64) string {
	if id == 0 {
		return "-"
	}
	return strconv.FormatUint(id, 10)
}

// writeCustody lists who holds each checkpoint's state pieces (jobs with a custody
// section): pieces proven of k+m, and the holders.
func writeCustody(tw io.Writer, custody []jobview.Custody) {
	if len(custody) == 0 {
		return
	}
	fmt.Fprintln(tw, "\nCUSTODY\tOBJECT\tPIECES PROVEN\tREBUILDABLE\tHOLDERS")
	for _, c := range custody {
		rebuildable := "yes"
		if c.Proven < c.Needed {
			rebuildable = fmt.Sprintf("no (needs %d)", c.Needed)
		}
		fmt.Fprintf(tw, "%d/%d\t%s\t%d of %d\t%s\t%s\n", c.LeaseID, c.Index, c.Object, c.Proven, c.Pieces, rebuildable,
			orDash(strings.Join(c.Holders, " ")))
	}
}

// writeRounds lists a sync job's rounds (who entered, missed, was excluded; the next
// global and when it may be final), then every round's commits and what became of
// their claims.
func writeRounds(tw io.Writer, y *jobview.Sync, rounds []jobview.Round) {
	if y == nil {
		return
	}
	fmt.Fprintf(tw, "\nsync: every %d steps, outer lr %g, outer momentum %g, top_k %d; round %d of %d\n",
		y.Every, y.OuterLR, y.OuterMomentum, y.TopK, y.Round, y.TotalRounds)
	fmt.Fprintln(tw, "ROUND\tSTATE\tOPENED\tDEADLINE\tENTERED\tMISSED\tEXCLUDED\tAGGREGATOR\tNEXT GLOBAL\tFINAL AFTER")
	for _, r := range rounds {
		excluded := make([]string, 0, len(r.Excluded))
		for _, c := range r.Commits {
			if c.Excluded {
				excluded = append(excluded, fmt.Sprintf("%d (%s)", c.Worker, c.ExcludedReason))
			}
		}
		fmt.Fprintf(tw, "%d\t%s\theight %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Round, r.State, r.OpenedHeight, heightOrDash(r.Deadline),
			slots(r.Entered), slots(r.Missed), orDash(strings.Join(excluded, " ")), orDash(r.Aggregator), orDash(r.NextGlobalRoot),
			heightOrDash(r.ChallengeDeadline))
	}
	fmt.Fprintln(tw, "\nROUND COMMIT\tWORKER\tLEASE\tPROVIDER\tCOMMITTED AT\tCLAIM\tPAY")
	for _, r := range rounds {
		for _, c := range r.Commits {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%s\theight %d\t%s\t%s\n", r.Round, c.Worker, c.LeaseID, c.Provider, c.CommittedHeight, c.Claim, c.Pay)
		}
	}
}

func heightOrDash(h int64) string {
	if h == 0 {
		return "-"
	}
	return fmt.Sprintf("height %d", h)
}

// slots writes worker slots as "0,2", or "-" for none.
func slots(ws []uint32) string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = strconv.FormatUint(uint64(w), 10)
	}
	return orDash(strings.Join(s, ","))
}

// Command depinprovider is the provider sidecar: it runs beside a GPU host,
// follows depinchain, bids with the host's free GPUs, trains the leases it
// wins and commits their checkpoints. See docs/operator-guide.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/depinchain/depinchain/pkg/chainparams"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/daemon"
	"github.com/depinchain/depinchain/provider/gpu"
	statusv1 "github.com/depinchain/depinchain/provider/status/v1"
)

// Version is set at build time (-ldflags -X main.Version=...).
var Version = "dev"

func main() {
	chainparams.SetAddressPrefixes()
	if err := rootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "depinprovider",
		Short:         "The depinchain provider sidecar: bid, train, commit checkpoints",
		Version:       Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	home, _ := os.UserHomeDir()
	root.PersistentFlags().String("home", filepath.Join(home, ".depinprovider"), "folder holding config.toml (and, by default, data, work and keyring)")
	root.AddCommand(initCmd(), startCmd(), statusCmd(), gpusCmd())
	return root
}

func configPath(cmd *cobra.Command) string {
	home, _ := cmd.Flags().GetString("home")
	return filepath.Join(home, "config.toml")
}

func initCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented config.toml into --home",
		Long: `Write a commented config.toml into --home. Flags set the fields an operator
always changes; every other field keeps its default and is explained in the file.
An existing file is never overwritten.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := config.Default()
			f := cmd.Flags()
			str := func(name string, dst *string) {
				if f.Changed(name) {
					*dst, _ = f.GetString(name)
				}
			}
			str("chain-id", &cfg.Chain.ChainID)
			str("node", &cfg.Chain.RPC)
			str("grpc", &cfg.Chain.GRPC)
			str("gas-prices", &cfg.Chain.GasPrices)
			str("keyring-backend", &cfg.Keys.KeyringBackend)
			str("keyring-dir", &cfg.Keys.KeyringDir)
			str("hot-key", &cfg.Keys.HotKey)
			str("operator", &cfg.Keys.Operator)
			str("gpu-source", &cfg.GPUs.Source)
			str("gpu-catalogue", &cfg.GPUs.Catalogue)
			str("api-listen", &cfg.API.Listen)
			str("checkpoint-listen", &cfg.Checkpoints.Listen)
			str("public-url", &cfg.Checkpoints.PublicURL)
			prices, _ := f.GetStringSlice("price")
			for _, p := range prices {
				model, amount, ok := strings.Cut(p, "=")
				v, err := strconv.ParseUint(amount, 10, 64)
				if !ok || err != nil {
					return fmt.Errorf("--price %q: want MODEL=UDEPIN_PER_GPU_HOUR, e.g. H100-SXM5-80GB=2000000", p)
				}
				cfg.Pricing.Table[model] = v
			}
			models, _ := f.GetStringSlice("model-name")
			for _, m := range models {
				nvmlName, model, ok := strings.Cut(m, "=")
				if !ok {
					return fmt.Errorf("--model-name %q: want NVML_NAME=MODEL, e.g. 'NVIDIA H100 80GB HBM3=H100-SXM5-80GB'", m)
				}
				cfg.GPUs.ModelNames[nvmlName] = model
			}
			path := configPath(cmd)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return err
			}
			if err := config.Write(path, cfg); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", path)
			return nil
		},
	}
	f := cmd.Flags()
	f.String("chain-id", "", "chain id to sign for")
	f.String("node", "", "CometBFT RPC of the node to follow, e.g. tcp://127.0.0.1:26657")
	f.String("grpc", "", "Cosmos SDK gRPC of the same node, e.g. 127.0.0.1:9090")
	f.String("gas-prices", "", "price per unit of gas, e.g. 0.025udepin")
	f.String("keyring-backend", "", "file, os or test")
	f.String("keyring-dir", "", "folder holding the keyring")
	f.String("hot-key", "", "keyring entry that signs")
	f.String("operator", "", "provider operator address the hot key acts for (through authz grants)")
	f.String("gpu-source", "", "nvml, none or mock-dgxh100 (simulated; local chains only)")
	f.String("api-listen", "", "status API address")
	f.String("checkpoint-listen", "", "checkpoint server address")
	f.String("public-url", "", "base URL others reach the checkpoint server at")
	f.StringSlice("price", nil, "MODEL=UDEPIN_PER_GPU_HOUR (repeatable)")
	f.StringSlice("model-name", nil, "NVML_NAME=MODEL: another NVML name for a catalogued MODEL (repeatable)")
	f.String("gpu-catalogue", "", "the operator's GPU catalogue file, laid over the built-in one")
	return cmd
}

func startCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Run the sidecar until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(configPath(cmd))
			if err != nil {
				return err
			}
			logger, err := newLogger(cmd)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var passphrase io.Reader
			if file, _ := cmd.Flags().GetString("keyring-passphrase-file"); file != "" {
				b, err := os.ReadFile(file)
				if err != nil {
					return fmt.Errorf("--keyring-passphrase-file: %w", err)
				}
				passphrase = strings.NewReader(strings.TrimRight(string(b), "\r\n") + "\n")
			}
			hooks, err := testHooks(cmd, logger)
			if err != nil {
				return err
			}
			d, err := daemon.New(ctx, daemon.Options{Config: cfg, Logger: logger, Version: Version, KeyringInput: passphrase, Hooks: hooks})
			if err != nil {
				return err
			}
			defer d.Close()
			return d.Run(ctx)
		},
	}
	cmd.Flags().String("log-format", "text", "text or json")
	cmd.Flags().String("log-level", "info", "debug, info, warn or error")
	cmd.Flags().String("keyring-passphrase-file", "", "file holding the passphrase of the file keyring")
	addTestHookFlags(cmd)
	return cmd
}

func newLogger(cmd *cobra.Command) (*slog.Logger, error) {
	format, _ := cmd.Flags().GetString("log-format")
	levelName, _ := cmd.Flags().GetString("log-level")
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelName)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
	}
}

func statusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print what the running sidecar is doing (its status API)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addr, _ := cmd.Flags().GetString("api")
			if addr == "" {
				cfg, err := config.Load(configPath(cmd))
				if err != nil {
					return fmt.Errorf("%w (or pass --api host:port)", err)
				}
				addr = cfg.API.Listen
			}
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			report, err := readStatus(ctx, statusv1.NewStatusServiceClient(conn))
			if err != nil {
				return fmt.Errorf("status API at %s: %w", addr, err)
			}
			if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
				return printJSON(cmd.OutOrStdout(), report)
			}
			printStatus(cmd.OutOrStdout(), report)
			return nil
		},
	}
	cmd.Flags().String("api", "", "status API address (default: api.listen of the config)")
	cmd.Flags().Bool("json", false, "print the API's answers as JSON")
	return cmd
}

type statusReport struct {
	status *statusv1.StatusResponse
	gpus   *statusv1.GPUsResponse
	jobs   *statusv1.JobsResponse
	bids   *statusv1.BidsResponse
	leases *statusv1.LeasesResponse
}

func readStatus(ctx context.Context, c statusv1.StatusServiceClient) (r statusReport, err error) {
	if r.status, err = c.Status(ctx, &statusv1.StatusRequest{}); err != nil {
		return r, err
	}
	if r.gpus, err = c.GPUs(ctx, &statusv1.GPUsRequest{}); err != nil {
		return r, err
	}
	if r.jobs, err = c.Jobs(ctx, &statusv1.JobsRequest{}); err != nil {
		return r, err
	}
	if r.bids, err = c.Bids(ctx, &statusv1.BidsRequest{}); err != nil {
		return r, err
	}
	r.leases, err = c.Leases(ctx, &statusv1.LeasesRequest{})
	return r, err
}

func printJSON(w io.Writer, r statusReport) error {
	out := map[string]json.RawMessage{}
	opts := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}
	for name, b := range map[string]func() ([]byte, error){
		"status": func() ([]byte, error) { return opts.Marshal(r.status) },
		"gpus":   func() ([]byte, error) { return opts.Marshal(r.gpus) },
		"jobs":   func() ([]byte, error) { return opts.Marshal(r.jobs) },
		"bids":   func() ([]byte, error) { return opts.Marshal(r.bids) },
		"leases": func() ([]byte, error) { return opts.Marshal(r.leases) },
	} {
		raw, err := b()
		if err != nil {
			return err
		}
		out[name] = raw
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func printStatus(w io.Writer, r statusReport) {
	s := r.status
	ready := "ready"
	if !s.Ready {
		ready = "NOT READY: " + strings.Join(s.NotReady, "; ")
	}
	fmt.Fprintf(w, "depinprovider %s on %s — %s\n", s.Version, s.ChainId, ready)
	fmt.Fprintf(w, "operator %s, hot key %s, up since %s\n", s.Operator, s.HotKey, s.StartedAt.AsTime().Format(time.RFC3339))
	fmt.Fprintf(w, "chain: processed height %d of %d (lag %d), websocket connected: %v\n", s.CursorHeight, s.ChainHeight, s.CursorLag, s.WebsocketConnected)
	fmt.Fprintf(w, "runtimes: %s; jobs seen %d, bids %d, active leases %d, checkpoints %d (%d final)\n",
		strings.Join(s.Runtimes, ", "), s.JobsSeen, s.BidsPlaced, s.LeasesActive, s.CheckpointsSubmitted, s.CheckpointsFinalized)
	if s.LastError != "" {
		fmt.Fprintf(w, "last error: %s\n", s.LastError)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nGPUs (%s)\nINDEX\tMODEL\tUUID\tMEM MiB\tTEMP C\tPOWER W\tHEALTH\tLEASE\n", r.gpus.Driver)
	for _, g := range r.gpus.Gpus {
		health := "ok"
		if !g.Healthy {
			health = strings.Join(g.Problems, "; ")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%.0f\t%s\t%s\n", g.Index, g.Model, g.Uuid, g.MemoryMib, g.TemperatureCelsius,
			float64(g.PowerMilliwatts)/1000, health, orDash(g.LeaseId))
	}
	fmt.Fprintf(tw, "\nLEASES\nLEASE\tJOB\tSTATUS\tRUNTIME\tSTEP\tCHECKPOINTED\tPROBLEMS\n")
	for _, l := range r.leases.Leases {
		status := l.Status
		if l.CloseReason != "" {
			status += " (" + l.CloseReason + ")"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d/%d\t%d\t%s\n", l.LeaseId, l.JobId, status, l.Runtime, l.CurrentStep, l.TotalSteps,
			l.LastCheckpointStep, strings.Join(l.Problems, "; "))
	}
	fmt.Fprintf(tw, "\nJOBS\nJOB\tSEEN AT\tDECISION\n")
	for _, j := range r.jobs.Jobs {
		fmt.Fprintf(tw, "%d\t%d\t%s\n", j.JobId, j.SeenHeight, j.Decision)
	}
	tw.Flush()
}

func orDash(id uint64) string {
	if id == 0 {
		return "-"
	}
	return strconv.FormatUint(id, 10)
}

func gpusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gpus",
		Short: "Print this host's GPUs as the --gpus value of `depinchaind tx stakingext register-provider`",
		Long: `Print this host's GPUs as the sidecar registers them: one JSON line per class,
{"model", "vram_mib", "count"}, the catalogue's model name and nominal memory class
(an H100 80GB HBM3 reading 81,559 MiB registers as H100-SXM5-80GB with 81,920).
GPUs that are unhealthy, or that the GPU catalogue does not map, are not offered;
they are listed on stderr with the reason and, for an unknown model, the
catalogue entry to add to the file gpus.catalogue names. --all lists every GPU
with its NVML reading, PCI id and health instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(configPath(cmd))
			if err != nil {
				return err
			}
			catalogue, err := gpu.LoadCatalogue(cfg.GPUs.Catalogue, cfg.GPUs.ModelNames)
			if err != nil {
				return err
			}
			var inv *gpu.Inventory
			switch cfg.GPUs.Source {
			case config.GPUSourceNone:
				inv = gpu.Empty()
			case config.GPUSourceMockDGXH100:
				inv, err = gpu.Open(gpu.NewSimulatedDGXH100(), gpu.WithCatalogue(catalogue))
			default:
				inv, err = gpu.OpenSystem(gpu.WithCatalogue(catalogue))
			}
			if err != nil && !errors.Is(err, gpu.ErrNoDriver) {
				return err
			}
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), err)
			}
			defer inv.Close()
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if all, _ := cmd.Flags().GetBool("all"); all {
				for _, g := range inv.GPUs() {
					b, err := json.Marshal(map[string]any{
						"index": g.Index, "uuid": g.UUID, "nvml_name": g.Name, "memory_mib": g.MemoryMiB,
						"pci_id": gpu.FormatPCIID(g.PCIDeviceID), "pci_subsystem_id": fmt.Sprintf("%08x", g.PCISubsystemID),
						"model": g.Model, "memory_class_gib": g.MemoryClassGiB, "offered": g.Offerable(),
						"problems": g.Problems, "unknown": g.Unknown, "unavailable": g.Unavailable,
					})
					if err != nil {
						return err
					}
					fmt.Fprintln(out, string(b))
				}
				return nil
			}
			for _, g := range inv.GPUs() {
				switch {
				case g.Unknown != "":
					fmt.Fprintf(errOut, "GPU %d (%s): %s\n", g.Index, g.UUID, g.Unknown)
				case !g.Healthy():
					fmt.Fprintf(errOut, "GPU %d (%s, %s): unhealthy, not offered: %s\n", g.Index, g.UUID, g.Model, strings.Join(g.Problems, "; "))
				}
			}
			for _, class := range gpu.ChainInventory(inv.Healthy()) {
				b, err := json.Marshal(map[string]any{"model": class.Model, "vram_mib": class.VramMib, "count": class.Count})
				if err != nil {
					return err
				}
				fmt.Fprintln(out, string(b))
			}
			return nil
		},
	}
	cmd.Flags().Bool("all", false, "list every GPU with its NVML reading, PCI id, catalogue model and health")
	return cmd
}

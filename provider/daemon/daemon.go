// Package daemon is depinprovider's long-running process: it ties the
// sidecar's packages into one provider that follows the chain, bids with its
// free healthy GPUs, trains the leases it wins, commits and serves their
// checkpoints and withdraws what they earn.
//
// Everything it must not forget lives in its store (package db) and
// everything else is rebuilt from the chain at start: killed at any point and
// restarted, it resumes each lease from its last local checkpoint and replays
// every block it had not finished, so no event and no payment is lost.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	sdkmath "cosmossdk.io/math"
	cmtservice "github.com/cosmos/cosmos-sdk/client/grpc/cmtservice"
	"github.com/cosmos/cosmos-sdk/crypto/keyring"

	"github.com/depinchain/depinchain/pkg/chainparams"
	"github.com/depinchain/depinchain/pkg/reftrainer"
	"github.com/depinchain/depinchain/provider/bidder"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/dispute"
	"github.com/depinchain/depinchain/provider/gpu"
	"github.com/depinchain/depinchain/provider/metrics"
	"github.com/depinchain/depinchain/provider/storage"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// StateFileName is the store's file in the configured data directory.
const StateFileName = "provider.db"

// Options configures a Daemon.
type Options struct {
	Config *config.Config
	// Logger receives the daemon's logs; nil discards them.
	Logger *slog.Logger
	// Version is reported by the status API.
	Version string
	// GPULibrary replaces the NVML library Config.GPUs.Source selects (tests).
	GPULibrary gpu.Library
	// KeyringInput answers the "file" keyring's passphrase prompt.
	KeyringInput io.Reader
	// CheatFabricateFromStep, when non-zero, makes this provider a cheater,
	// for tests and the fraud demo only: the checkpoint covering that step
	// commits fabricated hashes from it on instead of its trainer's.
	CheatFabricateFromStep uint64
}

// Daemon is one running provider sidecar.
type Daemon struct {
	cfg       *config.Config
	log       *slog.Logger
	version   string
	startedAt time.Time

	db        *db.DB
	conn      *grpc.ClientConn
	querier   *chain.Querier
	submitter *chain.Submitter
	follower  *chain.Follower
	market    markettypes.QueryClient
	verify    verifytypes.QueryClient
	providers stakingexttypes.QueryClient

	operator string
	// bidding is false for a verifier that is not a registered provider.
	bidding   bool
	inventory *gpu.Inventory
	gpuDriver string
	catalog   *checkpoint.Catalog
	pricer    bidder.Pricer
	runtimes  runtimes
	metrics   *metrics.Metrics
	// storageRole holds dataset pieces and answers their challenges; nil
	// unless [storage_role] is enabled.
	storageRole *storage.Role

	// bidQueue holds jobs to decide on; withdrawQueue coalesces requests to
	// withdraw earnings. Both are rebuilt from the chain after a restart.
	bidQueue      chan uint64
	withdrawQueue chan struct{}
	disputeQueue  chan uint64
	verifyQueue   chan checkpoint.Ref
	cheatFrom     uint64

	mu       sync.Mutex
	leases   map[uint64]*leaseRun
	progress map[uint64]uint64 // lease → step the trainer last reported
	// executions are the verifier's re-executions of challenged checkpoints,
	// by challenge; verifiedStates its latest computed state per lease.
	executions     map[uint64]*dispute.Execution
	verifiedStates map[uint64]*reftrainer.State
	ready          bool
	lastErr        string
}

// New connects to the chain and checks everything the provider needs before
// it may act: the node answers on both endpoints and runs the configured
// chain, the hot key exists, the operator is a registered provider and has
// granted the hot key every message it sends. Each failure names what is
// wrong and how to fix it.
func New(ctx context.Context, opts Options) (*Daemon, error) {
	cfg := opts.Config
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{
		cfg: cfg, log: log, version: opts.Version, startedAt: time.Now(),
		catalog:        checkpoint.NewCatalog(cfg.Checkpoints.Retention.Duration),
		metrics:        metrics.New(hostname()),
		bidQueue:       make(chan uint64, 4096),
		withdrawQueue:  make(chan struct{}, 1),
		disputeQueue:   make(chan uint64, 1024),
		verifyQueue:    make(chan checkpoint.Ref, 4096),
		cheatFrom:      opts.CheatFabricateFromStep,
		leases:         map[uint64]*leaseRun{},
		progress:       map[uint64]uint64{},
		executions:     map[uint64]*dispute.Execution{},
		verifiedStates: map[uint64]*reftrainer.State{},
	}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()

	if err := checkRPC(ctx, cfg.Chain.RPC, cfg.Chain.ChainID); err != nil {
		return nil, err
	}
	enc := chain.NewEncodingConfig()
	conn, err := chain.DialGRPC(cfg.Chain.GRPC, enc.InterfaceRegistry)
	if err != nil {
		return nil, fmt.Errorf("chain.grpc %s: %w", cfg.Chain.GRPC, err)
	}
	d.conn = conn
	if err := checkGRPC(ctx, conn, cfg.Chain.GRPC, cfg.Chain.ChainID); err != nil {
		return nil, err
	}
	d.querier = chain.NewQuerier(conn, enc.InterfaceRegistry)
	d.market = markettypes.NewQueryClient(conn)
	d.verify = verifytypes.NewQueryClient(conn)
	d.providers = stakingexttypes.NewQueryClient(conn)

	kr, err := chain.OpenKeyring(cfg.Keys.KeyringBackend, cfg.Keys.KeyringDir, enc.Codec, opts.KeyringInput)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	if err := checkHotKey(kr, cfg.Keys.HotKey, cfg.Keys.KeyringBackend, cfg.Keys.KeyringDir); err != nil {
		return nil, err
	}
	d.submitter, err = chain.NewSubmitter(conn, kr, enc, chain.SubmitterConfig{
		ChainID: cfg.Chain.ChainID, HotKey: cfg.Keys.HotKey, Operator: cfg.Keys.Operator,
		GasPrices: cfg.Chain.GasPrices, GasAdjustment: cfg.Chain.GasAdjustment,
		Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	d.operator = cfg.Keys.Operator
	if d.operator == "" {
		d.operator = d.submitter.HotKeyAddress()
	}
	if err := d.checkProvider(ctx); err != nil {
		return nil, err
	}
	if err := d.checkGrants(ctx); err != nil {
		return nil, err
	}

	if d.inventory, d.gpuDriver, err = openInventory(cfg.GPUs.Source, opts.GPULibrary, log); err != nil {
		return nil, err
	}
	if d.pricer, err = newPricer(cfg.Pricing); err != nil {
		return nil, err
	}
	if d.runtimes, err = newRuntimes(cfg.Runtimes, d.onTrainingProgress); err != nil {
		return nil, err
	}

	if err := os.MkdirAll(cfg.Storage.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("storage.data_dir: %w", err)
	}
	if err := os.MkdirAll(cfg.Storage.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("storage.work_dir: %w", err)
	}
	if d.db, err = db.Open(filepath.Join(cfg.Storage.DataDir, StateFileName)); err != nil {
		return nil, fmt.Errorf("storage.data_dir: %w", err)
	}
	if cfg.StorageRole.Enabled {
		d.storageRole, err = storage.New(storage.Options{
			Operator: d.operator, Submit: d.submit, Conn: conn, DB: d.db,
			PiecesDir: cfg.StorageRole.PiecesDir, ClaimLocal: cfg.StorageRole.ClaimLocal,
			Repair: cfg.StorageRole.Repair, RepairDatasets: cfg.StorageRole.RepairDatasets,
			CheckInterval: cfg.StorageRole.CheckInterval.Duration, Logger: log,
		})
		if err != nil {
			return nil, fmt.Errorf("storage_role: %w", err)
		}
		d.metrics.RegisterStorage(func() metrics.StorageTotals {
			c := d.storageRole.Status().Counters
			return metrics.StorageTotals{PiecesHeld: c.PiecesHeld, ChallengesAnswered: c.ChallengesAnswered,
				ChallengesMissed: c.ChallengesMissed, FaultsDecl: c.FaultsDeclared, Repairs: c.Repairs}
		})
	}
	d.follower, err = chain.NewFollower(chain.FollowerConfig{
		RPC: cfg.Chain.RPC, StartHeight: cfg.Chain.StartHeight, Logger: log,
	}, d.db, d.handleHeight)
	if err != nil {
		return nil, err
	}
	ok = true
	return d, nil
}

// Operator is the provider address the daemon acts for.
func (d *Daemon) Operator() string { return d.operator }

// Run serves until ctx ends: the checkpoint server, the status API, the
// chain follower and the workers that bid, train and withdraw. It returns
// nil after a clean stop, or the first error no retry can fix.
func (d *Daemon) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	checkpointLn, err := net.Listen("tcp", d.cfg.Checkpoints.Listen)
	if err != nil {
		return fmt.Errorf("checkpoints.listen: %w", err)
	}
	apiLn, err := net.Listen("tcp", d.cfg.API.Listen)
	if err != nil {
		checkpointLn.Close()
		return fmt.Errorf("api.listen: %w", err)
	}
	d.log.Info("provider sidecar starting", "operator", d.operator, "hot_key", d.submitter.HotKeyAddress(),
		"chain_id", d.cfg.Chain.ChainID, "gpus", len(d.inventory.GPUs()), "gpu_source", d.gpuDriver,
		"runtimes", d.runtimes.names(), "api", apiLn.Addr().String(), "checkpoints", checkpointLn.Addr().String())

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	spawn := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}

	public := http.NewServeMux()
	public.Handle("/checkpoints/", checkpoint.NewHandler(d.catalog))
	if d.storageRole != nil {
		// Holders repairing a shard fetch its other pieces from here.
		public.Handle("/pieces/", storage.NewPieceHandler(d.cfg.StorageRole.PiecesDir))
	}
	checkpointSrv := &http.Server{Handler: public, ReadHeaderTimeout: 10 * time.Second}
	spawn("checkpoint server", func(ctx context.Context) error { return serveHTTP(ctx, checkpointSrv, checkpointLn) })
	spawn("status api", func(ctx context.Context) error { return d.serveAPI(ctx, apiLn) })

	// Rebuild what the store knows before following new blocks: retained
	// checkpoints, running leases, open jobs not decided yet.
	if err := d.restore(ctx); err != nil {
		cancel()
		wg.Wait()
		return err
	}
	if err := d.reconcile(ctx); err != nil {
		d.log.Warn("start-up reconciliation failed; the chain follower will catch up", "err", err)
	}
	if err := d.resumeDisputes(ctx); err != nil {
		d.log.Warn("looking up open disputes failed; their next turns will bring them", "err", err)
	}
	d.setReady(true)

	spawn("follower", d.follower.Run)
	spawn("bidder", d.runBidder)
	spawn("earnings", d.runWithdrawals)
	spawn("gpu health", d.runHealth)
	spawn("retention", d.runRetention)
	spawn("metrics", d.runChainMetrics)
	spawn("disputes", d.runDisputes)
	if d.cfg.Verifier.Enabled {
		spawn("verifier", d.runVerifier)
	}
	if d.storageRole != nil {
		spawn("storage role", d.storageRole.Run)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
		d.log.Error("provider sidecar stopping", "err", runErr)
	}
	cancel()
	d.setReady(false)
	d.stopLeases()
	wg.Wait()
	d.log.Info("provider sidecar stopped")
	return runErr
}

// Close releases the store, the chain connection and the GPU library.
func (d *Daemon) Close() error {
	var errs []error
	if d.db != nil {
		errs = append(errs, d.db.Close())
	}
	if d.conn != nil {
		errs = append(errs, d.conn.Close())
	}
	if d.inventory != nil {
		errs = append(errs, d.inventory.Close())
	}
	errs = append(errs, d.runtimes.close())
	return errors.Join(errs...)
}

func (d *Daemon) setReady(ready bool) {
	d.mu.Lock()
	d.ready = ready
	d.mu.Unlock()
}

func (d *Daemon) noteError(err error) {
	d.mu.Lock()
	d.lastErr = err.Error()
	d.mu.Unlock()
}

func serveHTTP(ctx context.Context, srv *http.Server, ln net.Listener) error {
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown) //nolint:errcheck // best effort on the way out
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// checkGRPC makes sure the gRPC endpoint answers and serves the configured chain.
func checkGRPC(ctx context.Context, conn *grpc.ClientConn, addr, chainID string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := cmtservice.NewServiceClient(conn).GetNodeInfo(ctx, &cmtservice.GetNodeInfoRequest{})
	if err != nil {
		return fmt.Errorf("chain.grpc %s does not answer: %w", addr, err)
	}
	if network := res.GetDefaultNodeInfo().GetNetwork(); network != chainID {
		return fmt.Errorf("chain.grpc %s serves chain %q, but chain.chain_id is %q", addr, network, chainID)
	}
	return nil
}

func checkHotKey(kr keyring.Keyring, name, backend, dir string) error {
	if _, err := kr.Key(name); err != nil {
		return fmt.Errorf("keys.hot_key: no key %q in the %s keyring at %s (create it with: depinchaind keys add %s --keyring-backend %s --home <dir>): %w",
			name, backend, dir, name, backend, err)
	}
	return nil
}

// checkProvider makes sure the operator is a registered, bidding provider:
// bids from anyone else fail on chain.
func (d *Daemon) checkProvider(ctx context.Context) error {
	res, err := d.providers.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: d.operator})
	if err != nil && d.cfg.Verifier.Enabled && len(d.cfg.Pricing.Table) == 0 && len(d.cfg.Pricing.PricingCommand) == 0 {
		d.log.Info("verifier only: the operator is not a registered provider and the sidecar does not bid", "operator", d.operator)
		return nil
	}
	if err != nil {
		return fmt.Errorf("operator %s is not a registered provider (register with: depinchaind tx stakingext register-provider ...): %w", d.operator, err)
	}
	d.bidding = true
	d.log.Info("provider on chain", "operator", d.operator, "moniker", res.Provider.Moniker, "bond", res.Provider.Bond.String(), "status", res.Provider.Status.String())
	return nil
}

// checkGrants refuses to start when the operator has not granted the hot key
// every message the sidecar sends, and names the missing ones.
func (d *Daemon) checkGrants(ctx context.Context) error {
	hot := d.submitter.HotKeyAddress()
	if d.operator == hot {
		return nil
	}
	required := chain.RequiredGrants
	if d.cfg.Verifier.Enabled {
		required = append(slices.Clone(required), VerifierGrants...)
	}
	if d.cfg.StorageRole.Enabled {
		required = append(slices.Clone(required), storage.RequiredGrants...)
	}
	missing, err := d.querier.CheckGrants(ctx, d.operator, hot, required)
	if err != nil {
		return fmt.Errorf("checking authz grants: %w", err)
	}
	if len(missing) > 0 {
		return &MissingGrantsError{Operator: d.operator, Grantee: hot, Missing: missing}
	}
	return nil
}

// MissingGrantsError names the messages the operator still has to grant the hot key.
type MissingGrantsError struct {
	Operator, Grantee string
	Missing           []string
}

func (e *MissingGrantsError) Error() string {
	msg := fmt.Sprintf("operator %s has not granted hot key %s these messages:", e.Operator, e.Grantee)
	for _, m := range e.Missing {
		msg += "\n  " + m
	}
	msg += "\ngrant each with: depinchaind tx authz grant " + e.Grantee + " generic --msg-type <type> --from <operator key>"
	return msg
}

func openInventory(source string, lib gpu.Library, log *slog.Logger) (*gpu.Inventory, string, error) {
	driver := source
	switch {
	case lib != nil:
		driver = "injected"
	case source == config.GPUSourceNone:
		log.Info("gpus.source is \"none\": offering no GPUs")
		return gpu.Empty(), "none", nil
	case source == config.GPUSourceMockDGXH100:
		log.Warn("gpus.source is \"mock-dgxh100\": offering a SIMULATED DGX H100; never use this on a real provider")
		lib = gpu.NewSimulatedDGXH100()
	}
	var inv *gpu.Inventory
	var err error
	if lib != nil {
		inv, err = gpu.Open(lib)
	} else {
		inv, err = gpu.OpenSystem()
	}
	if errors.Is(err, gpu.ErrNoDriver) {
		log.Warn("no NVIDIA driver: offering no GPUs; non-GPU roles still run", "err", err)
		return inv, "none: no NVIDIA driver", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("gpus: %w", err)
	}
	return inv, driver, nil
}

func newPricer(p config.Pricing) (bidder.Pricer, error) {
	if len(p.PricingCommand) > 0 {
		return bidder.CommandPricer{Command: p.PricingCommand, Timeout: 10 * time.Second}, nil
	}
	table := bidder.PriceTable{}
	for model, price := range p.Table {
		table[model] = sdkmath.NewIntFromUint64(price)
	}
	return bidder.TablePricer{Denom: chainparams.BondDenom, Table: table}, nil
}

// simulatedGPUs reports whether the inventory is the simulated DGX H100.
func (d *Daemon) simulatedGPUs() bool { return d.gpuDriver == config.GPUSourceMockDGXH100 }

func hostname() string {
	name, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return name
}

// Package daemon is depinprovider's long-running process. It checks at
// start that the provider may act, then wires the sidecar's roles
// together: it follows the chain height by height, hands every event to
// every role, runs the roles, and answers the status API about them.
//
// The roles do the work, each in its own package: bidding (bids on jobs the
// host can serve), leases (trains won leases, commits and serves their
// checkpoints, withdraws earnings), disputes (plays the verification game,
// and verifies other providers' checkpoints in verifier mode) and storage
// (holds dataset pieces and answers their challenges).
//
// Everything the sidecar must not forget lives in its database (package
// db); everything else is rebuilt from the chain at start: killed at any
// point and restarted, it resumes each lease from its last local checkpoint
// and replays every block it had not finished, so no event and no payment
// is lost.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/disputes"
	"github.com/depinchain/depinchain/provider/gpu"
	"github.com/depinchain/depinchain/provider/leases"
	"github.com/depinchain/depinchain/provider/metrics"
)

// StateFileName is the database's file in the configured data directory.
const StateFileName = "provider.db"

// PausedLogMsg is the message a sidecar logs when a test hook pauses it at
// a named point (depinprovider's hidden --pause-before-* flags); a test
// waits for it, then kills the sidecar there.
const PausedLogMsg = "PAUSED by a test hook"

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
	// Hooks are the roles' test hooks: only tests and the fraud demo set
	// them (through depinprovider's hidden flags).
	Hooks Hooks
}

// Hooks are the test hooks of the roles that have them.
type Hooks struct {
	Leases   leases.Hooks
	Disputes disputes.Hooks
	// WithholdStates makes the checkpoint server refuse every state download (a
	// provider that withholds what its checkpoints start from, so nobody can check
	// them); metadata and traces are still served.
	WithholdStates bool
	// WithholdCustodyPieces makes the public server refuse the custody pieces of the
	// states the sidecar commits (a trainer that commits roots and serves no pieces,
	// so no holder can take them and its checkpoints never become final).
	WithholdCustodyPieces bool
	// CheatAggregate makes the rounds role a lying aggregator (rounds.Options).
	CheatAggregate bool
	// CheatPseudoGradient makes the rounds role a worker that fabricates its
	// pseudo-gradients (rounds.Options).
	CheatPseudoGradient bool
	// CheatErrorOut makes the rounds role a top-k worker that names error buffers with
	// one element off (rounds.Options.CheatErrorOut).
	CheatErrorOut bool
	// CheatTrainOnSlot makes the rounds role a worker that trains on that slot's data
	// (rounds.Options).
	CheatTrainOnSlot *uint32
}

// Daemon is one running provider sidecar.
type Daemon struct {
	cfg      *config.Config
	log      *slog.Logger
	operator string
	// region is the provider's registered region, read at start.
	region string

	db        *db.DB
	conn      *grpc.ClientConn
	queries   chain.Queries
	submitter *chain.Submitter
	follower  *chain.Follower

	host    host
	catalog *checkpoint.Catalog
	metrics *metrics.Metrics
	roles   roles
	state   runState
	// withholdStates is Hooks.WithholdStates.
	withholdStates bool
	// withholdCustodyPieces is Hooks.WithholdCustodyPieces.
	withholdCustodyPieces bool
}

// host is the GPU inventory and where it comes from.
type host struct {
	inventory *gpu.Inventory
	driver    string
}

// runState is what the status API says about the process itself.
type runState struct {
	version   string
	startedAt time.Time

	mu    sync.Mutex
	ready bool
}

// New connects to the chain and checks everything the provider needs before
// it may act: the node answers on both endpoints and runs the configured
// chain, the hot key exists, the operator is a registered provider and has
// granted the hot key every message it sends. Each failure names what is
// wrong and how to fix it. Then it opens the database and sets up the roles.
func New(ctx context.Context, opts Options) (*Daemon, error) {
	cfg := opts.Config
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{
		cfg: cfg, log: log,
		catalog: checkpoint.NewCatalog(cfg.Checkpoints.Retention.Duration),
		metrics: metrics.New(hostname()),
		state:   runState{version: opts.Version, startedAt: time.Now()},
	}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	if err := d.connect(ctx); err != nil {
		return nil, err
	}
	if err := d.openKeys(opts.KeyringInput); err != nil {
		return nil, err
	}
	registered, err := d.checkProvider(ctx)
	if err != nil {
		return nil, err
	}
	if err := d.checkGrants(ctx); err != nil {
		return nil, err
	}
	if d.host.inventory, d.host.driver, err = openInventory(cfg.GPUs, opts.GPULibrary, log); err != nil {
		return nil, err
	}
	if err := d.openDB(); err != nil {
		return nil, err
	}
	d.withholdStates = opts.Hooks.WithholdStates
	d.withholdCustodyPieces = opts.Hooks.WithholdCustodyPieces
	if d.roles, err = d.newRoles(!registered, opts.Hooks); err != nil {
		return nil, err
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

// connect checks both endpoints of the node and dials its gRPC.
func (d *Daemon) connect(ctx context.Context) error {
	c := d.cfg.Chain
	if err := checkRPC(ctx, c.RPC, c.ChainID); err != nil {
		return err
	}
	conn, err := chain.DialGRPC(c.GRPC, chain.NewEncodingConfig().InterfaceRegistry)
	if err != nil {
		return fmt.Errorf("chain.grpc %s: %w", c.GRPC, err)
	}
	d.conn = conn
	if err := checkGRPC(ctx, conn, c.GRPC, c.ChainID); err != nil {
		return err
	}
	d.queries = chain.NewQueries(conn)
	return nil
}

// openKeys opens the keyring and the submitter that signs with the hot key.
func (d *Daemon) openKeys(input io.Reader) error {
	k, c := d.cfg.Keys, d.cfg.Chain
	enc := chain.NewEncodingConfig()
	kr, err := chain.OpenKeyring(k.KeyringBackend, k.KeyringDir, enc.Codec, input)
	if err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	if err := checkHotKey(kr, k.HotKey, k.KeyringBackend, k.KeyringDir); err != nil {
		return err
	}
	d.submitter, err = chain.NewSubmitter(d.conn, kr, enc, chain.SubmitterConfig{
		ChainID: c.ChainID, HotKey: k.HotKey, Operator: k.Operator,
		GasPrices: c.GasPrices, GasAdjustment: c.GasAdjustment, Logger: d.log,
	})
	if err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	if d.operator = k.Operator; d.operator == "" {
		d.operator = d.submitter.HotKeyAddress()
	}
	return nil
}

// openDB creates the data and work folders and opens the database.
func (d *Daemon) openDB() error {
	s := d.cfg.Storage
	if err := os.MkdirAll(s.DataDir, 0o700); err != nil {
		return fmt.Errorf("storage.data_dir: %w", err)
	}
	if err := os.MkdirAll(s.WorkDir, 0o755); err != nil {
		return fmt.Errorf("storage.work_dir: %w", err)
	}
	var err error
	if d.db, err = db.Open(filepath.Join(s.DataDir, StateFileName)); err != nil {
		return fmt.Errorf("storage.data_dir: %w", err)
	}
	return nil
}

// Operator is the provider address the daemon acts for.
func (d *Daemon) Operator() string { return d.operator }

// Close releases the database, the chain connection, the GPU library and
// the roles' runtimes.
func (d *Daemon) Close() error {
	var errs []error
	if d.db != nil {
		errs = append(errs, d.db.Close())
	}
	if d.conn != nil {
		errs = append(errs, d.conn.Close())
	}
	if d.host.inventory != nil {
		errs = append(errs, d.host.inventory.Close())
	}
	if d.roles.leases != nil {
		errs = append(errs, d.roles.leases.Close())
	}
	return errors.Join(errs...)
}

func (s *runState) setReady(ready bool) {
	s.mu.Lock()
	s.ready = ready
	s.mu.Unlock()
}

func (s *runState) isReady() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready
}

func hostname() string {
	name, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return name
}

package daemon

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/chainparams"
	"github.com/depinchain/depinchain/pkg/custody/fetch"
	"github.com/depinchain/depinchain/pkg/reqauth"
	"github.com/depinchain/depinchain/provider/audits"
	"github.com/depinchain/depinchain/provider/bidding"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/datasets"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/disputes"
	"github.com/depinchain/depinchain/provider/gpu"
	"github.com/depinchain/depinchain/provider/internal/rolekit"
	"github.com/depinchain/depinchain/provider/leases"
	"github.com/depinchain/depinchain/provider/metrics"
	"github.com/depinchain/depinchain/provider/pieces"
	"github.com/depinchain/depinchain/provider/rounds"
	"github.com/depinchain/depinchain/provider/storage"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardregistrytypes "github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// Role is one duty of the sidecar. The daemon hands it every event of every
// block and runs it; the role does the rest on its own.
type Role interface {
	// Name names the role in logs, e.g. "bidding".
	Name() string
	// HandleEvent records what one event means for the role in tx, the
	// database transaction of the event's height, which marks the event
	// handled and commits every role's records together, or nothing. It
	// returns what to do once tx committed (start a trainer, queue a move),
	// or nil. Each event reaches each role once, in block order (a height
	// whose transaction failed is handed over again); it must not block or
	// use the network.
	HandleEvent(ctx context.Context, tx *db.Tx, ev chain.Event) (after func(), err error)
	// Run does the role's work until ctx ends. It returns nil after ctx
	// ends, or an error no retry can fix, which stops the sidecar.
	Run(ctx context.Context) error
}

// Resumer is a role that rebuilds what it keeps in memory after a start,
// before the first event reaches it: from the database, and from the
// chain's snapshot (nil when it could not be read).
type Resumer interface {
	Resume(ctx context.Context, snap *chain.Snapshot) error
}

// roles are the roles this sidecar runs. The typed fields serve the status
// API; all is every role in the order events reach them.
type roles struct {
	bidding *bidding.Role
	leases  *leases.Role
	// rounds serves the leases of training-together jobs (through leases).
	rounds   *rounds.Role
	disputes *disputes.Role
	// storage holds dataset pieces and answers their challenges; nil
	// unless [storage_role] is enabled.
	storage *storage.Role
	// audits answers the operator's audit assignments; nil unless [audits] is
	// enabled.
	audits *audits.Role
	all    []Role
}

// newRoles sets up the roles from the configuration. A passive sidecar (a
// verifier that is not a registered provider) records jobs but never bids.
func (d *Daemon) newRoles(passive bool, hooks Hooks) (roles, error) {
	cfg := d.cfg
	var rs roles
	// Dataset-backed jobs train on pieces fetched from their holders: the
	// bidder checks they can be had, the leases role fetches them, and so does
	// the disputes role, to re-execute and dispute their steps.
	data, err := datasets.New(datasets.Options{
		Registry: shardregistrytypes.NewQueryClient(d.conn), Providers: stakingexttypes.NewQueryClient(d.conn), Logger: d.log,
		StreamCacheBytes: cfg.Verifier.DatasetCacheGiB << 30,
	})
	if err != nil {
		return rs, err
	}
	// Checkpoint states kept in custody are rebuilt from their holders: a replacement
	// lease's start state, an auditor's or verifier's.
	custodySource := &fetch.Source{
		Shards:  shardregistrytypes.NewQueryClient(d.conn),
		Fetcher: fetch.Fetcher{Endpoint: pieces.NewEndpoints(stakingexttypes.NewQueryClient(d.conn)).Of, Authorize: d.signRequest},
	}
	rs.rounds, err = rounds.New(rounds.Options{
		Operator: d.operator, Submit: d.submitTx, Chain: d.queries, WorkDir: cfg.Storage.WorkDir,
		CustodyDir: d.custodyDir(), Custody: custodySource, Datasets: data, Metrics: d.metrics, Logger: d.log,
		CheatAggregate: hooks.CheatAggregate, CheatPseudoGradient: hooks.CheatPseudoGradient, CheatErrorOut: hooks.CheatErrorOut,
		CheatTrainOnSlot: hooks.CheatTrainOnSlot,
	})
	if err != nil {
		return rs, err
	}
	rs.leases, err = leases.New(leases.Options{
		Operator: d.operator, Submit: d.submit, Chain: d.queries, DB: d.db, Catalog: d.catalog,
		GPUs: d.host.inventory, SimulatedGPUs: d.host.driver == config.GPUSourceMockDGXH100, Runtimes: cfg.Runtimes,
		WorkDir: cfg.Storage.WorkDir, PublicURL: cfg.Checkpoints.PublicURL, HealthInterval: cfg.GPUs.RefreshInterval.Duration,
		CustodyDir: d.custodyDir(), Custody: custodySource, Rounds: rs.rounds, SubmitTx: d.submitTx, Authorize: d.signRequest,
		Data: data, Metrics: d.metrics, Logger: d.log, Hooks: hooks.Leases,
	})
	if err != nil {
		return rs, err
	}
	var rate func(context.Context, markettypes.Job, string, []bidding.GPU) (uint64, error)
	if !passive {
		rater, err := bidding.NewRater(cfg.Throughput)
		if err != nil {
			return rs, err
		}
		d.log.Info("throughput for committed rates", "go_trainer_macs_per_second", rater.GoMACsPerSecond(),
			"commit_fraction", cfg.Throughput.CommitFraction)
		rate = rater.StepsPerHour
	}
	rs.bidding, err = bidding.New(bidding.Options{
		Operator: d.operator, Passive: passive, Submit: d.submit, Chain: d.queries, DB: d.db,
		GPUs: d.host.inventory, ModelName: d.modelName, Pricer: bidding.PricerFor(cfg.Pricing, chainparams.BondDenom),
		Runtime: rs.leases.RuntimeFor, Rate: rate, Data: data, Region: d.region, Bond: stakingexttypes.NewQueryClient(d.conn),
		Custody:        shardregistrytypes.NewQueryClient(d.conn),
		HealthInterval: cfg.GPUs.RefreshInterval.Duration, Metrics: d.metrics, Logger: d.log,
	})
	if err != nil {
		return rs, err
	}
	// Audit assignments go before verifier-mode sampling.
	priority := &rolekit.Priority{}
	rs.disputes, err = disputes.New(disputes.Options{
		Operator: d.operator, Submit: d.submit, Chain: d.queries, Height: d.chainHeight, DB: d.db,
		Checkpoints: d.catalog, Verifier: cfg.Verifier, WorkDir: cfg.Storage.WorkDir, Custody: custodySource, Datasets: data, Authorize: d.signRequest,
		Metrics: d.metrics, Logger: d.log, Hooks: hooks.Disputes, Priority: priority,
	})
	if err != nil {
		return rs, err
	}
	rs.all = []Role{rs.bidding, rs.leases, rs.rounds, rs.disputes}
	if cfg.Audits.Enabled {
		d.metrics.RegisterAudits()
		rs.audits, err = audits.New(audits.Options{
			Operator: d.operator, Submit: d.submit, Height: d.chainHeight, DB: d.db, Config: cfg.Audits,
			Chain:   auditsChain{Queries: d.queries, QueryClient: stakingexttypes.NewQueryClient(d.conn)},
			Checker: rs.disputes, Priority: priority, Metrics: d.metrics, Logger: d.log,
		})
		if err != nil {
			return rs, err
		}
		rs.all = append(rs.all, rs.audits)
	}
	if cfg.StorageRole.Enabled {
		if rs.storage, err = d.newStorageRole(); err != nil {
			return rs, err
		}
		rs.all = append(rs.all, rs.storage)
	}
	return rs, nil
}

// auditsChain is what the audits role reads: x/verify's queries and x/stakingext's
// verifier query.
type auditsChain struct {
	chain.Queries
	stakingexttypes.QueryClient
}

func (d *Daemon) newStorageRole() (*storage.Role, error) {
	c := d.cfg.StorageRole
	role, err := storage.New(storage.Options{
		Operator: d.operator, Submit: d.submit, Conn: d.conn, DB: d.db,
		PiecesDir: c.PiecesDir, ClaimLocal: c.ClaimLocal, Repair: c.Repair, RepairDatasets: c.RepairDatasets, Custody: c.Custody,
		Authorize:     d.signRequest,
		CheckInterval: c.CheckInterval.Duration, Logger: d.log,
	})
	if err != nil {
		return nil, fmt.Errorf("storage_role: %w", err)
	}
	d.metrics.RegisterStorage(func() metrics.StorageTotals {
		c := role.Status().Counters
		return metrics.StorageTotals{PiecesHeld: c.PiecesHeld, ChallengesAnswered: c.ChallengesAnswered,
			ChallengesMissed: c.ChallengesMissed, FaultsDecl: c.FaultsDeclared, Repairs: c.Repairs}
	})
	return role, nil
}

// resume lets every role rebuild after a start, from the database and one
// snapshot of the chain.
func (d *Daemon) resume(ctx context.Context) error {
	snap, err := chain.NewQuerier(d.conn, chain.NewEncodingConfig().InterfaceRegistry).Reconcile(ctx, d.operator)
	if err != nil {
		d.log.Warn("start-up reconciliation failed; the chain follower will catch up", "err", err)
		snap = nil
	} else {
		d.log.Info("reconciling with the chain", "height", snap.Height, "open_jobs", len(snap.OpenJobs), "active_leases", len(snap.ActiveLeases))
	}
	for _, r := range d.roles.all {
		if res, ok := r.(Resumer); ok {
			if err := res.Resume(ctx, snap); err != nil {
				return fmt.Errorf("%s role: %w", r.Name(), err)
			}
		}
	}
	return nil
}

// handleHeight is the follower's handler: it hands each event of one block
// to every role in one database transaction, each event at most once, and
// only then runs what the roles asked to do once their records are safe
// (bid, start and stop trainers, move in games). That is idempotent and
// rebuilt from the database at start, so a crash between the two loses
// nothing.
func (d *Daemon) handleHeight(ctx context.Context, height int64, events []chain.Event) error {
	var after []func()
	err := d.db.Update(func(tx *db.Tx) error {
		after = after[:0]
		for _, ev := range events {
			first, err := tx.MarkHandled(ev.Key(), height)
			if err != nil {
				return err
			}
			if !first {
				continue
			}
			for _, r := range d.roles.all {
				act, err := r.HandleEvent(ctx, tx, ev)
				if err != nil {
					return fmt.Errorf("%s role: %s: %w", r.Name(), ev.Type(), err)
				}
				if act != nil {
					after = append(after, act)
				}
			}
		}
		// Keys of heights the cursor is long past can never be replayed.
		if height%1000 == 0 {
			if _, err := tx.PruneHandled(height - 1000); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, act := range after {
		act()
	}
	return nil
}

// submit sends one message through the submitter and counts the outcome.
func (d *Daemon) submit(ctx context.Context, msg sdk.Msg) (*chain.TxResult, error) {
	res, err := d.submitter.Submit(ctx, msg)
	d.metrics.Transaction(sdk.MsgTypeURL(msg), err == nil)
	return res, err
}

// submitTx sends several messages in one transaction and counts the outcome of each.
func (d *Daemon) submitTx(ctx context.Context, msgs ...sdk.Msg) (*chain.TxResult, error) {
	res, err := d.submitter.Submit(ctx, msgs...)
	for _, msg := range msgs {
		d.metrics.Transaction(sdk.MsgTypeURL(msg), err == nil)
	}
	return res, err
}

// chainHeight is the chain's latest height as the follower last saw it.
func (d *Daemon) chainHeight() int64 { return d.follower.Status().ChainHeight }

// modelName is the catalogue's name of an NVML product name, for GPUs the
// inventory has not named (metrics and status of unknown GPUs).
func (d *Daemon) modelName(nvmlName string) string {
	for _, g := range d.host.inventory.GPUs() {
		if g.Name == nvmlName && g.Model != "" {
			return g.Model
		}
	}
	return gpu.ModelName(nvmlName)
}

// custodyDir is where the leases role writes the custody pieces of the states it
// commits; the public server serves them under /pieces/ beside the storage role's.
func (d *Daemon) custodyDir() string { return filepath.Join(d.cfg.Storage.WorkDir, "custody") }

// signRequest signs a request to another provider's server with the hot key
// (pkg/reqauth): trainers serve checkpoint states, holders their pieces, only to
// signed requests.
func (d *Daemon) signRequest(req *http.Request) error {
	return reqauth.Sign(req, d.cfg.Chain.ChainID, d.submitter.HotKeyAddress(), d.submitter.SignBytes, time.Now())
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/depinchain/depinchain/pkg/reqauth"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/internal/rolekit"
	"github.com/depinchain/depinchain/provider/logs"
	"github.com/depinchain/depinchain/provider/storage"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// maxReadyLag is how far behind the chain the follower may be while ready.
const maxReadyLag = 5

// Run serves until ctx ends: the checkpoint server, the status API, the
// chain follower and every role. It returns nil after a clean stop, or the
// first error no retry can fix.
func (d *Daemon) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	public, api, err := d.listen()
	if err != nil {
		return err
	}
	d.log.Info("provider sidecar starting", "operator", d.operator, "hot_key", d.submitter.HotKeyAddress(),
		"chain_id", d.cfg.Chain.ChainID, "gpus", len(d.host.inventory.GPUs()), "gpu_source", d.host.driver,
		"runtimes", d.roles.leases.Status().Runtimes, "api", api.Addr().String(), "checkpoints", public.Addr().String())

	var wg sync.WaitGroup
	errs := make(chan error, len(d.roles.all)+5)
	spawn := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	spawn("checkpoint server", func(ctx context.Context) error { return serveHTTP(ctx, d.publicServer(), public) })
	spawn("status api", func(ctx context.Context) error { return d.serveAPI(ctx, api) })

	// Every role rebuilds what the database knows before new blocks come.
	if err := d.resume(ctx); err != nil {
		cancel()
		wg.Wait()
		return err
	}
	d.state.setReady(true)
	spawn("follower", d.follower.Run)
	spawn("gpu health", d.runGPUs)
	spawn("metrics", d.runChainMetrics)
	for _, r := range d.roles.all {
		spawn(r.Name()+" role", r.Run)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
		d.log.Error("provider sidecar stopping", "err", runErr)
	}
	cancel()
	d.state.setReady(false)
	wg.Wait()
	d.log.Info("provider sidecar stopped")
	return runErr
}

// listen opens the checkpoint server's and the status API's listeners.
func (d *Daemon) listen() (public, api net.Listener, err error) {
	if public, err = net.Listen("tcp", d.cfg.Checkpoints.Listen); err != nil {
		return nil, nil, fmt.Errorf("checkpoints.listen: %w", err)
	}
	if api, err = net.Listen("tcp", d.cfg.API.Listen); err != nil {
		public.Close()
		return nil, nil, fmt.Errorf("api.listen: %w", err)
	}
	return public, api, nil
}

// publicServer serves what other parties download: checkpoints and, for
// the storage role, pieces (holders repairing a shard fetch its other
// pieces from here).
func (d *Daemon) publicServer() *http.Server {
	mux := http.NewServeMux()
	var checkpoints http.Handler = checkpoint.NewHandler(d.catalog)
	if d.withholdStates {
		checkpoints = withholdStates(checkpoints)
	}
	// Checkpoint states, like their custody pieces, only to signed requests of the
	// parties allowed to read them; one Verifier, so a nonce is accepted once by both.
	verifier := &reqauth.Verifier{ChainID: d.cfg.Chain.ChainID}
	checkpoints = checkpoint.RestrictStates(checkpoints, verifier, stateReaders{d.conn})
	mux.Handle(checkpoint.PathPrefix, checkpoints)
	mux.Handle(logs.PathPrefix, &logs.Server{ChainID: d.cfg.Chain.ChainID, WorkDir: d.cfg.Storage.WorkDir, Chain: logReaders{d.conn}})
	var piecesDirs []string
	if !d.withholdCustodyPieces {
		piecesDirs = append(piecesDirs, d.custodyDir())
	}
	if d.roles.storage != nil {
		piecesDirs = append(piecesDirs, d.cfg.StorageRole.PiecesDir)
	}
	mux.Handle("/pieces/", storage.RestrictCustodyPieces(storage.NewPieceHandler(piecesDirs...), verifier, stateReaders{d.conn}))
	return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
}

// logReaders tells provider/logs who may read a lease's trainer logs: the
// job's owner and the lease's auditors, as the chain has them.
type logReaders struct{ conn *grpc.ClientConn }

func (c logReaders) Readers(ctx context.Context, lease uint64) ([]string, error) {
	l, err := markettypes.NewQueryClient(c.conn).Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: lease})
	if status.Code(err) == codes.NotFound {
		return nil, fmt.Errorf("%w: %d", logs.ErrUnknownLease, lease)
	} else if err != nil {
		return nil, err
	}
	j, err := markettypes.NewQueryClient(c.conn).Job(ctx, &markettypes.QueryJobRequest{JobId: l.Lease.JobId})
	if err != nil {
		return nil, err
	}
	out := []string{j.Job.Owner}
	a, err := verifytypes.NewQueryClient(c.conn).Audits(ctx, &verifytypes.QueryAuditsRequest{LeaseId: lease})
	if err != nil {
		return nil, err
	}
	for _, au := range a.Audits {
		out = append(out, au.Auditor)
	}
	return out, nil
}

// withholdStates is the test hook of a provider that does not serve the states its
// checkpoints start from: state and chunk downloads fail, the rest is served.
func withholdStates(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/state") || strings.Contains(r.URL.Path, "/chunks/") {
			http.Error(w, "withheld (test hook)", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
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

// runGPUs re-reads GPU telemetry and health every gpus.refresh_interval and
// exports it. A GPU that fails stops being offered at once; the roles flag
// the lease it serves and withdraw the bids that reserved it.
func (d *Daemon) runGPUs(ctx context.Context) error {
	rolekit.Every(ctx, d.cfg.GPUs.RefreshInterval.Duration, func() {
		if err := d.host.inventory.Refresh(); err != nil {
			d.log.Warn("reading GPUs failed", "err", err)
		}
		var taken map[string]uint64
		if err := d.db.View(func(tx *db.Tx) (err error) {
			taken, err = tx.TakenGPUs()
			return err
		}); err != nil {
			d.log.Error("reading the database failed", "err", err)
		}
		d.metrics.ObserveGPUs(d.host.inventory.GPUs(), d.modelName, func(uuid string) uint64 { return taken[uuid] })
	})
	return nil
}

// runChainMetrics exports the follower's progress.
func (d *Daemon) runChainMetrics(ctx context.Context) error {
	rolekit.Every(ctx, time.Second, func() {
		st := d.follower.Status()
		d.metrics.SetCursorHeight(st.CursorHeight)
		d.metrics.SetChainHeight(st.ChainHeight)
		d.metrics.SetWebsocketConnected(st.WebsocketConnected)
	})
	return nil
}

// notReady lists why the daemon should not be sent traffic yet.
func (d *Daemon) notReady() []string {
	var reasons []string
	if !d.state.isReady() {
		reasons = append(reasons, "starting or stopping")
	}
	if st := d.follower.Status(); st.ChainHeight == 0 {
		reasons = append(reasons, "chain height unknown yet")
	} else if st.Lag > maxReadyLag {
		reasons = append(reasons, fmt.Sprintf("catching up: %d blocks behind", st.Lag))
	}
	return reasons
}

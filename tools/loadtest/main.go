// Command loadtest measures how many market transactions a depinchain node
// includes per second, against bank sends measured in the same run, on the
// same node, at the same concurrency.
//
// It starts a single-validator chain on loopback (testutil/localnet, with
// many generated accounts funded at genesis), or uses an existing node given
// by -rpc and -grpc. It registers GPU providers, warms up, then runs two
// phases of fixed length: bank sends (MsgSend), then the market (owners
// submit jobs; the tool's providers bid on them and commit honest checkpoints,
// built with the reference trainer and the Merkle package, for the leases
// they win). Transactions are signed offline with local sequences and
// broadcast in sync mode over gRPC without waiting for blocks; inclusion,
// result codes and gas come from CometBFT's block and block_results.
//
// It prints tx/s and msgs/s included per phase, the market/bank ratio, block
// times (mean, p50, p95) and gas used per message type. `make bench` runs it;
// see docs/loadtest.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	rpchttp "github.com/cometbft/cometbft/rpc/client/http"
	"github.com/cosmos/gogoproto/proto"
	"google.golang.org/grpc"

	sdkmath "cosmossdk.io/math"

	"github.com/cosmos/cosmos-sdk/crypto/keyring"

	sdk "github.com/cosmos/cosmos-sdk/types"
	txtypes "github.com/cosmos/cosmos-sdk/types/tx"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/depinchain/depinchain/pkg/chainparams"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/testutil/localnet"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

const denom = "udepin"

// config is the run's size and where it runs; flags set it.
type config struct {
	duration, warmup time.Duration
	// txs, when positive, ends a phase after that many transactions instead.
	txs                                int
	concurrency, msgsPerTx, maxPending int
	bankAccounts, owners, providers    int
	bidsPerJob                         int
	bidBacklog                         int
	biddingWindow, steps               uint64
	challengeWindow                    uint64
	blockTime                          time.Duration
	seed                               string
	// fund is what each generated account gets, in udepin; bond is what
	// each provider bonds (a run's leases lock a few hundred udepin each).
	fund int64
	bond int64

	// home holds the node the tool starts (a temporary folder when empty);
	// keepHome leaves it in place.
	home     string
	keepHome bool
	// rpc and grpc name an existing node instead; funder, a key in the test
	// keyring in keyringDir, then funds the generated accounts.
	rpc, grpc, keyringDir, funder string

	drainTimeout, lostAfter time.Duration
	jsonOut                 string
	verbose                 bool
	log                     io.Writer
}

func defaultConfig() config {
	return config{
		duration: 20 * time.Second, warmup: 5 * time.Second,
		concurrency: 8, msgsPerTx: 1, maxPending: 2000,
		bankAccounts: 32, owners: 32, providers: 32, bidsPerJob: 2, bidBacklog: 400,
		biddingWindow: 6, steps: 8, challengeWindow: 10,
		blockTime: 500 * time.Millisecond, seed: "default",
		fund: 1_000_000_000_000, bond: 1_000_000_000,
		drainTimeout: 30 * time.Second, lostAfter: 30 * time.Second,
		log: os.Stderr,
	}
}

func main() {
	cfg := defaultConfig()
	flag.DurationVar(&cfg.duration, "duration", cfg.duration, "length of the bank phase and of the market phase")
	flag.IntVar(&cfg.txs, "txs", 0, "end each phase after this many transactions instead (0: use -duration)")
	flag.DurationVar(&cfg.warmup, "warmup", cfg.warmup, "bank sends before the bank phase, not counted (the market warm-up lasts -bidding-window + 8 blocks); 0 skips both")
	flag.IntVar(&cfg.concurrency, "concurrency", cfg.concurrency, "goroutines signing and broadcasting, in both phases")
	flag.IntVar(&cfg.msgsPerTx, "msgs-per-tx", cfg.msgsPerTx, "messages per transaction (sends, jobs, bids or checkpoints of one account)")
	flag.IntVar(&cfg.maxPending, "max-pending", cfg.maxPending, "transactions in flight (accepted, not yet in a block) at most")
	flag.IntVar(&cfg.bankAccounts, "bank-accounts", cfg.bankAccounts, "accounts sending bank transfers")
	flag.IntVar(&cfg.owners, "owners", cfg.owners, "accounts submitting jobs")
	flag.IntVar(&cfg.providers, "providers", cfg.providers, "registered providers bidding and committing checkpoints")
	flag.IntVar(&cfg.bidsPerJob, "bids-per-job", cfg.bidsPerJob, "providers bidding on each job (at most -providers)")
	flag.IntVar(&cfg.bidBacklog, "bid-backlog", cfg.bidBacklog, "bids waiting to be sent (including those of jobs in flight) before owners pause")
	flag.Uint64Var(&cfg.biddingWindow, "bidding-window", cfg.biddingWindow, "jobs' bidding_window_blocks")
	flag.Uint64Var(&cfg.steps, "steps", cfg.steps, "reference-workload steps per job (one checkpoint covers them all)")
	flag.Uint64Var(&cfg.challengeWindow, "challenge-window", cfg.challengeWindow, "x/verify challenge_window of the chain the tool starts, in blocks")
	flag.DurationVar(&cfg.blockTime, "block-time", cfg.blockTime, "timeout_commit of the chain the tool starts")
	flag.StringVar(&cfg.seed, "seed", cfg.seed, "derives the generated keys (the same seed gives the same accounts)")
	flag.StringVar(&cfg.home, "home", "", "folder for the node the tool starts (default: a temporary folder, removed afterwards)")
	flag.BoolVar(&cfg.keepHome, "keep-home", false, "do not remove the node's folder")
	flag.StringVar(&cfg.rpc, "rpc", "", "CometBFT RPC of an existing node (e.g. tcp://127.0.0.1:26657); with -grpc, no node is started")
	flag.StringVar(&cfg.grpc, "grpc", "", "gRPC address of the existing node (e.g. 127.0.0.1:9090)")
	flag.StringVar(&cfg.keyringDir, "keyring-dir", "", "test-backend keyring holding -funder (existing node only)")
	flag.StringVar(&cfg.funder, "funder", "", "key that funds the generated accounts on an existing node")
	flag.Int64Var(&cfg.fund, "fund", cfg.fund, "udepin given to each generated account")
	flag.StringVar(&cfg.jsonOut, "json", "", "also write the report as JSON to this file")
	flag.BoolVar(&cfg.verbose, "v", false, "log every block's market transactions and the pipeline's queues")
	flag.Parse()

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	rep, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
	rep.WriteTable(os.Stdout)
	if cfg.jsonOut != "" {
		out, err := json.MarshalIndent(rep, "", "  ")
		if err == nil {
			err = os.WriteFile(cfg.jsonOut, out, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(1)
		}
	}
}

func (c config) validate() error {
	switch {
	case c.concurrency < 1, c.msgsPerTx < 1, c.maxPending < 1:
		return errors.New("-concurrency, -msgs-per-tx and -max-pending must be at least 1")
	case c.bankAccounts < 2, c.owners < 1, c.providers < 1:
		return errors.New("need at least 2 bank accounts, 1 owner and 1 provider")
	case c.bidsPerJob < 1 || c.bidsPerJob > c.providers:
		return fmt.Errorf("-bids-per-job must be in [1, %d] (the providers)", c.providers)
	case c.bidBacklog < c.bidsPerJob*c.msgsPerTx:
		return errors.New("-bid-backlog must allow at least one submit-job transaction's bids")
	case c.duration <= 0 && c.txs <= 0:
		return errors.New("-duration or -txs must be positive")
	case (c.rpc == "") != (c.grpc == ""):
		return errors.New("-rpc and -grpc go together")
	case c.rpc != "" && c.funder == "":
		return errors.New("an existing node needs -funder (and -keyring-dir) to fund the generated accounts")
	case c.fund < 2*c.bond:
		return fmt.Errorf("-fund must be at least %d udepin: providers bond %d and owners' jobs need deposits", 2*c.bond, c.bond)
	}
	return nil
}

func (c config) logf(format string, args ...any) {
	if c.log != nil {
		fmt.Fprintf(c.log, "loadtest: "+format+"\n", args...)
	}
}

// run does the whole load test and returns its report.
func run(ctx context.Context, cfg config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	begin := time.Now()
	bank := newAccounts(cfg.seed, "bank", cfg.bankAccounts)
	owners := newAccounts(cfg.seed, "owner", cfg.owners)
	providers := newAccounts(cfg.seed, "provider", cfg.providers)
	all := append(append(append([]*account(nil), bank...), owners...), providers...)

	rpcAddr, grpcAddr, blockTime, pid := cfg.rpc, cfg.grpc, time.Duration(0), 0
	if rpcAddr == "" {
		node, cleanup, err := startNode(ctx, cfg, all)
		if err != nil {
			return nil, err
		}
		defer cleanup()
		rpcAddr, grpcAddr, blockTime, pid = node.RPC, node.GRPC, cfg.blockTime, nodePID(node.Home)
	}

	enc := chain.NewEncodingConfig()
	conn, err := chain.DialGRPC(grpcAddr, enc.InterfaceRegistry)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	rpc, err := rpchttp.New(rpcAddr, "/websocket")
	if err != nil {
		return nil, err
	}
	st, err := rpc.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("node status: %w", err)
	}
	chainID := st.NodeInfo.Network

	var current atomic.Pointer[market]
	t := &tracker{
		rpc: rpc, txs: txtypes.NewServiceClient(conn), auth: authtypes.NewQueryClient(conn),
		signer: signer{txConfig: enc.TxConfig, chainID: chainID}, gas: defaultGas(),
		maxPending: cfg.maxPending, lostAfter: cfg.lostAfter, logf: cfg.logf,
		onBlock: func(h int64, events []abci.Event, ours map[msgKind]counts) {
			if m := current.Load(); m != nil {
				m.block(h, events, ours)
			}
		},
	}
	if err := t.init(ctx); err != nil {
		return nil, err
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Go(func() { t.watch(watchCtx) })
	defer func() {
		stopWatching()
		watching.Wait()
	}()

	if cfg.rpc != "" {
		if err := fundAccounts(ctx, cfg, conn, enc, chainID, all); err != nil {
			return nil, err
		}
	}
	if err := loadAccounts(ctx, t.auth, all); err != nil {
		return nil, err
	}
	setup := newPhase("setup", nil)
	if err := registerProviders(ctx, cfg, t, setup, stakingexttypes.NewQueryClient(conn), providers); err != nil {
		return nil, err
	}

	r := &runner{cfg: cfg, t: t, nodePID: pid}
	bankKinds, marketKinds := []msgKind{kindSend}, []msgKind{kindSubmitJob, kindPlaceBid, kindCheckpoint}
	var warmups []*phase
	if cfg.warmup > 0 {
		cfg.logf("warm-up: bank sends for %s", cfg.warmup)
		warm := newPhase("warm-up (bank)", bankKinds)
		warmups = append(warmups, warm)
		if err := r.run(ctx, warm, cfg.warmup, 0, 0, r.bankWork(warm, bank)); err != nil {
			return nil, err
		}
		// Bank sends have no follow-up: let them land, so that phases do not
		// share blocks.
		if err := t.drain(ctx, warm, cfg.drainTimeout); err != nil {
			return nil, err
		}
	}
	cfg.logf("bank phase: %s", r.length())
	bankPh := newPhase("bank", bankKinds)
	if err := r.run(ctx, bankPh, cfg.duration, cfg.txs, 0, r.bankWork(bankPh, bank)); err != nil {
		return nil, err
	}
	if err := t.drain(ctx, bankPh, cfg.drainTimeout); err != nil {
		return nil, err
	}

	spec, err := jobSpec(cfg.steps, cfg.biddingWindow)
	if err != nil {
		return nil, err
	}
	m := newMarket(t, markettypes.NewQueryClient(conn), spec, sdk.NewInt64Coin(denom, 1_000_000),
		cfg.bidsPerJob, cfg.msgsPerTx, cfg.bidBacklog, float64(2*cfg.concurrency), owners, providers)
	m.verbose = cfg.verbose
	current.Store(m)
	if cfg.warmup > 0 {
		// Fill the pipeline first: a job's checkpoint comes a bidding window
		// after it, so the measured phase starts with all three kinds flowing.
		blocks := int64(cfg.biddingWindow) + 8
		cfg.logf("warm-up: market for %d blocks", blocks)
		warm := newPhase("warm-up (market)", marketKinds)
		warmups = append(warmups, warm)
		m.ph = warm
		if err := r.run(ctx, warm, 0, 0, blocks, m.work); err != nil {
			return nil, err
		}
	}
	cfg.logf("market phase: %s", r.length())
	marketPh := newPhase("market", marketKinds)
	m.ph = marketPh
	err = r.run(ctx, marketPh, cfg.duration, cfg.txs, 0, m.work)
	m.stop()
	if err != nil {
		return nil, err
	}
	for _, ph := range append([]*phase{marketPh}, warmups...) {
		if err := t.drain(ctx, ph, cfg.drainTimeout); err != nil {
			return nil, err
		}
	}
	current.Store(nil)

	rep := &Report{
		ChainID: chainID, CPUs: runtime.NumCPU(), BlockTime: blockTime, Concurrency: cfg.concurrency,
		MsgsPerTx: cfg.msgsPerTx, MaxPending: cfg.maxPending,
		Accounts: map[string]int{"bank": len(bank), "owner": len(owners), "provider": len(providers)},
	}
	bankRep, marketRep := t.phaseReport(bankPh, cfg.concurrency), t.phaseReport(marketPh, cfg.concurrency)
	rep.Market, marketRep.Unsent = m.report()
	rep.Phases = []PhaseReport{bankRep, marketRep}
	for _, w := range warmups {
		rep.WarmUps = append(rep.WarmUps, t.phaseReport(w, cfg.concurrency))
	}
	if bankRep.TxPerSec > 0 {
		rep.Ratio = marketRep.TxPerSec / bankRep.TxPerSec
	}
	if bankRep.MsgPerSec > 0 {
		rep.MsgRatio = marketRep.MsgPerSec / bankRep.MsgPerSec
	}
	if bankRep.TxPerNodeCPUSec > 0 {
		rep.CPURatio = marketRep.TxPerNodeCPUSec / bankRep.TxPerNodeCPUSec
	}
	rep.Gas = t.gasReports(t.gas, append([]*phase{bankPh, marketPh, setup}, warmups...)...)
	rep.Wall = time.Since(begin)
	return rep, nil
}

// startNode starts a single-validator chain with every account funded at
// genesis and a short challenge window, so that checkpoints become final
// (and jobs complete) while the market phase runs.
func startNode(ctx context.Context, cfg config, accounts []*account) (*localnet.Node, func(), error) {
	dir := cfg.home
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "depinchain-loadtest-"); err != nil {
			return nil, nil, err
		}
	}
	cfg.logf("starting a node in %s with %d funded accounts", dir, len(accounts))
	fund := fundAtGenesis(accounts, cfg.fund)
	node, err := localnet.Start(ctx, localnet.Options{
		Home: filepath.Join(dir, "node"), ChainID: "depin-loadtest", BlockTime: cfg.blockTime,
		Genesis: func(appState map[string]any) error {
			if err := fund(appState); err != nil {
				return err
			}
			verify, ok := appState["verify"].(map[string]any)
			if !ok {
				return errors.New("genesis has no verify state")
			}
			verify["params"].(map[string]any)["challenge_window"] = fmt.Sprint(cfg.challengeWindow)
			return nil
		},
	})
	if err != nil {
		if !cfg.keepHome && cfg.home == "" {
			os.RemoveAll(dir)
		}
		return nil, nil, fmt.Errorf("starting the node (log in %s): %w", filepath.Join(dir, "node", "node.log"), err)
	}
	return node, func() {
		node.Stop()
		if !cfg.keepHome && cfg.home == "" {
			os.RemoveAll(dir)
		}
	}, nil
}

// fundAccounts tops up the generated accounts on an existing node with one
// MsgMultiSend from the funder key, through the sidecar's Submitter.
func fundAccounts(ctx context.Context, cfg config, conn *grpc.ClientConn, enc chainparams.EncodingConfig, chainID string, accounts []*account) error {
	kr, err := chain.OpenKeyring(keyring.BackendTest, cfg.keyringDir, enc.Codec, nil)
	if err != nil {
		return err
	}
	sub, err := chain.NewSubmitter(conn, kr, enc, chain.SubmitterConfig{ChainID: chainID, HotKey: cfg.funder, GasAdjustment: 1.5})
	if err != nil {
		return err
	}
	each := sdk.NewCoins(sdk.NewInt64Coin(denom, cfg.fund))
	outputs := make([]banktypes.Output, len(accounts))
	for i, a := range accounts {
		outputs[i] = banktypes.Output{Address: a.address, Coins: each}
	}
	total := sdk.NewCoins(sdk.NewCoin(denom, sdkmath.NewInt(cfg.fund).MulRaw(int64(len(accounts)))))
	cfg.logf("funding %d accounts with %s each from %s", len(accounts), each, sub.HotKeyAddress())
	_, err = sub.Submit(ctx, &banktypes.MsgMultiSend{
		Inputs: []banktypes.Input{{Address: sub.HotKeyAddress(), Coins: total}}, Outputs: outputs,
	})
	return err
}

// registerProviders registers every provider that is not one yet, in
// parallel, and waits for the registrations to be in blocks.
func registerProviders(ctx context.Context, cfg config, t *tracker, setup *phase, q stakingexttypes.QueryClient, providers []*account) error {
	var wg sync.WaitGroup
	errs := make([]error, len(providers))
	registered := 0
	for i, p := range providers {
		if _, err := q.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: p.address}); err == nil {
			continue // registered by an earlier run with the same seed
		}
		registered++
		wg.Go(func() { errs[i] = t.sendAndWait(ctx, setup, p, kindRegister, registerProviderMsg(p, cfg.bond)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("registering providers: %w", err)
	}
	cfg.logf("%d providers, %d of them registered now", len(providers), registered)
	return nil
}

// runner runs phases: concurrency workers repeat a unit of work until the
// phase's time (or transaction count) is up, then the phase drains.
type runner struct {
	cfg config
	t   *tracker
	// nodePID is the node's process when the tool started it, else 0.
	nodePID int
}

func (r *runner) length() string {
	if r.cfg.txs > 0 {
		return fmt.Sprintf("%d transactions", r.cfg.txs)
	}
	return r.cfg.duration.String()
}

// run runs one phase: concurrency workers repeat work until d is over, or
// maxTxs transactions were started, or (when blocks > 0) that many blocks
// went by. The phase's throughput window is the blocks committed meanwhile;
// what is still in flight at the end is left to a later drain.
func (r *runner) run(ctx context.Context, ph *phase, d time.Duration, maxTxs int, blocks int64,
	work func(stop, ctx context.Context) error,
) error {
	stop, cancel := context.WithCancel(ctx)
	switch {
	case blocks > 0:
		go func() {
			_ = r.t.waitBlocks(stop, blocks)
			cancel()
		}()
	case maxTxs <= 0:
		stop, cancel = context.WithTimeout(ctx, d)
	}
	defer cancel()
	r.t.mu.Lock()
	ph.startHeight = r.t.height
	r.t.mu.Unlock()
	begin, cpu0 := time.Now(), sampleCPU(r.nodePID)
	var (
		wg       sync.WaitGroup
		started  atomic.Int64
		errOnce  sync.Once
		firstErr error
	)
	for range r.cfg.concurrency {
		wg.Go(func() {
			for stop.Err() == nil {
				if maxTxs > 0 && started.Add(1) > int64(maxTxs) {
					cancel()
					return
				}
				err := work(stop, ctx)
				if errors.Is(err, errStopped) {
					return
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	r.t.mu.Lock()
	ph.stopHeight = r.t.height
	r.t.mu.Unlock()
	ph.sending = time.Since(begin)
	ph.toolCores, ph.nodeCores, ph.machineCores = cpu0.cores(sampleCPU(r.nodePID))
	if firstErr != nil {
		return fmt.Errorf("%s phase: %w", ph.name, firstErr)
	}
	r.t.mu.Lock()
	r.cfg.logf("%s: %d txs sent in %s, blocks %d-%d", ph.name, ph.sentTxs, ph.sending.Round(time.Second), ph.startHeight+1, ph.stopHeight)
	r.t.mu.Unlock()
	return nil
}

// bankWork sends 1udepin transfers between the bank accounts.
func (r *runner) bankWork(ph *phase, bank []*account) func(stop, ctx context.Context) error {
	free := newPool(bank)
	return func(stop, ctx context.Context) error {
		a, err := free.get(stop)
		if err != nil {
			return errStopped
		}
		defer free.put(a)
		msgs := make([]sdk.Msg, r.cfg.msgsPerTx)
		for i := range msgs {
			to := bank[(a.index+1+rand.IntN(len(bank)-1))%len(bank)]
			msgs[i] = &banktypes.MsgSend{FromAddress: a.address, ToAddress: to.address, Amount: sdk.NewCoins(sdk.NewInt64Coin(denom, 1))}
		}
		_, err = r.t.send(stop, ctx, ph, a, kindSend, msgs, nil)
		return err
	}
}

// typedEvent decodes ev if it is a typed event of type typ.
func typedEvent(ev abci.Event, typ string) (proto.Message, bool) {
	if ev.Type != typ {
		return nil, false
	}
	// Drop the SDK's mode attribute (a bare word, not JSON) on block events.
	attrs := make([]abci.EventAttribute, 0, len(ev.Attributes))
	for _, a := range ev.Attributes {
		if a.Key == "mode" && !json.Valid([]byte(a.Value)) {
			continue
		}
		attrs = append(attrs, a)
	}
	ev.Attributes = attrs
	msg, err := sdk.ParseTypedEvent(ev)
	if err != nil {
		return nil, false
	}
	return msg, true
}

package app_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"

	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
	dbm "github.com/cosmos/cosmos-db"
	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"
	"cosmossdk.io/log"
	"cosmossdk.io/x/feegrant"

	"github.com/cosmos/cosmos-sdk/baseapp"
	servertypes "github.com/cosmos/cosmos-sdk/server/types"
	simtestutil "github.com/cosmos/cosmos-sdk/testutil/sims"
	"github.com/cosmos/cosmos-sdk/testutil/simsx"
	sdk "github.com/cosmos/cosmos-sdk/types"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	authzkeeper "github.com/cosmos/cosmos-sdk/x/authz/keeper"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"
	distrtypes "github.com/cosmos/cosmos-sdk/x/distribution/types"
	govtypes "github.com/cosmos/cosmos-sdk/x/gov/types"
	minttypes "github.com/cosmos/cosmos-sdk/x/mint/types"
	simcli "github.com/cosmos/cosmos-sdk/x/simulation/client/cli"
	slashingtypes "github.com/cosmos/cosmos-sdk/x/slashing/types"
	stakingtypes "github.com/cosmos/cosmos-sdk/x/staking/types"

	"github.com/depinchain/depinchain/app"
	"github.com/depinchain/depinchain/pkg/chainparams"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardregistrytypes "github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifykeeper "github.com/depinchain/depinchain/x/verify/keeper"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// The simulation runs short by default, so that it is part of `go test ./app/...`: a few
// seeds, shortNumBlocks blocks of about shortBlockSize operations each. `make
// test-sim-long` passes -NumBlocks, -BlockSize and -NumSeeds for long runs; -Seed runs one
// given seed. The SDK's other flags (-Verbose, -Commit, -ExportStatePath, ...) work as in
// its simapp.
const (
	shortNumBlocks = 30
	shortBlockSize = 30
)

var flagNumSeeds int

// seedList is where seeds come from, in order: seeds of the SDK runner's list, those
// whose random block-size schedule keeps blocks busy first (seed 1's mostly leaves them
// empty).
var seedList = []int64{7, 124, 582, 4, 32, 123, 2, 1893, 2989, 3012, 4728, 37827, 981928, 87821, 891823782, 1}

func init() {
	simcli.GetSimulatorFlags()
	flag.IntVar(&flagNumSeeds, "NumSeeds", 0, "number of seeds to run (default: 2 for the full simulation, 1 for the others)")
	chainparams.SetAddressPrefixes()
}

// simConfig is the simulation config from the flags, with the short defaults for the
// flags not given.
func simConfig() simtypes.Config {
	cfg := simcli.NewConfigFromFlags()
	cfg.ChainID = simsx.SimAppChainID
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["NumBlocks"] {
		cfg.NumBlocks = shortNumBlocks
	}
	if !set["BlockSize"] {
		cfg.BlockSize = shortBlockSize
	}
	return cfg
}

// seeds are the seeds a test runs: -Seed alone if given, else the first -NumSeeds (or
// byDefault) of seedList.
func seeds(byDefault int) []int64 {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "Seed" })
	if set {
		return []int64{simcli.FlagSeedValue}
	}
	n := byDefault
	if flagNumSeeds > 0 {
		n = flagNumSeeds
	}
	return seedList[:min(n, len(seedList))]
}

// runSeeds runs body for every seed, in parallel subtests.
func runSeeds(t *testing.T, byDefault int, body func(t *testing.T, cfg simtypes.Config, seed int64)) {
	cfg := simConfig()
	for _, seed := range seeds(byDefault) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			t.Parallel()
			body(t, cfg, seed)
		})
	}
}

func setupStateFactory(a *app.App) simsx.SimStateFactory {
	return simsx.SimStateFactory{
		Codec:         a.AppCodec(),
		AppStateFn:    simtestutil.AppStateFn(a.AppCodec(), a.SimulationManager(), a.DefaultGenesis()),
		BlockedAddr:   app.BlockedAddresses(),
		AccountSource: a.AccountKeeper,
		BalanceSource: a.BankKeeper,
	}
}

// newSimApp builds the app as the simulation runs it: every block checks all module
// invariants after EndBlock and fails on any error a module logged (deadline work that
// failed and was dropped), and BeginBlock sees a block hash, which the simulator's mock
// CometBFT does not send but x/market's randomness beacon (and with it x/shardregistry's
// storage challenges) needs.
func newSimApp(logger log.Logger, db dbm.DB, traceStore io.Writer, loadLatest bool, appOpts servertypes.AppOptions, baseAppOptions ...func(*baseapp.BaseApp)) *app.App {
	watch := &errorWatch{}
	a := app.New(&watchingLogger{Logger: logger, watch: watch}, db, traceStore, false, appOpts, baseAppOptions...)
	a.SetBeginBlocker(func(ctx sdk.Context) (sdk.BeginBlock, error) {
		if len(ctx.HeaderHash()) == 0 {
			ctx = ctx.WithHeaderHash(simBlockHash(ctx))
		}
		return a.BeginBlocker(ctx)
	})
	a.SetEndBlocker(func(ctx sdk.Context) (sdk.EndBlock, error) {
		res, err := a.EndBlocker(ctx)
		if err != nil {
			return res, err
		}
		if err := watch.take(); err != nil {
			return res, fmt.Errorf("height %d: %w", ctx.BlockHeight(), err)
		}
		return res, checkInvariants(ctx, a)
	})
	if loadLatest {
		if err := a.LoadLatestVersion(); err != nil {
			panic(err)
		}
	}
	return a
}

// simBlockHash stands in for the header hash CometBFT would send: a hash of the height,
// time and proposer, so it is the same in every run of a seed.
func simBlockHash(ctx sdk.Context) []byte {
	h := sha256.New()
	h.Write([]byte("depinchain/sim/block-hash"))
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(ctx.BlockHeight())))
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(ctx.BlockTime().UnixNano())))
	h.Write(ctx.BlockHeader().ProposerAddress)
	return h.Sum(nil)
}

func checkInvariants(ctx sdk.Context, a *app.App) error {
	for _, inv := range a.Invariants() {
		if msg, broken := inv.Check(ctx); broken {
			return fmt.Errorf("invariant of x/%s broken at height %d: %s", inv.Module, ctx.BlockHeight(), msg)
		}
	}
	return nil
}

// errorWatch collects the errors the project's modules log. Deadline work runs isolated
// in EndBlock: a failing entry is logged and dropped so the chain goes on, which in a
// simulation would hide the bug.
type errorWatch struct {
	mu     sync.Mutex
	errors []string
}

func (w *errorWatch) add(msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errors = append(w.errors, msg)
}

func (w *errorWatch) take() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errors) == 0 {
		return nil
	}
	err := fmt.Errorf("modules logged errors: %s", strings.Join(w.errors, "; "))
	w.errors = nil
	return err
}

var watchedModules = map[string]bool{
	"x/" + markettypes.ModuleName: true, "x/" + verifytypes.ModuleName: true,
	"x/" + shardregistrytypes.ModuleName: true, "x/" + stakingexttypes.ModuleName: true,
}

// watchingLogger passes everything on and reports the project's modules' errors.
type watchingLogger struct {
	log.Logger
	watch  *errorWatch
	module string
}

func (l *watchingLogger) With(keyVals ...any) log.Logger {
	module := l.module
	for i := 0; i+1 < len(keyVals); i += 2 {
		if keyVals[i] == "module" {
			module = fmt.Sprint(keyVals[i+1])
		}
	}
	return &watchingLogger{Logger: l.Logger.With(keyVals...), watch: l.watch, module: module}
}

func (l *watchingLogger) Error(msg string, keyVals ...any) {
	if watchedModules[l.module] {
		l.watch.add(fmt.Sprintf("%s: %s %v", l.module, msg, keyVals))
	}
	l.Logger.Error(msg, keyVals...)
}

// TestFullAppSimulation runs the whole app, the project's modules and the SDK's, on
// random genesis states and random operations, checking every module invariant after
// every block, and prints what the run reached.
func TestFullAppSimulation(t *testing.T) {
	runSeeds(t, 2, func(t *testing.T, cfg simtypes.Config, seed int64) {
		simsx.RunWithSeed(t, cfg, newSimApp, setupStateFactory, seed, nil,
			func(tb testing.TB, ti simsx.TestInstance[*app.App], _ []simtypes.Account) {
				ctx := ti.App.NewContextLegacy(true, cmtproto.Header{Height: ti.App.LastBlockHeight()})
				require.NoError(tb, checkInvariants(ctx, ti.App))
				fmt.Printf("+++ depinchain state after seed %d:\n%s", seed, coverage(ctx, ti.App))
			})
	})
}

// TestAppStateDeterminism runs each seed twice and requires the same app hash.
func TestAppStateDeterminism(t *testing.T) {
	const runsPerSeed = 2
	runSeeds(t, 1, func(t *testing.T, cfg simtypes.Config, seed int64) {
		var hashes [][]byte
		for i := 0; i < runsPerSeed; i++ {
			simsx.RunWithSeed(t, cfg, newSimApp, setupStateFactory, seed, nil,
				func(tb testing.TB, ti simsx.TestInstance[*app.App], _ []simtypes.Account) {
					hashes = append(hashes, ti.App.LastCommitID().Hash)
				})
		}
		require.Len(t, hashes, runsPerSeed)
		for i := 1; i < runsPerSeed; i++ {
			require.Equal(t, hashes[0], hashes[i], "non-determinism in seed %d: run %d's app hash differs from run 1's", seed, i+1)
		}
	})
}

// TestAppImportExport runs a simulation, exports the state, imports it into a fresh app
// and requires every store to be equal, apart from the SDK's usual queue and history
// prefixes.
func TestAppImportExport(t *testing.T) {
	runSeeds(t, 1, func(t *testing.T, cfg simtypes.Config, seed int64) {
		simsx.RunWithSeed(t, cfg, newSimApp, setupStateFactory, seed, nil,
			func(tb testing.TB, ti simsx.TestInstance[*app.App], _ []simtypes.Account) {
				tb.Helper()
				a := ti.App
				exported, err := a.ExportAppStateAndValidators(false, nil, nil)
				require.NoError(tb, err)

				newApp := simsx.NewSimulationAppInstance(tb, ti.Cfg, newSimApp).App
				var genesis app.GenesisState
				require.NoError(tb, json.Unmarshal(exported.AppState, &genesis))
				ctxA := a.NewContextLegacy(true, cmtproto.Header{Height: a.LastBlockHeight()})
				ctxB := newApp.NewContextLegacy(true, cmtproto.Header{Height: a.LastBlockHeight()})
				_, err = newApp.ModuleManager.InitGenesis(ctxB, newApp.AppCodec(), genesis)
				if err != nil && strings.Contains(err.Error(), "validator set is empty after InitGenesis") {
					tb.Skip("all validators unbonded; nothing to import")
				}
				require.NoError(tb, err)
				require.NoError(tb, newApp.StoreConsensusParams(ctxB, exported.ConsensusParams))
				require.NoError(tb, checkInvariants(ctxB, newApp))

				skip := map[string][][]byte{
					stakingtypes.StoreKey: {
						stakingtypes.UnbondingQueueKey, stakingtypes.RedelegationQueueKey, stakingtypes.ValidatorQueueKey,
						stakingtypes.HistoricalInfoKey, stakingtypes.UnbondingIDKey, stakingtypes.UnbondingIndexKey,
						stakingtypes.UnbondingTypeKey, stakingtypes.ValidatorUpdatesKey,
					},
					authzkeeper.StoreKey:   {authzkeeper.GrantQueuePrefix},
					feegrant.StoreKey:      {feegrant.FeeAllowanceQueueKeyPrefix},
					slashingtypes.StoreKey: {slashingtypes.ValidatorMissedBlockBitmapKeyPrefix},
					// x/verify cleans its finalization queue lazily: a checkpoint finalized or
					// rejected before its window closed keeps its entry until EndBlock reaches it
					// (and ignores it), and a window already processed while a dispute blocks the
					// checkpoint has none; import rebuilds one entry per pending checkpoint.
					verifytypes.StoreKey: {verifytypes.FinalizationQueueKey},
				}
				stores := []string{
					authtypes.StoreKey, banktypes.StoreKey, stakingtypes.StoreKey, slashingtypes.StoreKey,
					minttypes.StoreKey, distrtypes.StoreKey, govtypes.StoreKey, authzkeeper.StoreKey, feegrant.StoreKey,
					stakingexttypes.StoreKey, markettypes.StoreKey, verifytypes.StoreKey, shardregistrytypes.StoreKey,
				}
				for _, name := range stores {
					storeA, storeB := ctxA.KVStore(a.GetKey(name)), ctxB.KVStore(newApp.GetKey(name))
					diffA, diffB := simtestutil.DiffKVStores(storeA, storeB, skip[name])
					require.Equal(tb, len(diffA), len(diffB), "store %s: unequal sets of key-values", name)
					require.Empty(tb, diffA, "store %s differs after import:\n%s", name,
						simtestutil.GetSimulationLog(name, a.SimulationManager().StoreDecoders, diffA, diffB))
				}
			})
	})
}

// coverage summarizes how far the run took the project's modules.
func coverage(ctx sdk.Context, a *app.App) string {
	var b strings.Builder
	count := func(label string, m map[string]int) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "  %-12s", label)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%d", k, m[k])
		}
		b.WriteString("\n")
	}
	providers := map[string]int{}
	_ = a.StakingExtKeeper.Providers.Walk(ctx, nil, func(_ sdk.AccAddress, p stakingexttypes.Provider) (bool, error) {
		providers[strings.TrimPrefix(p.Status.String(), "PROVIDER_STATUS_")]++
		return false, nil
	})
	count("providers", providers)
	jobs := map[string]int{}
	_ = a.MarketKeeper.Jobs.Walk(ctx, nil, func(_ uint64, j markettypes.Job) (bool, error) {
		jobs[strings.TrimPrefix(j.State.String(), "JOB_STATE_")]++
		return false, nil
	})
	count("jobs", jobs)
	leases := map[string]int{}
	_ = a.MarketKeeper.Leases.Walk(ctx, nil, func(_ uint64, l markettypes.Lease) (bool, error) {
		k := strings.TrimPrefix(l.State.String(), "LEASE_STATE_")
		if l.State != markettypes.LEASE_STATE_ACTIVE {
			k = strings.TrimPrefix(l.CloseReason.String(), "LEASE_CLOSE_REASON_")
		}
		leases[k]++
		return false, nil
	})
	count("leases", leases)
	checkpoints := map[string]int{}
	_ = a.VerifyKeeper.Checkpoints.Walk(ctx, nil, func(_ collections.Pair[uint64, uint64], cp verifytypes.Checkpoint) (bool, error) {
		checkpoints[strings.TrimPrefix(cp.Status.String(), "CHECKPOINT_STATUS_")]++
		return false, nil
	})
	count("checkpoints", checkpoints)
	challenges := map[string]int{}
	_ = a.VerifyKeeper.Challenges.Walk(ctx, nil, func(_ uint64, ch verifytypes.Challenge) (bool, error) {
		k := strings.TrimPrefix(ch.Outcome.String(), "CHALLENGE_OUTCOME_")
		if ch.Outcome == verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED {
			k = "OPEN_" + strings.TrimPrefix(ch.Turn.String(), "GAME_TURN_")
		}
		challenges[k]++
		return false, nil
	})
	count("challenges", challenges)
	audits := map[string]int{}
	_ = a.VerifyKeeper.Assignments.Walk(ctx, nil, func(_ verifykeeper.AuditKey, au verifytypes.Audit) (bool, error) {
		k := strings.TrimPrefix(au.Status.String(), "AUDIT_STATUS_")
		if au.Settled && au.Paid.IsPositive() {
			k += "_PAID"
		}
		audits[k]++
		return false, nil
	})
	count("audits", audits)
	verifiers := map[string]int{}
	_ = a.StakingExtKeeper.Verifiers.Walk(ctx, nil, func(_ sdk.AccAddress, v stakingexttypes.Verifier) (bool, error) {
		verifiers[strings.TrimPrefix(v.Status.String(), "VERIFIER_STATUS_")]++
		return false, nil
	})
	count("verifiers", verifiers)
	replicas := map[string]int{}
	_ = a.ShardKeeper.Replicas.Walk(ctx, nil, func(_ uint64, r shardregistrytypes.Replica) (bool, error) {
		k := strings.TrimPrefix(r.Status.String(), "REPLICA_STATUS_")
		if r.Status == shardregistrytypes.REPLICA_STATUS_TERMINATED {
			k = strings.TrimPrefix(r.TerminationReason.String(), "TERMINATION_REASON_")
		}
		replicas[k]++
		return false, nil
	})
	count("replicas", replicas)
	datasets := 0
	_ = a.ShardKeeper.Datasets.Walk(ctx, nil, func(string, shardregistrytypes.Dataset) (bool, error) {
		datasets++
		return false, nil
	})
	count("datasets", map[string]int{"registered": datasets})
	return b.String()
}

package chain

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"

	sdk "github.com/cosmos/cosmos-sdk/types"
	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// syncBuffer is a log sink the submitter's goroutines can share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newSubmitter(t *testing.T, hotKey, operator string, logs *syncBuffer) *Submitter {
	t.Helper()
	kr, err := OpenKeyring("test", node.Home, enc.Codec, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := SubmitterConfig{ChainID: node.ChainID, HotKey: hotKey, Operator: operator, GasPrices: "0.025udepin", GasAdjustment: 1.5}
	if logs != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := NewSubmitter(conn, kr, enc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// bid commits 1000 steps an hour, enough for the test jobs to finish within their max_duration.
func bid(operator string, jobID uint64, price int64) *markettypes.MsgPlaceBid {
	return &markettypes.MsgPlaceBid{Provider: operator, JobId: jobID, PricePerGpuHour: sdk.NewInt64Coin("udepin", price), StepsPerHour: 1000}
}

func hasEvent(events []abci.Event, eventType string) bool {
	for _, e := range events {
		if e.Type == eventType {
			return true
		}
	}
	return false
}

func sequenceOf(t *testing.T, ctx context.Context, addr string) uint64 {
	t.Helper()
	resp, err := authtypes.NewQueryClient(conn).AccountInfo(ctx, &authtypes.QueryAccountInfoRequest{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Info.Sequence
}

func bidPrice(t *testing.T, ctx context.Context, jobID uint64, provider string) string {
	t.Helper()
	resp, err := markettypes.NewQueryClient(conn).Bids(ctx, &markettypes.QueryBidsRequest{JobId: jobID})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range resp.Bids {
		if b.Provider == provider {
			return b.PricePerGpuHour.String()
		}
	}
	return ""
}

func TestSubmitterSendsThroughAuthzAndTracksSequences(t *testing.T) {
	ctx := needChain(t)
	operator, hot := mustAddr(t, ctx, keyOperator), mustAddr(t, ctx, keyHot)
	registerProvider(t, ctx, keyOperator)
	_, jobID := submitJob(t, ctx, 600)
	q := NewQuerier(conn, enc.InterfaceRegistry)

	missing, err := q.CheckGrants(ctx, operator, hot, RequiredGrants)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(missing, RequiredGrants) {
		t.Fatalf("before any grant, missing = %v, want all of %v", missing, RequiredGrants)
	}
	for _, msgType := range []string{"/depinchain.market.v1.MsgPlaceBid", "/depinchain.market.v1.MsgWithdrawBid"} {
		mustTx(t, ctx, keyOperator, "authz", "grant", hot, "generic", "--msg-type", msgType)
	}
	missing, err = q.CheckGrants(ctx, operator, hot, RequiredGrants)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/depinchain.market.v1.MsgWithdrawEarnings",
		"/depinchain.market.v1.MsgCommitRound",
		"/depinchain.market.v1.MsgCommitGlobal",
		"/depinchain.verify.v1.MsgSubmitCheckpoint",
		"/depinchain.verify.v1.MsgRevealHash",
		"/depinchain.verify.v1.MsgStep",
		"/depinchain.verify.v1.MsgClaimTimeout",
		"/depinchain.verify.v1.MsgCommitRecords",
		"/depinchain.verify.v1.MsgRevealNode",
		"/depinchain.verify.v1.MsgOpenRecord",
		"/depinchain.verify.v1.MsgRevealChunk",
		"/depinchain.verify.v1.MsgProveRoundFault",
		"/depinchain.verify.v1.MsgOpenFileQuery",
		"/depinchain.verify.v1.MsgDescendFileQuery",
		"/depinchain.verify.v1.MsgAnswerFileQuery",
	}
	if !reflect.DeepEqual(missing, want) {
		t.Fatalf("after granting bids, missing = %v, want %v", missing, want)
	}

	logs := &syncBuffer{}
	sub := newSubmitter(t, keyHot, operator, logs)
	if sub.HotKeyAddress() != hot {
		t.Fatalf("hot key address %s, want %s", sub.HotKeyAddress(), hot)
	}
	startSeq := sequenceOf(t, ctx, hot)

	res, err := sub.Submit(ctx, bid(operator, jobID, 1_500_000))
	if err != nil {
		t.Fatalf("bid through authz: %v", err)
	}
	if res.Code != 0 || res.Height == 0 || res.Hash == "" || res.GasUsed == 0 {
		t.Fatalf("bid result: %+v", res)
	}
	if !hasEvent(res.Events, "depinchain.market.v1.EventBidPlaced") {
		t.Fatalf("no EventBidPlaced among %d events", len(res.Events))
	}
	if got := bidPrice(t, ctx, jobID, operator); got != "1500000udepin" {
		t.Fatalf("operator's bid on chain is %q", got)
	}

	// Several submissions at once: serialised, each with the next sequence.
	const parallel = 4
	var wg sync.WaitGroup
	errs := make(chan error, parallel)
	for i := 0; i < parallel; i++ {
		wg.Add(1)
		go func(price int64) {
			defer wg.Done()
			if _, err := sub.Submit(ctx, bid(operator, jobID, price)); err != nil {
				errs <- err
			}
		}(1_400_000 - int64(i)*10_000)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent bid: %v", err)
	}
	if got, want := sequenceOf(t, ctx, hot), startSeq+1+parallel; got != want {
		t.Fatalf("hot key sequence %d after %d transactions from %d", got, 1+parallel, startSeq)
	}
	if strings.Contains(logs.String(), "sequence mismatch") {
		t.Fatalf("back-to-back submissions hit a sequence mismatch:\n%s", logs)
	}

	// Someone else uses the hot key: the stale sequence is detected, re-read
	// and the bid still lands.
	mustTx(t, ctx, keyHot, "bank", "send", hot, operator, "1udepin")
	if _, err := sub.Submit(ctx, bid(operator, jobID, 1_000_000)); err != nil {
		t.Fatalf("bid after an outside transaction: %v", err)
	}
	if !strings.Contains(logs.String(), "account sequence mismatch") {
		t.Errorf("the outside transaction did not trigger the sequence recovery:\n%s", logs)
	}
	if got := bidPrice(t, ctx, jobID, operator); got != "1000000udepin" {
		t.Fatalf("operator's bid on chain is %q after re-pricing", got)
	}

	// A message the operator did not grant fails with the chain's reason.
	_, err = sub.Submit(ctx, &markettypes.MsgWithdrawEarnings{Provider: operator})
	if err == nil || !strings.Contains(err.Error(), "authorization not found") {
		t.Fatalf("ungranted message: %v", err)
	}

	// A message signed for someone else never reaches the chain.
	owner := mustAddr(t, ctx, keyOwner)
	_, err = sub.Submit(ctx, bid(owner, jobID, 1_000_000))
	if err == nil || !strings.Contains(err.Error(), "not by the operator") {
		t.Fatalf("message for another signer: %v", err)
	}

	// With grants in place the hot key can also withdraw the bid; the
	// result's events show it.
	res, err = sub.Submit(ctx, &markettypes.MsgWithdrawBid{Provider: operator, JobId: jobID})
	if err != nil || !hasEvent(res.Events, "depinchain.market.v1.EventBidWithdrawn") {
		t.Fatalf("withdraw bid: %v", err)
	}
}

func TestSubmitterSignsDirectlyWhenTheHotKeyIsTheOperator(t *testing.T) {
	ctx := needChain(t)
	leaser := mustAddr(t, ctx, keyLeaser)
	ensureProvider(t, ctx, keyLeaser)
	_, jobID := submitJob(t, ctx, 600)

	sub := newSubmitter(t, keyLeaser, "", nil)
	res, err := sub.Submit(ctx, bid(leaser, jobID, 1_200_000))
	if err != nil {
		t.Fatal(err)
	}
	if hasEvent(res.Events, "cosmos.authz.v1beta1.EventGrant") || bidPrice(t, ctx, jobID, leaser) != "1200000udepin" {
		t.Fatalf("direct bid: %+v", res)
	}
	for _, e := range res.Events {
		for _, a := range e.Attributes {
			if a.Key == "action" && strings.Contains(a.Value, "MsgExec") {
				t.Fatalf("a direct submission went through MsgExec: %+v", e)
			}
		}
	}

	// Simulation already runs the message, so a bid the chain would refuse
	// fails before anything is broadcast, with the chain's reason.
	_, err = sub.Submit(ctx, bid(leaser, jobID, 9_000_000))
	if err == nil || !strings.Contains(err.Error(), "exceeds job") {
		t.Fatalf("bid above the job's maximum: %v", err)
	}
}

func TestSubmitterReturnsTheChainsRejection(t *testing.T) {
	ctx := needChain(t)
	kr, err := OpenKeyring("test", node.Home, enc.Codec, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Simulation charges no fee, so only CheckTx finds that this one cannot be paid.
	sub, err := NewSubmitter(conn, kr, enc, SubmitterConfig{
		ChainID: node.ChainID, HotKey: keyUngranted, GasPrices: "100000000udepin", GasAdjustment: 1.2,
	})
	if err != nil {
		t.Fatal(err)
	}
	from, owner := mustAddr(t, ctx, keyUngranted), mustAddr(t, ctx, keyOwner)
	seq := sequenceOf(t, ctx, from)
	send := &banktypes.MsgSend{FromAddress: from, ToAddress: owner, Amount: sdk.NewCoins(sdk.NewInt64Coin("udepin", 1))}
	res, err := sub.Submit(ctx, send)
	var txErr *TxError
	if !errors.As(err, &txErr) {
		t.Fatalf("unpayable transaction: got %v, want a *TxError", err)
	}
	if res == nil || res.Code != sdkerrors.ErrInsufficientFunds.ABCICode() || res.Codespace != sdkerrors.RootCodespace || res.Height != 0 || txErr.Result != res {
		t.Fatalf("rejection result: %+v", res)
	}
	if got := sequenceOf(t, ctx, from); got != seq {
		t.Fatalf("a rejected transaction moved the sequence from %d to %d", seq, got)
	}
}

// providers registered so far, so tests that share a provider register it once.
var (
	providersMu sync.Mutex
	registered  = map[string]bool{}
)

func ensureProvider(t *testing.T, ctx context.Context, key string) {
	t.Helper()
	providersMu.Lock()
	defer providersMu.Unlock()
	if !registered[key] {
		registerProvider(t, ctx, key)
		registered[key] = true
	}
}

func TestNewSubmitterRejectsBadSettings(t *testing.T) {
	needChain(t)
	kr, err := OpenKeyring("test", node.Home, enc.Codec, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := SubmitterConfig{ChainID: node.ChainID, HotKey: keyHot, GasPrices: "0udepin", GasAdjustment: 1.2}
	for name, tc := range map[string]struct {
		mutate func(*SubmitterConfig)
		want   string
	}{
		"missing key":    {func(c *SubmitterConfig) { c.HotKey = "nobody" }, `hot key "nobody"`},
		"bad operator":   {func(c *SubmitterConfig) { c.Operator = "cosmos1xyz" }, "operator"},
		"low adjustment": {func(c *SubmitterConfig) { c.GasAdjustment = 0.5 }, "below 1"},
		"bad gas prices": {func(c *SubmitterConfig) { c.GasPrices = "lots" }, "gas prices"},
		"no chain id":    {func(c *SubmitterConfig) { c.ChainID = "" }, "chain id"},
	} {
		cfg := base
		tc.mutate(&cfg)
		if _, err := NewSubmitter(conn, kr, enc, cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error mentioning %q", name, err, tc.want)
		}
	}
}

func TestFeesRoundUp(t *testing.T) {
	gasPrices, err := sdk.ParseDecCoins("0.025udepin")
	if err != nil {
		t.Fatal(err)
	}
	s := &Submitter{gasPrices: gasPrices}
	for gas, want := range map[uint64]string{0: "", 40: "1udepin", 41: "2udepin", 200_000: "5000udepin"} {
		if got := s.fees(gas).String(); got != want {
			t.Errorf("fees for %d gas = %q, want %q", gas, got, want)
		}
	}
	if got := (&Submitter{}).fees(100_000); !got.IsZero() {
		t.Errorf("no gas prices: fees %s", got)
	}
}

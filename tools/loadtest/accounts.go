package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cosmos/cosmos-sdk/client"
	clienttx "github.com/cosmos/cosmos-sdk/client/tx"
	"github.com/cosmos/cosmos-sdk/crypto/keys/secp256k1"
	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/tx/signing"
	authsigning "github.com/cosmos/cosmos-sdk/x/auth/signing"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"

	"github.com/depinchain/depinchain/pkg/chainparams"
)

// account is a key the tool generated and signs for offline. Its sequence is
// managed here: each transaction the node accepts (CheckTx passed) takes the
// next one, without waiting for a block. One goroutine at a time signs and
// broadcasts for an account (whoever holds it from a pool), so its
// transactions reach the mempool in sequence order.
type account struct {
	role    string
	index   int
	priv    *secp256k1.PrivKey
	address string // bech32

	number uint64
	seq    uint64
	// resync asks the next holder to re-read the sequence from the chain (a
	// transaction of this account was lost, so later ones can never land);
	// the tracker sets it while a worker may hold the account.
	resync atomic.Bool
}

func (a *account) String() string { return fmt.Sprintf("%s-%d", a.role, a.index) }

// newAccounts derives n keys for a role from the run's seed, so the same
// seed gives the same addresses (useful against an existing node).
func newAccounts(seed, role string, n int) []*account {
	out := make([]*account, n)
	for i := range out {
		secret := sha256.Sum256([]byte(fmt.Sprintf("depinchain/loadtest/%s/%s/%d", seed, role, i)))
		priv := secp256k1.GenPrivKeyFromSecret(secret[:])
		addr := sdk.MustBech32ifyAddressBytes(chainparams.Bech32Prefix, priv.PubKey().Address())
		out[i] = &account{role: role, index: i, priv: priv, address: addr}
	}
	return out
}

// fundAtGenesis returns a localnet Genesis edit that creates the accounts in
// x/auth and gives each amount udepin in x/bank (raising the supply if the
// genesis states one). Doing it in one JSON edit, rather than a `keys add`
// and an `add-genesis-account` CLI call per account, keeps set-up at a
// second however many accounts there are.
func fundAtGenesis(accounts []*account, amount int64) func(map[string]any) error {
	return func(appState map[string]any) error {
		auth, ok := appState["auth"].(map[string]any)
		if !ok {
			return errors.New("genesis has no auth state")
		}
		bank, ok := appState["bank"].(map[string]any)
		if !ok {
			return errors.New("genesis has no bank state")
		}
		accs, _ := auth["accounts"].([]any)
		balances, _ := bank["balances"].([]any)
		for _, a := range accounts {
			// Account numbers are left at 0: x/auth's InitGenesis gives
			// duplicates the lowest free numbers, and the tool reads them back.
			accs = append(accs, map[string]any{
				"@type": "/cosmos.auth.v1beta1.BaseAccount", "address": a.address,
				"pub_key": nil, "account_number": "0", "sequence": "0",
			})
			balances = append(balances, map[string]any{
				"address": a.address,
				"coins":   []any{map[string]any{"denom": denom, "amount": fmt.Sprint(amount)}},
			})
		}
		auth["accounts"], bank["balances"] = accs, balances
		supply, _ := bank["supply"].([]any)
		for _, c := range supply {
			coin := c.(map[string]any)
			if coin["denom"] != denom {
				continue
			}
			var total sdk.Coin
			raw, _ := json.Marshal(coin)
			if err := json.Unmarshal(raw, &total); err != nil {
				return fmt.Errorf("genesis supply: %w", err)
			}
			coin["amount"] = total.Amount.AddRaw(amount * int64(len(accounts))).String()
		}
		return nil
	}
}

// loadAccounts reads every account's number and sequence from the chain.
func loadAccounts(ctx context.Context, auth authtypes.QueryClient, accounts []*account) error {
	var wg sync.WaitGroup
	errs := make([]error, len(accounts))
	sem := make(chan struct{}, 8)
	for i, a := range accounts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = a.load(ctx, auth)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (a *account) load(ctx context.Context, auth authtypes.QueryClient) error {
	res, err := auth.AccountInfo(ctx, &authtypes.QueryAccountInfoRequest{Address: a.address})
	if err != nil {
		return fmt.Errorf("account %s (%s): %w", a, a.address, err)
	}
	a.number, a.seq = res.Info.AccountNumber, res.Info.Sequence
	a.resync.Store(false)
	return nil
}

// signer builds and signs transactions offline with the app's tx config.
type signer struct {
	txConfig client.TxConfig
	chainID  string
}

// sign returns the encoded transaction of msgs signed by a at sequence seq,
// with no fee (the node's minimum gas price is zero) and the given gas limit.
func (s signer) sign(ctx context.Context, a *account, seq uint64, gas uint64, msgs ...sdk.Msg) ([]byte, error) {
	b := s.txConfig.NewTxBuilder()
	if err := b.SetMsgs(msgs...); err != nil {
		return nil, err
	}
	b.SetGasLimit(gas)
	pub := a.priv.PubKey()
	// SIGN_MODE_DIRECT signs over the signer infos, so they go in first with an
	// empty signature.
	if err := b.SetSignatures(signing.SignatureV2{
		PubKey: pub, Data: &signing.SingleSignatureData{SignMode: signing.SignMode_SIGN_MODE_DIRECT}, Sequence: seq,
	}); err != nil {
		return nil, err
	}
	sig, err := clienttx.SignWithPrivKey(ctx, signing.SignMode_SIGN_MODE_DIRECT, authsigning.SignerData{
		Address: a.address, ChainID: s.chainID, AccountNumber: a.number, Sequence: seq, PubKey: pub,
	}, b, a.priv, s.txConfig, seq)
	if err != nil {
		return nil, err
	}
	if err := b.SetSignatures(sig); err != nil {
		return nil, err
	}
	return s.txConfig.TxEncoder()(b.GetTx())
}

// pool hands out accounts so that one goroutine at a time uses each.
type pool struct {
	free chan *account
}

func newPool(accounts []*account) *pool {
	p := &pool{free: make(chan *account, len(accounts))}
	for _, a := range accounts {
		p.free <- a
	}
	return p
}

func (p *pool) get(ctx context.Context) (*account, error) {
	select {
	case a := <-p.free:
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pool) put(a *account) { p.free <- a }

// byAddress indexes accounts by bech32 address; it is not changed after it is built.
func byAddress(accounts []*account) map[string]*account {
	idx := make(map[string]*account, len(accounts))
	for _, a := range accounts {
		idx[a.address] = a
	}
	return idx
}

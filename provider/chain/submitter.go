package chain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"cosmossdk.io/core/address"
	sdkmath "cosmossdk.io/math"

	"github.com/cosmos/cosmos-sdk/client"
	clienttx "github.com/cosmos/cosmos-sdk/client/tx"
	"github.com/cosmos/cosmos-sdk/codec"
	codectypes "github.com/cosmos/cosmos-sdk/codec/types"
	"github.com/cosmos/cosmos-sdk/crypto/keyring"
	cryptotypes "github.com/cosmos/cosmos-sdk/crypto/types"
	sdk "github.com/cosmos/cosmos-sdk/types"
	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"
	txtypes "github.com/cosmos/cosmos-sdk/types/tx"
	"github.com/cosmos/cosmos-sdk/types/tx/signing"
	signingtypes "github.com/cosmos/cosmos-sdk/types/tx/signing"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	"github.com/cosmos/cosmos-sdk/x/authz"

	"github.com/depinchain/depinchain/pkg/chainparams"
)

// OpenKeyring opens the keyring holding the hot key. input answers the
// passphrase prompt of the "file" backend (e.g. a reader over the
// passphrase followed by a newline); the other backends ignore it.
func OpenKeyring(backend, dir string, cdc codec.Codec, input io.Reader) (keyring.Keyring, error) {
	if input == nil {
		// A prompt then fails with EOF instead of reading from a nil reader.
		input = strings.NewReader("")
	}
	kr, err := keyring.New(sdk.KeyringServiceName(), backend, dir, input, cdc)
	if err != nil {
		return nil, fmt.Errorf("opening the %s keyring in %s: %w", backend, dir, err)
	}
	return kr, nil
}

// SubmitterConfig configures a Submitter. Zero durations take the defaults.
type SubmitterConfig struct {
	ChainID string
	// HotKey names the keyring entry that signs.
	HotKey string
	// Operator is the address messages are signed for. When it is empty or the
	// hot key's own address, messages are sent directly; otherwise they are
	// wrapped in an authz MsgExec, with the hot key as grantee.
	Operator string
	// GasPrices are paid per unit of gas, e.g. "0.025udepin"; empty pays no fee.
	GasPrices string
	// GasAdjustment multiplies simulated gas (at least 1).
	GasAdjustment float64
	// InclusionTimeout bounds the wait for a broadcast transaction to land in
	// a block (default 1m).
	InclusionTimeout time.Duration
	// InclusionPoll is how often the transaction is looked up meanwhile
	// (default 500ms).
	InclusionPoll time.Duration
	// Logger receives the submitter's logs; nil discards them.
	Logger *slog.Logger
}

// TxResult is a transaction's outcome: delivered in a block (Height > 0) or
// rejected by the node before that.
type TxResult struct {
	Hash      string
	Height    int64
	Code      uint32
	Codespace string
	Log       string
	GasWanted int64
	GasUsed   int64
	Events    []abci.Event
}

// TxError is a transaction the chain refused (at CheckTx) or executed with
// an error (in the block). Its state changes did not happen.
type TxError struct {
	Result *TxResult
}

func (e *TxError) Error() string {
	stage := "rejected"
	if e.Result.Height > 0 {
		stage = fmt.Sprintf("failed in block %d", e.Result.Height)
	}
	return fmt.Sprintf("transaction %s %s: code %d (%s): %s", e.Result.Hash, stage, e.Result.Code, e.Result.Codespace, e.Result.Log)
}

// ErrNotIncluded means a broadcast transaction did not show up in a block
// within the inclusion timeout. It may still land later.
var ErrNotIncluded = errors.New("transaction not included in time")

// maxSequenceRetries bounds re-signing after sequence mismatches, which only
// repeat if something else keeps sending from the hot key.
const maxSequenceRetries = 3

// Submitter signs messages with the hot key and broadcasts them, one
// transaction at a time: Submit holds a lock from signing until the
// transaction is in a block, so two submissions never race for a sequence.
type Submitter struct {
	cfg        SubmitterConfig
	txConfig   client.TxConfig
	cdc        codec.Codec
	addrCodec  address.Codec
	keyring    keyring.Keyring
	auth       authtypes.QueryClient
	tx         txtypes.ServiceClient
	gasPrices  sdk.DecCoins
	hotAddrStr string
	hotPubKey  cryptotypes.PubKey
	operator   []byte
	viaAuthz   bool
	log        *slog.Logger

	mu sync.Mutex
	// accountNumber and sequence are the hot key's, valid while haveAccount.
	haveAccount   bool
	accountNumber uint64
	sequence      uint64
}

// NewSubmitter prepares a submitter for the hot key in kr. conn comes from
// DialGRPC and enc from NewEncodingConfig.
func NewSubmitter(conn grpc.ClientConnInterface, kr keyring.Keyring, enc chainparams.EncodingConfig, cfg SubmitterConfig) (*Submitter, error) {
	if cfg.ChainID == "" {
		return nil, errors.New("submitter needs the chain id")
	}
	if cfg.GasAdjustment < 1 {
		return nil, fmt.Errorf("gas adjustment %g is below 1", cfg.GasAdjustment)
	}
	if cfg.InclusionTimeout <= 0 {
		cfg.InclusionTimeout = time.Minute
	}
	if cfg.InclusionPoll <= 0 {
		cfg.InclusionPoll = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	gasPrices, err := sdk.ParseDecCoins(cfg.GasPrices)
	if err != nil {
		return nil, fmt.Errorf("gas prices %q: %w", cfg.GasPrices, err)
	}
	rec, err := kr.Key(cfg.HotKey)
	if err != nil {
		return nil, fmt.Errorf("hot key %q: %w", cfg.HotKey, err)
	}
	hotAddr, err := rec.GetAddress()
	if err != nil {
		return nil, fmt.Errorf("hot key %q: %w", cfg.HotKey, err)
	}
	pubKey, err := rec.GetPubKey()
	if err != nil {
		return nil, fmt.Errorf("hot key %q: %w", cfg.HotKey, err)
	}
	// Addresses are encoded with the app's codec rather than the SDK's global
	// config, so they are right whether or not the process set the prefixes.
	addrCodec := enc.InterfaceRegistry.SigningContext().AddressCodec()
	hotAddrStr, err := addrCodec.BytesToString(hotAddr)
	if err != nil {
		return nil, err
	}
	operator := []byte(hotAddr)
	if cfg.Operator != "" {
		if operator, err = addrCodec.StringToBytes(cfg.Operator); err != nil {
			return nil, fmt.Errorf("operator %q: %w", cfg.Operator, err)
		}
	}
	s := &Submitter{
		cfg:        cfg,
		txConfig:   enc.TxConfig,
		cdc:        enc.Codec,
		addrCodec:  addrCodec,
		keyring:    kr,
		auth:       authtypes.NewQueryClient(conn),
		tx:         txtypes.NewServiceClient(conn),
		gasPrices:  gasPrices,
		hotAddrStr: hotAddrStr,
		hotPubKey:  pubKey,
		operator:   operator,
		viaAuthz:   !bytes.Equal(operator, hotAddr),
		log:        cfg.Logger.With("component", "submitter"),
	}
	return s, nil
}

// SubmitFunc sends one message signed for the operator and waits until it
// is in a block; a message the chain refuses returns its result with a
// *TxError. Roles take one instead of a Submitter, so the daemon can count
// every submission and tests can record them.
type SubmitFunc func(ctx context.Context, msg sdk.Msg) (*TxResult, error)

// HotKeyAddress is the bech32 address of the signing key.
func (s *Submitter) HotKeyAddress() string { return s.hotAddrStr }

// Submit signs msgs (each signed for the operator) into one transaction,
// broadcasts it and waits until it is in a block. A transaction the chain
// refuses or executes with an error returns its result together with a
// *TxError. Submissions are serialised: a call waits for the one before it.
func (s *Submitter) Submit(ctx context.Context, msgs ...sdk.Msg) (*TxResult, error) {
	if len(msgs) == 0 {
		return nil, errors.New("no messages to submit")
	}
	for _, m := range msgs {
		if err := s.checkSigner(m); err != nil {
			return nil, err
		}
	}
	txMsgs := msgs
	if s.viaAuthz {
		exec, err := s.wrapInExec(msgs)
		if err != nil {
			return nil, err
		}
		txMsgs = []sdk.Msg{exec}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if !s.haveAccount {
			if err := s.loadAccount(ctx); err != nil {
				return nil, err
			}
		}
		res, err := s.signAndSend(ctx, txMsgs)
		if errors.Is(err, errSequenceMismatch) && attempt < maxSequenceRetries {
			// Another signer used the key, or an earlier transaction never
			// landed: learn the chain's sequence and sign again.
			s.log.Warn("account sequence mismatch; re-reading the account", "sequence", s.sequence, "err", err)
			s.haveAccount = false
			continue
		}
		return res, err
	}
}

// errSequenceMismatch marks a transaction signed with a stale sequence.
var errSequenceMismatch = errors.New("account sequence mismatch")

// checkSigner refuses messages that the operator would not be the signer
// of: the chain would reject them anyway, with a less helpful error.
func (s *Submitter) checkSigner(m sdk.Msg) error {
	signers, _, err := s.cdc.GetMsgV1Signers(m)
	if err != nil {
		return fmt.Errorf("%s: %w", sdk.MsgTypeURL(m), err)
	}
	for _, signer := range signers {
		if !bytes.Equal(signer, s.operator) {
			got, _ := s.addrCodec.BytesToString(signer)
			want, _ := s.addrCodec.BytesToString(s.operator)
			return fmt.Errorf("%s is signed by %s, not by the operator %s", sdk.MsgTypeURL(m), got, want)
		}
	}
	return nil
}

func (s *Submitter) wrapInExec(msgs []sdk.Msg) (*authz.MsgExec, error) {
	anys := make([]*codectypes.Any, len(msgs))
	for i, m := range msgs {
		a, err := codectypes.NewAnyWithValue(m)
		if err != nil {
			return nil, fmt.Errorf("packing %s: %w", sdk.MsgTypeURL(m), err)
		}
		anys[i] = a
	}
	return &authz.MsgExec{Grantee: s.hotAddrStr, Msgs: anys}, nil
}

func (s *Submitter) loadAccount(ctx context.Context) error {
	resp, err := s.auth.AccountInfo(ctx, &authtypes.QueryAccountInfoRequest{Address: s.hotAddrStr})
	if status.Code(err) == codes.NotFound {
		return fmt.Errorf("hot key account %s does not exist on chain yet: send it some tokens first", s.hotAddrStr)
	}
	if err != nil {
		return fmt.Errorf("reading hot key account %s: %w", s.hotAddrStr, err)
	}
	s.accountNumber, s.sequence = resp.Info.AccountNumber, resp.Info.Sequence
	s.haveAccount = true
	return nil
}

// signAndSend simulates for gas, signs, broadcasts and waits for inclusion.
func (s *Submitter) signAndSend(ctx context.Context, msgs []sdk.Msg) (*TxResult, error) {
	gas, err := s.simulate(ctx, msgs)
	if err != nil {
		return nil, err
	}
	fees := s.fees(gas)
	builder := s.txConfig.NewTxBuilder()
	if err := builder.SetMsgs(msgs...); err != nil {
		return nil, err
	}
	builder.SetGasLimit(gas)
	builder.SetFeeAmount(fees)
	txf := clienttx.Factory{}.
		WithTxConfig(s.txConfig).
		WithKeybase(s.keyring).
		WithChainID(s.cfg.ChainID).
		WithAccountNumber(s.accountNumber).
		WithSequence(s.sequence).
		WithSignMode(signing.SignMode_SIGN_MODE_DIRECT)
	if err := clienttx.Sign(ctx, txf, s.cfg.HotKey, builder, true); err != nil {
		return nil, fmt.Errorf("signing with %q: %w", s.cfg.HotKey, err)
	}
	txBytes, err := s.txConfig.TxEncoder()(builder.GetTx())
	if err != nil {
		return nil, err
	}

	resp, err := s.tx.BroadcastTx(ctx, &txtypes.BroadcastTxRequest{TxBytes: txBytes, Mode: txtypes.BroadcastMode_BROADCAST_MODE_SYNC})
	if err != nil {
		// Whether the node took it is unknown; re-read the sequence next time.
		s.haveAccount = false
		return nil, fmt.Errorf("broadcasting: %w", err)
	}
	checked := resultFromResponse(resp.TxResponse)
	if checked.Code != 0 {
		if checked.Codespace == sdkerrors.RootCodespace && checked.Code == sdkerrors.ErrWrongSequence.ABCICode() {
			return nil, fmt.Errorf("%w: %s", errSequenceMismatch, checked.Log)
		}
		return checked, &TxError{Result: checked}
	}
	// CheckTx passed, so the ante handler counted the sequence.
	s.sequence++
	s.log.Debug("transaction broadcast", "hash", checked.Hash, "gas", gas, "fees", fees.String())

	res, err := s.waitForInclusion(ctx, checked.Hash)
	if err != nil {
		s.haveAccount = false
		return nil, err
	}
	if res.Code != 0 {
		return res, &TxError{Result: res}
	}
	s.log.Info("transaction included", "hash", res.Hash, "height", res.Height, "gas_used", res.GasUsed)
	return res, nil
}

// simulate returns the gas msgs need, adjusted, from a dry run signed with
// an empty signature at the current sequence.
func (s *Submitter) simulate(ctx context.Context, msgs []sdk.Msg) (uint64, error) {
	builder := s.txConfig.NewTxBuilder()
	if err := builder.SetMsgs(msgs...); err != nil {
		return 0, err
	}
	err := builder.SetSignatures(signing.SignatureV2{
		PubKey:   s.hotPubKey,
		Data:     &signing.SingleSignatureData{SignMode: signing.SignMode_SIGN_MODE_DIRECT},
		Sequence: s.sequence,
	})
	if err != nil {
		return 0, err
	}
	txBytes, err := s.txConfig.TxEncoder()(builder.GetTx())
	if err != nil {
		return 0, err
	}
	resp, err := s.tx.Simulate(ctx, &txtypes.SimulateRequest{TxBytes: txBytes})
	if err != nil {
		if strings.Contains(err.Error(), sdkerrors.ErrWrongSequence.Error()) {
			return 0, fmt.Errorf("%w: %v", errSequenceMismatch, err)
		}
		return 0, fmt.Errorf("simulating: %w", err)
	}
	adjusted := math.Ceil(float64(resp.GasInfo.GasUsed) * s.cfg.GasAdjustment)
	return uint64(adjusted), nil
}

// fees prices gas at the configured gas prices, rounding up.
func (s *Submitter) fees(gas uint64) sdk.Coins {
	var fees sdk.Coins
	for _, p := range s.gasPrices {
		amount := p.Amount.MulInt(sdkmath.NewIntFromUint64(gas)).Ceil().TruncateInt()
		fees = fees.Add(sdk.NewCoin(p.Denom, amount))
	}
	return fees
}

// waitForInclusion polls for the transaction by hash until it is in a block.
func (s *Submitter) waitForInclusion(ctx context.Context, hash string) (*TxResult, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.InclusionTimeout)
	defer cancel()
	tick := time.NewTicker(s.cfg.InclusionPoll)
	defer tick.Stop()
	for {
		resp, err := s.tx.GetTx(ctx, &txtypes.GetTxRequest{Hash: hash})
		switch {
		case err == nil:
			return resultFromResponse(resp.TxResponse), nil
		case status.Code(err) == codes.NotFound:
			// Not in a block yet.
		case ctx.Err() == nil:
			s.log.Debug("looking up transaction", "hash", hash, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %s: %w", ErrNotIncluded, hash, ctx.Err())
		case <-tick.C:
		}
	}
}

func resultFromResponse(r *sdk.TxResponse) *TxResult {
	return &TxResult{
		Hash:      r.TxHash,
		Height:    r.Height,
		Code:      r.Code,
		Codespace: r.Codespace,
		Log:       r.RawLog,
		GasWanted: r.GasWanted,
		GasUsed:   r.GasUsed,
		Events:    r.Events,
	}
}

// SignBytes signs msg with the hot key and returns the signature and the key's
// compressed public key: a pkg/reqauth signer for the sidecar's requests to other
// providers' servers.
func (s *Submitter) SignBytes(msg []byte) ([]byte, []byte, error) {
	sig, pk, err := s.keyring.Sign(s.cfg.HotKey, msg, signingtypes.SignMode_SIGN_MODE_DIRECT)
	if err != nil {
		return nil, nil, err
	}
	return sig, pk.Bytes(), nil
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	rpchttp "github.com/cometbft/cometbft/rpc/client/http"
	"google.golang.org/grpc"

	cmtservice "github.com/cosmos/cosmos-sdk/client/grpc/cmtservice"
	"github.com/cosmos/cosmos-sdk/crypto/keyring"

	"github.com/depinchain/depinchain/provider/audits"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/disputes"
	"github.com/depinchain/depinchain/provider/gpu"
	"github.com/depinchain/depinchain/provider/storage"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// checkRPC makes sure the CometBFT RPC endpoint answers and runs the
// configured chain.
func checkRPC(ctx context.Context, addr, chainID string) error {
	client, err := rpchttp.New(addr, "/websocket")
	if err != nil {
		return fmt.Errorf("chain.rpc %s: %w", addr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	status, err := client.Status(ctx)
	if err != nil {
		return fmt.Errorf("chain.rpc %s does not answer: %w", addr, err)
	}
	if status.NodeInfo.Network != chainID {
		return fmt.Errorf("chain.rpc %s runs chain %q, but chain.chain_id is %q", addr, status.NodeInfo.Network, chainID)
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

// checkProvider makes sure the operator is a registered, bidding provider
// (bids from anyone else fail on chain), unless the sidecar is only a
// verifier: then registered is false and it does not bid.
func (d *Daemon) checkProvider(ctx context.Context) (registered bool, _ error) {
	res, err := stakingexttypes.NewQueryClient(d.conn).Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: d.operator})
	if err != nil && (d.cfg.Verifier.Enabled || d.cfg.Audits.Enabled) && len(d.cfg.Pricing.Table) == 0 && len(d.cfg.Pricing.PricingCommand) == 0 {
		d.log.Info("verifier only: the operator is not a registered provider and the sidecar does not bid", "operator", d.operator)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("operator %s is not a registered provider (register with: depinchaind tx stakingext register-provider ...): %w", d.operator, err)
	}
	d.region = res.Provider.Region
	d.log.Info("provider on chain", "operator", d.operator, "moniker", res.Provider.Moniker, "region", d.region, "bond", res.Provider.Bond.String(), "status", res.Provider.Status.String())
	return true, nil
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
		required = append(slices.Clone(required), disputes.VerifierGrants...)
	}
	if d.cfg.StorageRole.Enabled {
		required = append(slices.Clone(required), storage.RequiredGrants...)
	}
	if d.cfg.Audits.Enabled {
		for _, g := range audits.RequiredGrants {
			if !slices.Contains(required, g) {
				required = append(slices.Clone(required), g)
			}
		}
	}
	missing, err := chain.NewQuerier(d.conn, chain.NewEncodingConfig().InterfaceRegistry).CheckGrants(ctx, d.operator, hot, required)
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

func openInventory(cfg config.GPUs, lib gpu.Library, log *slog.Logger) (*gpu.Inventory, string, error) {
	source, driver := cfg.Source, cfg.Source
	catalogue, err := gpu.LoadCatalogue(cfg.Catalogue, cfg.ModelNames)
	if err != nil {
		return nil, "", fmt.Errorf("gpus: %w", err)
	}
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
	if lib != nil {
		inv, err = gpu.Open(lib, gpu.WithCatalogue(catalogue))
	} else {
		inv, err = gpu.OpenSystem(gpu.WithCatalogue(catalogue))
	}
	if errors.Is(err, gpu.ErrNoDriver) {
		log.Warn("no NVIDIA driver: offering no GPUs; non-GPU roles still run", "err", err)
		return inv, "none: no NVIDIA driver", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("gpus: %w", err)
	}
	for _, g := range inv.Unknown() {
		log.Warn("GPU not offered", "index", g.Index, "uuid", g.UUID, "why", g.Unknown)
	}
	return inv, driver, nil
}

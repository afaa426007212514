package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/bech32"

	"github.com/depinchain/depinchain/pkg/chainparams"
	shardregistrytypes "github.com/depinchain/depinchain/x/shardregistry/types"
)

// problems collects what is wrong with a configuration, each by its field's
// TOML name.
type problems []error

func (p *problems) bad(field, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

// Validate checks every field and reports each bad one by its TOML name.
func (c *Config) Validate() error {
	var p problems
	c.Chain.validate(&p)
	c.Keys.validate(&p)
	c.Pricing.validate(&p)
	c.Throughput.validate(&p)
	c.Runtimes.validateKinds(&p)
	c.Storage.validate(&p)
	c.GPUs.validate(&p)
	c.Runtimes.validateTrainers(&p)
	c.Runtimes.validateExactTorch(&p)
	c.Checkpoints.validate(&p)
	if err := validateHostPort(c.API.Listen); err != nil {
		p.bad("api.listen", "%v", err)
	}
	c.Verifier.validate(&p)
	c.Audits.validate(&p)
	c.StorageRole.validate(&p)
	return errors.Join(p...)
}

func (c Chain) validate(p *problems) {
	if err := validateRPC(c.RPC); err != nil {
		p.bad("chain.rpc", "%v", err)
	}
	if err := validateHostPort(c.GRPC); err != nil {
		p.bad("chain.grpc", "%v", err)
	}
	if strings.TrimSpace(c.ChainID) == "" {
		p.bad("chain.chain_id", "must be set to the chain's id, e.g. %q", "depin-1")
	}
	if _, err := sdk.ParseDecCoins(c.GasPrices); err != nil {
		p.bad("chain.gas_prices", "%q is not a list of prices like %q: %v", c.GasPrices, "0.025udepin", err)
	}
	if c.GasAdjustment < 1 {
		p.bad("chain.gas_adjustment", "must be at least 1 (simulated gas is a lower bound), got %g", c.GasAdjustment)
	}
	if c.StartHeight < 0 {
		p.bad("chain.start_height", "must not be negative, got %d", c.StartHeight)
	}
}

func (k Keys) validate(p *problems) {
	switch k.KeyringBackend {
	case KeyringBackendTest, KeyringBackendFile, KeyringBackendOS:
	default:
		p.bad("keys.keyring_backend", "must be %q, %q or %q, got %q", KeyringBackendTest, KeyringBackendFile, KeyringBackendOS, k.KeyringBackend)
	}
	if k.KeyringBackend != KeyringBackendOS && k.KeyringDir == "" {
		p.bad("keys.keyring_dir", "must be set for the %q backend", k.KeyringBackend)
	}
	if strings.TrimSpace(k.HotKey) == "" {
		p.bad("keys.hot_key", "must name the keyring entry that signs")
	}
	if k.Operator != "" {
		if hrp, _, err := bech32.DecodeAndConvert(k.Operator); err != nil {
			p.bad("keys.operator", "%q is not a bech32 address: %v", k.Operator, err)
		} else if hrp != chainparams.Bech32Prefix {
			p.bad("keys.operator", "%q has prefix %q, want %q", k.Operator, hrp, chainparams.Bech32Prefix)
		}
	}
}

func (c Pricing) validate(p *problems) {
	for model, price := range c.Table {
		if strings.TrimSpace(model) == "" {
			p.bad("pricing.table", "a GPU model name is empty")
		}
		if price == 0 {
			p.bad("pricing.table."+model, "price must be positive (udepin per GPU-hour)")
		}
	}
	if len(c.PricingCommand) > 0 && strings.TrimSpace(c.PricingCommand[0]) == "" {
		p.bad("pricing.pricing_command", "the first element must be the program to run")
	}
}

func (t Throughput) validate(p *problems) {
	if !(t.CommitFraction > 0 && t.CommitFraction <= 1) {
		p.bad("throughput.commit_fraction", "must be in (0, 1], got %g", t.CommitFraction)
	}
	if t.GoTrainerMACsPerSecond < 0 {
		p.bad("throughput.go_trainer_macs_per_second", "must not be negative (0 measures it)")
	}
	for model, v := range t.MACsPerSecondPerGPU {
		if !(v > 0) {
			p.bad("throughput.macs_per_second_per_gpu."+model, "must be positive (multiply-accumulates per second)")
		}
	}
}

func (r Runtimes) validateKinds(p *problems) {
	if !r.Reference && !r.Process && !r.Container {
		p.bad("runtimes", "enable at least one of reference, process or container")
	}
	if r.DockerHost != "" {
		if err := validateDockerHost(r.DockerHost); err != nil {
			p.bad("runtimes.docker_host", "%v", err)
		}
	}
}

func (r Runtimes) validateTrainers(p *problems) {
	for i, tr := range r.Trainers {
		field := fmt.Sprintf("runtimes.trainers[%d]", i)
		if !digestPattern.MatchString(tr.Digest) {
			p.bad(field+".digest", "%q is not an image digest like \"sha256:<64 hex>\"", tr.Digest)
		}
		if len(tr.Command) == 0 || strings.TrimSpace(tr.Command[0]) == "" {
			p.bad(field+".command", "must name the program to run")
		}
		for _, kv := range tr.Env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				p.bad(field+".env", "%q is not KEY=VALUE", kv)
			}
		}
	}
	for i, reg := range r.Registries {
		if strings.TrimSpace(reg.Host) == "" || strings.Contains(reg.Host, "/") {
			p.bad(fmt.Sprintf("runtimes.registries[%d].host", i), "must be a registry host like ghcr.io or 127.0.0.1:5000, got %q", reg.Host)
		}
		if reg.Username == "" {
			p.bad(fmt.Sprintf("runtimes.registries[%d].username", i), "must be set")
		}
	}
	if r.PullTimeout.Duration < time.Second {
		p.bad("runtimes.pull_timeout", "must be at least 1s, got %s", r.PullTimeout)
	}
	if r.ImageCacheImages < 1 {
		p.bad("runtimes.image_cache_images", "must be at least 1, got %d", r.ImageCacheImages)
	}
	if len(r.Trainers) > 0 && !r.Process {
		p.bad("runtimes.trainers", "set runtimes.process = true to run them")
	}
}

func (s Storage) validate(p *problems) {
	if s.DataDir == "" {
		p.bad("storage.data_dir", "must be set")
	}
	if s.WorkDir == "" {
		p.bad("storage.work_dir", "must be set")
	}
}

func (g GPUs) validate(p *problems) {
	switch g.Source {
	case GPUSourceNVML, GPUSourceNone, GPUSourceMockDGXH100:
	default:
		p.bad("gpus.source", "must be %q, %q or %q, got %q", GPUSourceNVML, GPUSourceNone, GPUSourceMockDGXH100, g.Source)
	}
	for nvmlName, model := range g.ModelNames {
		if strings.TrimSpace(nvmlName) == "" || strings.TrimSpace(model) == "" {
			p.bad("gpus.model_names", "names must not be empty (%q = %q)", nvmlName, model)
		}
	}
	if g.RefreshInterval.Duration < 100*time.Millisecond {
		p.bad("gpus.refresh_interval", "must be at least 100ms, got %s", g.RefreshInterval)
	}
}

func (c Checkpoints) validate(p *problems) {
	if err := validateHostPort(c.Listen); err != nil {
		p.bad("checkpoints.listen", "%v", err)
	}
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.bad("checkpoints.public_url", "%q must be an http(s) URL others reach the checkpoint server at", c.PublicURL)
	}
	if c.Retention.Duration < 0 {
		p.bad("checkpoints.retention", "must not be negative, got %s", c.Retention)
	}
}

func (v Verifier) validate(p *problems) {
	switch v.Policy {
	case PolicyAll:
	case PolicySample:
		if !(v.SampleRate > 0 && v.SampleRate <= 1) {
			p.bad("verifier.sample_rate", "must be in (0, 1] for the %q policy, got %g", PolicySample, v.SampleRate)
		}
	default:
		p.bad("verifier.policy", "must be %q or %q, got %q", PolicyAll, PolicySample, v.Policy)
	}
	if v.DatasetCacheGiB <= 0 {
		p.bad("verifier.dataset_cache_gib", "must be positive, got %d", v.DatasetCacheGiB)
	}
}

func (a Audits) validate(p *problems) {
	if a.RegisterBond == "" {
		return
	}
	coin, err := sdk.ParseCoinNormalized(a.RegisterBond)
	if err != nil || !coin.IsPositive() {
		p.bad("audits.register_bond", "must be a positive coin like 100000000%s, got %q", chainparams.BondDenom, a.RegisterBond)
	}
}

func (s StorageRole) validate(p *problems) {
	if s.Enabled && strings.TrimSpace(s.PiecesDir) == "" {
		p.bad("storage_role.pieces_dir", "must be set when the storage role is enabled")
	}
	seen := map[string]bool{}
	for _, id := range s.RepairDatasets {
		if err := shardregistrytypes.ValidateDatasetID(id); err != nil {
			p.bad("storage_role.repair_datasets", "%q is not a dataset id (3 to 64 of a-z, 0-9, '-')", id)
		} else if seen[id] {
			p.bad("storage_role.repair_datasets", "%q is listed twice", id)
		}
		seen[id] = true
	}
	if s.CheckInterval.Duration < time.Second {
		p.bad("storage_role.check_interval", "must be at least 1s, got %s", s.CheckInterval)
	}
}

// Package config is depinprovider's TOML configuration: what the sidecar
// connects to, which key signs, how it prices bids, which runtimes it offers,
// where it keeps its state and what it serves.
//
// Files are decoded strictly: a misspelt or unknown field is an error that
// names the field and its line, never a silently ignored setting.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/depinchain/depinchain/pkg/chainparams"
)

// Config is the whole configuration file.
type Config struct {
	Chain       Chain       `toml:"chain"`
	Keys        Keys        `toml:"keys"`
	Pricing     Pricing     `toml:"pricing"`
	Throughput  Throughput  `toml:"throughput"`
	Runtimes    Runtimes    `toml:"runtimes"`
	Storage     Storage     `toml:"storage"`
	GPUs        GPUs        `toml:"gpus"`
	Checkpoints Checkpoints `toml:"checkpoints"`
	API         API         `toml:"api"`
	Verifier    Verifier    `toml:"verifier"`
	Audits      Audits      `toml:"audits"`
	StorageRole StorageRole `toml:"storage_role"`
}

// Chain says which node the sidecar follows and how it pays for transactions.
type Chain struct {
	// RPC is the CometBFT RPC endpoint (block results and the websocket).
	RPC string `toml:"rpc"`
	// GRPC is the node's Cosmos SDK gRPC endpoint (queries, simulation, broadcast).
	GRPC string `toml:"grpc"`
	// ChainID must match the node's; transactions are signed for it.
	ChainID string `toml:"chain_id"`
	// GasPrices are paid per unit of gas, e.g. "0.025udepin".
	GasPrices string `toml:"gas_prices"`
	// GasAdjustment multiplies simulated gas to leave headroom.
	GasAdjustment float64 `toml:"gas_adjustment"`
	// StartHeight is the first height processed when the store has no cursor
	// yet; 0 means the chain's latest height at first start.
	StartHeight int64 `toml:"start_height"`
}

// Keys says which key signs and for whom.
type Keys struct {
	// KeyringBackend is "test", "file" or "os", as for depinchaind.
	KeyringBackend string `toml:"keyring_backend"`
	// KeyringDir holds the keyring (the folder that contains keyring-<backend>).
	KeyringDir string `toml:"keyring_dir"`
	// HotKey names the keyring entry that signs every transaction.
	HotKey string `toml:"hot_key"`
	// Operator is the provider's operator address the hot key acts for through
	// authz grants; empty means the hot key is the operator itself.
	Operator string `toml:"operator"`
}

// Pricing is what the provider asks per GPU-hour.
type Pricing struct {
	// Table maps a GPU model (as the chain names it) to a price in udepin per GPU-hour.
	Table map[string]uint64 `toml:"table"`
	// PricingCommand, when set, is run (argv, no shell) with the job as JSON on
	// stdin; it decides the price instead of the table.
	PricingCommand []string `toml:"pricing_command"`
}

// Throughput is what the provider can do per hour, from which a bid's committed rate
// (steps_per_hour) is computed. A lease that checkpoints less than the chain's
// rate_tolerance of its committed rate is closed for non-performance and slashed, so
// the estimate should be one the host sustains while it checkpoints and serves.
type Throughput struct {
	// CommitFraction of the estimated rate is what a bid commits (default 0.8): the
	// margin for checkpoints, audits and a busy host.
	CommitFraction float64 `toml:"commit_fraction"`
	// GoTrainerMACsPerSecond is the in-process Go trainer's speed in multiply-accumulates
	// per second on this host; 0 measures it with one timed step of the reference model
	// when the sidecar starts.
	GoTrainerMACsPerSecond float64 `toml:"go_trainer_macs_per_second"`
	// MACsPerSecondPerGPU is the exact transformer's sustained speed on one GPU of a
	// model (chain name) with the PyTorch trainer (runtimes.exact_torch). GPUs of a model
	// not listed count as the Go trainer's speed (a safe floor).
	MACsPerSecondPerGPU map[string]float64 `toml:"macs_per_second_per_gpu"`
	// ContainerStepsPerHour is the rate committed for container workloads (and operator
	// trainers), whose cost per step the sidecar cannot know; 0: they get no bid.
	ContainerStepsPerHour uint64 `toml:"container_steps_per_hour"`
}

// Runtimes selects the ways the provider may run workloads.
type Runtimes struct {
	// Reference enables the built-in deterministic reference trainer.
	Reference bool `toml:"reference"`
	// Process enables running trainers as local subprocesses.
	Process bool `toml:"process"`
	// Container enables running container workloads on a Docker Engine.
	Container bool `toml:"container"`
	// DockerHost is the Engine's address; empty uses DOCKER_HOST or the local socket.
	DockerHost string `toml:"docker_host"`
	// Trainers map container workloads, by image digest, to trainers the
	// operator installed, which the process runtime runs instead of the
	// image, but only for jobs whose owner allows it
	// (workload.allow_operator_trainer: true).
	Trainers []ProcessTrainer `toml:"trainers"`
	// ExactTorch, when set, is the argv (no shell) of the exact transformer's
	// PyTorch trainer, e.g. ["/usr/bin/python3", "/opt/depinchain/pkg/exact/torch/train.py"]:
	// jobs of the adjudicable kinds (reference and transformer) then run
	// through it on the process runtime instead of on the in-process Go
	// trainer. Empty means the Go trainer.
	ExactTorch []string `toml:"exact_torch"`
	// ExactTorchEnv is extra environment for ExactTorch, as KEY=VALUE (e.g.
	// DEPIN_TORCH_PROCS=2, OMP_NUM_THREADS=8); the sidecar's own environment
	// is not passed on.
	ExactTorchEnv []string `toml:"exact_torch_env"`
	// Pull fetches a container job's image@digest from its registry when no
	// local image matches; off, only images the operator loaded can run.
	Pull bool `toml:"pull"`
	// PullTimeout bounds one pull (a bid waits for it).
	PullTimeout Duration `toml:"pull_timeout"`
	// ImageCacheImages bounds how many pulled images are kept; the least
	// recently used beyond it are removed (never an image the operator loaded).
	ImageCacheImages int `toml:"image_cache_images"`
	// DockerConfig is Docker's config.json whose logins (auths, credential
	// helpers) serve registries Registries does not list; empty:
	// $DOCKER_CONFIG/config.json or ~/.docker/config.json.
	DockerConfig string `toml:"docker_config"`
	// Registries are logins for private registries.
	Registries []RegistryLogin `toml:"registries"`
	// MemlockUnlimited gives containers memlock=-1 (NVIDIA's PyTorch
	// setting) besides the 64 MiB stack; turn off for a Docker daemon that
	// cannot raise memlock (rootless, or one running inside a container).
	MemlockUnlimited bool `toml:"memlock_unlimited"`
}

// RegistryLogin is a container registry login.
type RegistryLogin struct {
	// Host is the registry as image references name it, e.g. "ghcr.io" or
	// "registry.example.com:5000" ("docker.io" for Docker Hub).
	Host     string `toml:"host"`
	Username string `toml:"username"`
	Password string `toml:"password"`
}

// ProcessTrainer is an operator-installed trainer the process runtime runs
// for jobs whose workload pins Digest.
type ProcessTrainer struct {
	// Digest is the job workload's image digest, "sha256:<64 hex>".
	Digest string `toml:"digest"`
	// Command is the trainer's argv (no shell), e.g. ["/usr/bin/python3", "train.py"].
	Command []string `toml:"command"`
	// Env is extra environment for the trainer, as KEY=VALUE.
	Env []string `toml:"env"`
}

// GPU sources.
const (
	GPUSourceNVML = "nvml"
	GPUSourceNone = "none"
	// GPUSourceMockDGXH100 simulates an eight-GPU DGX H100 with go-nvml's mock
	// server, for local chains and tests on machines without NVIDIA GPUs.
	GPUSourceMockDGXH100 = "mock-dgxh100"
)

// GPUs says where the GPU inventory comes from and how the chain names its models.
type GPUs struct {
	// Source is "nvml" (this host's driver), "none" (offer no GPUs) or
	// "mock-dgxh100" (a simulated DGX H100; never on a real provider).
	Source string `toml:"source"`
	// Catalogue is the operator's GPU catalogue file (provider/gpu/catalogue.yaml's
	// format), laid over the built-in one: it maps GPUs the built-in catalogue
	// does not know, or renames them. Empty uses the built-in catalogue alone.
	Catalogue string `toml:"catalogue"`
	// ModelNames adds NVML product names to catalogued models, e.g.
	// "NVIDIA H100 80GB HBM3 (custom)" = "H100-SXM5-80GB". The model must be
	// in the catalogue (built-in or gpus.catalogue), which also gives its memory class.
	ModelNames map[string]string `toml:"model_names"`
	// RefreshInterval is how often telemetry and health are re-read.
	RefreshInterval Duration `toml:"refresh_interval"`
}

// Checkpoints configures the public checkpoint server and retention.
type Checkpoints struct {
	// Listen is where challengers, verifiers and resuming providers download
	// checkpoints from.
	Listen string `toml:"listen"`
	// PublicURL is the base URL others reach Listen at; each checkpoint's URI
	// on chain is PublicURL/checkpoints/<lease>/<index>.
	PublicURL string `toml:"public_url"`
	// Retention is how long a final checkpoint stays served before it may be
	// pruned (a checkpoint a live dispute needs is never pruned).
	Retention Duration `toml:"retention"`
}

// Duration is a time.Duration written in TOML as a string like "90s" or "24h".
type Duration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return fmt.Errorf("%q is not a duration like \"30s\" or \"24h\"", text)
	}
	d.Duration = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Storage is where the sidecar keeps its state and its workloads' files.
type Storage struct {
	// DataDir holds the sidecar's database.
	DataDir string `toml:"data_dir"`
	// WorkDir holds lease working folders and local checkpoints.
	WorkDir string `toml:"work_dir"`
}

// API is the sidecar's own status API.
type API struct {
	// Listen is the address of the gRPC status API and its REST gateway.
	Listen string `toml:"listen"`
	// Metrics serves Prometheus metrics at /metrics on the same address.
	Metrics bool `toml:"metrics"`
}

// Verifier configures re-execution of other providers' reference checkpoints.
type Verifier struct {
	Enabled bool `toml:"enabled"`
	// Policy is "all" (check every checkpoint) or "sample".
	Policy string `toml:"policy"`
	// SampleRate is the fraction of checkpoints checked under the "sample" policy.
	SampleRate float64 `toml:"sample_rate"`
	// Seed makes sampling reproducible; verifiers with different seeds check different checkpoints.
	Seed uint64 `toml:"seed"`
	// DatasetCacheGiB bounds the dataset pieces kept to re-execute dataset-backed jobs
	// (<work_dir>/datasets); the least recently used shard sets beyond it are removed.
	DatasetCacheGiB int64 `toml:"dataset_cache_gib"`
}

// Audits configures the audits role (package provider/audits): the operator as a bonded
// verifier that x/verify draws to audit checkpoints, paid per audited step.
type Audits struct {
	Enabled bool `toml:"enabled"`
	// RegisterBond, when set (e.g. "100000000udepin"), registers the operator as a
	// verifier with that bond at start if it is not one yet.
	RegisterBond string `toml:"register_bond"`
	// Reactivate puts the verifier back into the audit set at start, and after a
	// missed assignment took it out, when its bond is enough.
	Reactivate bool `toml:"reactivate"`
	// ReportUnavailable reports on chain when a provider does not serve the state a
	// checkpoint starts from (enough such reports withhold the checkpoint).
	ReportUnavailable bool `toml:"report_unavailable"`
}

// StorageRole configures the storage role (package provider/storage): holding
// pieces of datasets registered in x/shardregistry and answering their
// storage challenges.
type StorageRole struct {
	Enabled bool `toml:"enabled"`
	// PiecesDir holds the piece files, one folder per dataset id laid out as
	// `depinchaind dataset build --out` writes it.
	PiecesDir string `toml:"pieces_dir"`
	// ClaimLocal claims open slots of the pieces found in PiecesDir.
	ClaimLocal bool `toml:"claim_local"`
	// Repair claims repair slots by rebuilding pieces from other pieces of
	// their shard, and rebuilds lost held pieces before declaring a fault.
	Repair bool `toml:"repair"`
	// RepairDatasets limits Repair to these dataset ids; empty means any.
	RepairDatasets []string `toml:"repair_datasets"`
	// Custody holds pieces of other providers' checkpoint states (x/shardregistry
	// custody objects), fetched from the trainer or rebuilt from k other holders.
	Custody bool `toml:"custody"`
	// CheckInterval is how often every held piece file is hashed in full.
	CheckInterval Duration `toml:"check_interval"`
}

// Keyring backends the sidecar can open without a terminal prompt loop.
const (
	KeyringBackendTest = "test"
	KeyringBackendFile = "file"
	KeyringBackendOS   = "os"
)

// Verifier policies.
const (
	PolicyAll    = "all"
	PolicySample = "sample"
)

// Default returns the configuration a fresh template holds. Relative paths are
// resolved against the configuration file's folder when loaded.
func Default() *Config {
	return &Config{
		Chain: Chain{
			RPC:           "tcp://127.0.0.1:26657",
			GRPC:          "127.0.0.1:9090",
			ChainID:       "depin-1",
			GasPrices:     "0.025" + chainparams.BondDenom,
			GasAdjustment: 1.5,
		},
		Keys: Keys{
			KeyringBackend: KeyringBackendFile,
			KeyringDir:     "keyring",
			HotKey:         "provider-hot",
		},
		Pricing:    Pricing{Table: map[string]uint64{}},
		Throughput: Throughput{CommitFraction: 0.8, MACsPerSecondPerGPU: map[string]float64{}},
		Runtimes: Runtimes{Reference: true, Pull: true, PullTimeout: Duration{10 * time.Minute},
			ImageCacheImages: 8, MemlockUnlimited: true},
		Storage: Storage{
			DataDir: "data",
			WorkDir: "work",
		},
		GPUs: GPUs{
			Source:          GPUSourceNVML,
			ModelNames:      map[string]string{},
			RefreshInterval: Duration{10 * time.Second},
		},
		Checkpoints: Checkpoints{
			Listen:    "0.0.0.0:8471",
			PublicURL: "http://127.0.0.1:8471",
			Retention: Duration{24 * time.Hour},
		},
		API: API{
			Listen:  "127.0.0.1:8470",
			Metrics: true,
		},
		Verifier: Verifier{
			Policy:          PolicySample,
			SampleRate:      0.1,
			DatasetCacheGiB: 20,
		},
		Audits: Audits{
			Reactivate:        true,
			ReportUnavailable: true,
		},
		StorageRole: StorageRole{
			PiecesDir:     "pieces",
			ClaimLocal:    true,
			CheckInterval: Duration{time.Hour},
		},
	}
}

// Load reads, strictly decodes and validates a configuration file. Fields the
// file leaves out keep their Default value; relative paths are resolved
// against the file's folder.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cfg := Default()
	// A table in the file replaces the default one rather than merging into it.
	cfg.Pricing.Table = nil
	cfg.Throughput.MACsPerSecondPerGPU = nil
	cfg.GPUs.ModelNames = nil
	dec := toml.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return nil, describeDecodeError(path, err)
	}
	// Empty and absent mean the same; keep one representation of each.
	if cfg.Pricing.Table == nil {
		cfg.Pricing.Table = map[string]uint64{}
	}
	if cfg.Throughput.MACsPerSecondPerGPU == nil {
		cfg.Throughput.MACsPerSecondPerGPU = map[string]float64{}
	}
	if len(cfg.Pricing.PricingCommand) == 0 {
		cfg.Pricing.PricingCommand = nil
	}
	if cfg.GPUs.ModelNames == nil {
		cfg.GPUs.ModelNames = map[string]string{}
	}
	if len(cfg.Runtimes.Trainers) == 0 {
		cfg.Runtimes.Trainers = nil
	}
	if len(cfg.Runtimes.ExactTorch) == 0 {
		cfg.Runtimes.ExactTorch = nil
	}
	if len(cfg.Runtimes.ExactTorchEnv) == 0 {
		cfg.Runtimes.ExactTorchEnv = nil
	}
	if len(cfg.Runtimes.Registries) == 0 {
		cfg.Runtimes.Registries = nil
	}
	if len(cfg.StorageRole.RepairDatasets) == 0 {
		cfg.StorageRole.RepairDatasets = nil
	}
	cfg.resolvePaths(filepath.Dir(path))
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// describeDecodeError turns go-toml's errors into "file:line:column: problem"
// lines that name the offending field.
func describeDecodeError(path string, err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		problems := make([]error, 0, len(strict.Errors))
		for i := range strict.Errors {
			e := &strict.Errors[i]
			row, col := e.Position()
			problems = append(problems, fmt.Errorf("%s:%d:%d: unknown field %q", path, row, col, strings.Join(e.Key(), ".")))
		}
		return errors.Join(problems...)
	}
	var decode *toml.DecodeError
	if errors.As(err, &decode) {
		row, col := decode.Position()
		msg := strings.TrimPrefix(decode.Error(), "toml: ")
		// Type mismatches name go-toml's view of the Go struct; say it in TOML terms.
		if m := typeMismatch.FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("got a TOML %s, want %s", m[1], tomlTypeName(m[2]))
		}
		if key := decode.Key(); len(key) > 0 {
			return fmt.Errorf("%s:%d:%d: %s: %s", path, row, col, strings.Join(key, "."), msg)
		}
		return fmt.Errorf("%s:%d:%d: %s", path, row, col, msg)
	}
	return fmt.Errorf("%s: %w", path, err)
}

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

var typeMismatch = regexp.MustCompile(`^cannot decode TOML (\w+) into .* of type (\S+)$`)

// tomlTypeName names a Go field type the way the file has to write it.
func tomlTypeName(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean (true or false)"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map["):
		return "a table"
	default:
		return goType
	}
}

func (c *Config) resolvePaths(base string) {
	for _, p := range []*string{&c.Keys.KeyringDir, &c.Storage.DataDir, &c.Storage.WorkDir, &c.StorageRole.PiecesDir, &c.GPUs.Catalogue, &c.Runtimes.DockerConfig} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(base, *p)
		}
	}
}

func validateRPC(addr string) error {
	u, err := url.Parse(addr)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %v", addr, err)
	}
	switch u.Scheme {
	case "tcp", "http", "https":
	default:
		return fmt.Errorf("%q: scheme must be tcp, http or https, like %q", addr, "tcp://127.0.0.1:26657")
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		return fmt.Errorf("%q: %v", addr, err)
	}
	return nil
}

func validateHostPort(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%q is not host:port: %v", addr, err)
	}
	return nil
}

func validateDockerHost(addr string) error {
	u, err := url.Parse(addr)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %v", addr, err)
	}
	switch u.Scheme {
	case "unix", "tcp", "http", "https", "ssh":
		return nil
	default:
		return fmt.Errorf("%q: scheme must be unix, tcp, http, https or ssh", addr)
	}
}

package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/template"
)

// configTemplate is the commented file WriteDefault writes. Every field is
// present with its default value, so the file doubles as the reference.
const configTemplate = `# depinprovider configuration.
#
# Relative paths are resolved against the folder holding this file.
# Unknown fields are rejected, so a typo never silently falls back to a default.

[chain]
# CometBFT RPC of the node to follow: block results and the NewBlockHeader
# websocket. The node must keep ABCI responses (discard_abci_responses = false).
rpc = {{q .Chain.RPC}}
# Cosmos SDK gRPC of the same node: queries, gas simulation, broadcast.
grpc = {{q .Chain.GRPC}}
# Chain id transactions are signed for; it must match the node's.
chain_id = {{q .Chain.ChainID}}
# Price paid per unit of gas, e.g. "0.025udepin"; "0udepin" on a chain with no
# minimum gas price.
gas_prices = {{q .Chain.GasPrices}}
# Simulated gas is multiplied by this before signing (at least 1).
gas_adjustment = {{f .Chain.GasAdjustment}}
# First height processed when the sidecar has no saved position yet; 0 starts
# at the chain's latest height. Later starts resume from the saved position.
start_height = {{.Chain.StartHeight}}

[keys]
# Keyring backend, as for depinchaind: "file" (passphrase-encrypted), "os"
# (the system keychain) or "test" (unencrypted; local chains only).
keyring_backend = {{q .Keys.KeyringBackend}}
# Folder holding the keyring (the one containing keyring-<backend>), e.g. the
# --home of depinchaind keys. Not used by the "os" backend.
keyring_dir = {{q .Keys.KeyringDir}}
# Name of the keyring entry that signs every transaction (the hot key).
hot_key = {{q .Keys.HotKey}}
# Provider operator address the hot key acts for through authz grants. Leave
# empty when the hot key is the operator itself. The operator grants with:
#   depinchaind tx authz grant <hot-key-address> generic --msg-type <type> --from <operator>
operator = {{q .Keys.Operator}}

[pricing]
# Program (argv, no shell) that prices a job: it gets the job as JSON on stdin
# and decides the bid instead of the table below. Empty uses the table.
# Example: pricing_command = ["/usr/local/bin/price-job", "--margin", "0.2"]
pricing_command = {{strs .Pricing.PricingCommand}}

# Price per GPU-hour in udepin for each GPU model, named as on the chain.
# Jobs whose accepted models have no price here get no bid; an empty table
# means the provider never bids (e.g. a verifier-only node).
# Example:
#   "H100-SXM5-80GB" = 2000000
#   "A100-SXM4-80GB" = 1200000
[pricing.table]
{{- range $model, $price := .Pricing.Table}}
{{q $model}} = {{$price}}
{{- end}}

[throughput]
# A bid commits a rate (steps per hour) computed from these; a lease that
# checkpoints less than the chain's rate_tolerance of it is closed for
# non-performance and slashed. Fraction of the estimate a bid commits:
commit_fraction = {{printf "%#g" .Throughput.CommitFraction}}
# The in-process Go trainer's multiply-accumulates per second on this host;
# 0 measures it with one timed step when the sidecar starts.
go_trainer_macs_per_second = {{printf "%#g" .Throughput.GoTrainerMACsPerSecond}}
# Rate for container workloads and operator trainers (their cost per step is
# unknown to the sidecar); 0 means they get no bid.
container_steps_per_hour = {{.Throughput.ContainerStepsPerHour}}

# The exact transformer's multiply-accumulates per second on one GPU of each
# model with the PyTorch trainer (runtimes.exact_torch); a model not listed
# counts as the Go trainer's speed, a safe floor. Example:
#   "H100-SXM5-80GB" = 2.0e14
[throughput.macs_per_second_per_gpu]
{{- range $model, $v := .Throughput.MACsPerSecondPerGPU}}
{{q $model}} = {{printf "%#g" $v}}
{{- end}}

[runtimes]
# Built-in deterministic reference trainer (reference workloads; disputes can
# be settled on-chain).
reference = {{.Runtimes.Reference}}
# Trainers run as local subprocesses with CUDA_VISIBLE_DEVICES set.
process = {{.Runtimes.Process}}
# Container workloads on a Docker Engine.
container = {{.Runtimes.Container}}
# Docker Engine address, e.g. "unix:///var/run/docker.sock"; empty uses
# DOCKER_HOST or the local socket.
docker_host = {{q .Runtimes.DockerHost}}
# Trainer of the exact transformer workload (job kinds reference and
# transformer, whose checkpoints the chain can adjudicate). Empty: the Go
# trainer built into the sidecar (CPU, every core). Set: the PyTorch trainer
# pkg/exact/torch/train.py, bit-identical to Go, run by the process runtime
# (argv, no shell) with the trainer contract's environment, logs in the
# lease's logs folder; it trains on the leased GPUs with CUDA when torch sees
# them, else on CPU. Needs reference = true. See docs/operator-guide.md.
#   exact_torch = ["/usr/bin/python3", "/opt/depinchain/pkg/exact/torch/train.py"]
exact_torch = {{strs .Runtimes.ExactTorch}}
# Extra environment of exact_torch as KEY=VALUE, e.g. "DEPIN_TORCH_PROCS=2"
# (data-parallel processes; default one per leased GPU, one on CPU) or
# "OMP_NUM_THREADS=16". The sidecar's own environment is not passed on.
exact_torch_env = {{strs .Runtimes.ExactTorchEnv}}
# Pull a container job's image@digest from its registry when no local image
# matches (Docker checks the digest); a failed pull is a refused bid.
pull = {{.Runtimes.Pull}}
# How long one pull may take (the bid waits for it).
pull_timeout = {{q .Runtimes.PullTimeout.String}}
# How many pulled images to keep; the least recently used beyond it are
# removed (never an image you loaded yourself).
image_cache_images = {{.Runtimes.ImageCacheImages}}
# Docker's config.json with registry logins ("docker login"), used for
# registries not listed below; empty: $DOCKER_CONFIG/config.json or
# ~/.docker/config.json.
docker_config = {{q .Runtimes.DockerConfig}}
# memlock=-1 for containers, as NVIDIA recommends for PyTorch (with a 64 MiB
# stack). Set false if your Docker daemon cannot raise memlock (rootless).
memlock_unlimited = {{.Runtimes.MemlockUnlimited}}
# Private registry logins (keep this file readable only by the sidecar):
#   [[runtimes.registries]]
#   host = "ghcr.io"
#   username = "acme-bot"
#   password = "..."
{{- if not .Runtimes.Registries}}
registries = []
{{- end}}
{{- range .Runtimes.Registries}}
[[runtimes.registries]]
host = {{q .Host}}
username = {{q .Username}}
password = {{q .Password}}
{{- end}}
# Trainers you installed on this host, run by the process runtime instead of a
# container job's image, only for jobs whose owner set
# workload.allow_operator_trainer: true (the lease records "process"):
#   [[runtimes.trainers]]
#   digest = "sha256:<64 hex of the job's workload.digest>"
#   command = ["/usr/bin/python3", "/opt/trainers/train.py"]
#   env = ["PYTHONUNBUFFERED=1"]
{{- if not .Runtimes.Trainers}}
trainers = []
{{- end}}
{{- range .Runtimes.Trainers}}
[[runtimes.trainers]]
digest = {{q .Digest}}
command = {{strs .Command}}
env = {{strs .Env}}
{{- end}}

[storage]
# The sidecar's database (chain position, bids, leases, checkpoints).
data_dir = {{q .Storage.DataDir}}
# Lease working folders and local checkpoints.
work_dir = {{q .Storage.WorkDir}}

[gpus]
# Where the GPU inventory comes from: "nvml" (this host's NVIDIA driver; with
# no driver the sidecar offers no GPUs and says so), "none", or
# "mock-dgxh100" (a simulated 8x H100 box for local chains and tests only).
source = {{q .GPUs.Source}}
# How often GPU telemetry and health (XID, ECC, lost GPUs) are re-read.
refresh_interval = {{q .GPUs.RefreshInterval.String}}

# The GPU catalogue names GPUs by PCI id and NVML name and gives each model
# its nominal memory class (an H100 80GB HBM3 reading 81,559 MiB registers as
# H100-SXM5-80GB with 80 GiB). A GPU it does not know is not offered;
# "depinprovider gpus" prints the entry to add. This file (same format as
# provider/gpu/catalogue.yaml) is laid over the built-in catalogue; empty for none.
catalogue = {{q .GPUs.Catalogue}}

# More NVML product names for catalogued models, e.g.
#   "NVIDIA H100 80GB HBM3 (custom board)" = "H100-SXM5-80GB"
[gpus.model_names]
{{- range $nvml, $model := .GPUs.ModelNames}}
{{q $nvml}} = {{q $model}}
{{- end}}

[checkpoints]
# Checkpoint server: challengers, verifiers and resuming providers download
# checkpoints, chunks and proofs here while they matter.
listen = {{q .Checkpoints.Listen}}
# Base URL others reach the server at; committed on chain with each checkpoint.
public_url = {{q .Checkpoints.PublicURL}}
# How long a final checkpoint stays served before it may be pruned. A
# checkpoint an open dispute needs is never pruned.
retention = {{q .Checkpoints.Retention.String}}

[api]
# Address of the status API (gRPC and its REST gateway) and the health check.
listen = {{q .API.Listen}}
# Serve Prometheus metrics at /metrics on the same address.
metrics = {{.API.Metrics}}

[verifier]
# Re-execute other providers' reference-workload checkpoints and challenge
# the wrong ones.
enabled = {{.Verifier.Enabled}}
# "all" checks every checkpoint; "sample" checks a fraction of them.
policy = {{q .Verifier.Policy}}
# Fraction of checkpoints checked under the "sample" policy, in (0, 1].
sample_rate = {{f .Verifier.SampleRate}}
# Seed of the sampling: verifiers with different seeds check different
# checkpoints.
seed = {{.Verifier.Seed}}
# GiB of dataset pieces kept under <storage.work_dir>/datasets to re-execute
# dataset-backed jobs; the least recently used shard sets beyond it are removed
# (and fetched again when a later check needs them).
dataset_cache_gib = {{.Verifier.DatasetCacheGiB}}

[audits]
# Audit checkpoints as a bonded verifier: x/verify draws auditors for every
# checkpoint of an adjudicable job, and each must attest (its own re-execution
# has the provider's trace root), challenge, or report that the provider does
# not serve the start state, before the challenge window closes. Audits are
# paid per step from the job's escrow; a missed one costs a small slash and the
# place in the audit set; attesting to a checkpoint later proven fraudulent
# costs a large slash and the verifier role for good. Assignments go before
# [verifier] sampling. With a hot key, the operator grants it MsgAttest,
# MsgReportUnavailable, MsgChallenge, MsgRespond, MsgStep, MsgClaimTimeout,
# MsgProveTile (/depinchain.verify.v1.*), MsgRegisterVerifier and MsgActivateVerifier
# (/depinchain.stakingext.v1.*).
enabled = {{.Audits.Enabled}}
# Register the operator as a verifier with this bond at start when it is not
# one yet (at least x/stakingext's min_verifier_bond), e.g. "100000000udepin";
# empty: register yourself with 'depinchaind tx stakingext register-verifier'.
register_bond = {{q .Audits.RegisterBond}}
# Rejoin the audit set at start and after a missed assignment took it out.
reactivate = {{.Audits.Reactivate}}
# Report providers that do not serve the state a checkpoint starts from.
report_unavailable = {{.Audits.ReportUnavailable}}

[storage_role]
# Hold pieces of datasets registered on chain and answer their storage
# challenges before each deadline. With a hot key, the operator grants it
# MsgClaimReplica, MsgSubmitStorageProof and MsgDeclareFault
# (/depinchain.shardregistry.v1.*), and MsgProveParityFault
# (/depinchain.verify.v1.*: a custody repair that finds a trainer's parity wrong
# proves it).
enabled = {{.StorageRole.Enabled}}
# Piece files, one folder per dataset id as 'depinchaind dataset build --out'
# writes it: <pieces_dir>/<dataset id>/pieces/sSSSSSS-pPPP.piece.
pieces_dir = {{q .StorageRole.PiecesDir}}
# Claim open slots of the pieces found in pieces_dir, at most one piece per
# shard: at start, when a dataset is registered and when a slot reopens. Each
# claim locks collateral from the provider's bond.
claim_local = {{.StorageRole.ClaimLocal}}
# Claim repair slots of pieces not held here by rebuilding them from k other
# pieces of their shard (local files, or downloaded from their holders and
# checked against the roots on chain); also rebuild a lost held piece before
# declaring it faulty. Takes disk space and collateral.
repair = {{.StorageRole.Repair}}
# Datasets repair may rebuild pieces of; empty means any dataset.
repair_datasets = {{strs .StorageRole.RepairDatasets}}
# Hold pieces of other providers' checkpoint states for jobs with a custody
# section: fetched from the trainer when it commits them (or rebuilt from k
# other holders), checked against the roots on chain, claimed and proven like
# dataset pieces. A checkpoint is final only once k holders proved theirs.
custody = {{.StorageRole.Custody}}
# How often every held piece file is hashed in full (a missing or corrupt one
# is rebuilt or declared faulty, a smaller slash than missed deadlines), and
# open slots are listed again in case an event was missed.
check_interval = {{q .StorageRole.CheckInterval.String}}
`

var tmpl = template.Must(template.New("config").Funcs(template.FuncMap{
	"q":    tomlString,
	"f":    tomlFloat,
	"strs": tomlStrings,
}).Parse(configTemplate))

// Render returns the commented TOML text of the configuration.
func (c *Config) Render() ([]byte, error) {
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, c); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteDefault writes the commented default configuration to path. It never
// overwrites: an existing file is an error, so an operator's edits survive.
func WriteDefault(path string) error { return Write(path, Default()) }

// Write writes c, commented, to a new file at path after validating it. It
// never overwrites an existing file.
func Write(path string, c *Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	text, err := c.Render()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("writing default config: %w", err)
	}
	if _, err := f.Write(text); err != nil {
		f.Close()
		return fmt.Errorf("writing default config: %w", err)
	}
	return f.Close()
}

// tomlString quotes s as a TOML basic string. JSON's escapes are a subset of
// TOML's, so the JSON encoding of a string is a valid TOML string.
func tomlString(s string) string {
	out, _ := json.Marshal(s)
	return string(out)
}

func tomlStrings(list []string) string {
	quoted := make([]string, len(list))
	for i, s := range list {
		quoted[i] = tomlString(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// tomlFloat always writes a decimal point, so the template shows which fields
// take fractions.
func tomlFloat(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

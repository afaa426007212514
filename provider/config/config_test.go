package config

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cosmos/cosmos-sdk/types/bech32"

	"github.com/depinchain/depinchain/pkg/chainparams"
)

func operatorAddress(t *testing.T, prefix string) string {
	t.Helper()
	addr, err := bech32.ConvertAndEncode(prefix, bytes.Repeat([]byte{7}, 20))
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func resolved(c *Config, base string) *Config {
	c.resolvePaths(base)
	return c
}

func TestWriteDefaultLoadsBackAsDefault(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	if err := WriteDefault(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load of the written default: %v", err)
	}
	if want := resolved(Default(), dir); !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	if got.Storage.DataDir != filepath.Join(dir, "data") {
		t.Fatalf("data_dir not resolved against the file's folder: %q", got.Storage.DataDir)
	}
	if got.StorageRole.PiecesDir != filepath.Join(dir, "pieces") {
		t.Fatalf("storage_role.pieces_dir not resolved against the file's folder: %q", got.StorageRole.PiecesDir)
	}

	if err := WriteDefault(path); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second WriteDefault: want an existing-file error, got %v", err)
	}
}

func TestRenderRoundTripsEverySetting(t *testing.T) {
	c := Default()
	c.Chain.RPC = "http://node.example:26657"
	c.Chain.GRPC = "node.example:9090"
	c.Chain.ChainID = "depin-test"
	c.Chain.GasPrices = "0udepin"
	c.Chain.GasAdjustment = 2
	c.Chain.StartHeight = 1234
	c.Keys.KeyringBackend = KeyringBackendTest
	c.Keys.KeyringDir = "/var/lib/keys"
	c.Keys.HotKey = "hot \"quoted\" key"
	c.Keys.Operator = operatorAddress(t, chainparams.Bech32Prefix)
	c.Pricing.Table = map[string]uint64{"H100-SXM5-80GB": 2_000_000, "RTX 4090 24GB": 400_000}
	c.Pricing.PricingCommand = []string{"/usr/local/bin/price", "--margin", "0.2"}
	c.Runtimes = Runtimes{Reference: false, Process: true, Container: true, DockerHost: "unix:///run/docker.sock",
		Trainers: []ProcessTrainer{{Digest: "sha256:" + strings.Repeat("ab", 32), Command: []string{"/usr/bin/python3", "train.py"}, Env: []string{"A=b c"}}},
		Pull:     false, PullTimeout: Duration{3 * time.Minute}, ImageCacheImages: 3, DockerConfig: "/etc/depin/docker.json",
		Registries: []RegistryLogin{{Host: "127.0.0.1:5000", Username: "bot", Password: "p \"w\""}}, MemlockUnlimited: false}
	c.Storage = Storage{DataDir: "/srv/data", WorkDir: "/srv/work"}
	c.GPUs = GPUs{Source: GPUSourceMockDGXH100, Catalogue: "/etc/depin/gpus.yaml", ModelNames: map[string]string{"NVIDIA H100 80GB HBM3": "H100-SXM5-80GB"}, RefreshInterval: Duration{3 * time.Second}}
	c.Checkpoints = Checkpoints{Listen: "0.0.0.0:9001", PublicURL: "https://gpu1.example.com:9001", Retention: Duration{90 * time.Minute}}
	c.API = API{Listen: "0.0.0.0:9000", Metrics: false}
	c.Verifier = Verifier{Enabled: true, Policy: PolicyAll, SampleRate: 0.25, Seed: 42, DatasetCacheGiB: 5}
	c.StorageRole = StorageRole{Enabled: true, PiecesDir: "/srv/pieces", ClaimLocal: false, Repair: true,
		RepairDatasets: []string{"wiki-en-2026", "code-v2"}, CheckInterval: Duration{20 * time.Minute}}

	text, err := c.Render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Load(writeFile(t, string(text)))
	if err != nil {
		t.Fatalf("Load: %v\n%s", err, text)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, c)
	}
}

// Every field of every section appears in the template, right under a comment.
func TestTemplateExplainsEveryField(t *testing.T) {
	text, err := Default().Render()
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]int{} // "section.key" → line index
	var all []string
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		all = append(all, line)
		switch {
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			lines[section] = len(all) - 1
		case line != "" && !strings.HasPrefix(line, "#"):
			key, _, _ := strings.Cut(line, "=")
			lines[section+"."+strings.TrimSpace(key)] = len(all) - 1
		}
	}
	cfgType := reflect.TypeOf(Config{})
	for i := 0; i < cfgType.NumField(); i++ {
		sec := cfgType.Field(i)
		secName := sec.Tag.Get("toml")
		for j := 0; j < sec.Type.NumField(); j++ {
			name := secName + "." + sec.Type.Field(j).Tag.Get("toml")
			at, ok := lines[name]
			if !ok {
				t.Errorf("template has no line for %s", name)
				continue
			}
			if at == 0 || !strings.HasPrefix(all[at-1], "#") {
				t.Errorf("%s is not preceded by a comment", name)
			}
		}
	}
}

func TestLoadKeepsDefaultsForOmittedFields(t *testing.T) {
	path := writeFile(t, "[keys]\nhot_key = \"signer\"\n\n[pricing.table]\n\"A100-SXM4-80GB\" = 900000\n")
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := resolved(Default(), filepath.Dir(path))
	want.Keys.HotKey = "signer"
	want.Pricing.Table = map[string]uint64{"A100-SXM4-80GB": 900000}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestLoadRejectsUnknownFieldsByNameAndLine(t *testing.T) {
	path := writeFile(t, "[chain]\nrpc = \"tcp://127.0.0.1:26657\"\nrcp = \"oops\"\n\n[storage]\ndatadir = \"x\"\n\n[gpu]\nenabled = true\n")
	_, err := Load(path)
	if err == nil {
		t.Fatal("unknown fields were accepted")
	}
	for _, want := range []string{
		path + `:3:1: unknown field "chain.rcp"`,
		path + `:6:1: unknown field "storage.datadir"`,
		`unknown field "gpu"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
}

func TestLoadNamesWrongTypes(t *testing.T) {
	path := writeFile(t, "[chain]\ngas_adjustment = \"high\"\n")
	_, err := Load(path)
	if err == nil {
		t.Fatal("a string gas_adjustment was accepted")
	}
	if want := path + `:2:18: chain.gas_adjustment: got a TOML string, want a number`; err.Error() != want {
		t.Fatalf("error:\n got %q\nwant %q", err, want)
	}

	_, err = Load(writeFile(t, "[pricing.table]\n\"H100\" = -5\n"))
	if err == nil || !strings.Contains(err.Error(), ":2:") || !strings.Contains(err.Error(), "pricing.table.H100") {
		t.Fatalf("negative price: want an error naming pricing.table.H100 and line 2, got %v", err)
	}

	_, err = Load(writeFile(t, "[chain\nrpc = 1\n"))
	if err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Fatalf("malformed TOML: want an error with a position, got %v", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "absent.toml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("want a not-exist error, got %v", err)
	}
}

func TestValidateNamesTheBadField(t *testing.T) {
	cases := []struct {
		field  string
		mutate func(*Config)
	}{
		{"chain.rpc", func(c *Config) { c.Chain.RPC = "127.0.0.1:26657" }},
		{"chain.rpc", func(c *Config) { c.Chain.RPC = "tcp://no-port" }},
		{"chain.grpc", func(c *Config) { c.Chain.GRPC = "localhost" }},
		{"chain.chain_id", func(c *Config) { c.Chain.ChainID = " " }},
		{"chain.gas_prices", func(c *Config) { c.Chain.GasPrices = "cheap" }},
		{"chain.gas_adjustment", func(c *Config) { c.Chain.GasAdjustment = 0.9 }},
		{"chain.start_height", func(c *Config) { c.Chain.StartHeight = -1 }},
		{"keys.keyring_backend", func(c *Config) { c.Keys.KeyringBackend = "memory" }},
		{"keys.keyring_dir", func(c *Config) { c.Keys.KeyringDir = "" }},
		{"keys.hot_key", func(c *Config) { c.Keys.HotKey = "" }},
		{"keys.operator", func(c *Config) { c.Keys.Operator = "depin1notanaddress" }},
		{"keys.operator", func(c *Config) { c.Keys.Operator = operatorAddress(t, "cosmos") }},
		{"pricing.table.H100", func(c *Config) { c.Pricing.Table["H100"] = 0 }},
		{"pricing.table", func(c *Config) { c.Pricing.Table[""] = 5 }},
		{"pricing.pricing_command", func(c *Config) { c.Pricing.PricingCommand = []string{""} }},
		{"runtimes", func(c *Config) { c.Runtimes = Runtimes{} }},
		{"runtimes.docker_host", func(c *Config) { c.Runtimes.DockerHost = "/var/run/docker.sock" }},
		{"storage.data_dir", func(c *Config) { c.Storage.DataDir = "" }},
		{"storage.work_dir", func(c *Config) { c.Storage.WorkDir = "" }},
		{"checkpoints.public_url", func(c *Config) { c.Checkpoints.PublicURL = "ftp://x" }},
		{"gpus.source", func(c *Config) { c.GPUs.Source = "amd" }},
		{"runtimes.trainers[0].digest", func(c *Config) {
			c.Runtimes.Process = true
			c.Runtimes.Trainers = []ProcessTrainer{{Digest: "sha256:abc", Command: []string{"python3"}}}
		}},
		{"api.listen", func(c *Config) { c.API.Listen = "8470" }},
		{"verifier.policy", func(c *Config) { c.Verifier.Policy = "some" }},
		{"verifier.sample_rate", func(c *Config) { c.Verifier.SampleRate = 1.5 }},
		{"verifier.sample_rate", func(c *Config) { c.Verifier.SampleRate = 0 }},
		{"verifier.dataset_cache_gib", func(c *Config) { c.Verifier.DatasetCacheGiB = 0 }},
		{"storage_role.pieces_dir", func(c *Config) { c.StorageRole.Enabled, c.StorageRole.PiecesDir = true, "" }},
		{"storage_role.repair_datasets", func(c *Config) { c.StorageRole.RepairDatasets = []string{"Wiki_EN"} }},
		{"storage_role.repair_datasets", func(c *Config) { c.StorageRole.RepairDatasets = []string{"wiki", "wiki"} }},
		{"storage_role.check_interval", func(c *Config) { c.StorageRole.CheckInterval = Duration{time.Millisecond} }},
	}
	for _, tc := range cases {
		c := Default()
		tc.mutate(c)
		err := c.Validate()
		if err == nil {
			t.Errorf("%s: bad value accepted", tc.field)
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.field+": ") {
			t.Errorf("%s: error does not name the field: %v", tc.field, err)
		}
	}

	// Each bad field is reported, not just the first.
	c := Default()
	c.Chain.ChainID = ""
	c.API.Listen = "nowhere"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "chain.chain_id") || !strings.Contains(err.Error(), "api.listen") {
		t.Fatalf("want both fields reported, got %v", err)
	}

	// A bad value in a file is reported with the file's name.
	_, err = Load(writeFile(t, "[verifier]\npolicy = \"some\"\n"))
	if err == nil || !strings.Contains(err.Error(), "verifier.policy") {
		t.Fatalf("Load of a bad value: %v", err)
	}
}

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
	c := Default()
	c.Chain.GasPrices = "0" + chainparams.BondDenom
	if err := c.Validate(); err != nil {
		t.Fatalf("zero gas prices: %v", err)
	}
}

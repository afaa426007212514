// Package sidecar drives real depinprovider processes beside a localnet
// chain: it registers a provider with the inventory its sidecar reports,
// grants the sidecar's hot key over authz, writes the sidecar's config with
// `depinprovider init` and starts, stops and kills it. End-to-end tests and
// the demos use it.
package sidecar

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/depinchain/depinchain/provider/audits"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/disputes"
	"github.com/depinchain/depinchain/provider/storage"
	"github.com/depinchain/depinchain/testutil/localnet"
)

// Options describe a GPU provider driven by a real depinprovider.
type Options struct {
	// Home is the sidecar's folder; it must not exist yet.
	Home string
	// Operator is the funded test-keyring key that registers and bonds the
	// provider; HotKey is the funded key the sidecar signs with, which the
	// operator grants through authz.
	Operator, HotKey string
	// Bond is the provider's bond, e.g. "100000000000udepin". Empty leaves
	// the operator unregistered (a verifier that does not bid).
	Bond string
	// Prices are udepin per GPU-hour by chain model name.
	Prices map[string]uint64
	// RPC, when set, replaces the node's RPC address in the sidecar's config
	// (e.g. a proxy a test can cut).
	RPC string
	// SkipGrants leaves the hot key without authz grants.
	SkipGrants bool
	// StartArgs are extra arguments of `depinprovider start`.
	StartArgs []string
	// Set overrides fields of config.toml after `depinprovider init` wrote
	// it: "section.key" to a TOML value, e.g. "verifier.policy": `"all"`.
	Set map[string]string
	// Log receives the sidecar's stderr; nil writes it to Home/provider.log.
	Log io.Writer
}

// Provider is a registered provider and its sidecar process.
type Provider struct {
	Binary   string
	Home     string
	Operator string // bech32
	HotKey   string // bech32
	API      string // host:port of the status API
	Public   string // base URL of the checkpoint server

	node      *localnet.Node
	log       io.Writer
	startArgs []string
	cmd       *exec.Cmd
	done      chan struct{}
}

// Setup registers a provider on n with the inventory its sidecar
// reports, grants the hot key what the sidecar sends and writes the
// sidecar's config with `depinprovider init`, on a simulated DGX H100.
// Start runs it.
func Setup(ctx context.Context, n *localnet.Node, opts Options) (*Provider, error) {
	bin, err := localnet.ProviderBinary()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Home, 0o755); err != nil {
		return nil, err
	}
	ports, err := localnet.FreePorts(2)
	if err != nil {
		return nil, err
	}
	p := &Provider{
		Binary: bin, Home: opts.Home, node: n, log: opts.Log, startArgs: opts.StartArgs,
		API: fmt.Sprintf("127.0.0.1:%d", ports[0]), Public: fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
	}
	if p.Operator, err = n.Address(ctx, opts.Operator); err != nil {
		return nil, err
	}
	if p.HotKey, err = n.Address(ctx, opts.HotKey); err != nil {
		return nil, err
	}
	rpc := n.RPC
	if opts.RPC != "" {
		rpc = opts.RPC
	}
	args := []string{"init", "--home", opts.Home, "--chain-id", n.ChainID, "--node", rpc, "--grpc", n.GRPC,
		"--gas-prices", "0udepin", "--keyring-backend", "test", "--keyring-dir", n.Home,
		"--hot-key", opts.HotKey, "--operator", p.Operator, "--gpu-source", "mock-dgxh100",
		"--model-name", "NVIDIA H100 80GB HBM3=H100-SXM5-80GB",
		"--api-listen", p.API, "--checkpoint-listen", strings.TrimPrefix(p.Public, "http://"), "--public-url", p.Public}
	for model, price := range opts.Prices {
		args = append(args, "--price", fmt.Sprintf("%s=%d", model, price))
	}
	if _, err := p.exec(ctx, args...); err != nil {
		return nil, err
	}
	if len(opts.Set) > 0 {
		path := filepath.Join(opts.Home, "config.toml")
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		text := string(raw)
		for field, value := range opts.Set {
			if text, err = setField(text, field, value); err != nil {
				return nil, err
			}
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			return nil, err
		}
	}

	// Register with the inventory the sidecar itself reports.
	if opts.Bond != "" {
		gpus, err := p.exec(ctx, "gpus", "--home", opts.Home)
		if err != nil {
			return nil, err
		}
		reg := []string{"stakingext", "register-provider", opts.Operator, p.Public, "local", opts.Bond}
		for _, line := range strings.Split(strings.TrimSpace(gpus), "\n") {
			reg = append(reg, "--gpus", line)
		}
		if err := mustTx(ctx, n, opts.Operator, reg...); err != nil {
			return nil, err
		}
	}
	if !opts.SkipGrants {
		grants := append(append(slices.Clone(chain.RequiredGrants), disputes.VerifierGrants...), storage.RequiredGrants...)
		if opts.Set["audits.enabled"] == "true" {
			grants = append(grants, audits.RequiredGrants...)
		}
		slices.Sort(grants)
		for _, msg := range slices.Compact(grants) {
			if err := mustTx(ctx, n, opts.Operator, "authz", "grant", p.HotKey, "generic", "--msg-type", msg); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// setField sets "section.key" = value in the text `depinprovider init`
// writes, where every field of a section stands on its own line.
func setField(text, field, value string) (string, error) {
	dot := strings.LastIndex(field, ".")
	if dot < 0 {
		return "", fmt.Errorf("config field %q: want section.key", field)
	}
	section, key := field[:dot], field[dot+1:]
	lines := strings.SplitAfter(text, "\n")
	in := false
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "[") {
			in = trimmed == "["+section+"]"
			continue
		}
		if in && strings.HasPrefix(trimmed, key+" = ") {
			lines[i] = key + " = " + value + "\n"
			return strings.Join(lines, ""), nil
		}
	}
	return "", fmt.Errorf("config.toml has no field %s", field)
}

func mustTx(ctx context.Context, n *localnet.Node, from string, args ...string) error {
	res, err := n.Tx(ctx, from, args...)
	if err != nil {
		return err
	}
	if res.Code != 0 {
		return fmt.Errorf("tx %v failed: code %d: %s", args, res.Code, res.RawLog)
	}
	return nil
}

func (p *Provider) exec(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, p.Binary, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", &localnet.ExecError{Args: args, Stdout: stdout.String(), Stderr: stderr.String(), Err: err}
	}
	return stdout.String(), nil
}

// Exec runs depinprovider with --home, returning stdout.
func (p *Provider) Exec(ctx context.Context, args ...string) (string, error) {
	return p.exec(ctx, append(args, "--home", p.Home)...)
}

// Start runs `depinprovider start` and returns once its status API says it
// is ready, or with the sidecar's last log lines if it exits first.
func (p *Provider) Start(ctx context.Context) error { return p.StartWith(ctx) }

// StartWith is Start with extra arguments for this start only, e.g. a
// hidden test flag that pauses the sidecar at a named point
// ("--pause-before-move", "2"); a later Start runs without them.
func (p *Provider) StartWith(ctx context.Context, extra ...string) error {
	logPath := filepath.Join(p.Home, "provider.log")
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	var sink io.Writer = logFile
	if p.log != nil {
		sink = io.MultiWriter(logFile, p.log)
	}
	args := append(append([]string{"start", "--home", p.Home}, p.startArgs...), extra...)
	cmd := exec.Command(p.Binary, args...)
	cmd.Stdout, cmd.Stderr = sink, sink
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() {
		cmd.Wait() //nolint:errcheck // the exit is observed through Exited
		logFile.Close()
		close(p.done)
	}()
	deadline := time.NewTimer(StartTimeout)
	defer deadline.Stop()
	for {
		ready, err := p.Ready(ctx)
		if ready {
			return nil
		}
		why := "/readyz answers not ready"
		if err != nil {
			why = err.Error()
		}
		select {
		case <-p.done:
			return fmt.Errorf("depinprovider exited during start:\n%s", tail(logPath, 20))
		case <-ctx.Done():
			return fmt.Errorf("depinprovider not ready (%s): %w\n%s", why, ctx.Err(), tail(logPath, 20))
		case <-deadline.C:
			return fmt.Errorf("depinprovider not ready within %s (%s); it is left running for Stop\n%s", StartTimeout, why, tail(logPath, 20))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// StartTimeout bounds how long Start waits for the sidecar to become ready:
// to load its database, reconcile with the chain and catch up with it.
var StartTimeout = 2 * time.Minute

// Exited is closed when the sidecar process ends.
func (p *Provider) Exited() <-chan struct{} { return p.done }

// Stop ends the sidecar gracefully (SIGTERM, then SIGKILL after 20 s).
func (p *Provider) Stop() { p.signal(syscall.SIGTERM, 20*time.Second) }

// Kill ends the sidecar with SIGKILL, as a crash would.
func (p *Provider) Kill() { p.signal(syscall.SIGKILL, 0) }

func (p *Provider) signal(sig syscall.Signal, grace time.Duration) {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(sig) //nolint:errcheck // it may have exited already
	select {
	case <-p.done:
	case <-time.After(grace):
		p.cmd.Process.Kill() //nolint:errcheck // same
		<-p.done
	}
}

// Ready reports whether /readyz answers 200.
func (p *Provider) Ready(ctx context.Context) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.API+"/readyz", nil)
	if err != nil {
		return false, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK, nil
}

// REST GETs a path of the sidecar's status API and decodes the JSON into out.
func (p *Provider) REST(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.API+path, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, res.Status, body)
	}
	if out == nil {
		return nil
	}
	if s, ok := out.(*string); ok {
		*s = string(body)
		return nil
	}
	return json.Unmarshal(body, out)
}

// Logged reports whether the sidecar's log holds a line whose message is
// msg (msg="..." in the text format), in any run since Setup.
func (p *Provider) Logged(msg string) bool { return p.LogCount(msg) > 0 }

// LogCount counts the sidecar's log lines whose message is msg, in every
// run since Setup.
func (p *Provider) LogCount(msg string) int {
	b, err := os.ReadFile(p.LogPath())
	if err != nil {
		return 0
	}
	return strings.Count(string(b), fmt.Sprintf("msg=%q", msg))
}

// WaitLog waits until the sidecar's log holds a line whose message is msg
// (msg="..." in the text format), e.g. daemon.PausedLogMsg. It fails, with
// the log's last lines, when ctx ends or the sidecar exits first.
func (p *Provider) WaitLog(ctx context.Context, msg string) error {
	for !p.Logged(msg) {
		select {
		case <-p.Exited():
			if p.Logged(msg) {
				return nil
			}
			return fmt.Errorf("depinprovider exited before logging msg=%q:\n%s", msg, tail(p.LogPath(), 20))
		case <-ctx.Done():
			return fmt.Errorf("depinprovider never logged msg=%q: %w\n%s", msg, ctx.Err(), tail(p.LogPath(), 20))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// LogPath is the sidecar's log file.
func (p *Provider) LogPath() string { return filepath.Join(p.Home, "provider.log") }

func tail(path string, lines int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var all []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		all = append(all, sc.Text())
	}
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// Pid is the sidecar's process id, 0 before Start.
func (p *Provider) Pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

package localnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// NetworkOptions configure a chain of several validators, each a separate
// depinchaind with its own home, built from a genesis of gentxs.
type NetworkOptions struct {
	// Dir holds validator i's home in Dir/val<i> and the network's state file
	// (network.json); it must not exist yet, or be empty.
	Dir string
	// Validators is how many validators the genesis bonds, each with the same
	// stake; default 4.
	Validators int
	ChainID    string
	// BlockTime is CometBFT's timeout_commit; default 250ms.
	BlockTime time.Duration
	// ProposeTimeout is timeout_propose: how long the others wait for a
	// stopped proposer before moving to the next round; default 1s.
	ProposeTimeout time.Duration
	// Accounts are keys created in every validator's test keyring (so any
	// validator's home can sign for them) and funded at genesis, in udepin.
	// The validators' own operator keys are val0, val1, ...
	Accounts map[string]int64
	// Genesis edits the app state (module name → decoded JSON) after the
	// gentxs are collected and the localnet's own edit (withGenesisEdit).
	Genesis func(appState map[string]any) error
	// Binary is the depinchaind that runs the CLI on the host (and the nodes
	// unless Docker is set); empty means Binary().
	Binary string
	// BasePort, when not zero, gives validator i the fixed loopback ports
	// BasePort+10i+k for k = 0 p2p, 1 RPC, 2 gRPC, 3 REST, 4 ABCI,
	// 5 CometBFT Prometheus; zero picks free ports.
	BasePort int
	// Telemetry turns on CometBFT's Prometheus endpoint and the app's
	// telemetry (served as Prometheus text by the REST server).
	Telemetry bool
	// Docker, when set, runs each validator in a container instead of a host
	// process (see docker.go), so links between them can be cut.
	Docker *DockerOptions
}

// Network is a running multi-validator chain.
type Network struct {
	Dir        string
	ChainID    string
	Binary     string
	Validators []*Validator

	docker *dockerNet
}

// Validator is one validator node. Its embedded Node runs the CLI on the host
// with the validator's home (whose keyring holds every account of the
// network) against the validator's own RPC, gRPC and REST endpoints; the
// methods below replace Node's process control and height queries.
type Validator struct {
	*Node
	Index   int
	Moniker string
	NodeID  string
	// Key is its operator key's name in the keyrings (val<i>); Operator its
	// valoper address.
	Key, Operator string
	// P2P is the address other validators dial (in Docker, on their link).
	P2P string
	// Metrics is CometBFT's Prometheus endpoint and AppMetrics the app's
	// telemetry in Prometheus format, as URLs; empty without telemetry.
	Metrics, AppMetrics string
	// Container is its container's name in Docker mode.
	Container string

	pid int // the process of a validator started by an earlier driver (LoadNetwork)
	net *Network
}

const networkStateFile = "network.json"

// StartNetwork initialises opts.Validators homes, builds one genesis from
// their gentxs, wires them as persistent peers of one another and starts
// them, returning once every validator has committed block 2 and validator
// 0's REST API answers. On error, whatever was started is stopped.
func StartNetwork(ctx context.Context, opts NetworkOptions) (*Network, error) {
	if opts.Validators == 0 {
		opts.Validators = 4
	}
	if opts.ChainID == "" {
		opts.ChainID = "depin-localnet"
	}
	if opts.BlockTime == 0 {
		opts.BlockTime = 250 * time.Millisecond
	}
	if opts.ProposeTimeout == 0 {
		opts.ProposeTimeout = time.Second
	}
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = Binary(); err != nil {
			return nil, err
		}
	}
	if entries, err := os.ReadDir(opts.Dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%s is not empty", opts.Dir)
	}
	n := &Network{Dir: opts.Dir, ChainID: opts.ChainID, Binary: bin}
	for i := 0; i < opts.Validators; i++ {
		home := filepath.Join(opts.Dir, fmt.Sprintf("val%d", i))
		n.Validators = append(n.Validators, &Validator{
			Node:  &Node{Binary: bin, Home: home, ChainID: opts.ChainID},
			Index: i, Moniker: fmt.Sprintf("val%d", i), Key: fmt.Sprintf("val%d", i), net: n,
		})
	}
	if opts.Docker != nil {
		d, err := newDockerNet(ctx, opts.Docker, opts.Validators)
		if err != nil {
			return nil, err
		}
		n.docker = d
	}
	ok := false
	defer func() {
		if !ok {
			n.Stop()
		}
	}()
	if err := n.initGenesis(ctx, opts); err != nil {
		return nil, err
	}
	if err := n.configure(opts); err != nil {
		return nil, err
	}
	if n.docker != nil {
		if err := n.docker.create(ctx, n); err != nil {
			return nil, err
		}
	}
	for _, v := range n.Validators {
		if err := v.launch(ctx); err != nil {
			return nil, err
		}
	}
	for _, v := range n.Validators {
		if err := v.WaitHeight(ctx, 2); err != nil {
			return nil, err
		}
	}
	if err := n.Validators[0].waitREST(ctx); err != nil {
		return nil, err
	}
	if err := n.Save(); err != nil {
		return nil, err
	}
	ok = true
	return n, nil
}

// initGenesis creates the homes and keys, funds the accounts, collects one
// gentx per validator into validator 0's genesis and copies the result to
// every home.
func (n *Network) initGenesis(ctx context.Context, opts NetworkOptions) error {
	v0 := n.Validators[0]
	if err := n.each(func(v *Validator) error {
		if _, err := v.Exec(ctx, "init", v.Moniker, "--chain-id", n.ChainID); err != nil {
			return err
		}
		id, err := v.Exec(ctx, "comet", "show-node-id")
		v.NodeID = strings.TrimSpace(id)
		return err
	}); err != nil {
		return err
	}
	accounts := map[string]int64{}
	for _, v := range n.Validators {
		accounts[v.Key] = 1_000_000_000_000
	}
	for name, amount := range opts.Accounts {
		accounts[name] = amount
	}
	for _, name := range slices.Sorted(maps.Keys(accounts)) {
		if _, err := v0.Exec(ctx, "keys", "add", name, "--keyring-backend", "test"); err != nil {
			return err
		}
		if _, err := v0.Exec(ctx, "genesis", "add-genesis-account", name, fmt.Sprintf("%dudepin", accounts[name]), "--keyring-backend", "test"); err != nil {
			return err
		}
	}
	genesis := filepath.Join(v0.Home, "config", "genesis.json")
	if err := os.MkdirAll(filepath.Join(v0.Home, "config", "gentx"), 0o755); err != nil {
		return err
	}
	if err := n.each(func(v *Validator) error {
		if v.Index > 0 {
			// The test keyring is a folder of files: copying it shares every key.
			if err := copyDir(filepath.Join(v0.Home, "keyring-test"), filepath.Join(v.Home, "keyring-test")); err != nil {
				return err
			}
			if err := copyFile(genesis, filepath.Join(v.Home, "config", "genesis.json")); err != nil {
				return err
			}
		}
		// Every gentx goes straight into the folder validator 0's collect-gentxs reads.
		out := filepath.Join(v0.Home, "config", "gentx", fmt.Sprintf("gentx-%s.json", v.NodeID))
		_, err := v.Exec(ctx, "genesis", "gentx", v.Key, "100000000000udepin", "--chain-id", n.ChainID,
			"--keyring-backend", "test", "--moniker", v.Moniker, "--output-document", out)
		return err
	}); err != nil {
		return err
	}
	if _, err := v0.Exec(ctx, "genesis", "collect-gentxs"); err != nil {
		return err
	}
	if err := editGenesis(genesis, withGenesisEdit(opts.Genesis)); err != nil {
		return err
	}
	if _, err := v0.Exec(ctx, "genesis", "validate"); err != nil {
		return err
	}
	for _, v := range n.Validators[1:] {
		if err := copyFile(genesis, filepath.Join(v.Home, "config", "genesis.json")); err != nil {
			return err
		}
	}
	return n.each(func(v *Validator) error {
		op, err := v.Exec(ctx, "keys", "show", v.Key, "--bech", "val", "-a", "--keyring-backend", "test")
		v.Operator = strings.TrimSpace(op)
		return err
	})
}

// each runs f for every validator at once and returns the first error.
func (n *Network) each(f func(v *Validator) error) error {
	errs := make([]error, len(n.Validators))
	var wg sync.WaitGroup
	for i, v := range n.Validators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(v)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// configure writes each validator's config.toml, app.toml and client.toml:
// its addresses, the others as persistent peers, short timeouts and ABCI
// responses kept for sidecars.
func (n *Network) configure(opts NetworkOptions) error {
	type addrs struct {
		p2p, rpc, grpc, api, abci, metrics string // what the node listens on
	}
	listen := make([]addrs, len(n.Validators))
	for i, v := range n.Validators {
		if n.docker != nil {
			listen[i] = addrs{"tcp://0.0.0.0:26656", "tcp://0.0.0.0:26657", "0.0.0.0:9090", "tcp://0.0.0.0:1317",
				"tcp://127.0.0.1:26658", ":26660"}
			host := n.docker.hostPorts[i]
			v.RPC = fmt.Sprintf("tcp://127.0.0.1:%d", host.rpc)
			v.GRPC = fmt.Sprintf("127.0.0.1:%d", host.grpc)
			v.API = fmt.Sprintf("http://127.0.0.1:%d", host.api)
			if opts.Telemetry {
				v.Metrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", host.metrics)
			}
			v.Container = n.docker.container(i)
			continue
		}
		var ports []int
		if opts.BasePort != 0 {
			for k := 0; k < 6; k++ {
				ports = append(ports, opts.BasePort+10*i+k)
			}
		} else {
			var err error
			if ports, err = FreePorts(6); err != nil {
				return err
			}
		}
		listen[i] = addrs{
			p2p: fmt.Sprintf("tcp://127.0.0.1:%d", ports[0]), rpc: fmt.Sprintf("tcp://127.0.0.1:%d", ports[1]),
			grpc: fmt.Sprintf("127.0.0.1:%d", ports[2]), api: fmt.Sprintf("tcp://127.0.0.1:%d", ports[3]),
			abci: fmt.Sprintf("tcp://127.0.0.1:%d", ports[4]), metrics: fmt.Sprintf("127.0.0.1:%d", ports[5]),
		}
		v.P2P = fmt.Sprintf("127.0.0.1:%d", ports[0])
		v.RPC, v.GRPC, v.API = listen[i].rpc, listen[i].grpc, "http://"+strings.TrimPrefix(listen[i].api, "tcp://")
		if opts.Telemetry {
			v.Metrics = "http://" + listen[i].metrics + "/metrics"
		}
	}
	for i, v := range n.Validators {
		if opts.Telemetry {
			v.AppMetrics = v.API + "/metrics?format=prometheus"
		}
		var peers []string
		for j, w := range n.Validators {
			if j == i {
				continue
			}
			addr := w.P2P
			if n.docker != nil {
				addr = n.docker.linkAddr(j, i)
			}
			peers = append(peers, w.NodeID+"@"+addr)
		}
		cfg := filepath.Join(v.Home, "config")
		if err := setTOML(filepath.Join(cfg, "config.toml"), map[string]map[string]string{
			"":    {"proxy_app": quote(listen[i].abci), "moniker": quote(v.Moniker)},
			"rpc": {"laddr": quote(listen[i].rpc), "pprof_laddr": quote("")},
			"p2p": {
				"laddr": quote(listen[i].p2p), "persistent_peers": quote(strings.Join(peers, ",")),
				// Every peer is on 127.0.0.1 in process mode; the peer set is fixed, so no gossip of addresses.
				"addr_book_strict": "false", "allow_duplicate_ip": "true", "pex": "false",
			},
			"consensus": {
				"timeout_commit": quote(opts.BlockTime.String()), "timeout_propose": quote(opts.ProposeTimeout.String()),
				"timeout_prevote": quote("500ms"), "timeout_precommit": quote("500ms"),
			},
			"storage": {"discard_abci_responses": "false"},
			"instrumentation": {
				"prometheus": strconv.FormatBool(opts.Telemetry), "prometheus_listen_addr": quote(listen[i].metrics),
				"namespace": quote("cometbft"),
			},
		}); err != nil {
			return err
		}
		app := map[string]map[string]string{
			"api":  {"enable": "true", "address": quote(listen[i].api)},
			"grpc": {"enable": "true", "address": quote(listen[i].grpc)},
		}
		if opts.Telemetry {
			app["telemetry"] = map[string]string{"enabled": "true", "prometheus-retention-time": "60"}
		}
		if err := setTOML(filepath.Join(cfg, "app.toml"), app); err != nil {
			return err
		}
		if err := setTOML(filepath.Join(cfg, "client.toml"), map[string]map[string]string{
			"": {"chain-id": quote(n.ChainID), "keyring-backend": quote("test"), "node": quote(v.RPC)},
		}); err != nil {
			return err
		}
	}
	return nil
}

// launch starts the validator's process or container without waiting.
func (v *Validator) launch(ctx context.Context) error {
	if v.net.docker != nil {
		return v.net.docker.start(ctx, v.Index)
	}
	if err := v.Node.launch(nil); err != nil {
		return err
	}
	v.pid = v.cmd.Process.Pid
	return nil
}

// Running reports whether the validator's process (or container) is up.
func (v *Validator) Running() bool {
	if v.net.docker != nil {
		return v.net.docker.running(v.Index)
	}
	if v.cmd != nil {
		select {
		case <-v.exited:
			return false
		default:
			return true
		}
	}
	return v.pid != 0 && syscall.Kill(v.pid, 0) == nil
}

// Pid is the validator's process id (0 in Docker mode or when stopped).
func (v *Validator) Pid() int {
	if !v.Running() || v.net.docker != nil {
		return 0
	}
	return v.pid
}

// Stop ends the validator gracefully (SIGTERM; SIGKILL after 10 s).
func (v *Validator) Stop() { v.signal(syscall.SIGTERM) }

// Kill ends the validator with SIGKILL, as a crash or power cut would.
func (v *Validator) Kill() { v.signal(syscall.SIGKILL) }

func (v *Validator) signal(sig syscall.Signal) {
	if v.net.docker != nil {
		v.net.docker.signal(v.Index, sig)
		return
	}
	if v.cmd != nil {
		if sig == syscall.SIGTERM {
			v.Node.Stop()
			return
		}
		v.Node.Kill()
		return
	}
	// A process an earlier driver started (LoadNetwork): signal its group and
	// wait for it to go; its parent is gone, so init reaps it.
	if v.pid == 0 {
		return
	}
	_ = syscall.Kill(-v.pid, sig)
	killed := sig == syscall.SIGKILL
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(v.pid, 0) == nil; {
		if time.Now().After(deadline) {
			if killed {
				// Still there 10 s after SIGKILL: not ours to wait for any more
				// (a stuck process, or the pid taken by another one).
				fmt.Fprintf(os.Stderr, "localnet: validator %d (pid %d) still exists 10s after SIGKILL; not waiting any longer\n", v.Index, v.pid)
				return
			}
			_ = syscall.Kill(-v.pid, syscall.SIGKILL)
			killed, deadline = true, time.Now().Add(10*time.Second)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// resumeTimeout bounds how long Resume waits for a restarted validator's RPC.
const resumeTimeout = 2 * time.Minute

// Resume starts a stopped validator again on the same home and ports and
// waits until its RPC answers (at most resumeTimeout, or until ctx ends). It
// does not wait for new blocks: the rest of the network may be halted.
func (v *Validator) Resume(ctx context.Context) error {
	if v.Running() {
		return fmt.Errorf("validator %d is running", v.Index)
	}
	if err := v.launch(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, resumeTimeout)
	defer cancel()
	for {
		_, err := v.Status(ctx)
		if err == nil {
			return nil
		}
		if !v.Running() {
			return fmt.Errorf("validator %d exited while starting; see %s", v.Index, v.LogPath())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("validator %d's RPC did not answer after a restart (%v; last error: %v); see %s",
				v.Index, ctx.Err(), err, v.LogPath())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// LogPath is the validator's log (in Docker mode, written when the network stops).
func (v *Validator) LogPath() string { return filepath.Join(v.Home, "node.log") }

// rpcGet GETs a CometBFT RPC path and decodes its JSON-RPC result into out.
func (v *Validator) rpcGet(ctx context.Context, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+strings.TrimPrefix(v.RPC, "tcp://")+path, nil)
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
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
			Data    string `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("GET %s: %s: %s", path, res.Status, body)
	}
	if env.Error != nil {
		return fmt.Errorf("GET %s: %s %s", path, env.Error.Message, env.Error.Data)
	}
	return json.Unmarshal(env.Result, out)
}

// NodeStatus is the part of CometBFT's /status the tests read.
type NodeStatus struct {
	Height     int64
	AppHash    string
	CatchingUp bool
	// Address is the node's consensus address (hex), as commits name signers.
	Address string
}

// Status asks the validator's RPC for its latest height.
func (v *Validator) Status(ctx context.Context) (NodeStatus, error) {
	var s struct {
		SyncInfo struct {
			LatestBlockHeight string `json:"latest_block_height"`
			LatestAppHash     string `json:"latest_app_hash"`
			CatchingUp        bool   `json:"catching_up"`
		} `json:"sync_info"`
		ValidatorInfo struct {
			Address string `json:"address"`
		} `json:"validator_info"`
	}
	if err := v.rpcGet(ctx, "/status", &s); err != nil {
		return NodeStatus{}, err
	}
	h, err := strconv.ParseInt(s.SyncInfo.LatestBlockHeight, 10, 64)
	return NodeStatus{Height: h, AppHash: s.SyncInfo.LatestAppHash, CatchingUp: s.SyncInfo.CatchingUp, Address: s.ValidatorInfo.Address}, err
}

// Height is the validator's latest committed height, from its RPC.
func (v *Validator) Height(ctx context.Context) (int64, error) {
	s, err := v.Status(ctx)
	return s.Height, err
}

// Header is what a committed block says about the chain at its height.
type Header struct {
	Height int64
	// BlockHash identifies the block; AppHash is the app state after the
	// previous block, as every validator that signed it computed.
	BlockHash, AppHash string
	// Signers are the consensus addresses (hex) whose precommits for the
	// block are in its commit, as this node stored it.
	Signers []string
}

// Signed reports whether the validator with consensus address addr (see
// NodeStatus.Address) is among the block's signers.
func (h Header) Signed(addr string) bool { return slices.Contains(h.Signers, addr) }

// Header returns the committed header at height h as this validator stores it.
func (v *Validator) Header(ctx context.Context, h int64) (Header, error) {
	var c struct {
		SignedHeader struct {
			Header struct {
				AppHash string `json:"app_hash"`
			} `json:"header"`
			Commit struct {
				BlockID struct {
					Hash string `json:"hash"`
				} `json:"block_id"`
				Signatures []struct {
					Flag    int    `json:"block_id_flag"`
					Address string `json:"validator_address"`
				} `json:"signatures"`
			} `json:"commit"`
		} `json:"signed_header"`
	}
	if err := v.rpcGet(ctx, fmt.Sprintf("/commit?height=%d", h), &c); err != nil {
		return Header{}, err
	}
	hd := Header{Height: h, BlockHash: c.SignedHeader.Commit.BlockID.Hash, AppHash: c.SignedHeader.Header.AppHash}
	for _, sig := range c.SignedHeader.Commit.Signatures {
		if sig.Flag == 2 { // BlockIDFlagCommit
			hd.Signers = append(hd.Signers, sig.Address)
		}
	}
	return hd, nil
}

// AppHash is the app hash in the header at height h: the state after block h-1.
func (v *Validator) AppHash(ctx context.Context, h int64) (string, error) {
	hd, err := v.Header(ctx, h)
	return hd.AppHash, err
}

// WaitHeight waits until the validator has committed height h. It fails
// when ctx ends, when the validator's process exits, or when its height has
// not moved for a minute.
func (v *Validator) WaitHeight(ctx context.Context, h int64) error {
	return v.WaitHeightStall(ctx, h, time.Minute)
}

// WaitHeightStall is WaitHeight with the time the height may stand still.
func (v *Validator) WaitHeightStall(ctx context.Context, h int64, stall time.Duration) error {
	last, lastMoved := int64(-1), time.Now()
	for {
		got, err := v.Height(ctx)
		if err == nil && got >= h {
			return nil
		}
		if err == nil && got != last {
			last, lastMoved = got, time.Now()
		}
		if time.Since(lastMoved) > stall {
			return fmt.Errorf("validator %d stuck at height %d (want %d) for %s: %v; see %s", v.Index, last, h, stall, err, v.LogPath())
		}
		if v.net.docker == nil && !v.Running() {
			return fmt.Errorf("validator %d exited; see %s", v.Index, v.LogPath())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for validator %d to reach height %d (at %d): %w", v.Index, h, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitBlocks waits for k more blocks on this validator.
func (v *Validator) WaitBlocks(ctx context.Context, k int64) error {
	h, err := v.Height(ctx)
	if err != nil {
		return err
	}
	return v.WaitHeight(ctx, h+k)
}

// Running returns the validators whose process (or container) is up.
func (n *Network) Running() []*Validator {
	var out []*Validator
	for _, v := range n.Validators {
		if v.Running() {
			out = append(out, v)
		}
	}
	return out
}

// Heights returns each validator's latest height, -1 where it does not answer.
func (n *Network) Heights(ctx context.Context) []int64 {
	hs := make([]int64, len(n.Validators))
	for i, v := range n.Validators {
		h, err := v.Height(ctx)
		if err != nil {
			h = -1
		}
		hs[i] = h
	}
	return hs
}

// SameHeader checks that the given validators (every running one when none
// is named) store the same block and app hash at height h, and returns it.
func (n *Network) SameHeader(ctx context.Context, h int64, idx ...int) (Header, error) {
	vs := n.pick(idx)
	if len(vs) == 0 {
		return Header{}, errors.New("no validator to compare")
	}
	var first Header
	var seen []string
	for k, v := range vs {
		hd, err := v.Header(ctx, h)
		if err != nil {
			return Header{}, fmt.Errorf("validator %d at height %d: %w", v.Index, h, err)
		}
		seen = append(seen, fmt.Sprintf("val%d: block %s app %s", v.Index, hd.BlockHash, hd.AppHash))
		if k == 0 {
			first = hd
		} else if hd.BlockHash != first.BlockHash || hd.AppHash != first.AppHash {
			return Header{}, fmt.Errorf("validators disagree at height %d:\n%s", h, strings.Join(seen, "\n"))
		}
	}
	return first, nil
}

// WaitSynced waits until the given validators (every running one when none
// is named) have all committed height h and agree on its header.
func (n *Network) WaitSynced(ctx context.Context, h int64, idx ...int) (Header, error) {
	for _, v := range n.pick(idx) {
		if err := v.WaitHeight(ctx, h); err != nil {
			return Header{}, err
		}
	}
	return n.SameHeader(ctx, h, idx...)
}

func (n *Network) pick(idx []int) []*Validator {
	if len(idx) == 0 {
		return n.Running()
	}
	vs := make([]*Validator, len(idx))
	for k, i := range idx {
		vs[k] = n.Validators[i]
	}
	return vs
}

// Stop ends every validator; in Docker mode it also saves each container's
// log to its node.log and removes the containers and networks.
func (n *Network) Stop() {
	for _, v := range n.Validators {
		if v.net.docker == nil {
			v.Stop()
		}
	}
	if n.docker != nil {
		n.docker.remove(n)
	}
}

// networkState is what network.json records, for LoadNetwork.
type networkState struct {
	ChainID    string           `json:"chain_id"`
	Binary     string           `json:"binary"`
	Validators []validatorState `json:"validators"`
}

type validatorState struct {
	Index      int    `json:"index"`
	Moniker    string `json:"moniker"`
	Home       string `json:"home"`
	NodeID     string `json:"node_id"`
	Operator   string `json:"operator"`
	P2P        string `json:"p2p"`
	RPC        string `json:"rpc"`
	GRPC       string `json:"grpc"`
	API        string `json:"api"`
	Metrics    string `json:"metrics,omitempty"`
	AppMetrics string `json:"app_metrics,omitempty"`
	Pid        int    `json:"pid"`
}

// Save records the network (endpoints and process ids) in Dir/network.json.
func (n *Network) Save() error {
	if n.docker != nil {
		return nil // containers are the test's own; nothing outlives it
	}
	st := networkState{ChainID: n.ChainID, Binary: n.Binary}
	for _, v := range n.Validators {
		st.Validators = append(st.Validators, validatorState{
			Index: v.Index, Moniker: v.Moniker, Home: v.Home, NodeID: v.NodeID, Operator: v.Operator,
			P2P: v.P2P, RPC: v.RPC, GRPC: v.GRPC, API: v.API, Metrics: v.Metrics, AppMetrics: v.AppMetrics, Pid: v.Pid(),
		})
	}
	out, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.Dir, networkStateFile), out, 0o644)
}

// LoadNetwork attaches to a network an earlier StartNetwork left running in
// dir (process mode), e.g. to stop, kill or restart one validator of
// `make localnet`.
func LoadNetwork(dir string) (*Network, error) {
	raw, err := os.ReadFile(filepath.Join(dir, networkStateFile))
	if err != nil {
		return nil, err
	}
	var st networkState
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", networkStateFile, err)
	}
	n := &Network{Dir: dir, ChainID: st.ChainID, Binary: st.Binary}
	for _, s := range st.Validators {
		n.Validators = append(n.Validators, &Validator{
			Node:  &Node{Binary: st.Binary, Home: s.Home, ChainID: st.ChainID, RPC: s.RPC, GRPC: s.GRPC, API: s.API},
			Index: s.Index, Moniker: s.Moniker, NodeID: s.NodeID, Key: fmt.Sprintf("val%d", s.Index), Operator: s.Operator,
			P2P: s.P2P, Metrics: s.Metrics, AppMetrics: s.AppMetrics, pid: s.Pid, net: n,
		})
	}
	return n, nil
}

// Kill ends the node's process group with SIGKILL and waits for it.
func (n *Node) Kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.exited
	if n.logFile != nil {
		n.logFile.Close()
	}
}

func copyFile(from, to string) error {
	raw, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	info, err := os.Stat(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, raw, info.Mode().Perm())
}

func copyDir(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if err := copyFile(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

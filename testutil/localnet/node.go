package localnet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options configure a local chain.
type Options struct {
	// Home is where the node's config and data live; it must not exist yet.
	Home    string
	ChainID string
	// Accounts are keys created in the test keyring and funded at genesis, in udepin.
	Accounts map[string]int64
	// BlockTime is CometBFT's timeout_commit; short blocks keep tests fast.
	BlockTime time.Duration
	// Genesis edits the app state (module name → decoded JSON) before the chain starts,
	// after the localnet's own edit (x/market's default custody off: withGenesisEdit).
	Genesis func(appState map[string]any) error
	// Log receives the node's stdout and stderr; nil writes them to Home/node.log.
	Log io.Writer
	// Binary is the depinchaind to run (e.g. an older release in the upgrade test);
	// empty means Binary(). Node.Binary can be changed between Stop and Resume.
	Binary string
}

// Node is one running depinchaind.
type Node struct {
	Binary  string
	Home    string
	ChainID string
	RPC     string // tcp://127.0.0.1:port
	GRPC    string // 127.0.0.1:port
	API     string // http://127.0.0.1:port

	cmd     *exec.Cmd
	exited  chan struct{}
	logFile *os.File
}

const validatorKey = "validator"

// Start initialises a single-validator chain in opts.Home and starts it, returning once
// the first blocks are committed and the REST API answers.
func Start(ctx context.Context, opts Options) (*Node, error) {
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = Binary(); err != nil {
			return nil, err
		}
	}
	if opts.ChainID == "" {
		opts.ChainID = "depin-local"
	}
	if opts.BlockTime == 0 {
		opts.BlockTime = 300 * time.Millisecond
	}
	ports, err := FreePorts(5)
	if err != nil {
		return nil, err
	}
	n := &Node{
		Binary:  bin,
		Home:    opts.Home,
		ChainID: opts.ChainID,
		RPC:     fmt.Sprintf("tcp://127.0.0.1:%d", ports[0]),
		GRPC:    fmt.Sprintf("127.0.0.1:%d", ports[2]),
		API:     fmt.Sprintf("http://127.0.0.1:%d", ports[3]),
	}
	if err := n.initHome(ctx, opts, ports); err != nil {
		return nil, err
	}
	if err := n.launch(opts.Log); err != nil {
		return nil, err
	}
	if err := n.WaitHeight(ctx, 2); err != nil {
		n.Stop()
		return nil, err
	}
	if err := n.waitREST(ctx); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

func (n *Node) initHome(ctx context.Context, opts Options, ports []int) error {
	if _, err := n.Exec(ctx, "init", "localnet", "--chain-id", n.ChainID); err != nil {
		return err
	}
	accounts := map[string]int64{validatorKey: 1_000_000_000_000}
	for name, amount := range opts.Accounts {
		accounts[name] = amount
	}
	for name, amount := range accounts {
		if _, err := n.Exec(ctx, "keys", "add", name, "--keyring-backend", "test"); err != nil {
			return err
		}
		if _, err := n.Exec(ctx, "genesis", "add-genesis-account", name, fmt.Sprintf("%dudepin", amount), "--keyring-backend", "test"); err != nil {
			return err
		}
	}
	if _, err := n.Exec(ctx, "genesis", "gentx", validatorKey, "100000000000udepin", "--chain-id", n.ChainID, "--keyring-backend", "test"); err != nil {
		return err
	}
	if _, err := n.Exec(ctx, "genesis", "collect-gentxs"); err != nil {
		return err
	}
	if err := editGenesis(filepath.Join(n.Home, "config", "genesis.json"), withGenesisEdit(opts.Genesis)); err != nil {
		return err
	}
	if _, err := n.Exec(ctx, "genesis", "validate"); err != nil {
		return err
	}
	cfg := filepath.Join(n.Home, "config")
	if err := setTOML(filepath.Join(cfg, "config.toml"), map[string]map[string]string{
		"":          {"proxy_app": quote(fmt.Sprintf("tcp://127.0.0.1:%d", ports[4]))},
		"rpc":       {"laddr": quote(n.RPC), "pprof_laddr": quote("")},
		"p2p":       {"laddr": quote(fmt.Sprintf("tcp://127.0.0.1:%d", ports[1])), "addr_book_strict": "false"},
		"consensus": {"timeout_commit": quote(opts.BlockTime.String())},
		"storage":   {"discard_abci_responses": "false"},
	}); err != nil {
		return err
	}
	if err := setTOML(filepath.Join(cfg, "app.toml"), map[string]map[string]string{
		"api":  {"enable": "true", "address": quote("tcp://" + strings.TrimPrefix(n.API, "http://"))},
		"grpc": {"enable": "true", "address": quote(n.GRPC)},
	}); err != nil {
		return err
	}
	return setTOML(filepath.Join(cfg, "client.toml"), map[string]map[string]string{
		"": {"chain-id": quote(n.ChainID), "keyring-backend": quote("test"), "node": quote(n.RPC)},
	})
}

// withGenesisEdit is the caller's genesis edit after the localnet's own: x/market's
// default custody off. A localnet runs no storage holders unless its caller starts them
// (and then its job specs name their custody section), and with the default on no
// checkpoint of an adjudicable job would ever be final. A binary whose params have no
// default_custody (an older release) is left alone.
func withGenesisEdit(edit func(map[string]any) error) func(map[string]any) error {
	return func(appState map[string]any) error {
		if market, ok := appState["market"].(map[string]any); ok {
			if params, ok := market["params"].(map[string]any); ok {
				if _, ok := params["default_custody"]; ok {
					params["default_custody"] = map[string]any{"data_pieces": 0, "parity_pieces": 0, "retain_checkpoints": "0s"}
				}
			}
		}
		if edit == nil {
			return nil
		}
		return edit(appState)
	}
}

func editGenesis(path string, edit func(map[string]any) error) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return err
	}
	appState, ok := doc["app_state"].(map[string]any)
	if !ok {
		return errors.New("genesis has no app_state object")
	}
	if err := edit(appState); err != nil {
		return fmt.Errorf("editing genesis: %w", err)
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

func (n *Node) launch(logOut io.Writer) error {
	if logOut == nil {
		f, err := os.OpenFile(filepath.Join(n.Home, "node.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		n.logFile = f
		logOut = f
	}
	n.cmd = exec.Command(n.Binary, "start", "--home", n.Home)
	n.cmd.Stdout = logOut
	n.cmd.Stderr = logOut
	// A process group of its own, so Stop can end it even if the test is interrupted.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		return fmt.Errorf("starting depinchaind: %w", err)
	}
	n.exited = make(chan struct{})
	go func() {
		_ = n.cmd.Wait()
		close(n.exited)
	}()
	return nil
}

// Exited is closed once the node's process has ended, for whatever reason.
func (n *Node) Exited() <-chan struct{} { return n.exited }

// Stop ends the node (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (n *Node) Stop() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.exited
	}
	if n.logFile != nil {
		n.logFile.Close()
	}
}

// Exec runs depinchaind with --home, returning stdout; on failure the error carries stderr.
func (n *Node) Exec(ctx context.Context, args ...string) (string, error) {
	args = append(args, "--home", n.Home)
	cmd := exec.CommandContext(ctx, n.Binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &ExecError{Args: args, Stdout: stdout.String(), Stderr: stderr.String(), Err: err}
	}
	return stdout.String(), nil
}

// ExecError is a failed CLI call with everything it printed.
type ExecError struct {
	Args           []string
	Stdout, Stderr string
	Err            error
}

func (e *ExecError) Error() string {
	return fmt.Sprintf("depinchaind %s: %v\nstdout: %s\nstderr: %s", strings.Join(e.Args, " "), e.Err, e.Stdout, e.Stderr)
}

// Query runs `depinchaind query ...` with JSON output and decodes it into out.
func (n *Node) Query(ctx context.Context, out any, args ...string) error {
	stdout, err := n.Exec(ctx, append(append([]string{"query"}, args...), "--output", "json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		return fmt.Errorf("decoding %q: %w", stdout, err)
	}
	return nil
}

// Address returns the bech32 address of a key in the test keyring.
func (n *Node) Address(ctx context.Context, key string) (string, error) {
	out, err := n.Exec(ctx, "keys", "show", key, "-a", "--keyring-backend", "test")
	return strings.TrimSpace(out), err
}

// Height returns the latest committed height.
func (n *Node) Height(ctx context.Context) (int64, error) {
	var status struct {
		SyncInfo struct {
			LatestBlockHeight string `json:"latest_block_height"`
		} `json:"sync_info"`
	}
	out, err := n.Exec(ctx, "status", "--node", n.RPC)
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal([]byte(out), &status); err != nil {
		return 0, fmt.Errorf("decoding status: %w", err)
	}
	return strconv.ParseInt(status.SyncInfo.LatestBlockHeight, 10, 64)
}

// WaitHeight blocks until the chain has committed height h.
func (n *Node) WaitHeight(ctx context.Context, h int64) error {
	deadline := time.Now().Add(60 * time.Second)
	last, lastErr := int64(-1), error(nil)
	for time.Now().Before(deadline) {
		select {
		case <-n.exited:
			return fmt.Errorf("depinchaind exited; see %s", filepath.Join(n.Home, "node.log"))
		case <-ctx.Done():
			return fmt.Errorf("waiting for height %d (at %d): %w", h, last, ctx.Err())
		default:
		}
		got, err := n.Height(ctx)
		if err == nil && got >= h {
			return nil
		}
		if err == nil {
			last = got
		}
		lastErr = err
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("height %d not reached within 60s (at %d; last error: %v); see %s", h, last, lastErr, filepath.Join(n.Home, "node.log"))
}

// WaitBlocks waits for k more blocks.
func (n *Node) WaitBlocks(ctx context.Context, k int64) error {
	h, err := n.Height(ctx)
	if err != nil {
		return err
	}
	return n.WaitHeight(ctx, h+k)
}

func (n *Node) waitREST(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if _, err = n.REST(ctx, "/cosmos/base/tendermint/v1beta1/node_info"); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("REST API at %s did not answer within 30s (last error: %v)", n.API, err)
}

// REST GETs a path from the node's REST API and returns the body; non-200 is an error.
func (n *Node) REST(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.API+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return body, nil
}

// Resume starts a stopped node again on the same home and ports, waiting for it to
// commit a block past minHeight.
func (n *Node) Resume(ctx context.Context, minHeight int64) error {
	if err := n.launch(nil); err != nil {
		return err
	}
	if err := n.WaitHeight(ctx, minHeight+1); err != nil {
		n.Stop()
		return err
	}
	return n.waitREST(ctx)
}

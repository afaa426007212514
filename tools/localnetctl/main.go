// Command localnetctl runs `make localnet`: a chain of four validators, each a
// separate depinchaind process with its own home under ./.localnet/, built
// from a genesis of gentxs and wired as persistent peers, with Prometheus
// telemetry on, plus one provider sidecar (depinprovider on the reference
// runtime, simulated DGX H100) following validator 0. The processes stay up
// after it returns; their ids are in .localnet/network.json and
// .localnet/provider.json.
//
//	localnetctl up [-validators 4] [-base-port 26600] [-block-time 1s] [-provider=true]
//	localnetctl status
//	localnetctl stop|kill|start <i>   one validator: SIGTERM, SIGKILL, or start again
//	localnetctl down                  everything (`make localnet-stop`)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
)

const usage = `usage: localnetctl [-dir .localnet] <command>

commands:
  up [-validators 4] [-base-port 26600] [-block-time 1s] [-provider=true]
                     start the network (and a provider sidecar) and leave it running
  status             heights, app hashes and processes
  stop <i>           stop validator i (SIGTERM)
  kill <i>           kill validator i (SIGKILL, as a crash would)
  start <i>          start validator i again
  down               stop every validator and the sidecar
`

func main() {
	dir := flag.String("dir", "", "the network's folder (default: .localnet at the module root)")
	flag.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*dir, flag.Arg(0), flag.Args()[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "localnetctl:", err)
		os.Exit(1)
	}
}

func run(dir, cmd string, args []string) error {
	if dir == "" {
		root, err := localnet.ModuleRoot()
		if err != nil {
			return err
		}
		dir = filepath.Join(root, ".localnet")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	switch cmd {
	case "up":
		return up(ctx, dir, args)
	case "status":
		net, err := localnet.LoadNetwork(dir)
		if err != nil {
			return notUp(err)
		}
		printNetwork(ctx, os.Stdout, dir, net, loadProvider(dir))
		return nil
	case "down":
		return down(dir)
	case "stop", "kill", "start":
		if len(args) != 1 {
			return fmt.Errorf("%s needs a validator index", cmd)
		}
		return one(ctx, dir, cmd, args[0])
	default:
		flag.Usage()
		os.Exit(2)
	}
	return nil
}

func notUp(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return errors.New("no localnet here; start one with `make localnet`")
	}
	return err
}

// providerState is what provider.json records about the sidecar.
type providerState struct {
	Home     string `json:"home"`
	Operator string `json:"operator"`
	API      string `json:"api"`
	Public   string `json:"public"`
	Pid      int    `json:"pid"`
}

func loadProvider(dir string) *providerState {
	raw, err := os.ReadFile(filepath.Join(dir, "provider.json"))
	if err != nil {
		return nil
	}
	var p providerState
	if json.Unmarshal(raw, &p) != nil {
		return nil
	}
	return &p
}

func saveProvider(dir string, p *providerState) error {
	out, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "provider.json"), out, 0o644)
}

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// absEnv makes a binary path given in the environment absolute: `make` passes
// them relative to where it started.
func absEnv(name string) {
	if bin := os.Getenv(name); bin != "" {
		if abs, err := filepath.Abs(bin); err == nil {
			os.Setenv(name, abs)
		}
	}
}

func up(ctx context.Context, dir string, args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	validators := fs.Int("validators", 4, "how many validators")
	basePort := fs.Int("base-port", 26600, "validator i listens on base+10i+{0 p2p, 1 RPC, 2 gRPC, 3 REST, 4 ABCI, 5 metrics}; 0 picks free ports")
	blockTime := fs.Duration("block-time", time.Second, "CometBFT's timeout_commit")
	withProvider := fs.Bool("provider", true, "also run a provider sidecar following validator 0")
	fs.Parse(args) //nolint:errcheck // ExitOnError
	absEnv("DEPINCHAIND_BINARY")
	absEnv("DEPINPROVIDER_BINARY")

	if old, err := localnet.LoadNetwork(dir); err == nil {
		for _, v := range old.Validators {
			if v.Running() {
				return fmt.Errorf("a localnet is already running in %s (validator %d, pid %d); stop it with `make localnet-stop`", dir, v.Index, v.Pid())
			}
		}
		if p := loadProvider(dir); p != nil && alive(p.Pid) {
			return fmt.Errorf("the localnet's sidecar (pid %d) is still running; stop it with `make localnet-stop`", p.Pid)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	fmt.Printf("starting %d validators in %s ...\n", *validators, dir)
	net, err := localnet.StartNetwork(ctx, localnet.NetworkOptions{
		Dir: dir, Validators: *validators, ChainID: "depin-localnet", BlockTime: *blockTime,
		BasePort: *basePort, Telemetry: true,
		Accounts: map[string]int64{"owner": 1_000_000_000_000, "operator": 1_000_000_000_000, "hot": 1_000_000_000},
	})
	if err != nil {
		if *basePort != 0 && strings.Contains(err.Error(), "exited") {
			err = fmt.Errorf("%w\n(a port in %d-%d may be taken: try `make localnet LOCALNET_FLAGS=-base-port=0`)", err, *basePort, *basePort+10**validators)
		}
		return err
	}
	var prov *providerState
	if *withProvider {
		fmt.Println("registering a provider and starting its sidecar ...")
		p, err := sidecar.Setup(ctx, net.Validators[0].Node, sidecar.Options{
			Home: filepath.Join(dir, "provider"), Operator: "operator", HotKey: "hot", Bond: "100000000000udepin",
			Prices: map[string]uint64{"H100-SXM5-80GB": 1_500_000},
		})
		if err == nil {
			err = p.Start(ctx)
		}
		if err != nil {
			net.Stop()
			return fmt.Errorf("provider sidecar: %w", err)
		}
		prov = &providerState{Home: p.Home, Operator: p.Operator, API: p.API, Public: p.Public, Pid: p.Pid()}
		if err := saveProvider(dir, prov); err != nil {
			return err
		}
	}
	if err := net.Save(); err != nil {
		return err
	}
	printNetwork(ctx, os.Stdout, dir, net, prov)
	return nil
}

func printNetwork(ctx context.Context, w *os.File, dir string, net *localnet.Network, p *providerState) {
	rel := dir
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, dir); err == nil && !strings.HasPrefix(r, "..") {
			rel = r
		}
	}
	fmt.Fprintf(w, "\nlocalnet %q: %d validators, homes in %s\n\n", net.ChainID, len(net.Validators), rel)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tpid\theight\tRPC\tgRPC\tREST\tCometBFT metrics\tp2p")
	for _, v := range net.Validators {
		pid, height := "stopped", "-"
		if v.Running() {
			pid = strconv.Itoa(v.Pid())
			if h, err := v.Height(ctx); err == nil {
				height = strconv.FormatInt(h, 10)
			}
		}
		fmt.Fprintf(tw, "val%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Index, pid, height, v.RPC, v.GRPC, v.API, v.Metrics, v.P2P)
	}
	tw.Flush()
	fmt.Fprintf(w, "\napp telemetry (Prometheus text): %s\n", net.Validators[0].AppMetrics)
	if p != nil {
		state := "stopped"
		if alive(p.Pid) {
			state = "pid " + strconv.Itoa(p.Pid)
		}
		fmt.Fprintf(w, "provider sidecar (%s) following val0: status http://%s/v1/status, checkpoints %s, log %s\n",
			state, p.API, p.Public, filepath.Join(p.Home, "provider.log"))
	}
	fmt.Fprintf(w, `
keys in every validator's test keyring: owner, operator (the provider), hot (its sidecar), val0..val%d
  build/depinchaind query market jobs --home %[2]s/val0
  build/depinchaind tx market submit-job --spec job.yaml --deposit 50000000udepin --from owner --home %[2]s/val1 --yes
node logs: %[2]s/val<i>/node.log
one validator: go run ./tools/localnetctl stop|kill|start <i>; all: make localnet-stop
`, len(net.Validators)-1, rel)
}

func one(ctx context.Context, dir, cmd, arg string) error {
	net, err := localnet.LoadNetwork(dir)
	if err != nil {
		return notUp(err)
	}
	i, err := strconv.Atoi(arg)
	if err != nil || i < 0 || i >= len(net.Validators) {
		return fmt.Errorf("no validator %q (0..%d)", arg, len(net.Validators)-1)
	}
	v := net.Validators[i]
	switch cmd {
	case "stop", "kill":
		if !v.Running() {
			return fmt.Errorf("validator %d is not running", i)
		}
		if cmd == "stop" {
			v.Stop()
		} else {
			v.Kill()
		}
		fmt.Printf("validator %d %s\n", i, map[string]string{"stop": "stopped", "kill": "killed"}[cmd])
	case "start":
		if err := v.Resume(ctx); err != nil {
			return err
		}
		h, _ := v.Height(ctx)
		fmt.Printf("validator %d started (pid %d) at height %d; it catches up from its peers\n", i, v.Pid(), h)
	}
	return net.Save()
}

func down(dir string) error {
	net, err := localnet.LoadNetwork(dir)
	if err != nil {
		return notUp(err)
	}
	if p := loadProvider(dir); p != nil && alive(p.Pid) {
		syscall.Kill(p.Pid, syscall.SIGTERM) //nolint:errcheck // it may just have exited
		for deadline := time.Now().Add(20 * time.Second); alive(p.Pid) && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
		if alive(p.Pid) {
			syscall.Kill(p.Pid, syscall.SIGKILL) //nolint:errcheck // same
		}
		fmt.Println("provider sidecar stopped")
	}
	stopped := 0
	for _, v := range net.Validators {
		if v.Running() {
			v.Stop()
			stopped++
		}
	}
	fmt.Printf("%d validators stopped; their homes stay in %s until the next `make localnet`\n", stopped, dir)
	return net.Save()
}

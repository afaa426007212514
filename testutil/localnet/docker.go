package localnet

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Docker mode runs each validator as a container of a FROM-scratch image
// holding a static depinchaind, on networks the test can cut:
//
//   - every pair of validators (i, j) has a network of its own, a "link",
//     and each dials the other only at its address on that link, so cutting
//     links (docker network disconnect) makes any partition, 2|2 included;
//   - a "control" network (inter-container traffic off) carries the ports
//     published on the host's loopback: RPC, gRPC, REST and metrics, which the
//     test, the CLI and sidecars use. Disconnecting a validator from it cuts
//     the host off that validator while the validator keeps its links.
//
// The homes stay on the host (bind-mounted at /depin), so the host CLI signs
// with their keyrings and reads their files.

// DockerOptions configure Docker mode.
type DockerOptions struct {
	// Image runs the validators: a static depinchaind at /depinchaind as the
	// entrypoint, as BuildImage makes.
	Image string
	// Name prefixes the containers and networks; default a random one.
	Name string
}

// DockerAvailable returns nil when a Docker Engine answers, otherwise an
// error that says why.
func DockerAvailable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	if err != nil {
		return fmt.Errorf("no Docker Engine answers (`docker version`: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	return nil
}

const imageLabel = "depinchain.localnet.image"

// BuildImage builds (once per binary content) a FROM-scratch image holding
// the static depinchaind bin as its entrypoint and returns its tag. Older
// images this function built are removed where no container uses them.
func BuildImage(ctx context.Context, bin string) (string, error) {
	if err := isStatic(bin); err != nil {
		return "", err
	}
	f, err := os.Open(bin)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return "", err
	}
	tag := "depinchaind-localnet:" + hex.EncodeToString(h.Sum(nil))[:16]
	if _, err := docker(ctx, "image", "inspect", tag); err == nil {
		return tag, nil
	}
	dir, err := os.MkdirTemp("", "depinchaind-image")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := os.Link(bin, filepath.Join(dir, "depinchaind")); err != nil {
		if err := copyFile(bin, filepath.Join(dir, "depinchaind")); err != nil {
			return "", err
		}
	}
	dockerfile := "FROM scratch\nCOPY depinchaind /depinchaind\nENTRYPOINT [\"/depinchaind\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return "", err
	}
	if _, err := docker(ctx, "build", "-q", "--label", imageLabel+"=1", "-t", tag, dir); err != nil {
		return "", err
	}
	if old, err := docker(ctx, "images", "--format", "{{.Repository}}:{{.Tag}}", "--filter", "label="+imageLabel); err == nil {
		for _, img := range strings.Fields(old) {
			if img != tag {
				docker(ctx, "image", "rm", img) //nolint:errcheck // in use by another run: leave it
			}
		}
	}
	return tag, nil
}

// isStatic returns nil if the ELF file bin needs no dynamic loader.
func isStatic(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; a FROM-scratch image needs a static binary (see StaticBinary)", bin)
		}
	}
	return nil
}

// docker runs the docker CLI and returns its stdout; errors carry stderr.
func docker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// Container ports: fixed inside, published on host ports FreePorts reserved
// (held while the container is stopped or cut off, so a restart binds them again).
const (
	containerP2P     = 26656
	containerRPC     = 26657
	containerGRPC    = 9090
	containerAPI     = 1317
	containerMetrics = 26660
)

type hostPorts struct{ rpc, grpc, api, metrics int }

// dockerNet is the containers and networks of one Network.
type dockerNet struct {
	name      string
	image     string
	n         int
	base      [3]byte // the /24 all its subnets are carved from
	hostPorts []hostPorts
	networks  []string
	created   []string // containers
	cut       map[[2]int]bool
	hostCut   map[int]bool
}

func newDockerNet(ctx context.Context, opts *DockerOptions, n int) (*dockerNet, error) {
	if opts.Image == "" {
		return nil, errors.New("DockerOptions.Image is empty (see BuildImage)")
	}
	if n > 7 {
		return nil, fmt.Errorf("docker mode wires one network per pair of validators; %d validators are too many", n)
	}
	d := &dockerNet{name: opts.Name, image: opts.Image, n: n, cut: map[[2]int]bool{}, hostCut: map[int]bool{}}
	if d.name == "" {
		d.name = "depin-" + randomHex(4)
	}
	for i := 0; i < n; i++ {
		ports, err := FreePorts(4)
		if err != nil {
			return nil, err
		}
		d.hostPorts = append(d.hostPorts, hostPorts{ports[0], ports[1], ports[2], ports[3]})
	}
	// Subnets are chosen here rather than from Docker's pools so every
	// address is known before the containers exist (persistent peers need
	// them) and many link networks do not drain the default pools. A random
	// /24 in 10.0.0.0/8 rarely overlaps; when it does, try another.
	var lastErr error
	for attempt := 0; attempt < 8; attempt++ {
		var b [2]byte
		rand.Read(b[:]) //nolint:errcheck // never fails
		d.base = [3]byte{10, 64 + b[0]%128, b[1]}
		if lastErr = d.createNetworks(ctx); lastErr == nil {
			return d, nil
		}
		d.removeNetworks()
		if !strings.Contains(lastErr.Error(), "overlap") {
			break
		}
	}
	return nil, lastErr
}

func (d *dockerNet) createNetworks(ctx context.Context) error {
	// Inter-container traffic is off on the control network: validators
	// talk only over their links.
	if _, err := docker(ctx, "network", "create", "--subnet", d.subnet(0, 27),
		"-o", "com.docker.network.bridge.enable_icc=false", "--label", imageLabel+"=net", d.ctlNet()); err != nil {
		return err
	}
	d.networks = append(d.networks, d.ctlNet())
	for i := 0; i < d.n; i++ {
		for j := i + 1; j < d.n; j++ {
			if _, err := docker(ctx, "network", "create", "--internal", "--subnet", d.subnet(d.linkOffset(i, j), 29),
				"--label", imageLabel+"=net", d.linkNet(i, j)); err != nil {
				return err
			}
			d.networks = append(d.networks, d.linkNet(i, j))
		}
	}
	return nil
}

func (d *dockerNet) subnet(offset, bits int) string {
	return fmt.Sprintf("%d.%d.%d.%d/%d", d.base[0], d.base[1], d.base[2], offset, bits)
}

func (d *dockerNet) ip(offset int) string {
	return fmt.Sprintf("%d.%d.%d.%d", d.base[0], d.base[1], d.base[2], offset)
}

func (d *dockerNet) container(i int) string { return fmt.Sprintf("%s-val%d", d.name, i) }
func (d *dockerNet) ctlNet() string         { return d.name + "-ctl" }
func (d *dockerNet) ctlIP(i int) string     { return d.ip(10 + i) }

// linkOffset is where link (i, j)'s /29 starts: after the control /27.
func (d *dockerNet) linkOffset(i, j int) int {
	if i > j {
		i, j = j, i
	}
	k := 0
	for a := 0; a < i; a++ {
		k += d.n - 1 - a
	}
	k += j - i - 1
	return 32 + 8*k
}

func (d *dockerNet) linkNet(i, j int) string {
	if i > j {
		i, j = j, i
	}
	return fmt.Sprintf("%s-l%d%d", d.name, i, j)
}

// linkIP is validator i's address on its link with j (.1 is the bridge's).
func (d *dockerNet) linkIP(i, j int) string {
	if i < j {
		return d.ip(d.linkOffset(i, j) + 2)
	}
	return d.ip(d.linkOffset(i, j) + 3)
}

// linkAddr is where validator i dials validator j.
func (d *dockerNet) linkAddr(j, i int) string {
	return fmt.Sprintf("%s:%d", d.linkIP(j, i), containerP2P)
}

// create makes the containers (not started) and joins them to their links.
func (d *dockerNet) create(ctx context.Context, n *Network) error {
	user := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	for i, v := range n.Validators {
		home, err := filepath.Abs(v.Home)
		if err != nil {
			return err
		}
		p := d.hostPorts[i]
		args := []string{"create", "--name", d.container(i), "--hostname", v.Moniker, "--user", user,
			"--network", d.ctlNet(), "--ip", d.ctlIP(i), "-v", home + ":/depin", "--label", imageLabel + "=" + d.name,
			"-p", fmt.Sprintf("127.0.0.1:%d:%d", p.rpc, containerRPC),
			"-p", fmt.Sprintf("127.0.0.1:%d:%d", p.grpc, containerGRPC),
			"-p", fmt.Sprintf("127.0.0.1:%d:%d", p.api, containerAPI),
			"-p", fmt.Sprintf("127.0.0.1:%d:%d", p.metrics, containerMetrics),
			d.image, "start", "--home", "/depin"}
		if _, err := docker(ctx, args...); err != nil {
			return err
		}
		d.created = append(d.created, d.container(i))
	}
	for i := 0; i < d.n; i++ {
		for j := i + 1; j < d.n; j++ {
			if err := d.setLink(ctx, i, j, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// setLink connects (up) or disconnects both ends of link (i, j).
func (d *dockerNet) setLink(ctx context.Context, i, j int, up bool) error {
	for _, end := range [][2]int{{i, j}, {j, i}} {
		var err error
		if up {
			_, err = docker(ctx, "network", "connect", "--ip", d.linkIP(end[0], end[1]), d.linkNet(i, j), d.container(end[0]))
		} else {
			_, err = docker(ctx, "network", "disconnect", d.linkNet(i, j), d.container(end[0]))
		}
		if err != nil {
			return err
		}
	}
	key := [2]int{min(i, j), max(i, j)}
	if up {
		delete(d.cut, key)
	} else {
		d.cut[key] = true
	}
	return nil
}

func (d *dockerNet) start(ctx context.Context, i int) error {
	_, err := docker(ctx, "start", d.container(i))
	return err
}

func (d *dockerNet) running(i int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := docker(ctx, "inspect", "--format", "{{.State.Running}}", d.container(i))
	return err == nil && out == "true"
}

func (d *dockerNet) signal(i int, sig syscall.Signal) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if sig == syscall.SIGKILL {
		docker(ctx, "kill", d.container(i)) //nolint:errcheck // it may not be running
		return
	}
	docker(ctx, "stop", "--time", "10", d.container(i)) //nolint:errcheck // same
}

// remove saves each container's log into its home and removes the
// containers and networks.
func (d *dockerNet) remove(n *Network) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i, c := range d.created {
		if out, err := exec.CommandContext(ctx, "docker", "logs", c).CombinedOutput(); err == nil {
			os.WriteFile(n.Validators[i].LogPath(), out, 0o644) //nolint:errcheck // best effort
		}
		docker(ctx, "rm", "-f", c) //nolint:errcheck // best effort
	}
	d.created = nil
	d.removeNetworks()
}

func (d *dockerNet) removeNetworks() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, nw := range d.networks {
		docker(ctx, "network", "rm", nw) //nolint:errcheck // best effort
	}
	d.networks = nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // never fails
	return hex.EncodeToString(b)
}

// Partition cuts the links between validators in different groups and
// restores those within a group (Docker mode). A validator in no group is
// cut off from everyone. Partition() with every validator in one group heals.
func (n *Network) Partition(ctx context.Context, groups ...[]int) error {
	if n.docker == nil {
		return errors.New("Partition needs Docker mode")
	}
	group := make([]int, len(n.Validators))
	for i := range group {
		group[i] = -1 - i
	}
	for g, members := range groups {
		for _, i := range members {
			group[i] = g
		}
	}
	for i := range n.Validators {
		for j := i + 1; j < len(n.Validators); j++ {
			wantCut := group[i] != group[j]
			if wantCut != n.docker.cut[[2]int{i, j}] {
				if err := n.docker.setLink(ctx, i, j, !wantCut); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Heal restores every link (Docker mode).
func (n *Network) Heal(ctx context.Context) error {
	all := make([]int, len(n.Validators))
	for i := range all {
		all[i] = i
	}
	return n.Partition(ctx, all)
}

// CutHost disconnects validator i from the control network (Docker mode):
// its published RPC, gRPC, REST and metrics ports stop answering, while it
// stays in consensus over its links.
func (n *Network) CutHost(ctx context.Context, i int) error {
	if n.docker == nil {
		return errors.New("CutHost needs Docker mode")
	}
	if _, err := docker(ctx, "network", "disconnect", n.docker.ctlNet(), n.docker.container(i)); err != nil {
		return err
	}
	n.docker.hostCut[i] = true
	return nil
}

// RestoreHost reconnects validator i to the control network at its address.
func (n *Network) RestoreHost(ctx context.Context, i int) error {
	if n.docker == nil {
		return errors.New("RestoreHost needs Docker mode")
	}
	if _, err := docker(ctx, "network", "connect", "--ip", n.docker.ctlIP(i), n.docker.ctlNet(), n.docker.container(i)); err != nil {
		return err
	}
	delete(n.docker.hostCut, i)
	return nil
}

package localnet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Ports for nodes and containers are chosen before anything binds them: a
// node's config names its own ports and its peers', and `docker create -p`
// names the host ports a container publishes when it starts. A port the
// kernel calls free at choosing time can be taken before that bind, so
// FreePorts does not just ask the kernel for a free port and let it go:
//
//   - it chooses outside the kernel's ephemeral range
//     (/proc/sys/net/ipv4/ip_local_port_range), from which the kernel hands out
//     ports for `listen :0` and outgoing connections and Docker picks the
//     host ports it publishes on its own, so neither can land on a chosen port;
//   - it holds an exclusive lock (flock) on a file named after the port in a
//     folder every driver on this machine shares, from choosing until this
//     process exits, so no other test process, no other network of this
//     process and no later call can choose the same port, including while a
//     stopped node or a cut-off container does not hold its port;
//   - it checks that the port can be bound right now, so a port some other
//     program listens on is never chosen.
//
// What is left is a program that binds that exact fixed port later, which is
// not a race between tests.

// portLocks are the open lock files of the ports this process reserved; they
// stay open until the process exits.
var portLocks = struct {
	sync.Mutex
	files map[string]*os.File // by lock file
}{files: map[string]*os.File{}}

// portLockDir is the folder of lock files every driver on the machine shares.
func portLockDir() (string, error) {
	dir := filepath.Join(os.TempDir(), "depinchain-localnet-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", fmt.Errorf("port reservations: %w", err)
	}
	// Other users on the machine may reserve ports too: a sticky folder
	// everyone can write to, as /tmp is. Best effort: only its owner can.
	os.Chmod(dir, os.ModeSticky|0o777) //nolint:errcheck // not ours: leave it as its owner made it
	return dir, nil
}

// portRange is where FreePorts chooses: every port from 20000 to 65535 that
// is not in the kernel's ephemeral range and not in 26000-26999 (CometBFT's
// default ports and `make localnet`'s fixed ones).
func portRange() []int {
	lo, hi := 32768, 60999 // Linux's default, where the file cannot be read
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(raw)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && l <= h {
				lo, hi = l, h
			}
		}
	}
	var ports []int
	for p := 20000; p <= 65535; p++ {
		if (p < lo || p > hi) && (p < 26000 || p > 26999) {
			ports = append(ports, p)
		}
	}
	if len(ports) < 1000 {
		// The ephemeral range covers nearly everything: the locks still keep
		// drivers apart, and the bind check still skips busy ports.
		ports = ports[:0]
		for p := 20000; p <= 65535; p++ {
			ports = append(ports, p)
		}
	}
	return ports
}

// FreePorts reserves n distinct loopback ports for this process (see above):
// each is bindable on 127.0.0.1 now, and no other caller of FreePorts on this
// machine gets it until this process exits.
func FreePorts(n int) ([]int, error) {
	dir, err := portLockDir()
	if err != nil {
		return nil, err
	}
	candidates := portRange()
	rand.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
	return reservePorts(dir, candidates, n)
}

// reservePorts reserves the first n of candidates that are neither locked nor
// busy, locking their files in dir.
func reservePorts(dir string, candidates []int, n int) ([]int, error) {
	portLocks.Lock()
	defer portLocks.Unlock()
	var ports []int
	for _, p := range candidates {
		if len(ports) == n {
			break
		}
		if _, mine := portLocks.files[portLockFile(dir, p)]; mine {
			continue
		}
		f, err := lockPort(dir, p)
		if err != nil {
			if errors.Is(err, errPortTaken) {
				continue
			}
			return nil, err
		}
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err != nil {
			f.Close() // someone outside the drivers listens there
			continue
		} else {
			l.Close()
		}
		portLocks.files[f.Name()] = f
		ports = append(ports, p)
	}
	if len(ports) < n {
		for _, p := range ports {
			name := portLockFile(dir, p)
			portLocks.files[name].Close()
			delete(portLocks.files, name)
		}
		return nil, fmt.Errorf("reserving %d loopback ports: only %d of %d candidates are free and unreserved (locks in %s)",
			n, len(ports), len(candidates), dir)
	}
	return ports, nil
}

var errPortTaken = errors.New("port reserved by another driver")

func portLockFile(dir string, p int) string { return filepath.Join(dir, strconv.Itoa(p)) }

// lockPort takes the exclusive lock on port p's file without waiting.
func lockPort(dir string, p int) (*os.File, error) {
	f, err := os.OpenFile(portLockFile(dir, p), os.O_RDONLY|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("port reservations: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errPortTaken
		}
		return nil, fmt.Errorf("port reservations: locking %s: %w", f.Name(), err)
	}
	return f, nil
}

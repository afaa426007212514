package localnet

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
)

func TestFreePortsAreDistinctAndOutsideTheEphemeralRange(t *testing.T) {
	a, err := FreePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	b, err := FreePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(a), b...)
	in := portRange()
	seen := map[int]bool{}
	for _, p := range all {
		if seen[p] {
			t.Fatalf("port %d reserved twice: %v then %v", p, a, b)
		}
		seen[p] = true
		if _, ok := slices.BinarySearch(in, p); !ok {
			t.Fatalf("port %d is outside the range FreePorts chooses from (the kernel's ephemeral range or 26000-26999)", p)
		}
		// Reserved, not held: the node or container it is for can bind it.
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("reserved port %d cannot be bound: %v", p, err)
		}
		l.Close()
	}
}

// Another process that wants a reserved port opens its lock file and finds it
// locked; a second open in this process is treated the same way by flock.
func TestReservedPortIsLockedForOtherDrivers(t *testing.T) {
	ports, err := FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := portLockDir()
	if err != nil {
		t.Fatal(err)
	}
	if f, err := lockPort(dir, ports[0]); !errors.Is(err, errPortTaken) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("locking reserved port %d again: got %v, want errPortTaken", ports[0], err)
	}
}

func TestReservePortsSkipsBusyAndLockedPorts(t *testing.T) {
	dir := t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	// Candidates this process reserved in the shared folder: free, and no one
	// else's to take while the test runs. The test reserves them again in a
	// folder of its own.
	mine, err := FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	lockedPort, freePort, second := mine[0], mine[1], mine[2]
	other, err := lockPort(dir, lockedPort) // another driver's reservation
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	got, err := reservePorts(dir, []int{busyPort, lockedPort, freePort}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != freePort {
		t.Fatalf("reserved %v from [busy %d, locked %d, free %d]; want only the free one", got, busyPort, lockedPort, freePort)
	}
	// Too few candidates left: an error that says so, and nothing stays reserved.
	if _, err := reservePorts(dir, []int{busyPort, lockedPort, freePort}, 1); err == nil {
		t.Fatal("reserved a port from candidates that are all busy, locked or already ours")
	}
	if _, err := reservePorts(dir, []int{second, busyPort}, 2); err == nil {
		t.Fatal("reserved 2 ports from one usable candidate")
	}
	if f, err := lockPort(dir, second); err != nil {
		t.Fatalf("a failed reservation kept port %d locked: %v", second, err)
	} else {
		f.Close()
	}
}

// Package localnet drives real depinchaind processes: it builds the binary, creates a
// home with free loopback ports, starts a single-validator chain and talks to it through
// the real CLI, gRPC and REST. End-to-end tests and `make demo` both use it.
package localnet

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// ModuleRoot returns the repository root (the folder holding go.mod).
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("locating go.mod: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the depinchain module")
	}
	return filepath.Dir(gomod), nil
}

// Binary returns the path of a depinchaind built from the current sources. It honours
// DEPINCHAIND_BINARY (e.g. `make test` builds once and points every test at it);
// otherwise it builds once per process into build/.
func Binary() (string, error) { return chainBinary.path() }

// PrevBinary returns the path of the previous release's depinchaind, for the upgrade
// test: the current sources built with -tags prev_release (see internal/release).
// It honours DEPINCHAIND_PREV_BINARY (`make test-e2e` builds it with `make build-prev`).
func PrevBinary() (string, error) { return prevChainBinary.path() }

// ProviderBinary returns the path of a depinprovider built from the current sources,
// honouring DEPINPROVIDER_BINARY the same way.
func ProviderBinary() (string, error) { return providerBinary.path() }

// StaticBinary returns the path of a statically linked depinchaind, which a
// FROM-scratch container image can run (see BuildImage). It honours
// DEPINCHAIND_STATIC_BINARY (`make build-static`), then takes Binary() if that
// is already static, and otherwise links one into build/ from the same
// compiled packages as Binary() (cgo on, glibc linked in statically), so it
// costs a link, not a second compile of the SDK as CGO_ENABLED=0 would.
func StaticBinary() (string, error) {
	if os.Getenv(staticChainBinary.env) == "" {
		if bin, err := Binary(); err == nil && isStatic(bin) == nil {
			return bin, nil
		}
	}
	return staticChainBinary.path()
}

var (
	chainBinary       = &binary{env: "DEPINCHAIND_BINARY", name: "depinchaind", pkg: "./cmd/depinchaind"}
	staticChainBinary = &binary{env: "DEPINCHAIND_STATIC_BINARY", name: "depinchaind-static", pkg: "./cmd/depinchaind",
		ldflags: "-linkmode external -extldflags -static"}
	prevChainBinary = &binary{env: "DEPINCHAIND_PREV_BINARY", name: "depinchaind-prev", pkg: "./cmd/depinchaind", tags: "prev_release"}
	providerBinary  = &binary{env: "DEPINPROVIDER_BINARY", name: "depinprovider", pkg: "./provider/cmd/depinprovider"}
)

// binary is a command of this module, built at most once per test process.
type binary struct {
	env, name, pkg string
	// tags are the build tags and ldflags the linker flags, if any.
	tags, ldflags string

	once  sync.Once
	built string
	err   error
}

func (b *binary) path() (string, error) {
	if p := os.Getenv(b.env); p != "" {
		return p, nil
	}
	b.once.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			b.err = err
			return
		}
		b.built = filepath.Join(root, "build", b.name)
		cmd := exec.Command("go", "build", "-tags", b.tags, "-ldflags", b.ldflags, "-o", b.built, b.pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building %s: %w\n%s", b.name, err, out)
		}
	})
	return b.built, b.err
}

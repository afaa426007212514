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

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
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
func Binary() (string, error) {
	if p := os.Getenv("DEPINCHAIND_BINARY"); p != "" {
		return p, nil
	}
	buildOnce.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(root, "build", "depinchaind")
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/depinchaind")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building depinchaind: %w\n%s", err, out)
		}
	})
	return buildPath, buildErr
}

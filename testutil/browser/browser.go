// Package browser drives headless Chromium (chromedp) against the real
// `depinchaind dashboard` for e2e tests of any package: it starts the
// dashboard, opens a browser on it, and checks the page by evaluating
// JavaScript until it holds, writing screenshots to the test's artifacts.
package browser

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/depinchain/depinchain/testutil/localnet"
)

// ArtifactDir is where screenshots go: $ARTIFACTS/<test name> when $ARTIFACTS
// is set, else the test's temp dir.
func ArtifactDir(t testing.TB) string {
	if d := os.Getenv("ARTIFACTS"); d != "" {
		d = filepath.Join(d, t.Name())
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// Chromium is the browser's path ($CHROMIUM or a usual install); the test is
// skipped without one.
func Chromium(t testing.TB) string {
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	t.Skip("no Chromium: scripts/deps.sh installs Debian's chromium")
	return ""
}

// StartDashboard runs `depinchaind dashboard` as an owner runs it, against
// node's gRPC (and REST) endpoints, polling every poll; it returns the
// page's base URL once the dashboard says it listens. It is killed at the
// test's end.
func StartDashboard(ctx context.Context, t testing.TB, node *localnet.Node, poll time.Duration) string {
	t.Helper()
	ports, err := localnet.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", ports[0])
	dash := exec.CommandContext(ctx, node.Binary, "dashboard", "--listen", listen, "--grpc-addr", node.GRPC,
		"--rest-addr", node.API, "--poll", poll.String())
	stdout, err := dash.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	dash.Stderr = os.Stderr
	if err := dash.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dash.Process.Kill(); _ = dash.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.Contains(line, "dashboard on http://"+listen) {
		t.Fatalf("dashboard said %q: %v", line, err)
	}
	return "http://" + listen + "/"
}

// Page is one headless Chromium tab.
type Page struct {
	t     testing.TB
	Ctx   context.Context // a chromedp context for chromedp.Run
	shots string
}

// Open starts headless Chromium (1280×1000) for the test; it is closed at
// the test's end or when ctx ends.
func Open(ctx context.Context, t testing.TB) *Page {
	t.Helper()
	actx, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(t)), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000))...)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(func() { bcancel(); acancel() })
	return &Page{t: t, Ctx: bctx, shots: ArtifactDir(t)}
}

// Navigate loads url (a full page load).
func (p *Page) Navigate(url string) {
	p.t.Helper()
	if err := chromedp.Do(p.Ctx, chromedp.Navigate(url)); err != nil {
		p.t.Fatal(err)
	}
}

// Route moves the page to another of its hash routes, as a click on a link
// does: the page is not reloaded.
func (p *Page) Route(hash string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.Ctx, chromedp.Evaluate[string](`location.hash = `+strconv.Quote(hash))); err != nil {
		p.t.Fatal(err)
	}
}

// Shot writes a full-page screenshot to the artifacts as name.png.
func (p *Page) Shot(name string) {
	p.t.Helper()
	png, err := chromedp.Run(p.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.shots, name+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// MarkLoad tags the loaded document; Reloaded says whether it was replaced
// since (a reload or a navigation), which a live page must never need.
func (p *Page) MarkLoad() {
	p.t.Helper()
	if _, err := chromedp.Run(p.Ctx, chromedp.Evaluate[bool](`window.loadMark = true`)); err != nil {
		p.t.Fatal(err)
	}
}

// Reloaded: see MarkLoad.
func (p *Page) Reloaded() bool {
	marked, err := chromedp.Run(p.Ctx, chromedp.Evaluate[bool](`window.loadMark === true`))
	return err != nil || !marked
}

// WaitFor evaluates the JavaScript expression expr until it is true, and
// fails the test with the page's #view when it is not within the time.
func (p *Page) WaitFor(what, expr string, within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if ok, err := chromedp.Run(p.Ctx, chromedp.Evaluate[bool](expr)); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			html, _ := chromedp.Run(p.Ctx, chromedp.OuterHTML(chromedp.CSS("#view")))
			where, _ := chromedp.Run(p.Ctx, chromedp.Evaluate[string](`location.href + " " + document.getElementById('live').textContent`))
			p.t.Fatalf("%s: not within %s; the page at %s:\n%s", what, within, where, html)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Eval evaluates expr and decodes its value into T.
func Eval[T any](p *Page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.Ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

package main

import (
	"context"
	"fmt"
	"image/color"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/depinchain/depinchain/cmd/depinchaind/jobview"
	"github.com/depinchain/depinchain/testutil/localnet"
)

// The loss curve's size: 576×384 pixels at gonum/plot's 96 dpi.
const lossCurveWidth, lossCurveHeight = 6 * vg.Inch, 4 * vg.Inch

// writeLossCurve draws job id's loss curve, as `depinchaind dashboard` and
// `job status` assemble it (jobview), into a PNG at path: one line per
// worker, verified points as filled circles, self-reported ones as
// triangles.
func writeLossCurve(ctx context.Context, grpcAddr string, id uint64, path string) (*jobview.View, error) {
	src, conn, err := jobview.Dial(grpcAddr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	v, err := src.Job(ctx, id)
	if err != nil {
		return nil, err
	}
	return v, drawLossCurve(v, path)
}

// drawLossCurve draws v's loss curve into a PNG at path.
func drawLossCurve(v *jobview.View, path string) error {
	if len(v.Loss) == 0 {
		return fmt.Errorf("job %d has no loss point to draw", v.ID)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("job %d %q: training loss", v.ID, v.Name)
	p.X.Label.Text = "step"
	p.Y.Label.Text = "loss (nats)"
	p.Add(plotter.NewGrid())
	byWorker := map[uint32][]jobview.LossPoint{}
	for _, l := range v.Loss {
		byWorker[l.Worker] = append(byWorker[l.Worker], l)
	}
	workers := make([]uint32, 0, len(byWorker))
	for w := range byWorker {
		workers = append(workers, w)
	}
	sort.Slice(workers, func(i, j int) bool { return workers[i] < workers[j] })
	palette := []color.RGBA{{59, 125, 221, 255}, {17, 128, 58, 255}, {176, 90, 0, 255}, {122, 59, 221, 255}}
	for i, w := range workers {
		pts := byWorker[w]
		line := make(plotter.XYs, len(pts))
		var verified, self plotter.XYs
		for j, l := range pts {
			line[j] = plotter.XY{X: float64(l.Step), Y: l.Nats}
			if l.Source == jobview.LossVerified {
				verified = append(verified, line[j])
			} else {
				self = append(self, line[j])
			}
		}
		c := palette[i%len(palette)]
		l, err := plotter.NewLine(line)
		if err != nil {
			return err
		}
		l.Color, l.Width = c, vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("worker %d", w), l)
		for _, set := range []struct {
			xy    plotter.XYs
			label string
			shape draw.GlyphDrawer
		}{{verified, "verified", draw.CircleGlyph{}}, {self, "self-reported", draw.TriangleGlyph{}}} {
			if len(set.xy) == 0 {
				continue
			}
			s, err := plotter.NewScatter(set.xy)
			if err != nil {
				return err
			}
			s.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(3.5), Shape: set.shape}
			p.Add(s)
			p.Legend.Add(fmt.Sprintf("worker %d: %d %s", w, len(set.xy), set.label), s)
		}
	}
	p.Legend.Top = true
	return p.Save(lossCurveWidth, lossCurveHeight, path)
}

// startDashboard runs `depinchaind dashboard` on a free port for the kept
// chain and returns the URL of job's page.
func startDashboard(ctx context.Context, n *localnet.Node, job uint64) (string, func(), error) {
	ports, err := localnet.FreePorts(1)
	if err != nil {
		return "", nil, err
	}
	listen := fmt.Sprintf("127.0.0.1:%d", ports[0])
	cmd := exec.CommandContext(ctx, n.Binary, "dashboard", "--listen", listen, "--grpc-addr", n.GRPC, "--rest-addr", n.API)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }
	url := fmt.Sprintf("http://%s/", listen)
	for range 50 {
		if resp, err := http.Get(url + "api/config"); err == nil {
			resp.Body.Close()
			if job != 0 {
				url += fmt.Sprintf("#/job/%d", job)
			}
			return url, stop, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("no answer on %s", listen)
}

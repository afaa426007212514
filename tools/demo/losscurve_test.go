package main

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/depinchain/depinchain/cmd/depinchaind/jobview"
)

// The demo's loss curve is a PNG of the documented size with each worker's
// line in its colour, and a job with no loss point is refused, not drawn empty.
func TestDrawLossCurve(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loss-curve.png")
	v := &jobview.View{ID: 3, Name: "fortunes-lm", Loss: []jobview.LossPoint{
		{Worker: 0, Step: 16, Nats: 3.1, Source: jobview.LossVerified},
		{Worker: 0, Step: 32, Nats: 2.9, Source: jobview.LossVerified},
		{Worker: 1, Step: 32, Nats: 3.0, Source: jobview.LossSelfReported},
	}}
	if err := drawLossCurve(v, path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 576 || b.Dy() != 384 {
		t.Fatalf("the curve is %dx%d pixels, want 576x384", b.Dx(), b.Dy())
	}
	// Worker 0's blue and worker 1's green are both drawn.
	found := map[[3]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			found[[3]uint32{r >> 8, g >> 8, bl >> 8}] = true
		}
	}
	for _, c := range [][3]uint32{{59, 125, 221}, {17, 128, 58}} {
		if !found[c] {
			t.Errorf("no pixel of colour %v: a worker's line is missing", c)
		}
	}
	if err := drawLossCurve(&jobview.View{ID: 4}, filepath.Join(t.TempDir(), "empty.png")); err == nil {
		t.Fatal("a job with no loss point was drawn")
	}
}

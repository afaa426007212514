package reftrainer

import (
	"errors"
	"reflect"
	"testing"

	"github.com/depinchain/depinchain/pkg/traindata"
)

func TestBatchWindows(t *testing.T) {
	cfg := DefaultConfig()
	const dataLen = 1000
	w, err := BatchWindows(cfg, []byte("job"), 7, dataLen)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != int(cfg.BatchSize) {
		t.Fatalf("%d windows, want %d", len(w), cfg.BatchSize)
	}
	for i, win := range w {
		if win.Length != uint64(cfg.Context)+1 || win.Start+win.Length > dataLen {
			t.Errorf("window %d = %+v out of range", i, win)
		}
	}
	again, _ := BatchWindows(cfg, []byte("job"), 7, dataLen)
	if !reflect.DeepEqual(w, again) {
		t.Error("BatchWindows is not deterministic")
	}
	otherStep, _ := BatchWindows(cfg, []byte("job"), 8, dataLen)
	otherJob, _ := BatchWindows(cfg, []byte("job2"), 7, dataLen)
	if reflect.DeepEqual(w, otherStep) || reflect.DeepEqual(w, otherJob) {
		t.Error("windows do not depend on step and job seed")
	}
}

func TestBatchWindowsDataLengthEdges(t *testing.T) {
	cfg := DefaultConfig()
	exact := uint64(cfg.Context) + 1
	w, err := BatchWindows(cfg, nil, 0, exact)
	if err != nil {
		t.Fatal(err)
	}
	for _, win := range w {
		if win.Start != 0 {
			t.Fatalf("only one window fits, got start %d", win.Start)
		}
	}
	if _, err := BatchWindows(cfg, nil, 0, exact-1); !errors.Is(err, ErrInvalidData) {
		t.Errorf("short data: %v", err)
	}
	cfg.BatchSize = 0
	if _, err := BatchWindows(cfg, nil, 0, 100); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("invalid config: %v", err)
	}
}

func TestBatch(t *testing.T) {
	data := []byte("0123456789")
	got, err := Batch(data, []traindata.Window{{Start: 2, Length: 3}, {Start: 7, Length: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if string(got[0]) != "234" || string(got[1]) != "789" || cap(got[0]) != 3 {
		t.Errorf("Batch = %q (cap %d)", got, cap(got[0]))
	}
	for _, w := range []traindata.Window{{Start: 8, Length: 3}, {Start: 11, Length: 0}, {Start: 1<<64 - 1, Length: 2}} {
		if _, err := Batch(data, []traindata.Window{w}); !errors.Is(err, ErrInvalidData) {
			t.Errorf("window %+v: %v", w, err)
		}
	}
}

func TestDefaultCorpus(t *testing.T) {
	c := DefaultCorpus()
	if len(c) < 20_000 || len(c) > 40_000 {
		t.Errorf("corpus is %d bytes", len(c))
	}
	for i, b := range c {
		if (b < 0x20 || b > 0x7e) && b != '\n' {
			t.Fatalf("byte %d is %#x, want printable ASCII or newline", i, b)
		}
	}
	c[0] = 'x'
	if DefaultCorpus()[0] == 'x' {
		t.Error("DefaultCorpus returned shared memory")
	}
}

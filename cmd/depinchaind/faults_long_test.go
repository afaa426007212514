//go:build long

package main_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/depinchain/depinchain/testutil/localnet"
)

// TestLongPartitionHeals holds a 2|2 split for longer than CometBFT keeps
// redialing a lost persistent peer every few seconds (a dead connection is
// noticed within about 105 s of pings, then 20 tries 5-8 s apart; after
// that the switch backs off exponentially up to 3^10 s), then heals it: the
// chain must resume soon, and the time it takes is logged.
func TestLongPartitionHeals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	net := startDockerNetwork(t, ctx, localnet.NetworkOptions{})
	v0 := net.Validators[0]
	if err := net.Partition(ctx, []int{0, 1}, []int{2, 3}); err != nil {
		t.Fatal(err)
	}
	from, _ := v0.Height(ctx)
	held := 6 * time.Minute
	time.Sleep(held)
	hs := checkNoFork(t, ctx, net, from)
	top := max(hs[0], hs[1], hs[2], hs[3])
	if top > from+1 {
		t.Fatalf("heights %v: blocks during a 2|2 split (cut at %d)", hs, from)
	}
	if err := net.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	for _, v := range net.Validators {
		if err := v.WaitHeightStall(ctx, top+2, 8*time.Minute); err != nil {
			t.Fatalf("%v (the split was held %s)", err, held)
		}
	}
	target, _ := v0.Height(ctx)
	hd, err := net.WaitSynced(ctx, target+1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("split held %s at heights %v; all four moving again %s after healing; agree at %d",
		held, hs, time.Since(healed).Round(time.Second), hd.Height)
}

// TestFaultSoak runs rounds of random faults on validators 1-3 of four
// processes while transfers flow through validator 0: one validator stopped
// or killed for a while, or two stopped at once (a halt), then brought back. After every round all four
// must agree on one block and app hash, and at the end on every balance.
func TestFaultSoak(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	net := startNetwork(t, ctx, localnet.NetworkOptions{
		Accounts: map[string]int64{"alice": 1_000_000_000_000, "bob": 1_000_000},
	})
	bob := mustAddr(t, ctx, net.Validators[0].Node, "bob")
	start := bankBalance(t, ctx, net.Validators[0], bob)

	// Transfers go through validator 0, which the faults spare: a transfer
	// whose node died before it could say so might still be committed, and
	// the count would be off.
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if res, err := net.Validators[0].Tx(ctx, "alice", "bank", "send", "alice", bob, "1udepin"); err == nil && res.Code == 0 {
				sent.Add(1)
			}
		}
	}()

	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	for round := 0; round < 15; round++ {
		a := 1 + rng.IntN(3)
		down := []*localnet.Validator{net.Validators[a]}
		fault := []string{"stop", "kill", "stop two:"}[rng.IntN(3)]
		if fault == "stop two:" {
			down = append(down, net.Validators[1+(a+rng.IntN(2))%3])
		}
		for _, v := range down {
			if fault == "kill" {
				v.Kill()
			} else {
				v.Stop()
			}
		}
		names := make([]string, len(down))
		for k, v := range down {
			names[k] = fmt.Sprintf("val%d", v.Index)
		}
		what := fault + " " + strings.Join(names, "+")
		outage := time.Duration(1+rng.IntN(10)) * time.Second
		time.Sleep(outage)
		for _, v := range down {
			if err := v.Resume(ctx); err != nil {
				t.Fatal(err)
			}
		}
		h, err := net.Validators[a].Height(ctx)
		if err != nil {
			t.Fatal(err)
		}
		target := h
		for _, v := range net.Validators {
			if vh, err := v.Height(ctx); err == nil {
				target = max(target, vh)
			}
		}
		hd, err := net.WaitSynced(ctx, target+1)
		if err != nil {
			t.Fatalf("round %d (%s for %s): %v", round, what, outage, err)
		}
		t.Logf("round %d: %s for %s; all agree at %d", round, what, outage, hd.Height)
	}
	close(stop)
	wg.Wait()
	target, _ := net.Validators[0].Height(ctx)
	if _, err := net.WaitSynced(ctx, target+1); err != nil {
		t.Fatal(err)
	}
	for _, v := range net.Validators {
		if got := bankBalance(t, ctx, v, bob); got != start+sent.Load() {
			t.Fatalf("val%d says bob has %d, want %d", v.Index, got, start+sent.Load())
		}
	}
	t.Logf("%d transfers committed through 15 rounds of faults", sent.Load())
}

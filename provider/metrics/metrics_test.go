package metrics_test

import (
	"slices"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/depinchain/depinchain/provider/gpu"
	"github.com/depinchain/depinchain/provider/metrics"
)

// sample is one gathered series: its labels and value.
type sample struct {
	labels map[string]string
	value  float64
}

// gather returns every series of the registry by metric name.
func gather(t *testing.T, m *metrics.Metrics) map[string][]sample {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string][]sample{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, l := range mt.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch f.GetType() {
			case dto.MetricType_GAUGE:
				s.value = mt.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				s.value = mt.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				s.value = float64(mt.GetHistogram().GetSampleCount())
			}
			out[f.GetName()] = append(out[f.GetName()], s)
		}
	}
	return out
}

// value returns the value of name's series whose labels include want.
func value(t *testing.T, got map[string][]sample, name string, want map[string]string) float64 {
	t.Helper()
	for _, s := range got[name] {
		match := true
		for k, v := range want {
			if s.labels[k] != v {
				match = false
			}
		}
		if match {
			return s.value
		}
	}
	t.Fatalf("no %s series with labels %v; have %v", name, want, got[name])
	return 0
}

func testGPUs() []gpu.GPU {
	return []gpu.GPU{
		{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559,
			UtilizationPercent: 97, MemoryUtilizationPercent: 41, TemperatureCelsius: 63, PowerMilliwatts: 612500},
		{Index: 1, UUID: "GPU-bbbb", Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559,
			ECCDoubleBitErrors: 2, XIDs: []uint64{13, 79}, Problems: []string{"xid 79: GPU has fallen off the bus"}},
	}
}

func TestObserveGPUs(t *testing.T) {
	m := metrics.New("node-7")
	model := func(string) string { return "H100-SXM5-80GB" }
	leaseOf := func(uuid string) uint64 {
		if uuid == "GPU-aaaa" {
			return 42
		}
		return 0
	}
	m.ObserveGPUs(testGPUs(), model, leaseOf)
	got := gather(t, m)

	gpu0 := map[string]string{"gpu": "0", "UUID": "GPU-aaaa", "device": "nvidia0",
		"modelName": "NVIDIA H100 80GB HBM3", "Hostname": "node-7"}
	gpu1 := map[string]string{"gpu": "1", "UUID": "GPU-bbbb", "Hostname": "node-7"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"DCGM_FI_DEV_GPU_UTIL", gpu0, 97},
		{"DCGM_FI_DEV_MEM_COPY_UTIL", gpu0, 41},
		{"DCGM_FI_DEV_GPU_TEMP", gpu0, 63},
		{"DCGM_FI_DEV_POWER_USAGE", gpu0, 612.5},
		{"DCGM_FI_DEV_FB_TOTAL", gpu0, 81559},
		{"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", gpu0, 0},
		{"DCGM_FI_DEV_XID_ERRORS", gpu0, 0},
		{"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", gpu1, 2},
		{"DCGM_FI_DEV_XID_ERRORS", gpu1, 79},
		{"depinprovider_gpu_healthy", map[string]string{"UUID": "GPU-aaaa", "model": "H100-SXM5-80GB"}, 1},
		{"depinprovider_gpu_healthy", gpu1, 0},
		{"depinprovider_gpu_leased", gpu0, 42},
		{"depinprovider_gpu_leased", gpu1, 0},
	} {
		if v := value(t, got, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}

	// GPU 1 vanishes: its series go; nil model and leaseOf are allowed.
	m.ObserveGPUs(testGPUs()[:1], nil, nil)
	got = gather(t, m)
	for _, name := range []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS", "depinprovider_gpu_healthy", "depinprovider_gpu_leased"} {
		if n := len(got[name]); n != 1 || got[name][0].labels["UUID"] != "GPU-aaaa" {
			t.Errorf("%s after GPU-bbbb vanished: %v", name, got[name])
		}
	}
	if v := value(t, got, "depinprovider_gpu_healthy", map[string]string{"model": "H100-80GB-HBM3"}); v != 1 {
		t.Errorf("healthy with default model name = %v", v)
	}
	if v := value(t, got, "depinprovider_gpu_leased", gpu0); v != 0 {
		t.Errorf("leased with nil leaseOf = %v", v)
	}

	m.ObserveGPUs(nil, nil, nil)
	if got := gather(t, m); len(got["DCGM_FI_DEV_GPU_UTIL"]) != 0 {
		t.Errorf("series left with no GPUs: %v", got["DCGM_FI_DEV_GPU_UTIL"])
	}
}

func TestDaemonMetrics(t *testing.T) {
	m := metrics.New("h")
	got := gather(t, m)
	// Known label values exist from the start.
	for _, r := range []string{"placed", "skipped", "failed", "withdrawn", "won", "lost"} {
		if v := value(t, got, "depinprovider_bids_total", map[string]string{"result": r}); v != 0 {
			t.Errorf("bids %s = %v before any bid", r, v)
		}
	}
	// Go and process collectors are registered.
	if _, ok := got["go_goroutines"]; !ok {
		t.Error("no go_goroutines")
	}

	m.SetChainHeight(120)
	m.SetCursorHeight(100)
	m.SetWebsocketConnected(true)
	m.JobSeen()
	m.JobSeen()
	m.Bid(metrics.BidPlaced)
	m.Bid(metrics.BidWon)
	m.BidLatency(100, 103)
	m.BidLatency(100, 99) // clamped to 0
	m.LeaseWon()
	m.SetLeasesActive(1)
	m.SetTrainingStep(7, 1500)
	m.SetTrainingStep(8, 10)
	m.Checkpoint(metrics.CheckpointSubmitted)
	m.CheckpointHashed(1 << 20)
	m.Transaction("/depinchain.market.v1.MsgPlaceBid", true)
	m.Transaction("/depinchain.market.v1.MsgPlaceBid", false)
	m.Transaction("/depinchain.market.v1.MsgPlaceBid", true)
	m.EarningsWithdrawn(250000)
	m.LeaseClosed(8)

	got = gather(t, m)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"depinprovider_cursor_height", nil, 100},
		{"depinprovider_chain_height", nil, 120},
		{"depinprovider_cursor_lag_blocks", nil, 20},
		{"depinprovider_websocket_connected", nil, 1},
		{"depinprovider_jobs_seen_total", nil, 2},
		{"depinprovider_bids_total", map[string]string{"result": "placed"}, 1},
		{"depinprovider_bids_total", map[string]string{"result": "won"}, 1},
		{"depinprovider_bids_total", map[string]string{"result": "lost"}, 0},
		{"depinprovider_bid_latency_blocks", nil, 2},
		{"depinprovider_leases_total", map[string]string{"event": "won"}, 1},
		{"depinprovider_leases_total", map[string]string{"event": "closed"}, 1},
		{"depinprovider_leases_active", nil, 1},
		{"depinprovider_training_step", map[string]string{"lease": "7"}, 1500},
		{"depinprovider_checkpoints_total", map[string]string{"status": "submitted"}, 1},
		{"depinprovider_checkpoints_total", map[string]string{"status": "finalized"}, 0},
		{"depinprovider_checkpoint_hash_bytes_total", nil, 1 << 20},
		{"depinprovider_transactions_total", map[string]string{"msg": "/depinchain.market.v1.MsgPlaceBid", "result": "ok"}, 2},
		{"depinprovider_transactions_total", map[string]string{"msg": "/depinchain.market.v1.MsgPlaceBid", "result": "failed"}, 1},
		{"depinprovider_earnings_withdrawn_udepin_total", nil, 250000},
	} {
		if v := value(t, got, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	// The closed lease's step is forgotten.
	if steps := got["depinprovider_training_step"]; len(steps) != 1 {
		t.Errorf("training_step series = %v, want only lease 7", steps)
	}
	// The cursor ahead of a stale chain height never makes a negative lag.
	m.SetCursorHeight(130)
	if v := value(t, gather(t, m), "depinprovider_cursor_lag_blocks", nil); v != 0 {
		t.Errorf("lag = %v, want 0", v)
	}
}

func TestBidLatencyBuckets(t *testing.T) {
	m := metrics.New("h")
	for _, d := range []int64{0, 1, 1, 10, 25} {
		m.BidLatency(50, 50+d)
	}
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "depinprovider_bid_latency_blocks" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		var bounds []float64
		cum := map[float64]uint64{}
		for _, b := range h.GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
			cum[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		if !slices.Equal(bounds, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
			t.Fatalf("buckets %v, want 0..10", bounds)
		}
		if cum[0] != 1 || cum[1] != 3 || cum[10] != 4 || h.GetSampleCount() != 5 {
			t.Errorf("cumulative counts %v, total %d", cum, h.GetSampleCount())
		}
		return
	}
	t.Fatal("no depinprovider_bid_latency_blocks")
}

func TestAlertMetrics(t *testing.T) {
	m := metrics.New("h")
	got := gather(t, m)
	// Every role and result exists at 0 from the start, so an alert's
	// increase() sees the first game.
	for _, role := range []string{"defender", "challenger"} {
		if v := value(t, got, "depinprovider_disputes_open", map[string]string{"role": role}); v != 0 {
			t.Errorf("disputes_open %s = %v before any game", role, v)
		}
		for _, res := range []string{metrics.DisputeWon, metrics.DisputeLost, metrics.DisputeMoot} {
			if v := value(t, got, "depinprovider_disputes_resolved_total", map[string]string{"role": role, "result": res}); v != 0 {
				t.Errorf("disputes_resolved %s/%s = %v before any game", role, res, v)
			}
		}
	}
	if n := len(got["depinprovider_lease_checkpoint_deadline_height"]); n != 0 {
		t.Errorf("%d deadline series before any lease", n)
	}

	m.SetCheckpointDeadline(7, 1600)
	m.SetCheckpointDeadline(8, 900)
	m.SetCheckpointDeadline(7, 2200) // a checkpoint moved it on
	m.SetDisputesOpen("defender", 2)
	m.DisputeOpened("defender")
	m.DisputeOpened("defender")
	m.DisputeOpened("challenger")
	m.DisputeResolved("defender", metrics.DisputeLost)
	m.SetBond(100_000_000, 30_000_000, 8_000_000)
	m.LeaseClosed(8)

	got = gather(t, m)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"depinprovider_lease_checkpoint_deadline_height", map[string]string{"lease": "7"}, 2200},
		{"depinprovider_disputes_open", map[string]string{"role": "defender"}, 2},
		{"depinprovider_disputes_open", map[string]string{"role": "challenger"}, 0},
		{"depinprovider_disputes_opened_total", map[string]string{"role": "defender"}, 2},
		{"depinprovider_disputes_opened_total", map[string]string{"role": "challenger"}, 1},
		{"depinprovider_disputes_resolved_total", map[string]string{"role": "defender", "result": "lost"}, 1},
		{"depinprovider_disputes_resolved_total", map[string]string{"role": "defender", "result": "won"}, 0},
		{"depinprovider_bond_udepin", nil, 100_000_000},
		{"depinprovider_bond_locked_udepin", nil, 30_000_000},
		{"depinprovider_bond_free_udepin", nil, 70_000_000},
		{"depinprovider_bond_required_udepin", nil, 8_000_000},
	} {
		if v := value(t, got, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	// The closed lease's deadline is forgotten: no alert on a lease that is gone.
	if d := got["depinprovider_lease_checkpoint_deadline_height"]; len(d) != 1 || d[0].labels["lease"] != "7" {
		t.Errorf("deadline series after lease 8 closed: %v", d)
	}
}

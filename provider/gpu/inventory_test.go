package gpu_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/depinchain/depinchain/provider/gpu"
	stakingtypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// host is a DGX H100 mock with the functions the mock leaves nil wired to
// state the test controls.
type host struct {
	*server.Server
	mu     sync.Mutex
	queued []nvml.EventData
	waits  []uint32 // timeouts Wait was called with
	ecc    map[int]uint64
	lost   map[int]bool
	masks  map[int]uint64 // event masks registered per GPU
	// rowsPending and rowsFailed are what GetRemappedRows reports per GPU
	// (Hopper remaps rows; its driver answers NOT_SUPPORTED for retired pages).
	rowsPending map[int]bool
	rowsFailed  map[int]bool
	freed       bool
	devices     []*server.Device
}

func newHost(t *testing.T) *host {
	t.Helper()
	h := &host{Server: dgxh100.New(), ecc: map[int]uint64{}, lost: map[int]bool{}, masks: map[int]uint64{},
		rowsPending: map[int]bool{}, rowsFailed: map[int]bool{}}
	events := &mock.EventSet{
		WaitFunc: func(timeout uint32) (nvml.EventData, nvml.Return) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.waits = append(h.waits, timeout)
			if len(h.queued) == 0 {
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
			e := h.queued[0]
			h.queued = h.queued[1:]
			return e, nvml.SUCCESS
		},
		FreeFunc: func() nvml.Return {
			h.freed = true
			return nvml.SUCCESS
		},
	}
	h.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return events, nvml.SUCCESS }
	for i, d := range h.Devices {
		dev := d.(*server.Device)
		h.devices = append(h.devices, dev)
		lostOr := func(ret nvml.Return) nvml.Return {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.lost[i] {
				return nvml.ERROR_GPU_IS_LOST
			}
			return ret
		}
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: uint32(10 * i), Memory: uint32(5 * i)}, lostOr(nvml.SUCCESS)
		}
		dev.GetTemperatureFunc = func(sensor nvml.TemperatureSensors) (uint32, nvml.Return) {
			if sensor != nvml.TEMPERATURE_GPU {
				t.Errorf("temperature of sensor %d asked", sensor)
			}
			return uint32(40 + i), lostOr(nvml.SUCCESS)
		}
		dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return uint32(300_000 + i), lostOr(nvml.SUCCESS) }
		dev.GetTotalEccErrorsFunc = func(kind nvml.MemoryErrorType, counter nvml.EccCounterType) (uint64, nvml.Return) {
			if kind != nvml.MEMORY_ERROR_TYPE_UNCORRECTED || counter != nvml.VOLATILE_ECC {
				t.Errorf("ECC counter %d/%d asked, want volatile uncorrected", kind, counter)
			}
			h.mu.Lock()
			count := h.ecc[i]
			h.mu.Unlock()
			return count, lostOr(nvml.SUCCESS)
		}
		dev.RegisterEventsFunc = func(mask uint64, set nvml.EventSet) nvml.Return {
			h.masks[i] = mask
			return nvml.SUCCESS
		}
		// A real H100 80GB HBM3 reports 81,559 MiB (the mock says 81,920).
		dev.MemoryInfo.Total = 81_559 << 20
		dev.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
			return nvml.FEATURE_DISABLED, lostOr(nvml.ERROR_NOT_SUPPORTED)
		}
		dev.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
			h.mu.Lock()
			pending, failed := h.rowsPending[i], h.rowsFailed[i]
			h.mu.Unlock()
			return 0, 0, pending, failed, lostOr(nvml.SUCCESS)
		}
	}
	return h
}

func (h *host) xid(gpu int, xid uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queued = append(h.queued, nvml.EventData{Device: h.devices[gpu], EventType: nvml.EventTypeXidCriticalError, EventData: xid})
}

func (h *host) uuid(gpu int) string { return h.devices[gpu].UUID }

func openHost(t *testing.T, h *host) *gpu.Inventory {
	t.Helper()
	inv, err := gpu.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inv.Close() })
	return inv
}

func TestInventoryReadsEveryGPU(t *testing.T) {
	h := newHost(t)
	inv := openHost(t, h)
	gpus := inv.GPUs()
	if len(gpus) != 8 {
		t.Fatalf("%d GPUs, want 8", len(gpus))
	}
	for i, g := range gpus {
		want := gpu.GPU{
			Index: i, UUID: h.uuid(i), Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559,
			UtilizationPercent: uint32(10 * i), MemoryUtilizationPercent: uint32(5 * i),
			TemperatureCelsius: uint32(40 + i), PowerMilliwatts: uint32(300_000 + i),
		}
		if !strings.HasPrefix(g.UUID, "GPU-") || g.Index != want.Index || g.UUID != want.UUID || g.Name != want.Name ||
			g.MemoryMiB != want.MemoryMiB || g.UtilizationPercent != want.UtilizationPercent ||
			g.MemoryUtilizationPercent != want.MemoryUtilizationPercent || g.TemperatureCelsius != want.TemperatureCelsius ||
			g.PowerMilliwatts != want.PowerMilliwatts || !g.Healthy() ||
			!slices.Equal(g.Unavailable, []string{"retired pages: ERROR_NOT_SUPPORTED"}) ||
			g.Model != "H100-SXM5-80GB" || g.MemoryClassGiB != 80 || g.PCIDeviceID != 0x233010de || !g.Offerable() {
			t.Errorf("GPU %d = %+v\nwant %+v", i, g, want)
		}
		if h.masks[i] != nvml.EventTypeXidCriticalError {
			t.Errorf("GPU %d registered events %#x, want XID critical errors", i, h.masks[i])
		}
	}
	if len(inv.Healthy()) != 8 || inv.UnhealthyLeased([]string{h.uuid(0), h.uuid(7)}) != nil {
		t.Fatal("a fresh host is not all healthy")
	}
	if err := inv.Close(); err != nil || !h.freed {
		t.Fatalf("Close: %v, event set freed: %v", err, h.freed)
	}
}

func TestInventoryXIDMarksUnhealthy(t *testing.T) {
	h := newHost(t)
	inv := openHost(t, h)
	h.xid(2, 79) // GPU has fallen off the bus
	h.xid(3, 13) // graphics engine exception: the application's fault
	if err := inv.Refresh(); err != nil {
		t.Fatal(err)
	}
	for _, timeout := range h.waits {
		if timeout != 0 {
			t.Fatalf("events polled with a %d ms wait, want 0 (never block)", timeout)
		}
	}
	gpus := inv.GPUs()
	if gpus[2].Healthy() || !slices.Equal(gpus[2].Problems, []string{"critical XID 79"}) || !slices.Equal(gpus[2].XIDs, []uint64{79}) {
		t.Fatalf("GPU 2 after XID 79: %+v", gpus[2])
	}
	if !gpus[3].Healthy() || !slices.Equal(gpus[3].XIDs, []uint64{13}) {
		t.Fatalf("GPU 3 after application XID 13: %+v", gpus[3])
	}
	leased := []string{h.uuid(1), h.uuid(2), h.uuid(3)}
	if got, want := inv.UnhealthyLeased(leased), []gpu.Unhealthy{{UUID: h.uuid(2), Reason: "critical XID 79"}}; !slices.Equal(got, want) {
		t.Fatalf("UnhealthyLeased = %v, want %v", got, want)
	}
	if healthy := inv.Healthy(); len(healthy) != 7 || slices.ContainsFunc(healthy, func(g gpu.GPU) bool { return g.Index == 2 }) {
		t.Fatalf("Healthy() = %d GPUs incl. GPU 2", len(healthy))
	}
	// Health is sticky: nothing new happens, GPU 2 stays out.
	if err := inv.Refresh(); err != nil || inv.GPUs()[2].Healthy() {
		t.Fatal("GPU 2 recovered by itself")
	}
}

func TestInventoryDoubleBitECCMarksUnhealthy(t *testing.T) {
	h := newHost(t)
	inv := openHost(t, h)
	h.mu.Lock()
	h.ecc[5] = 2
	h.mu.Unlock()
	if err := inv.Refresh(); err != nil {
		t.Fatal(err)
	}
	g := inv.GPUs()[5]
	if g.Healthy() || g.ECCDoubleBitErrors != 2 || !slices.Equal(g.Problems, []string{"double-bit ECC errors"}) {
		t.Fatalf("GPU 5 with 2 double-bit errors: %+v", g)
	}
	if got := inv.UnhealthyLeased([]string{h.uuid(5)}); len(got) != 1 || got[0].Reason != "double-bit ECC errors" {
		t.Fatalf("UnhealthyLeased = %v", got)
	}
}

func TestInventoryLostGPUs(t *testing.T) {
	h := newHost(t)
	inv := openHost(t, h)
	// GPU 1 answers ERROR_GPU_IS_LOST; GPU 6 vanishes from the list.
	h.mu.Lock()
	h.lost[1] = true
	h.mu.Unlock()
	gone := h.uuid(6)
	h.Devices = slices.Delete(h.Devices, 6, 7)
	if err := inv.Refresh(); err != nil {
		t.Fatal(err)
	}
	got := inv.UnhealthyLeased([]string{h.uuid(0), h.uuid(1), gone, "GPU-unknown"})
	want := []gpu.Unhealthy{
		{UUID: h.uuid(1), Reason: "lost: NVML reports ERROR_GPU_IS_LOST"},
		{UUID: gone, Reason: "lost: no longer listed by the driver"},
		{UUID: "GPU-unknown", Reason: "not in the inventory"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("UnhealthyLeased = %v\nwant %v", got, want)
	}
	if n := len(inv.Healthy()); n != 6 {
		t.Fatalf("%d healthy GPUs, want 6", n)
	}
	// A lost GPU's handle is not used again, even if it answers again.
	h.mu.Lock()
	h.lost[1] = false
	h.mu.Unlock()
	h.devices[1].GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		t.Error("a lost GPU was queried again")
		return nvml.Utilization{}, nvml.SUCCESS
	}
	if err := inv.Refresh(); err != nil || inv.GPUs()[1].Healthy() {
		t.Fatalf("after the lost GPU answers again: %v", err)
	}
}

func TestInventoryNotesUnsupportedTelemetry(t *testing.T) {
	h := newHost(t)
	h.devices[4].GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	h.devices[4].RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
	inv := openHost(t, h)
	g := inv.GPUs()[4]
	if !g.Healthy() || !slices.Equal(g.Unavailable, []string{"xid events: ERROR_NOT_SUPPORTED", "ecc: ERROR_NOT_SUPPORTED", "retired pages: ERROR_NOT_SUPPORTED"}) {
		t.Fatalf("GPU 4 without ECC and XID events: %+v", g)
	}
}

func TestInventoryWithoutDriver(t *testing.T) {
	// Only Init is wired: the mock panics if anything else is called,
	// as the real library would kill the process.
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	inv, err := gpu.Open(lib)
	if !errors.Is(err, gpu.ErrNoDriver) || !strings.Contains(err.Error(), "no NVIDIA driver found: offering no GPUs") {
		t.Fatalf("Open without a driver: %v", err)
	}
	if err := inv.Refresh(); err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs()) != 0 || len(inv.Healthy()) != 0 || len(gpu.ChainInventory(inv.Healthy())) != 0 {
		t.Fatal("GPUs offered without a driver")
	}
	if got := inv.UnhealthyLeased([]string{"GPU-x"}); len(got) != 1 {
		t.Fatalf("UnhealthyLeased = %v", got)
	}
	if err := inv.Close(); err != nil {
		t.Fatal(err)
	}
	if calls := len(lib.InitCalls()); calls != 1 {
		t.Fatalf("Init called %d times", calls)
	}
}

// The real NVML: on a host without the driver (CI, this build machine) it
// must say so and offer nothing; on a GPU host it lists the GPUs.
func TestOpenSystem(t *testing.T) {
	inv, err := gpu.OpenSystem()
	if errors.Is(err, gpu.ErrNoDriver) {
		t.Logf("as expected without a driver: %v", err)
		if len(inv.GPUs()) != 0 {
			t.Fatal("GPUs listed without a driver")
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	for _, g := range inv.GPUs() {
		t.Logf("GPU %d %s %q %d MiB, %d%% busy, %d °C, %d mW, healthy %v %v, unavailable %v",
			g.Index, g.UUID, g.Name, g.MemoryMiB, g.UtilizationPercent, g.TemperatureCelsius, g.PowerMilliwatts, g.Healthy(), g.Problems, g.Unavailable)
	}
	for _, g := range inv.Unknown() {
		t.Logf("GPU %d: %s", g.Index, g.Unknown)
	}
	t.Logf("chain inventory: %v", gpu.ChainInventory(inv.Healthy()))
}

func TestChainInventory(t *testing.T) {
	h := newHost(t)
	inv := openHost(t, h)
	got := gpu.ChainInventory(inv.Healthy())
	// 81,559 MiB read, the nominal 80 GiB class registered: a job's min_vram_gib: 80 matches.
	if want := []stakingtypes.GPUInventory{{Model: "H100-SXM5-80GB", VramMib: 80 * 1024, Count: 8}}; !slices.Equal(got, want) {
		t.Fatalf("dgxh100 inventory = %v, want %v", got, want)
	}
	if err := stakingtypes.ValidateGPUs(got, 16); err != nil {
		t.Fatalf("the chain rejects the inventory: %v", err)
	}
}

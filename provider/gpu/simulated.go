package gpu

import (
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// SimulatedHost is an eight-GPU NVIDIA DGX H100 as go-nvml's mock server
// describes it, with each GPU's memory set to what a real H100 80GB HBM3
// reports (81,559 MiB; the mock says 81,920), with the telemetry the mock leaves unset wired to plausible
// values and with faults that can be injected. It implements Library.
//
// It exists for machines without NVIDIA GPUs: local chains, the demo and
// tests run the sidecar's whole GPU path (inventory, health gating,
// metrics) on it. A provider on real hardware never uses it.
type SimulatedHost struct {
	*server.Server

	mu      sync.Mutex
	devices []*server.Device
	xids    []nvml.EventData
	ecc     map[int]uint64
	lost    map[int]bool
}

// NewSimulatedDGXH100 returns a healthy simulated DGX H100.
func NewSimulatedDGXH100() *SimulatedHost {
	h := &SimulatedHost{Server: dgxh100.New(), ecc: map[int]uint64{}, lost: map[int]bool{}}
	events := &mock.EventSet{
		WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if len(h.xids) == 0 {
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
			e := h.xids[0]
			h.xids = h.xids[1:]
			return e, nvml.SUCCESS
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
	h.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return events, nvml.SUCCESS }
	for i, d := range h.Devices {
		dev := d.(*server.Device)
		h.devices = append(h.devices, dev)
		h.wire(i, dev)
	}
	return h
}

// realH100MiB is an H100 80GB HBM3's total memory as NVML reports it.
const realH100MiB = 81_559

func (h *SimulatedHost) wire(i int, dev *server.Device) {
	dev.MemoryInfo.Total = realH100MiB << 20
	unlessLost := func() nvml.Return {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.lost[i] {
			return nvml.ERROR_GPU_IS_LOST
		}
		return nvml.SUCCESS
	}
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: 0, Memory: 0}, unlessLost()
	}
	dev.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return uint32(31 + i), unlessLost() }
	dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return uint32(70_000 + 1000*i), unlessLost() }
	dev.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
		h.mu.Lock()
		count := h.ecc[i]
		h.mu.Unlock()
		return count, unlessLost()
	}
	dev.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	// Hopper remaps rows and does not retire pages, as the driver says.
	dev.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
		return nvml.FEATURE_DISABLED, nvml.ERROR_NOT_SUPPORTED
	}
	dev.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, unlessLost() }
}

// UUID returns the UUID of the GPU at index.
func (h *SimulatedHost) UUID(index int) string { return h.devices[index].UUID }

// InjectXID queues a critical XID error on the GPU at index, as the driver
// reports one.
func (h *SimulatedHost) InjectXID(index int, xid uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.xids = append(h.xids, nvml.EventData{Device: h.devices[index], EventType: nvml.EventTypeXidCriticalError, EventData: xid})
}

// InjectDoubleBitECC raises the GPU's volatile uncorrectable ECC counter.
func (h *SimulatedHost) InjectDoubleBitECC(index int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ecc[index]++
}

// Lose makes the GPU at index answer every query with ERROR_GPU_IS_LOST.
func (h *SimulatedHost) Lose(index int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lost[index] = true
}

// Package gpu inventories the host's NVIDIA GPUs through NVML (go-nvml):
// identity, memory and telemetry per GPU, and health, so the sidecar offers
// only GPUs it can use and notices when a leased one fails.
//
// A GPU becomes unhealthy, for good (until the sidecar restarts), when NVML
// reports a critical XID error that is not an application's fault, a
// volatile double-bit (uncorrectable) ECC error, or when the GPU is lost or
// disappears from the driver. On a host without the NVIDIA driver, Open
// returns an empty inventory together with ErrNoDriver and calls nothing
// but nvml.Init, because any other NVML call without a successful Init
// kills the process.
package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Library is the part of NVML the inventory uses. nvml.New() implements it,
// and so do the mock servers of github.com/NVIDIA/go-nvml/pkg/nvml/mock.
type Library interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(index int) (nvml.Device, nvml.Return)
	EventSetCreate() (nvml.EventSet, nvml.Return)
}

// ErrNoDriver is returned by Open, with an empty inventory, on a host
// without the NVIDIA driver. The daemon logs it and offers no GPUs.
var ErrNoDriver = errors.New("no NVIDIA driver found: offering no GPUs")

// applicationXIDs are the XID errors NVIDIA documents as caused by the
// application rather than the GPU (graphics engine exception, memory page
// fault, GPU stopped processing, preemptive cleanup, video processor
// exception, context switch timeout); the NVIDIA Kubernetes device plugin
// ignores the same set. They fail the trainer that caused them, not the GPU.
var applicationXIDs = []uint64{13, 31, 43, 45, 68, 109}

// GPU is one GPU as last seen.
type GPU struct {
	// Index is NVML's index, which is also nvidia-smi's.
	Index int
	UUID  string
	// Name is NVML's product name, e.g. "NVIDIA H100 80GB HBM3".
	Name string
	// MemoryMiB is NVML's reading of total memory (81,559 for an H100 80GB HBM3).
	MemoryMiB uint64
	// PCIDeviceID is NVML's device<<16 | vendor (0x233010de for an H100 SXM5);
	// PCISubsystemID tells board variants apart.
	PCIDeviceID, PCISubsystemID uint32
	// Model is the catalogue's canonical model name ("H100-SXM5-80GB") and
	// MemoryClassGiB its nominal memory class (80), which the provider registers;
	// both empty when the GPU is not in the catalogue.
	Model          string
	MemoryClassGiB uint64
	// Unknown says why the GPU is not offered although it may be healthy: not in
	// the catalogue (with its ids and the entry to add), or a memory reading
	// that does not fit its class. Empty for a catalogued GPU.
	Unknown string
	// Telemetry, as of the last Refresh.
	UtilizationPercent       uint32
	MemoryUtilizationPercent uint32
	TemperatureCelsius       uint32
	PowerMilliwatts          uint32
	// ECCDoubleBitErrors counts volatile (since the driver loaded)
	// uncorrectable memory errors.
	ECCDoubleBitErrors uint64
	// XIDs are the critical XID errors seen, in order, including
	// application ones.
	XIDs []uint64
	// Unavailable lists what NVML could not report for this GPU (e.g.
	// "ecc: ERROR_NOT_SUPPORTED" on a GPU without ECC); not a health problem.
	Unavailable []string
	// Problems says why the GPU is unhealthy; empty when it is healthy.
	Problems []string
}

// Healthy reports whether the GPU works (whether or not it is catalogued).
func (g GPU) Healthy() bool { return len(g.Problems) == 0 }

// Offerable reports whether the GPU may be offered for bids: healthy and in
// the catalogue.
func (g GPU) Offerable() bool { return g.Healthy() && g.Model != "" && g.Unknown == "" }

// tracked is a GPU with its NVML handle.
type tracked struct {
	GPU
	device nvml.Device
	// unsubscribed says why XID events of this GPU are not monitored;
	// empty when they are.
	unsubscribed string
	// lost means the GPU is gone: its handle must not be used again.
	lost bool
}

func (t *tracked) addProblem(problem string) {
	if !slices.Contains(t.Problems, problem) {
		t.Problems = append(t.Problems, problem)
	}
}

// Inventory tracks the host's GPUs. It is safe for concurrent use.
type Inventory struct {
	mu  sync.Mutex
	lib Library // nil when NVML could not be initialised
	// events is the XID event set, or nil if NVML could not create one.
	events      nvml.EventSet
	eventsError string
	gpus        map[string]*tracked // by UUID
	catalogue   *Catalogue
}

// Option configures Open.
type Option func(*Inventory)

// WithCatalogue names GPUs with c instead of the built-in catalogue.
func WithCatalogue(c *Catalogue) Option { return func(inv *Inventory) { inv.catalogue = c } }

// Open initialises NVML through lib and reads the GPUs. Without a driver it
// returns an empty inventory and ErrNoDriver; on other failures, nil and an
// error.
func Open(lib Library, opts ...Option) (*Inventory, error) {
	inv := &Inventory{gpus: map[string]*tracked{}}
	for _, o := range opts {
		o(inv)
	}
	if inv.catalogue == nil {
		inv.catalogue = BuiltinCatalogue()
	}
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
		return inv, fmt.Errorf("%w (nvml.Init: %s)", ErrNoDriver, ret)
	default:
		return nil, fmt.Errorf("gpu: nvml.Init: %s", ret)
	}
	inv.lib = lib
	set, ret := lib.EventSetCreate()
	if ret == nvml.SUCCESS {
		inv.events = set
	} else {
		inv.eventsError = fmt.Sprintf("xid events: %s", ret)
	}
	if err := inv.Refresh(); err != nil {
		inv.Close()
		return nil, err
	}
	return inv, nil
}

// Empty returns an inventory with no GPUs, for a sidecar configured to offer none.
func Empty() *Inventory { return &Inventory{gpus: map[string]*tracked{}} }

// OpenSystem opens the inventory of this host's GPUs through the NVML
// library of the installed driver.
func OpenSystem(opts ...Option) (*Inventory, error) {
	return Open(nvml.New(), opts...)
}

// Close releases NVML. The inventory keeps its last view but no longer
// refreshes.
func (inv *Inventory) Close() error {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.lib == nil {
		return nil
	}
	var errs []error
	if inv.events != nil {
		if ret := inv.events.Free(); ret != nvml.SUCCESS {
			errs = append(errs, fmt.Errorf("gpu: freeing the event set: %s", ret))
		}
		inv.events = nil
	}
	if ret := inv.lib.Shutdown(); ret != nvml.SUCCESS {
		errs = append(errs, fmt.Errorf("gpu: nvml.Shutdown: %s", ret))
	}
	inv.lib = nil
	return errors.Join(errs...)
}

// Refresh re-reads every GPU's telemetry and ECC counter, drains the XID
// events that arrived since the last call without waiting for more, and
// marks GPUs that are lost or no longer listed. It returns an error only
// when the GPU list itself cannot be read.
func (inv *Inventory) Refresh() error {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.lib == nil {
		return nil
	}
	inv.drainEvents()
	count, ret := inv.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("gpu: counting GPUs: %s", ret)
	}
	listed := map[string]bool{}
	for i := range count {
		device, ret := inv.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue // a lost GPU has no handle; it shows up below as not listed
		}
		uuid, ret := device.GetUUID()
		if ret != nvml.SUCCESS {
			continue
		}
		listed[uuid] = true
		t, known := inv.gpus[uuid]
		if !known {
			t = inv.discover(i, uuid, device)
			inv.gpus[uuid] = t
		}
		if t.lost {
			continue // NVML lists it again, but after a loss it stays out of use
		}
		t.Index, t.device = i, device
		inv.readTelemetry(t)
	}
	for uuid, t := range inv.gpus {
		if !listed[uuid] && !t.lost {
			t.lost = true
			t.addProblem("lost: no longer listed by the driver")
		}
	}
	return nil
}

// discover reads the fixed properties of a GPU seen for the first time,
// names it from the catalogue and subscribes to its XID events. A property
// NVML cannot read makes that GPU unhealthy, never the inventory fail.
func (inv *Inventory) discover(index int, uuid string, device nvml.Device) *tracked {
	t := &tracked{GPU: GPU{Index: index, UUID: uuid}, device: device}
	name, ret := device.GetName()
	if ret != nvml.SUCCESS {
		t.addProblem(fmt.Sprintf("name: %s", ret))
	}
	memory, ret := device.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		t.addProblem(fmt.Sprintf("memory: %s", ret))
	}
	t.Name, t.MemoryMiB = name, memory.Total>>20
	if pci, ret := device.GetPciInfo(); ret == nvml.SUCCESS {
		t.PCIDeviceID, t.PCISubsystemID = pci.PciDeviceId, pci.PciSubSystemId
	} else {
		t.Unavailable = append(t.Unavailable, fmt.Sprintf("pci: %s", ret))
	}
	inv.catalogue.classify(&t.GPU)
	if inv.events == nil {
		t.unsubscribed = inv.eventsError
	} else if ret := device.RegisterEvents(nvml.EventTypeXidCriticalError, inv.events); ret != nvml.SUCCESS {
		t.unsubscribed = fmt.Sprintf("xid events: %s", ret)
	}
	return t
}

// readTelemetry refreshes t's telemetry and ECC-based health. A reading
// NVML does not support is noted in Unavailable; ERROR_GPU_IS_LOST on any
// of them marks the GPU lost.
func (inv *Inventory) readTelemetry(t *tracked) {
	var unavailable []string
	if t.unsubscribed != "" {
		unavailable = append(unavailable, t.unsubscribed)
	}
	check := func(what string, ret nvml.Return) bool {
		switch ret {
		case nvml.SUCCESS:
			return true
		case nvml.ERROR_GPU_IS_LOST:
			t.lost = true
			t.addProblem("lost: NVML reports ERROR_GPU_IS_LOST")
		default:
			unavailable = append(unavailable, fmt.Sprintf("%s: %s", what, ret))
		}
		return false
	}
	if u, ret := t.device.GetUtilizationRates(); check("utilization", ret) {
		t.UtilizationPercent, t.MemoryUtilizationPercent = u.Gpu, u.Memory
	}
	if c, ret := t.device.GetTemperature(nvml.TEMPERATURE_GPU); check("temperature", ret) {
		t.TemperatureCelsius = c
	}
	if mw, ret := t.device.GetPowerUsage(); check("power", ret) {
		t.PowerMilliwatts = mw
	}
	if n, ret := t.device.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); check("ecc", ret) {
		t.ECCDoubleBitErrors = n
		if n > 0 {
			t.addProblem("double-bit ECC errors")
		}
	}
	// Memory a driver could not retire or remap yet: the pages (pre-Ampere) or
	// rows (A100 and later) take effect only after a GPU reset, and until then
	// the bad cells are in use. The driver reports NOT_SUPPORTED for whichever
	// mechanism the GPU lacks.
	if pending, ret := t.device.GetRetiredPagesPendingStatus(); check("retired pages", ret) && pending == nvml.FEATURE_ENABLED {
		t.addProblem("retired pages pending: reset the GPU (or reboot) to retire them")
	}
	if _, _, pending, failed, ret := t.device.GetRemappedRows(); check("remapped rows", ret) {
		if pending {
			t.addProblem("row remapping pending: reset the GPU (or reboot) to remap them")
		}
		if failed {
			t.addProblem("row remapping failed: the GPU needs service")
		}
	}
	t.Unavailable = unavailable
}

// drainEvents takes every XID event already queued, without blocking.
func (inv *Inventory) drainEvents() {
	if inv.events == nil {
		return
	}
	for {
		data, ret := inv.events.Wait(0)
		if ret != nvml.SUCCESS { // ERROR_TIMEOUT: nothing queued
			return
		}
		if data.EventType != nvml.EventTypeXidCriticalError || data.Device == nil {
			continue
		}
		uuid, ret := data.Device.GetUUID()
		if ret != nvml.SUCCESS {
			continue
		}
		t, ok := inv.gpus[uuid]
		if !ok {
			continue
		}
		xid := data.EventData
		t.XIDs = append(t.XIDs, xid)
		if !slices.Contains(applicationXIDs, xid) {
			t.addProblem(fmt.Sprintf("critical XID %d", xid))
		}
	}
}

// GPUs returns every GPU seen since Open, healthy or not, by index.
func (inv *Inventory) GPUs() []GPU {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	gpus := make([]GPU, 0, len(inv.gpus))
	for _, t := range inv.gpus {
		g := t.GPU
		// Copies, so callers cannot race with the next Refresh.
		g.XIDs, g.Unavailable, g.Problems = slices.Clone(g.XIDs), slices.Clone(g.Unavailable), slices.Clone(g.Problems)
		gpus = append(gpus, g)
	}
	slices.SortFunc(gpus, func(a, b GPU) int { return a.Index - b.Index })
	return gpus
}

// Healthy returns the GPUs that may be offered and used, by index: healthy
// and in the catalogue (Offerable).
func (inv *Inventory) Healthy() []GPU {
	return slices.DeleteFunc(inv.GPUs(), func(g GPU) bool { return !g.Offerable() })
}

// Unknown returns the GPUs not offered because the catalogue does not map
// them, by index; each one's Unknown says what to add.
func (inv *Inventory) Unknown() []GPU {
	return slices.DeleteFunc(inv.GPUs(), func(g GPU) bool { return g.Unknown == "" })
}

// Host is what the sidecar's roles read of the inventory: which GPUs may be
// offered and which of those they use went bad. *Inventory satisfies it.
type Host interface {
	Healthy() []GPU
	UnhealthyLeased(uuids []string) []Unhealthy
}

// Unhealthy is a leased GPU that can no longer be used, and why.
type Unhealthy struct {
	UUID   string
	Reason string
}

// UnhealthyLeased returns those of the leased GPUs (by UUID) that are
// unhealthy or unknown, in the order given, so the daemon can flag their
// lease.
func (inv *Inventory) UnhealthyLeased(uuids []string) []Unhealthy {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	var bad []Unhealthy
	for _, uuid := range uuids {
		t, ok := inv.gpus[uuid]
		switch {
		case !ok:
			bad = append(bad, Unhealthy{UUID: uuid, Reason: "not in the inventory"})
		case !t.Healthy():
			bad = append(bad, Unhealthy{UUID: uuid, Reason: strings.Join(t.Problems, "; ")})
		}
	}
	return bad
}

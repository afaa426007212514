package gpu_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/depinchain/depinchain/provider/gpu"
	stakingtypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// realCard is a GPU as NVML reports it on a real host: the product name,
// total memory in MiB and PCI device id (device<<16 | vendor), with the
// catalogue entry it must map to.
type realCard struct {
	name     string
	mib      uint64
	pci      uint32
	model    string
	classGiB uint64
	// retiresPages: pre-Ampere GPUs retire pages; Ampere and later remap rows
	// and their driver answers NOT_SUPPORTED for page retirement.
	retiresPages bool
}

// realCards are readings of real cards (nvidia-smi --query-gpu=name,memory.total,pci.device_id).
var realCards = []realCard{
	{"NVIDIA H100 80GB HBM3", 81_559, 0x233010de, "H100-SXM5-80GB", 80, false},
	{"NVIDIA H200", 143_771, 0x233510de, "H200-SXM-141GB", 141, false},
	{"NVIDIA H100 PCIe", 81_559, 0x233110de, "H100-PCIE-80GB", 80, false},
	{"NVIDIA H100 NVL", 95_830, 0x232110de, "H100-NVL-94GB", 94, false},
	{"NVIDIA A100-SXM4-80GB", 81_920, 0x20b210de, "A100-SXM4-80GB", 80, false},
	{"NVIDIA A100-PCIE-40GB", 40_536, 0x20f110de, "A100-PCIE-40GB", 40, false},
	{"NVIDIA L40S", 46_068, 0x26b910de, "L40S-48GB", 48, false},
	{"NVIDIA GeForce RTX 4090", 24_564, 0x268410de, "RTX-4090-24GB", 24, false},
	{"Tesla V100-SXM2-32GB", 32_510, 0x1db510de, "V100-SXM2-32GB", 32, true},
}

// fleet is a mock NVML host with the given cards, telemetry wired, and
// faults the test sets: lost GPUs, pending page retirement or row remapping,
// queued XID events.
type fleet struct {
	*server.Server
	mu           sync.Mutex
	lost         map[string]bool // by UUID
	pagesPending map[string]bool
	rowsPending  map[string]bool
	xids         []nvml.EventData
}

func newFleet(t *testing.T, cards ...realCard) *fleet {
	t.Helper()
	var configs []gpus.Config
	for _, c := range cards {
		configs = append(configs, gpus.Config{Name: c.name, MemoryMB: c.mib, PciDeviceId: c.pci, Brand: nvml.BRAND_NVIDIA})
	}
	f := &fleet{Server: server.NewServerWithGPUs("580.95.05", "13.580.95.05", 13000, configs...),
		lost: map[string]bool{}, pagesPending: map[string]bool{}, rowsPending: map[string]bool{}}
	f.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
				f.mu.Lock()
				defer f.mu.Unlock()
				if len(f.xids) == 0 {
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
				e := f.xids[0]
				f.xids = f.xids[1:]
				return e, nvml.SUCCESS
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	for i, d := range f.Devices {
		f.wire(d.(*server.Device), cards[i].retiresPages)
	}
	return f
}

// wire sets what go-nvml's mock leaves nil to what a driver returns.
func (f *fleet) wire(dev *server.Device, retiresPages bool) {
	state := func() (lost, pages, rows bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.lost[dev.UUID], f.pagesPending[dev.UUID], f.rowsPending[dev.UUID]
	}
	lostOr := func(ret nvml.Return) nvml.Return {
		if lost, _, _ := state(); lost {
			return nvml.ERROR_GPU_IS_LOST
		}
		return ret
	}
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, lostOr(nvml.SUCCESS) }
	dev.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 35, lostOr(nvml.SUCCESS) }
	dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 90_000, lostOr(nvml.SUCCESS) }
	dev.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
		return 0, lostOr(nvml.SUCCESS)
	}
	dev.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	dev.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
		if !retiresPages {
			return nvml.FEATURE_DISABLED, lostOr(nvml.ERROR_NOT_SUPPORTED)
		}
		if _, pages, _ := state(); pages {
			return nvml.FEATURE_ENABLED, lostOr(nvml.SUCCESS)
		}
		return nvml.FEATURE_DISABLED, lostOr(nvml.SUCCESS)
	}
	dev.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		if retiresPages {
			return 0, 0, false, false, lostOr(nvml.ERROR_NOT_SUPPORTED)
		}
		_, _, rows := state()
		return 0, 1, rows, false, lostOr(nvml.SUCCESS)
	}
}

func (f *fleet) uuid(i int) string { return f.Devices[i].(*server.Device).UUID }

func open(t *testing.T, lib gpu.Library, opts ...gpu.Option) *gpu.Inventory {
	t.Helper()
	inv, err := gpu.Open(lib, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inv.Close() })
	return inv
}

func refresh(t *testing.T, inv *gpu.Inventory) {
	t.Helper()
	if err := inv.Refresh(); err != nil {
		t.Fatal(err)
	}
}

func TestBuiltinCatalogue(t *testing.T) {
	c := gpu.BuiltinCatalogue()
	if n := len(c.Models()); n < 20 {
		t.Fatalf("%d models in the catalogue, want the common training GPUs (20+)", n)
	}
	for _, want := range []string{"H100-SXM5-80GB", "H100-PCIE-80GB", "H100-NVL-94GB", "H200-SXM-141GB",
		"A100-SXM4-80GB", "A100-PCIE-40GB", "L40S-48GB", "RTX-4090-24GB"} {
		if !slices.ContainsFunc(c.Models(), func(m gpu.Model) bool { return m.Name == want }) {
			t.Errorf("%s missing from the catalogue", want)
		}
	}
}

// Real readings register as catalogue names and nominal classes, and the chain
// matches them to the jobs the README and docs/job-spec.md show.
func TestRealCardsRegisterAndMatchDocumentedJobs(t *testing.T) {
	for _, card := range realCards {
		t.Run(card.model, func(t *testing.T) {
			f := newFleet(t, card, card)
			inv := open(t, f)
			if unknown := inv.Unknown(); len(unknown) != 0 {
				t.Fatalf("%q (%d MiB) not mapped: %s", card.name, card.mib, unknown[0].Unknown)
			}
			got := gpu.ChainInventory(inv.Healthy())
			want := []stakingtypes.GPUInventory{{Model: card.model, VramMib: card.classGiB * 1024, Count: 2}}
			if !slices.Equal(got, want) {
				t.Fatalf("registers %v, want %v", got, want)
			}
			if err := stakingtypes.ValidateGPUs(got, 16); err != nil {
				t.Fatal(err)
			}
			p := stakingtypes.Provider{Gpus: got}
			// A job asking for the model's class by name and memory matches.
			if !p.Satisfies([]string{card.model}, card.classGiB*1024, 2) {
				t.Fatalf("a job for 2 × %s with min_vram_gib %d does not match %v", card.model, card.classGiB, got)
			}
			// The README's job: models [H100-SXM5-80GB], min_vram_gib: 80.
			readme := p.Satisfies([]string{"H100-SXM5-80GB"}, 80*1024, 1)
			if readme != (card.model == "H100-SXM5-80GB") {
				t.Fatalf("README job matches %s: %v", card.model, readme)
			}
			// docs/job-spec.md's: models [H100-SXM5-80GB, H100-NVL-94GB], min_vram_gib: 80.
			docs := p.Satisfies([]string{"H100-SXM5-80GB", "H100-NVL-94GB"}, 80*1024, 1)
			if docs != (card.model == "H100-SXM5-80GB" || card.model == "H100-NVL-94GB") {
				t.Fatalf("docs/job-spec.md job matches %s: %v", card.model, docs)
			}
			// Any model with 80 GiB: every 80 GB card and the larger ones.
			if any80 := p.Satisfies(nil, 80*1024, 1); any80 != (card.classGiB >= 80) {
				t.Fatalf("min_vram_gib 80, any model, matches %s (%d GiB): %v", card.model, card.classGiB, any80)
			}
		})
	}
}

// An unknown GPU is listed with its ids and the entry to add, is not offered,
// and does not disturb the known ones; the operator's catalogue file maps it.
func TestUnknownGPUIsReportedNotOffered(t *testing.T) {
	unknown := realCard{name: "NVIDIA Future X900", mib: 196_608, pci: 0x2fff10de}
	f := newFleet(t, realCards[0], unknown)
	inv := open(t, f)
	gs := inv.GPUs()
	if len(gs) != 2 || !gs[1].Healthy() || gs[1].Offerable() {
		t.Fatalf("GPUs = %+v", gs)
	}
	msg := gs[1].Unknown
	for _, want := range []string{"not in the GPU catalogue", "10de:2fff", `"NVIDIA Future X900"`, "196608 MiB",
		"gpus.catalogue", `memory_gib: 192, pci_ids: ["10de:2fff"]`} {
		if !strings.Contains(msg, want) {
			t.Errorf("report %q lacks %q", msg, want)
		}
	}
	if u := inv.Unknown(); len(u) != 1 || u[0].UUID != f.uuid(1) {
		t.Fatalf("Unknown() = %v", u)
	}
	if got := gpu.ChainInventory(inv.Healthy()); len(got) != 1 || got[0].Model != "H100-SXM5-80GB" || got[0].Count != 1 {
		t.Fatalf("offered %v, want the H100 only", got)
	}
	// Even given all GPUs, ChainInventory never offers an unmapped one.
	if got := gpu.ChainInventory(inv.GPUs()); len(got) != 1 {
		t.Fatalf("ChainInventory(all) = %v", got)
	}

	override := filepath.Join(t.TempDir(), "catalogue.yaml")
	if err := os.WriteFile(override, []byte("models:\n  - {name: X900-192GB, memory_gib: 192, pci_ids: [\"10de:2fff\"], nvml_names: [\"NVIDIA Future X900\"]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := gpu.LoadCatalogue(override, nil)
	if err != nil {
		t.Fatal(err)
	}
	inv = open(t, newFleet(t, realCards[0], unknown), gpu.WithCatalogue(c))
	want := []stakingtypes.GPUInventory{{Model: "H100-SXM5-80GB", VramMib: 81920, Count: 1}, {Model: "X900-192GB", VramMib: 192 * 1024, Count: 1}}
	if got := gpu.ChainInventory(inv.Healthy()); !slices.Equal(got, want) {
		t.Fatalf("with the operator's entry: %v, want %v", got, want)
	}
}

func TestCatalogueOverridesAndAliases(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// An override entry replaces the built-in one sharing its PCI id.
	c, err := gpu.LoadCatalogue(write("rename.yaml", "models:\n  - {name: H100-80G, memory_gib: 80, pci_ids: [\"10de:2330\"]}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := c.Lookup(0x233010de, "NVIDIA H100 80GB HBM3"); !ok || m.Name != "H100-80G" {
		t.Fatalf("Lookup after the override = %v %v", m, ok)
	}
	// gpus.model_names adds NVML names to catalogued models, and names a missing one clearly.
	c, err = gpu.LoadCatalogue("", map[string]string{"NVIDIA H100 80GB HBM3 (custom board)": "H100-SXM5-80GB"})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := c.Lookup(0x0, "NVIDIA H100 80GB HBM3 (custom board)"); !ok || m.Name != "H100-SXM5-80GB" {
		t.Fatalf("alias lookup = %v %v", m, ok)
	}
	if _, err := gpu.LoadCatalogue("", map[string]string{"NVIDIA Z": "Z-1GB"}); err == nil || !strings.Contains(err.Error(), `no model "Z-1GB" in the GPU catalogue`) {
		t.Fatalf("alias to a missing model: %v", err)
	}
	for text, want := range map[string]string{
		"models:\n  - {name: X, memory_gib: 0, pci_ids: [\"10de:0001\"]}\n":  "models[0].memory_gib (X): must be positive",
		"models:\n  - {name: X, memory_gib: 8, pci_ids: [\"10de-0001\"]}\n":  `is not a PCI id like "10de:2330"`,
		"models:\n  - {name: X, memory_gib: 8}\n":                            "needs pci_ids or nvml_names",
		"models:\n  - {name: X, memory_gib: 8, nvml_name: [\"NVIDIA X\"]}\n": "unknown field",
	} {
		if _, err := gpu.LoadCatalogue(write("bad.yaml", text), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("catalogue %q: %v, want %q", text, err, want)
		}
	}
	if _, err := gpu.LoadCatalogue(filepath.Join(dir, "missing.yaml"), nil); err == nil {
		t.Fatal("a missing catalogue file was accepted")
	}
}

// A MIG-sized or mis-catalogued reading is not offered under the full card's class.
func TestMemoryBelowTheClassIsNotOffered(t *testing.T) {
	slice := realCard{name: "NVIDIA H100 80GB HBM3", mib: 40_192, pci: 0x233010de}
	inv := open(t, newFleet(t, slice))
	g := inv.GPUs()[0]
	if g.Offerable() || !strings.Contains(g.Unknown, "reports 40192 MiB, less than 90% of the catalogue's 80 GiB for H100-SXM5-80GB") {
		t.Fatalf("GPU = %+v", g)
	}
	if got := gpu.ChainInventory(inv.Healthy()); len(got) != 0 {
		t.Fatalf("offered %v", got)
	}
}

// Health as drivers report it: ERROR_GPU_IS_LOST, pending page retirement
// (pre-Ampere) or row remapping (Ampere+), a critical XID. None is offered;
// after a reboot (a fresh driver, the sidecar restarted) all are, with no
// manual step.
func TestHealthGatingAndRecoveryAfterReboot(t *testing.T) {
	cards := []realCard{realCards[0], realCards[1], realCards[4], realCards[8], realCards[6]}
	f := newFleet(t, cards...)
	inv := open(t, f)
	if n := len(inv.Healthy()); n != 5 {
		t.Fatalf("%d offered at start, want 5", n)
	}
	f.mu.Lock()
	f.lost[f.uuid(0)] = true         // H100: fell off the bus
	f.rowsPending[f.uuid(2)] = true  // A100: an uncorrectable error, row remap pending
	f.pagesPending[f.uuid(3)] = true // V100: page retirement pending
	f.xids = append(f.xids, nvml.EventData{Device: f.Devices[1], EventType: nvml.EventTypeXidCriticalError, EventData: 79})
	f.mu.Unlock()
	refresh(t, inv)
	want := map[int]string{
		0: "lost: NVML reports ERROR_GPU_IS_LOST",
		1: "critical XID 79",
		2: "row remapping pending: reset the GPU (or reboot) to remap them",
		3: "retired pages pending: reset the GPU (or reboot) to retire them",
	}
	for _, g := range inv.GPUs() {
		if w, bad := want[g.Index]; bad && (g.Offerable() || !slices.Contains(g.Problems, w)) {
			t.Errorf("GPU %d (%s): problems %v, want %q", g.Index, g.Model, g.Problems, w)
		}
	}
	if got := gpu.ChainInventory(inv.Healthy()); !slices.Equal(got, []stakingtypes.GPUInventory{{Model: "L40S-48GB", VramMib: 48 * 1024, Count: 1}}) {
		t.Fatalf("offered %v, want the L40S only", got)
	}
	inv.Close()

	// Reboot: the driver loads afresh (same GPUs, same UUIDs, nothing pending)
	// and the sidecar opens a new inventory. Nothing about the old faults is
	// kept, so every GPU is offered again without the operator doing anything.
	f.mu.Lock()
	f.lost, f.pagesPending, f.rowsPending, f.xids = map[string]bool{}, map[string]bool{}, map[string]bool{}, nil
	f.mu.Unlock()
	inv = open(t, f)
	if n := len(inv.Healthy()); n != 5 {
		t.Fatalf("%d GPUs offered after the reboot, want 5: %+v", n, inv.GPUs())
	}
}

// A GPU that appears while the sidecar runs is inventoried (and subscribed
// to XID events); one that disappears is lost.
func TestHotplugIsNoticed(t *testing.T) {
	f := newFleet(t, realCards[0])
	inv := open(t, f)
	added := server.NewDeviceFromConfig(gpus.Config{Name: "NVIDIA H200", MemoryMB: 143_771, PciDeviceId: 0x233510de}, 1)
	f.wire(added, false)
	subscribed := false
	added.RegisterEventsFunc = func(mask uint64, _ nvml.EventSet) nvml.Return {
		subscribed = mask == nvml.EventTypeXidCriticalError
		return nvml.SUCCESS
	}
	f.Devices = append(f.Devices, added)
	refresh(t, inv)
	if got := gpu.ChainInventory(inv.Healthy()); len(got) != 2 || got[1].Model != "H200-SXM-141GB" || !subscribed {
		t.Fatalf("after a GPU appeared: %v (subscribed %v)", got, subscribed)
	}
	f.Devices = f.Devices[:1]
	refresh(t, inv)
	if got := inv.UnhealthyLeased([]string{added.UUID}); len(got) != 1 || got[0].Reason != "lost: no longer listed by the driver" {
		t.Fatalf("after it disappeared: %v", got)
	}
	if n := len(inv.Healthy()); n != 1 {
		t.Fatalf("%d offered, want 1", n)
	}
}

// A GPU whose name or memory NVML cannot read is unhealthy; the others are
// still inventoried.
func TestUnreadableGPUNeverFailsTheInventory(t *testing.T) {
	f := newFleet(t, realCards[0], realCards[1])
	f.Devices[1].(*server.Device).GetNameFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
	inv := open(t, f)
	if got := gpu.ChainInventory(inv.Healthy()); len(got) != 1 || got[0].Model != "H100-SXM5-80GB" {
		t.Fatalf("offered %v", got)
	}
	if g := inv.GPUs()[1]; g.Healthy() || !slices.Contains(g.Problems, "name: ERROR_UNKNOWN") {
		t.Fatalf("GPU 1 = %+v", g)
	}
}

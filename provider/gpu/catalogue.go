package gpu

import (
	_ "embed"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

//go:embed catalogue.yaml
var builtinCatalogue []byte

// minMemoryFraction is how much of its catalogue class a GPU must report: a
// real card reports 93–100% (an L40S 46,068 MiB of 48 GiB, an H100 81,559 of
// 80 GiB); less means a MIG slice or a wrong entry, and the GPU is not offered.
const minMemoryFraction = 0.90

// Model is one catalogue entry: a GPU model as job specs and the chain name it.
type Model struct {
	// Name is the canonical model name providers register, e.g. "H100-SXM5-80GB".
	Name string `json:"name"`
	// MemoryGiB is the nominal memory class, registered as vram_mib = MemoryGiB × 1024.
	MemoryGiB uint64 `json:"memory_gib"`
	// PCIIDs are "vendor:device" ids in lowercase hex as lspci prints them, e.g. "10de:2330".
	PCIIDs []string `json:"pci_ids"`
	// NVMLNames are NVML's product names of the model, e.g. "NVIDIA H100 80GB HBM3".
	NVMLNames []string `json:"nvml_names"`
}

type catalogueFile struct {
	Models []Model `json:"models"`
}

// Catalogue maps PCI ids and NVML names to models.
type Catalogue struct {
	models []Model
	byPCI  map[uint32]int // NVML's PciDeviceId: device<<16 | vendor
	byName map[string]int
}

var (
	pciIDPattern     = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{4}$`)
	modelNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// BuiltinCatalogue is the catalogue shipped in provider/gpu/catalogue.yaml.
func BuiltinCatalogue() *Catalogue {
	c, err := ParseCatalogue(builtinCatalogue)
	if err != nil {
		panic(fmt.Sprintf("gpu: the built-in catalogue.yaml: %v", err))
	}
	return c
}

// LoadCatalogue is the built-in catalogue with the operator's file (same format,
// empty path for none) laid over it: an override entry replaces the built-in
// entries it shares a name, PCI id or NVML name with. aliases (NVML name →
// model name, config's gpus.model_names) add NVML names to catalogued models.
func LoadCatalogue(path string, aliases map[string]string) (*Catalogue, error) {
	c := BuiltinCatalogue()
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("gpu catalogue: %w", err)
		}
		override, err := ParseCatalogue(data)
		if err != nil {
			return nil, fmt.Errorf("gpu catalogue %s: %w", path, err)
		}
		c = c.overlay(override.models)
	}
	for nvmlName, model := range aliases {
		i := c.index(model)
		if i < 0 {
			return nil, fmt.Errorf("gpus.model_names: %q = %q: no model %q in the GPU catalogue; add it to the file gpus.catalogue names", nvmlName, model, model)
		}
		c.models[i].NVMLNames = append(c.models[i].NVMLNames, nvmlName)
		c.byName[nvmlName] = i
	}
	return c, nil
}

// ParseCatalogue reads and checks a catalogue file.
func ParseCatalogue(data []byte) (*Catalogue, error) {
	var f catalogueFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, err
	}
	c := &Catalogue{}
	for i, m := range f.Models {
		field := fmt.Sprintf("models[%d]", i)
		if !modelNamePattern.MatchString(m.Name) {
			return nil, fmt.Errorf("%s.name: %q is not a model name like H100-SXM5-80GB", field, m.Name)
		}
		if m.MemoryGiB == 0 {
			return nil, fmt.Errorf("%s.memory_gib (%s): must be positive", field, m.Name)
		}
		if len(m.PCIIDs) == 0 && len(m.NVMLNames) == 0 {
			return nil, fmt.Errorf("%s (%s): needs pci_ids or nvml_names", field, m.Name)
		}
		for _, id := range m.PCIIDs {
			if _, err := parsePCIID(id); err != nil {
				return nil, fmt.Errorf("%s.pci_ids (%s): %w", field, m.Name, err)
			}
		}
	}
	return c.overlay(f.Models), nil
}

// overlay returns c with models added; each replaces the entries it shares a
// name, PCI id or NVML name with. Duplicates within models: the later wins.
func (c *Catalogue) overlay(models []Model) *Catalogue {
	out := &Catalogue{}
	clash := func(old, m Model) bool {
		if old.Name == m.Name {
			return true
		}
		for _, id := range m.PCIIDs {
			if containsFold(old.PCIIDs, id) {
				return true
			}
		}
		for _, n := range m.NVMLNames {
			if containsFold(old.NVMLNames, n) {
				return true
			}
		}
		return false
	}
	all := append(append([]Model(nil), c.models...), models...)
	for i, m := range all {
		replaced := false
		for _, later := range all[i+1:] {
			if clash(m, later) {
				replaced = true
				break
			}
		}
		if !replaced {
			out.models = append(out.models, m)
		}
	}
	out.reindex()
	return out
}

func (c *Catalogue) reindex() {
	c.byPCI, c.byName = map[uint32]int{}, map[string]int{}
	for i, m := range c.models {
		for _, id := range m.PCIIDs {
			v, _ := parsePCIID(id)
			c.byPCI[v] = i
		}
		for _, n := range m.NVMLNames {
			c.byName[n] = i
		}
	}
}

func (c *Catalogue) index(name string) int {
	for i, m := range c.models {
		if m.Name == name {
			return i
		}
	}
	return -1
}

// Models lists the catalogue's models in file order.
func (c *Catalogue) Models() []Model { return append([]Model(nil), c.models...) }

// Lookup finds the model of a GPU by NVML's PCI device id (device<<16 |
// vendor), then by its NVML product name.
func (c *Catalogue) Lookup(pciDeviceID uint32, nvmlName string) (Model, bool) {
	if i, ok := c.byPCI[pciDeviceID]; ok {
		return c.models[i], true
	}
	if i, ok := c.byName[strings.TrimSpace(nvmlName)]; ok {
		return c.models[i], true
	}
	return Model{}, false
}

// classify fills g's Model and MemoryClassGiB from the catalogue, or says in
// g.Unknown why the GPU is not offered and what to add to the catalogue.
func (c *Catalogue) classify(g *GPU) {
	m, ok := c.Lookup(g.PCIDeviceID, g.Name)
	if !ok {
		g.Unknown = fmt.Sprintf("not in the GPU catalogue (PCI id %s, subsystem %08x, NVML name %q, %d MiB); not offered. "+
			"To offer it, add to the file gpus.catalogue names: "+
			`{name: <MODEL-NAME>, memory_gib: %d, pci_ids: ["%s"], nvml_names: [%q]}`,
			FormatPCIID(g.PCIDeviceID), g.PCISubsystemID, g.Name, g.MemoryMiB,
			nominalGiB(g.MemoryMiB), FormatPCIID(g.PCIDeviceID), g.Name)
		return
	}
	if float64(g.MemoryMiB) < minMemoryFraction*float64(m.MemoryGiB*1024) {
		g.Unknown = fmt.Sprintf("reports %d MiB, less than %.0f%% of the catalogue's %d GiB for %s (PCI id %s, NVML name %q): a MIG slice or a wrong catalogue entry; not offered",
			g.MemoryMiB, 100*minMemoryFraction, m.MemoryGiB, m.Name, FormatPCIID(g.PCIDeviceID), g.Name)
		return
	}
	g.Model, g.MemoryClassGiB = m.Name, m.MemoryGiB
}

// nominalGiB rounds a reading up to whole GiB, as a suggestion for a new entry.
func nominalGiB(mib uint64) uint64 { return (mib + 1023) / 1024 }

// parsePCIID turns "10de:2330" into NVML's PciDeviceId 0x233010de.
func parsePCIID(s string) (uint32, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if !pciIDPattern.MatchString(s) {
		return 0, fmt.Errorf("%q is not a PCI id like \"10de:2330\" (vendor:device, hex)", s)
	}
	vendor, _ := strconv.ParseUint(s[:4], 16, 16)
	device, _ := strconv.ParseUint(s[5:], 16, 16)
	return uint32(device)<<16 | uint32(vendor), nil
}

// FormatPCIID writes NVML's PciDeviceId as "vendor:device", e.g. "10de:2330".
func FormatPCIID(id uint32) string { return fmt.Sprintf("%04x:%04x", id&0xffff, id>>16) }

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

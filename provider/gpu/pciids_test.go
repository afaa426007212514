package gpu_test

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/depinchain/depinchain/provider/gpu"
)

// pciIDsExcerpt is the NVIDIA part of the PCI ID Repository the catalogue is
// checked against (its header says which version).
const pciIDsExcerpt = "testdata/pci.ids.nvidia"

// readPCIIDs parses a pci.ids file into "vendor:device" → the device's name,
// e.g. "10de:2330" → "GH100 [H100 SXM5 80GB]". Subsystem lines (two tabs)
// are skipped.
func readPCIIDs(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	devices := map[string]string{}
	vendor := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "\t\t"):
		case strings.HasPrefix(line, "\t"):
			id, name, ok := strings.Cut(line[1:], "  ")
			if !ok || vendor == "" {
				t.Fatalf("%s: malformed device line %q", path, line)
			}
			devices[vendor+":"+id] = name
		default:
			id, _, ok := strings.Cut(line, "  ")
			if !ok {
				t.Fatalf("%s: malformed vendor line %q", path, line)
			}
			vendor = id
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return devices
}

// marketingName is the part of a pci.ids device name in brackets, the name the
// card is sold under: "GH100 [H100 SXM5 80GB]" → "H100 SXM5 80GB".
func marketingName(pciName string) string {
	if i, j := strings.IndexByte(pciName, '['), strings.LastIndexByte(pciName, ']'); i >= 0 && j > i {
		return pciName[i+1 : j]
	}
	return pciName
}

var memoryWord = regexp.MustCompile(`^(\d+)GB$`)

// Every PCI id in the shipped catalogue is a real NVIDIA device id, and the
// device pci.ids names there is the catalogue's model. An id typed from memory
// (a neighbour's, a transposed digit) fails here.
func TestCatalogueMatchesPCIIDs(t *testing.T) {
	models := gpu.BuiltinCatalogue().Models()
	if len(models) < 20 {
		t.Fatalf("the built-in catalogue has %d models", len(models))
	}
	for _, problem := range pciIDProblems(models, readPCIIDs(t, pciIDsExcerpt)) {
		t.Error(problem)
	}
}

// The check fails on the mistakes it exists for: an H100 entry with the
// H200's id, an id pci.ids does not list, and a memory class that is not the
// card's.
func TestPCIIDCheckCatchesWrongEntries(t *testing.T) {
	devices := readPCIIDs(t, pciIDsExcerpt)
	for _, tc := range []struct {
		model gpu.Model
		want  string
	}{
		{gpu.Model{Name: "H100-SXM5-80GB", MemoryGiB: 80, PCIIDs: []string{"10de:2335"}}, `is "GH100 [H200 SXM 141GB]" in pci.ids, not a H100`},
		{gpu.Model{Name: "H200-SXM-141GB", MemoryGiB: 141, PCIIDs: []string{"10de:2336"}}, "PCI id 10de:2336 is not in"},
		{gpu.Model{Name: "A100-SXM4-80GB", MemoryGiB: 80, PCIIDs: []string{"10de:20b0"}}, `memory class 80 GiB, but PCI id 10de:20b0 is "GA100 [A100 SXM4 40GB]"`},
		{gpu.Model{Name: "A10-24GB", MemoryGiB: 24, PCIIDs: []string{"10de:20b2"}}, "not a A10"},
	} {
		problems := pciIDProblems([]gpu.Model{tc.model}, devices)
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
			t.Errorf("%+v: problems %q, want one saying %q", tc.model, problems, tc.want)
		}
	}
	good := gpu.Model{Name: "H100-NVL-94GB", MemoryGiB: 94, PCIIDs: []string{"10de:2321"}}
	if problems := pciIDProblems([]gpu.Model{good}, devices); len(problems) != 0 {
		t.Errorf("the H100 NVL (pci.ids: H100L 94GB): %q", problems)
	}
}

// pciIDProblems checks models against pci.ids devices: each PCI id is listed,
// the model number (the first part of the canonical name with a digit, e.g.
// H100, 4090, A6000) is a word of the device's marketing name (NVIDIA's NVL
// boards are listed as "H100L"), and where that name states one memory size
// it is the model's memory class.
func pciIDProblems(models []gpu.Model, devices map[string]string) []string {
	var problems []string
	for _, m := range models {
		number := ""
		for _, part := range strings.Split(m.Name, "-") {
			if strings.IndexFunc(part, unicode.IsDigit) >= 0 {
				number = part
				break
			}
		}
		if number == "" {
			problems = append(problems, m.Name+": no model number in the canonical name")
			continue
		}
		for _, id := range m.PCIIDs {
			name, ok := devices[strings.ToLower(id)]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: PCI id %s is not in %s (not an NVIDIA device id pci.ids knows)", m.Name, id, pciIDsExcerpt))
				continue
			}
			var named bool
			var sizes []uint64
			for _, w := range strings.FieldsFunc(marketingName(name), func(r rune) bool { return r == ' ' || r == '/' }) {
				if strings.EqualFold(w, number) || strings.EqualFold(w, number+"L") {
					named = true
				}
				if mm := memoryWord.FindStringSubmatch(w); mm != nil {
					gib, _ := strconv.ParseUint(mm[1], 10, 64)
					sizes = append(sizes, gib)
				}
			}
			if !named {
				problems = append(problems, fmt.Sprintf("%s: PCI id %s is %q in pci.ids, not a %s", m.Name, id, name, number))
			}
			if len(sizes) == 1 && sizes[0] != m.MemoryGiB {
				problems = append(problems, fmt.Sprintf("%s: memory class %d GiB, but PCI id %s is %q", m.Name, m.MemoryGiB, id, name))
			}
		}
	}
	return problems
}

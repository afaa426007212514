package gpu

import (
	"cmp"
	"slices"
	"strings"

	stakingtypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// ModelName turns NVML's product name into a display name for a GPU the
// catalogue does not map (metrics and status labels only; such a GPU is never
// registered or offered): the "NVIDIA " prefix dropped and spaces made
// dashes, so "NVIDIA H100 80GB HBM3" becomes "H100-80GB-HBM3".
func ModelName(nvmlName string) string {
	name := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(nvmlName), "NVIDIA "))
	return strings.Join(strings.Fields(name), "-")
}

// ChainInventory groups gpus into the provider record's GPU classes: one
// {model, vram_mib, count} per catalogued model, sorted by model, where
// vram_mib is the model's nominal memory class (memory_gib × 1024: 81,920 for
// an H100 whose NVML reading is 81,559), so a job's min_vram_gib matches every
// card of the class. GPUs the catalogue does not map are left out: they are
// not offered. Pass Healthy() to offer only usable GPUs.
func ChainInventory(gpus []GPU) []stakingtypes.GPUInventory {
	var classes []stakingtypes.GPUInventory
	for _, g := range gpus {
		if g.Model == "" || g.Unknown != "" {
			continue
		}
		vram := g.MemoryClassGiB * 1024
		i := slices.IndexFunc(classes, func(c stakingtypes.GPUInventory) bool {
			return c.Model == g.Model && c.VramMib == vram
		})
		if i < 0 {
			classes = append(classes, stakingtypes.GPUInventory{Model: g.Model, VramMib: vram})
			i = len(classes) - 1
		}
		classes[i].Count++
	}
	slices.SortFunc(classes, func(a, b stakingtypes.GPUInventory) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.VramMib, b.VramMib))
	})
	return classes
}

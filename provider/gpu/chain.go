package gpu

import (
	"cmp"
	"slices"
	"strings"

	stakingtypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// ModelName turns NVML's product name into the model name a provider
// registers when its configuration names none: the "NVIDIA " prefix dropped
// and spaces made dashes, so "NVIDIA H100 80GB HBM3" becomes
// "H100-80GB-HBM3".
func ModelName(nvmlName string) string {
	name := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(nvmlName), "NVIDIA "))
	return strings.Join(strings.Fields(name), "-")
}

// ChainInventory groups gpus into the provider record's GPU classes: one
// {model, vram_mib, count} per distinct model and memory size, sorted by
// model then memory. modelNames maps NVML product names to the model names
// job specs use (e.g. "NVIDIA H100 80GB HBM3" to "H100-SXM5-80GB"); names it
// does not list go through ModelName. Pass Healthy() to offer only usable
// GPUs.
func ChainInventory(gpus []GPU, modelNames map[string]string) []stakingtypes.GPUInventory {
	var classes []stakingtypes.GPUInventory
	for _, g := range gpus {
		model, ok := modelNames[g.Name]
		if !ok {
			model = ModelName(g.Name)
		}
		i := slices.IndexFunc(classes, func(c stakingtypes.GPUInventory) bool {
			return c.Model == model && c.VramMib == g.MemoryMiB
		})
		if i < 0 {
			classes = append(classes, stakingtypes.GPUInventory{Model: model, VramMib: g.MemoryMiB})
			i = len(classes) - 1
		}
		classes[i].Count++
	}
	slices.SortFunc(classes, func(a, b stakingtypes.GPUInventory) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.VramMib, b.VramMib))
	})
	return classes
}

package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/depinchain/depinchain/provider/gpu"
)

// dcgmLabels are the labels dcgm-exporter puts on every GPU metric (less
// pci_bus_id, which NVML's GPU record here does not carry): gpu is NVML's
// index, device the /dev/nvidiaN name, modelName NVML's product name.
var dcgmLabels = []string{"gpu", "UUID", "device", "modelName", "Hostname"}

// ourGPULabels add the model name the chain knows the GPU by.
var ourGPULabels = append(append([]string{}, dcgmLabels...), "model")

// gpuSample is one GPU as of the last ObserveGPUs.
type gpuSample struct {
	gpu.GPU
	model string
	lease uint64
}

// gpuCollector exports the last ObserveGPUs snapshot at each scrape, so a
// scrape sees either the previous set of GPUs or the new one, never a
// half-reset vector, and a GPU missing from the snapshot is simply gone.
type gpuCollector struct {
	hostname string

	util, memUtil, temp, power, fbTotal, eccDBE, xid *prometheus.Desc
	healthy, leased                                  *prometheus.Desc

	mu   sync.Mutex
	gpus []gpuSample
}

func newGPUCollector(hostname string) *gpuCollector {
	dcgm := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, dcgmLabels, nil)
	}
	ours := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, ourGPULabels, nil)
	}
	return &gpuCollector{
		hostname: hostname,
		// Names and help texts as dcgm-exporter's default counters.
		util:    dcgm("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
		memUtil: dcgm("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %)."),
		temp:    dcgm("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."),
		power:   dcgm("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
		fbTotal: dcgm("DCGM_FI_DEV_FB_TOTAL", "Total framebuffer memory (in MiB)."),
		eccDBE:  dcgm("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors."),
		xid:     dcgm("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered."),
		healthy: ours("depinprovider_gpu_healthy", "1 while the GPU may be offered and used, 0 once it is unhealthy."),
		leased:  ours("depinprovider_gpu_leased", "ID of the lease using the GPU, 0 when it is free."),
	}
}

func (c *gpuCollector) set(gpus []gpuSample) {
	c.mu.Lock()
	c.gpus = gpus
	c.mu.Unlock()
}

func (c *gpuCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.util, c.memUtil, c.temp, c.power, c.fbTotal, c.eccDBE, c.xid, c.healthy, c.leased} {
		ch <- d
	}
}

func (c *gpuCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	gpus := c.gpus
	c.mu.Unlock()
	for _, g := range gpus {
		idx := strconv.Itoa(g.Index)
		labels := []string{idx, g.UUID, "nvidia" + idx, g.Name, c.hostname}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
		}
		gauge(c.util, float64(g.UtilizationPercent))
		gauge(c.memUtil, float64(g.MemoryUtilizationPercent))
		gauge(c.temp, float64(g.TemperatureCelsius))
		gauge(c.power, float64(g.PowerMilliwatts)/1000)
		gauge(c.fbTotal, float64(g.MemoryMiB))
		ch <- prometheus.MustNewConstMetric(c.eccDBE, prometheus.CounterValue, float64(g.ECCDoubleBitErrors), labels...)
		var lastXID uint64
		if n := len(g.XIDs); n > 0 {
			lastXID = g.XIDs[n-1]
		}
		gauge(c.xid, float64(lastXID))

		ours := append(labels[:len(labels):len(labels)], g.model)
		ch <- prometheus.MustNewConstMetric(c.healthy, prometheus.GaugeValue, boolFloat(g.Healthy()), ours...)
		ch <- prometheus.MustNewConstMetric(c.leased, prometheus.GaugeValue, float64(g.lease), ours...)
	}
}

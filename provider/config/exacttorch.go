package config

import (
	"slices"
	"strings"
)

// contractEnv are the variables the sidecar sets for every trainer from the
// lease (provider/trainer's Env): exact_torch_env must not set them.
var contractEnv = []string{
	"DEPIN_JOB_ID", "DEPIN_LEASE_ID", "DEPIN_OUTPUT_DIR", "DEPIN_RESUME_FROM", "DEPIN_DATA_DIR",
	"DEPIN_START_STEP", "DEPIN_TOTAL_STEPS", "DEPIN_CHECKPOINT_INTERVAL", "DEPIN_JOB_SEED",
	"DEPIN_EXACT_CONFIG", "CUDA_VISIBLE_DEVICES",
}

// UsesExactTorch reports whether adjudicable jobs run on the PyTorch trainer
// rather than the in-process Go one.
func (r Runtimes) UsesExactTorch() bool { return len(r.ExactTorch) > 0 }

func (r Runtimes) validateExactTorch(p *problems) {
	if len(r.ExactTorchEnv) > 0 && !r.UsesExactTorch() {
		p.bad("runtimes.exact_torch_env", "is set but runtimes.exact_torch is empty: the Go trainer takes no environment")
	}
	if !r.UsesExactTorch() {
		return
	}
	if strings.TrimSpace(r.ExactTorch[0]) == "" {
		p.bad("runtimes.exact_torch", "the first element must be the program to run, e.g. \"/usr/bin/python3\"")
	}
	if !r.Reference {
		p.bad("runtimes.exact_torch", "is set but runtimes.reference = false: set it to true to take the reference and transformer jobs exact_torch trains")
	}
	for _, kv := range r.ExactTorchEnv {
		k, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || k == "":
			p.bad("runtimes.exact_torch_env", "%q is not KEY=VALUE", kv)
		case slices.Contains(contractEnv, k):
			p.bad("runtimes.exact_torch_env", "%q: %s is set from the lease by the trainer contract", kv, k)
		}
	}
}

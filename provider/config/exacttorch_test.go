package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestExactTorchRoundTripsAndLoads(t *testing.T) {
	c := Default()
	c.Runtimes.ExactTorch = []string{"/usr/bin/python3", "/opt/depin chain/train.py"}
	c.Runtimes.ExactTorchEnv = []string{"DEPIN_TORCH_PROCS=2", "OMP_NUM_THREADS=8"}
	text, err := c.Render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Load(writeFile(t, string(text)))
	if err != nil {
		t.Fatalf("Load: %v\n%s", err, text)
	}
	if !reflect.DeepEqual(got.Runtimes, c.Runtimes) || !got.Runtimes.UsesExactTorch() {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got.Runtimes, c.Runtimes)
	}

	// The default is the Go trainer, and the commented template shows the
	// field empty, with an example.
	if Default().Runtimes.UsesExactTorch() {
		t.Fatal("the default must be the Go trainer")
	}
	def, err := Default().Render()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nexact_torch = []\n", "\nexact_torch_env = []\n", `#   exact_torch = ["/usr/bin/python3", "/opt/depinchain/pkg/exact/torch/train.py"]`} {
		if !strings.Contains(string(def), want) {
			t.Errorf("the template lacks %q", want)
		}
	}

	// Written by hand after [[runtimes.trainers]] tables it would belong to
	// them; in [runtimes] it loads.
	got, err = Load(writeFile(t, "[runtimes]\nreference = true\nexact_torch = [\"python3\", \"train.py\"]\n"))
	if err != nil || !reflect.DeepEqual(got.Runtimes.ExactTorch, []string{"python3", "train.py"}) {
		t.Fatalf("hand-written exact_torch: %+v, %v", got, err)
	}
}

func TestExactTorchValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*Runtimes)
		want   string // "" = valid
	}{
		"go trainer": {func(r *Runtimes) {}, ""},
		"torch":      {func(r *Runtimes) { r.ExactTorch = []string{"/usr/bin/python3", "train.py"} }, ""},
		"torch with env": {func(r *Runtimes) {
			r.ExactTorch, r.ExactTorchEnv = []string{"train.py"}, []string{"DEPIN_TORCH_PROCS=2", "EMPTY="}
		}, ""},
		"empty program": {func(r *Runtimes) { r.ExactTorch = []string{" ", "train.py"} }, "runtimes.exact_torch: the first element must be the program to run"},
		"no reference":  {func(r *Runtimes) { r.Reference, r.Process, r.ExactTorch = false, true, []string{"train.py"} }, "runtimes.exact_torch: is set but runtimes.reference = false"},
		"env without":   {func(r *Runtimes) { r.ExactTorchEnv = []string{"DEPIN_TORCH_PROCS=2"} }, "runtimes.exact_torch_env: is set but runtimes.exact_torch is empty"},
		"env not kv":    {func(r *Runtimes) { r.ExactTorch, r.ExactTorchEnv = []string{"train.py"}, []string{"DEPIN_TORCH_PROCS"} }, `runtimes.exact_torch_env: "DEPIN_TORCH_PROCS" is not KEY=VALUE`},
		"env empty key": {func(r *Runtimes) { r.ExactTorch, r.ExactTorchEnv = []string{"train.py"}, []string{"=1"} }, "runtimes.exact_torch_env: \"=1\" is not KEY=VALUE"},
		"env sets config": {func(r *Runtimes) {
			r.ExactTorch, r.ExactTorchEnv = []string{"train.py"}, []string{"DEPIN_EXACT_CONFIG={}"}
		}, "runtimes.exact_torch_env: \"DEPIN_EXACT_CONFIG={}\": DEPIN_EXACT_CONFIG is set from the lease"},
		"env sets gpus": {func(r *Runtimes) {
			r.ExactTorch, r.ExactTorchEnv = []string{"train.py"}, []string{"CUDA_VISIBLE_DEVICES=0"}
		}, "runtimes.exact_torch_env: \"CUDA_VISIBLE_DEVICES=0\": CUDA_VISIBLE_DEVICES is set from the lease"},
	} {
		t.Run(name, func(t *testing.T) {
			c := Default()
			tc.mutate(&c.Runtimes)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid config refused: %v", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), strings.SplitN(tc.want, ":", 2)[0]+": ") || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

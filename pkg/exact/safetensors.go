package exact

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// ErrSafetensors is wrapped by errors about safetensors files.
var ErrSafetensors = errors.New("exact: invalid safetensors")

// Files written by Export.
const (
	SafetensorsFileName = "model.safetensors"
	HFConfigFileName    = "config.json"
)

// FloatTensor is a named float tensor.
type FloatTensor struct {
	Shape []int
	Data  []float64
}

type stEntry struct {
	DType   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// WriteSafetensors writes tensors (as F32, keys in sorted order) and
// string metadata in the safetensors format: u64le header length, the JSON
// header (padded with spaces to a multiple of 8), then the data.
func WriteSafetensors(path string, tensors map[string]FloatTensor, meta map[string]string) error {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	header := map[string]any{}
	if len(meta) > 0 {
		header["__metadata__"] = meta
	}
	var off int64
	for _, n := range names {
		t := tensors[n]
		size := int64(len(t.Data)) * 4
		header[n] = stEntry{DType: "F32", Shape: t.Shape, Offsets: [2]int64{off, off + size}}
		off += size
	}
	hj, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(hj)%8 != 0 {
		hj = append(hj, ' ')
	}
	buf := make([]byte, 0, 8+len(hj)+int(off))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(hj)))
	buf = append(buf, hj...)
	for _, n := range names {
		for _, v := range tensors[n].Data {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(float32(v)))
		}
	}
	return writeSynced(path, buf)
}

// ReadSafetensors parses a safetensors file with F32, F64, F16 or BF16
// tensors (converted exactly to float64) and returns them with the
// metadata.
func ReadSafetensors(b []byte) (map[string]FloatTensor, map[string]string, error) {
	fail := func(format string, args ...any) (map[string]FloatTensor, map[string]string, error) {
		return nil, nil, fmt.Errorf("%w: %s", ErrSafetensors, fmt.Sprintf(format, args...))
	}
	if len(b) < 8 {
		return fail("%d bytes", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(len(b)-8) || n > 100<<20 {
		return fail("header length %d exceeds the file", n)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &raw); err != nil {
		return fail("header: %v", err)
	}
	data := b[8+n:]
	out := map[string]FloatTensor{}
	var meta map[string]string
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &meta); err != nil {
				return fail("metadata: %v", err)
			}
			continue
		}
		var e stEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return fail("%s: %v", name, err)
		}
		size := map[string]int64{"F32": 4, "F64": 8, "F16": 2, "BF16": 2}[e.DType]
		if size == 0 {
			return fail("%s: dtype %q not supported (F32, F64, F16, BF16)", name, e.DType)
		}
		elems := int64(1)
		for _, d := range e.Shape {
			if d < 0 || d > 1<<31 {
				return fail("%s: bad shape %v", name, e.Shape)
			}
			elems *= int64(d)
			if elems > int64(len(data)) {
				return fail("%s: shape %v exceeds the file", name, e.Shape)
			}
		}
		lo, hi := e.Offsets[0], e.Offsets[1]
		if lo < 0 || hi < lo || hi > int64(len(data)) || hi-lo != elems*size {
			return fail("%s: data offsets [%d, %d) do not hold %d %s values", name, lo, hi, elems, e.DType)
		}
		t := FloatTensor{Shape: e.Shape, Data: make([]float64, elems)}
		src := data[lo:hi]
		for i := range t.Data {
			switch e.DType {
			case "F32":
				t.Data[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:])))
			case "F64":
				t.Data[i] = math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:]))
			case "BF16":
				t.Data[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16))
			case "F16":
				t.Data[i] = half(binary.LittleEndian.Uint16(src[2*i:]))
			}
		}
		out[name] = t
	}
	return out, meta, nil
}

// half converts an IEEE binary16 to float64 (exactly).
func half(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, frac := int(h>>10&0x1f), float64(h&0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 31:
		if frac == 0 {
			return sign * math.Inf(1)
		}
		return math.NaN()
	}
	return sign * math.Ldexp(1024+frac, exp-25)
}

// Dequantize returns parameter p's weights as float64 (raw·2^-28, exact).
func (s *State) Dequantize(p string) FloatTensor {
	t := s.Tensor(p + ".w")
	f := FloatTensor{Shape: append([]int(nil), t.Spec.Shape...), Data: make([]float64, len(t.Data))}
	for i, v := range t.Data {
		f.Data[i] = math.Ldexp(float64(v), -FracW)
	}
	return f
}

// HFConfig is the Hugging Face-style config.json Export writes.
func HFConfig(s *State) map[string]any {
	m := s.Config.Model
	return map[string]any{
		"architectures":        []string{"DepinExactGPT"},
		"model_type":           "depin_exact_gpt",
		"n_layer":              m.Layers,
		"n_embd":               m.DModel,
		"n_head":               m.Heads,
		"n_inner":              m.DFF,
		"n_positions":          m.Context,
		"vocab_size":           m.Vocab,
		"activation_function":  "relu",
		"normalization":        "rmsnorm_without_gain",
		"rms_norm_eps":         s.Config.Train.NormEps,
		"bias":                 false,
		"tie_word_embeddings":  false,
		"torch_dtype":          "float32",
		"tokenizer":            "bytes",
		"depinchain_step":      s.Step,
		"depinchain_loss":      LossNats(s.Loss),
		"depinchain_root":      s.Root().Hex(),
		"depinchain_workload":  s.Config,
		"depinchain_weight_of": "weight = raw int32 · 2^-28; linear weights are [out, in] (y = x·Wᵀ)",
	}
}

// Export writes dir/model.safetensors (every weight matrix dequantized to
// float32, named as in Params) and dir/config.json.
func Export(s *State, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ts := map[string]FloatTensor{}
	for _, p := range Params(s.Config) {
		ts[p.Name] = s.Dequantize(p.Name)
	}
	meta := map[string]string{"format": "pt", "depinchain_step": strconv.FormatUint(s.Step, 10), "depinchain_root": s.Root().Hex()}
	if err := WriteSafetensors(filepath.Join(dir, SafetensorsFileName), ts, meta); err != nil {
		return err
	}
	cj, err := json.MarshalIndent(HFConfig(s), "", "  ")
	if err != nil {
		return err
	}
	return writeSynced(filepath.Join(dir, HFConfigFileName), append(cj, '\n'))
}

// QuantizeWeight is the import rule: raw = clamp32(floor(x·2^28 + 1/2)),
// computed in float64 (exact for |x| < 2^24; beyond, the value saturates
// anyway). NaN and infinities are refused by ImportWeights.
func QuantizeWeight(x float64) int64 {
	v := math.Floor(math.Ldexp(x, FracW) + 0.5)
	if v > Max32 {
		return Max32
	}
	if v < -Max32 {
		return -Max32
	}
	return int64(v)
}

// ImportWeights returns the step-0 state of cfg whose weights are the
// given float tensors (one per parameter, by Params name and shape, no
// others) quantized by QuantizeWeight; the Adam moments are zero.
func ImportWeights(cfg Config, weights map[string]FloatTensor) (*State, error) {
	s, err := Init(cfg, nil)
	if err != nil {
		return nil, err
	}
	ps := Params(s.Config)
	if len(weights) != len(ps) {
		return nil, fmt.Errorf("%w: %d tensors, the config has %d parameters", ErrSafetensors, len(weights), len(ps))
	}
	for _, p := range ps {
		w, ok := weights[p.Name]
		if !ok {
			return nil, fmt.Errorf("%w: no tensor %q", ErrSafetensors, p.Name)
		}
		if len(w.Shape) != 2 || w.Shape[0] != p.Rows || w.Shape[1] != p.Cols {
			return nil, fmt.Errorf("%w: %s has shape %v, want [%d %d]", ErrSafetensors, p.Name, w.Shape, p.Rows, p.Cols)
		}
		dst := s.Tensor(p.Name + ".w").Data
		for i, x := range w.Data {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("%w: %s element %d is %v", ErrSafetensors, p.Name, i, x)
			}
			dst[i] = QuantizeWeight(x)
		}
	}
	return s, nil
}

// ImportSafetensors reads a safetensors file and imports it (ImportWeights).
func ImportSafetensors(cfg Config, path string) (*State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ws, _, err := ReadSafetensors(b)
	if err != nil {
		return nil, err
	}
	return ImportWeights(cfg, ws)
}

package exact

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
)

// genDomain separates sampling from other SHA-256 uses.
const genDomain = "depinchain/exact/sample/v1"

// GenerateOptions control Generate.
type GenerateOptions struct {
	// Seed keys the sampler; equal seeds give equal text.
	Seed []byte
	// Temperature 0 takes the most likely token (lowest byte on ties);
	// otherwise logits are scaled by 1/Temperature (Q24, in [1/16, 16]).
	Temperature float64
	Workers     int
}

// Forward runs the exact forward pass of s's weights over windows (each
// seqLen+1 bytes, seqLen ≤ context: tokens and, shifted by one, targets)
// and returns the logits ([B·seqLen, vocab], Q16) and the per-token losses
// (Q30).
func Forward(s *State, windows [][]byte, workers int) (logits, lossTok *Tensor, err error) {
	if len(windows) == 0 {
		return nil, nil, fmt.Errorf("%w: no windows", ErrInvalidData)
	}
	seq := len(windows[0]) - 1
	if seq < 1 || seq > s.Config.Model.Context {
		return nil, nil, fmt.Errorf("%w: windows of %d bytes; need 2..context+1", ErrInvalidData, seq+1)
	}
	g := ForwardGraph(s.Config, len(windows), seq)
	in := map[int]*Tensor{}
	data := make([]int64, 0, len(windows)*(seq+1))
	for _, w := range windows {
		if len(w) != seq+1 {
			return nil, nil, fmt.Errorf("%w: windows of different lengths", ErrInvalidData)
		}
		for _, c := range w {
			data = append(data, int64(c))
		}
	}
	in[g.ID("window")] = &Tensor{Data: data}
	for _, p := range Params(s.Config) {
		in[g.ID(p.Name+".w")] = s.Tensor(p.Name + ".w")
	}
	env, err := (&Executor{Workers: workers}).Run(g, in)
	if err != nil {
		return nil, nil, err
	}
	return env[g.ID("logits")], env[g.ID("loss_tok")], nil
}

// MeanLoss is the exact mean next-token loss (Q30 nats) of s on windows.
func MeanLoss(s *State, windows [][]byte, workers int) (int64, error) {
	_, lt, err := Forward(s, windows, workers)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, v := range lt.Data {
		sum += v
	}
	return DIV(sum, int64(len(lt.Data))), nil
}

// Generate appends n sampled bytes to prompt with the exact forward pass
// (the last context bytes are the model's input) and returns them. Token i
// (0-based) is drawn from the softmax of the last position's logits,
// z_j = RS(l_j·τ⁻¹, 24), e_j = Exp(z_j - max z), by the smallest j with
// e_0 + … + e_j > u, u = u64le(SHA-256(genDomain || u64(len(seed)) || seed
// || u64(i))[:8]) mod Σe.
func Generate(s *State, prompt []byte, n int, o GenerateOptions) ([]byte, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("%w: empty prompt", ErrInvalidData)
	}
	var tinv int64
	if o.Temperature != 0 {
		if math.IsNaN(o.Temperature) || o.Temperature < 1.0/16 || o.Temperature > 16 {
			return nil, fmt.Errorf("%w: temperature %g outside [1/16, 16]", ErrInvalidData, o.Temperature)
		}
		tinv = int64(math.Floor(math.Ldexp(1/o.Temperature, 24) + 0.5))
	}
	text := append([]byte(nil), prompt...)
	C := s.Config.Model.Context
	prefix := []byte(genDomain)
	prefix = binary.LittleEndian.AppendUint64(prefix, uint64(len(o.Seed)))
	prefix = append(prefix, o.Seed...)
	for i := range n {
		ctx := text[max(0, len(text)-C):]
		window := append(append([]byte(nil), ctx...), 0) // the target byte is unused
		logits, _, err := Forward(s, [][]byte{window}, o.Workers)
		if err != nil {
			return nil, err
		}
		last := logits.Row(len(ctx) - 1)
		text = append(text, sample(last, tinv, binary.LittleEndian.AppendUint64(append([]byte(nil), prefix...), uint64(i))))
	}
	return text[len(prompt):], nil
}

func sample(logits []int64, tinv int64, key []byte) byte {
	if tinv == 0 {
		best := 0
		for j, v := range logits {
			if v > logits[best] {
				best = j
			}
		}
		return byte(best)
	}
	z := make([]int64, len(logits))
	m := int64(math.MinInt64)
	for j, v := range logits {
		z[j] = RS(v*tinv, 24)
		m = max(m, z[j])
	}
	var Z int64
	for j := range z {
		z[j] = Exp(z[j] - m)
		Z += z[j]
	}
	d := sha256.Sum256(key)
	u := int64(binary.LittleEndian.Uint64(d[:8]) % uint64(Z))
	var c int64
	for j, e := range z {
		c += e
		if c > u {
			return byte(j)
		}
	}
	return byte(len(z) - 1)
}

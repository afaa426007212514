package exact

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// ChunkSize is the Merkle chunk size of states and of every operator
// output: 4 KiB, a few rows of any tensor, so a tile opening is a handful
// of chunks.
const ChunkSize = 4096

// DType is a tensor's element type in its canonical encoding.
type DType uint8

// Element types.
const (
	U8 DType = iota + 1
	I8
	I16
	I32
	I64
)

// Size is the encoded size of one element in bytes.
func (d DType) Size() int {
	switch d {
	case U8, I8:
		return 1
	case I16:
		return 2
	case I32:
		return 4
	case I64:
		return 8
	}
	panic(fmt.Sprintf("exact: unknown dtype %d", d))
}

func (d DType) String() string {
	switch d {
	case U8:
		return "u8"
	case I8:
		return "i8"
	case I16:
		return "i16"
	case I32:
		return "i32"
	case I64:
		return "i64"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Range returns the smallest and largest values the dtype holds. I32
// tensors hold the symmetric s32 range [-Max32, Max32], I16 the symmetric
// [-MaxQ, MaxQ].
func (d DType) Range() (lo, hi int64) {
	switch d {
	case U8:
		return 0, 255
	case I8:
		return math.MinInt8, math.MaxInt8
	case I16:
		return -MaxQ, MaxQ
	case I32:
		return -Max32, Max32
	}
	return math.MinInt64, math.MaxInt64
}

// EncodeValues appends the canonical little-endian encoding of vals as dt.
// Values must lie in dt's range (they always do for kernel outputs).
func EncodeValues(dst []byte, dt DType, vals []int64) []byte {
	switch dt {
	case U8, I8:
		for _, v := range vals {
			dst = append(dst, byte(v))
		}
	case I16:
		for _, v := range vals {
			dst = binary.LittleEndian.AppendUint16(dst, uint16(v))
		}
	case I32:
		for _, v := range vals {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(v))
		}
	case I64:
		for _, v := range vals {
			dst = binary.LittleEndian.AppendUint64(dst, uint64(v))
		}
	}
	return dst
}

// DecodeValues decodes n elements of dt from b (len(b) = n·dt.Size()) into
// dst, checking each against dt's range.
func DecodeValues(dst []int64, dt DType, b []byte) error {
	lo, hi := dt.Range()
	for i := range dst {
		var v int64
		switch dt {
		case U8:
			v = int64(b[i])
		case I8:
			v = int64(int8(b[i]))
		case I16:
			v = int64(int16(binary.LittleEndian.Uint16(b[2*i:])))
		case I32:
			v = int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
		case I64:
			v = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
		if v < lo || v > hi {
			return fmt.Errorf("element %d is %d, outside the %s range [%d, %d]", i, v, dt, lo, hi)
		}
		dst[i] = v
	}
	return nil
}

// TensorSpec describes a named tensor of a graph.
type TensorSpec struct {
	ID    int    `json:"id"`
	Name  string `json:"name"`
	DType DType  `json:"-"`
	Shape []int  `json:"shape"`
	// Frac is the fixed-point position: value = raw · 2^-Frac. Zero for
	// integers (tokens, exponents, mantissas).
	Frac int `json:"frac"`
}

// Elems is the number of elements.
func (t *TensorSpec) Elems() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Cols is the length of the last dimension: a tensor is viewed as
// Rows()×Cols() row-major, and kernels read it a row at a time.
func (t *TensorSpec) Cols() int { return t.Shape[len(t.Shape)-1] }

// Rows is the number of rows of the Rows()×Cols() view.
func (t *TensorSpec) Rows() int { return t.Elems() / t.Cols() }

// Bytes is the size of the canonical encoding.
func (t *TensorSpec) Bytes() int { return t.Elems() * t.DType.Size() }

// Chunks is the number of ChunkSize chunks of the encoding.
func (t *TensorSpec) Chunks() int { return int(merkle.ChunkCount(int64(t.Bytes()), ChunkSize)) }

// Tensor is a tensor's values (always held as int64, whatever the dtype).
type Tensor struct {
	Spec *TensorSpec
	Data []int64
}

// Encode returns the canonical bytes: elements row-major, little-endian.
func (t *Tensor) Encode() []byte {
	return EncodeValues(make([]byte, 0, t.Spec.Bytes()), t.Spec.DType, t.Data)
}

// Root is the Merkle root of the canonical bytes cut into ChunkSize chunks
// (an empty tensor has merkle.EmptyRoot).
func (t *Tensor) Root() merkle.Hash { return merkle.RootOfBytes(t.Encode(), ChunkSize) }

// Row returns row r of the Rows()×Cols() view.
func (t *Tensor) Row(r int) []int64 {
	c := t.Spec.Cols()
	return t.Data[r*c : (r+1)*c]
}

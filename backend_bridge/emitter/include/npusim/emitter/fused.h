// Emits one kernel for a fused group of pointwise operations, optionally with reductions: the kernels torch.compile's
// Inductor backend generates (docs/compile.md), every eager elementwise op, a small group of its own
// (elementwise.h), and the row kernels (rows.h). The kernel is a small dataflow program over an iteration space:
// loads of strided views of the argument tensors, vector operations, reductions over the innermost dimensions, and
// stores. Every value lives in a scratchpad tile; a tile is a block of rows of the iteration space (a row is every
// reduced element of one point of the outer space, one element when nothing is reduced), so a reduction finds its
// whole row in one tile and its result broadcasts back over the row. A value the same in every row that varies
// along it (a load with strides 0 over the outer dimensions, as layer norm's weight) takes one row per tile.
//
// A multi-tensor kernel (FusedSpec::segments) runs one program over a list of tensor groups in one launch: each
// segment is a one-dimensional space of its own length with its own arguments, as an optimizer's foreach step
// updates every parameter with its gradient and state. Scalars that change from launch to launch (an optimizer's
// bias corrections, its learning rate) are Argument nodes, read from the argument block, so that a new value does
// not build a new kernel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/kernel_builder.h"
#include "npusim/isa/isa.h"

namespace npusim::emitter {

enum class FusedOpcode : uint8_t {
  Load,      // the view `access` of spec.loads; the value has the load's type
  Constant,  // `constant`, of `type`, the same at every point
  Argument,  // entry `argument` of the argument block (of the segment's, with segments): a scalar of `type` in the
             // entry's low bytes, given at launch, the same at every point
  // one operand (a): float types, except Neg and Abs (any numeric type) and Not (bool)
  Neg,
  Abs,
  Exp,
  Log,
  Tanh,
  Sigmoid,
  Erf,
  Sqrt,
  Rsqrt,
  Reciprocal,
  Sin,
  Cos,
  Log1p,
  Expm1,
  Floor,
  Ceil,
  Round,  // halves to even
  Trunc,
  Not,      // of a bool
  Convert,  // a converted to `type` (float to integer truncates, as C and PyTorch do)
  // two operands (a, b) of the same type, the result of that type
  Add,
  Sub,
  Mul,
  Div,      // float division; integers truncate
  Fmod,     // C's fmod: a - trunc(a / b) b computed exactly, the sign of a; an integer zero divisor traps
  Maximum,  // NaN if either is NaN
  Minimum,
  And,  // bools (and integers, bitwise)
  Or,
  Xor,
  // two operands (a, b) of the same type, a bool result
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  Where,   // a (bool) ? b : c, b and c of `type`
  MulAdd,  // a * b + c rounded once (a fused multiply-add, as CPU kernels' vectorised fmadd), float types
  // over the reduced dimensions of a (a row): a per-row value of a's type
  ReduceSum,
  ReduceMax,  // NaN if the row has one
  ReduceMin,
  ReduceArgMax,  // an i64: the first index along the row of its maximum (a NaN counting as the maximum), a float or
                 // integer a, as PyTorch's argmax; the row's reduced dimensions flattened in their order
  ReduceArgMin,
  Store,    // a, to the view `access` of spec.stores (converted to the store's type when they differ)
  Product,  // the kernel's matrix product (FusedSpec::matmul) at each point, rounded from f32 to `type`
  // Indexed accesses: a (i64) holds each point's element index into the argument, from the access's offset (whose
  // strides must be 0). The DMA engine does not bound the indices: the spec checks them first with CheckIndex.
  Gather,      // element offset + a of the load `access` (dma.ldx), of the load's type. `constant` r (2 or 4; 0 or 1
               // for none) says the points come in runs of r along the innermost dimension (reduced; its size a
               // multiple of r) whose indices are consecutive: each run moves as one element of r times the width
  ScatterAdd,  // adds a (of the store's type) to element offset + b of the store `access` (dma.stxadd), on one core
               // in the order of the points (row-major over the space), so that repeated indices accumulate in order
  CheckIndex,  // a (an integer), which must lie in [0, constant) at every point, else the kernel stops with trap
               // kIndexOutOfRangeTrap (gather.h); a DMA that reads the result comes after the check
  // Counter-based random numbers (vrand, vrandn): the draw at stream position b + the point's row-major index over
  // `sizes`, under key a, so that a value does not depend on tiles or cores. a and b are i64 Constants, Arguments or
  // loads with strides 0 (the scalar core reads them; b may be -1 for 0). Of f32, f16 or bf16: uniform in [0, 1) on
  // the type's grid, or standard normal (Box-Muller in binary64, rounded). Not with segments or a product; the
  // first store must walk the space in its order (else Unsupported), so that a tile's positions are consecutive.
  RandomUniform,
  RandomNormal,
};

// A strided view of an argument tensor over the iteration space: element (i0, i1, ...) of the space is element
// offset + sum(ik * strides[k]) of the tensor (in elements; stride 0 broadcasts). One stride per dimension of
// FusedSpec::sizes; a load whose strides over the reduced dimensions are all 0 is a per-row value.
struct FusedAccess {
  int argument = 0;  // index into the argument block: the tensor's address is entry `argument`
  isa::ElementType type = isa::ElementType::F32;
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

struct FusedNode {
  FusedOpcode op = FusedOpcode::Constant;
  isa::ElementType type = isa::ElementType::F32;  // the result's (Store: the value's)
  int a = -1, b = -1, c = -1;                     // operands: indices of earlier nodes
  int access = -1;                                // Load and Store: index into loads / stores
  double constant = 0;                            // Constant: its value (integers exactly up to 2^53)
  int argument = -1;                              // Argument: its entry of the argument block
};

// A GEMM template's product: C[e][i][j] = sum over l of A[e][i][l] B[e][l][j], accumulated in f32, for batch entry e
// < batch, i < m, j < n. A and B are views of arguments a_argument and b_argument (element offsets and strides),
// of `type` (f32, f16 or bf16). The iteration space is then (batch,) m, n with nothing reduced, and the nodes are
// the product's epilogue: a Product node reads C, loads read the other operands (bias, residual) over the same
// space, and the stores write the results. The kernel computes each block of C on the matrix engine and runs the
// epilogue on the block before storing it, so C itself reaches memory only if a Store writes it.
struct FusedMatmul {
  int a_argument = 0, b_argument = 0;
  isa::ElementType type = isa::ElementType::F32;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t a_offset = 0, a_batch = 0, a_row = 0, a_col = 0;
  int64_t b_offset = 0, b_batch = 0, b_row = 0, b_col = 0;
};

// One tensor group of a multi-tensor kernel: `elements` points, and its argument k (the address of a tensor, or an
// Argument's value) is entry first_argument + k of the argument block. Each access then has one stride (in elements;
// 0 repeats one element over the segment) and its offset, and walks the segment's tensor with them.
struct FusedSegment {
  int64_t elements = 0;
  int first_argument = 0;
};

struct FusedSpec {
  std::string name;            // the kernel's name in reports, e.g. "fused_add_exp_sum"
  std::vector<int64_t> sizes;  // the iteration space: the outer (pointwise) dimensions, then the reduced ones
  int reduced_dims = 0;        // how many of the last dimensions of `sizes` are reduced
  int arguments = 0;           // entries of the argument block (tensor addresses)
  std::vector<FusedAccess> loads, stores;
  std::vector<FusedNode> nodes;  // in program order; a node reads only earlier nodes
  std::optional<FusedMatmul> matmul;
  // A multi-tensor kernel: with segments, `sizes` is empty and `arguments` counts each segment's. The cores share the
  // tiles of every segment; a segment with no elements has none. With reduced_dims 1, each segment is one row reduced
  // whole (a foreach norm: one value per tensor), and the cores take segments in turn.
  std::vector<FusedSegment> segments;
};

// A value's shape: it varies along the reduced dimensions (a full row), or not (one value per row: a reduction's
// result, a per-row load, a constant, or an operation of those only). Stores of per-row values write one element per
// row (their strides over the reduced dimensions must be 0).
bool is_per_row(const FusedSpec& spec, int node);

// Checks the spec (operand indices, types, strides, a store of a full row into per-row strides) and throws
// std::invalid_argument naming the node; throws Unsupported for what the emitter cannot express (a row larger than
// the scratchpad allows, an operation on a type the vector engine lacks; with a product, a reduction or a stride beyond
// the DMA's immediates), so that the caller can run the group another way. A spec with a product is the GEMM loop
// with the nodes as the epilogue of each block; the kernel is named spec.name.
Kernel emit_fused(const FusedSpec& spec, const config::ChipConfig& config);

}  // namespace npusim::emitter

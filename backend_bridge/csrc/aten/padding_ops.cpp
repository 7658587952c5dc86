// Reflection and replication padding (F.pad with mode "reflect" or "replicate"; nn.ReflectionPad*d,
// nn.ReplicationPad*d) of 1, 2 or 3 trailing dimensions, in every numeric type: the forward one fused kernel, the
// backward a fill and one fused kernel. Each output point
// reads the input element at an index gathered on the device (dma.ldx): the sum of a term per leading (batch, channel)
// index and one per padded dimension, taken from a small table of those terms. Which input index each output index
// reads along a dimension is PyTorch's own map, from the CPU's kernel run on the indices. The backward adds each
// output gradient into the input gradient at the same indices (dma.stxadd), in the order of the output points, as the
// CPU's kernel adds them. Sizes and paddings are checked first by PyTorch's meta functions, so a bad padding raises
// PyTorch's error.
#include <ATen/native/Resize.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/reflection_pad1d.h>
#include <ATen/ops/reflection_pad1d_backward.h>
#include <ATen/ops/reflection_pad2d.h>
#include <ATen/ops/reflection_pad2d_backward.h>
#include <ATen/ops/reflection_pad3d.h>
#include <ATen/ops/reflection_pad3d_backward.h>
#include <ATen/ops/replication_pad1d.h>
#include <ATen/ops/replication_pad1d_backward.h>
#include <ATen/ops/replication_pad2d.h>
#include <ATen/ops/replication_pad2d_backward.h>
#include <ATen/ops/replication_pad3d.h>
#include <ATen/ops/replication_pad3d_backward.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bridge.h"
#include "pointwise_output.h"
#include "runtime/kernel_launcher.h"
#include "tensor_kernel.h"

namespace npusim::bridge {
namespace {

using emitter::FusedOpcode;

// One padding op: its mode and how many trailing dimensions it pads, with PyTorch's functions of it (run on meta
// tensors for the checks and the output's size, on CPU index tensors for the maps).
struct PaddingOp {
  const char* name;  // "reflection_pad2d"
  int dims;
  at::Tensor (*forward)(const at::Tensor&, at::IntArrayRef);
  at::Tensor (*backward)(const at::Tensor&, const at::Tensor&, at::IntArrayRef);
  at::Tensor (*one_dimension)(const at::Tensor&, at::IntArrayRef);  // the same mode's 1-D op, for the maps
};

// The input index each output index reads along padded dimension d (0 the first padded one), PyTorch's map.
std::vector<int64_t> index_map(const PaddingOp& op, int64_t size, at::IntArrayRef padding, int d) {
  const int from_last = op.dims - 1 - d;  // padding lists the last dimension's pair first
  const at::Tensor indices = at::arange(size, at::TensorOptions().dtype(at::kDouble)).view({1, 1, size});
  const at::Tensor map = op.one_dimension(indices, {padding[2 * from_last], padding[2 * from_last + 1]}).reshape(-1);
  const double* sources = map.const_data_ptr<double>();
  return std::vector<int64_t>(sources, sources + map.numel());
}

// The kernel's space (the output's sizes), the table of index terms (on the device) and the index node: the element
// of `padded` (the input, or the input's gradient) that each output point reads or adds to.
struct GatheredIndex {
  at::Tensor table;
  int index = -1;
};

GatheredIndex gathered_index(TensorKernel& k, const PaddingOp& op, const at::Tensor& padded, at::IntArrayRef out_sizes,
                             at::IntArrayRef padding, const at::Device& device) {
  const int64_t leading = padded.dim() - op.dims;
  const int64_t dims = padded.dim();
  std::vector<int64_t> terms;  // the leading indices' terms in row-major order, then each padded dimension's
  int64_t leading_points = 1;
  for (int64_t d = 0; d < leading; ++d) leading_points *= padded.size(d);
  for (int64_t point = 0; point < leading_points; ++point) {
    int64_t offset = 0;
    for (int64_t d = leading - 1, rest = point; d >= 0; --d) {
      offset += rest % padded.size(d) * padded.stride(d);
      rest /= padded.size(d);
    }
    terms.push_back(offset);
  }
  std::vector<std::pair<int64_t, int64_t>> spans;  // per padded dimension: its terms' first entry and its stride
  for (int d = 0; d < op.dims; ++d) {
    const int64_t dim = leading + d;
    spans.push_back({static_cast<int64_t>(terms.size()), padded.stride(dim)});
    for (int64_t source : index_map(op, padded.size(dim), padding, d)) terms.push_back(source * padded.stride(dim));
  }
  GatheredIndex result{TensorKernel::table(terms, at::kLong, device)};
  std::vector<int64_t> strides(dims, 0);
  for (int64_t d = leading - 1, stride = 1; d >= 0; stride *= out_sizes[d], --d) strides[d] = stride;
  result.index = k.load(result.table, strides);
  for (int d = 0; d < op.dims; ++d) {
    std::vector<int64_t> along(dims, 0);
    along[leading + d] = 1;
    const int term = k.load(result.table, along, spans[d].first);
    result.index = k.op(FusedOpcode::Add, result.index, term, -1, isa::ElementType::I64);
  }
  return result;
}

// PyTorch pads every numeric type but bool, which takes the fallback and its error.
bool native(const at::Tensor& tensor) {
  return tensor.is_privateuseone() && element_type(tensor.scalar_type()) && tensor.scalar_type() != at::kBool;
}

// An out= tensor of `sizes`: a new (empty) one laid out as `like` suggests, a given one resized as out= does.
void prepare_output(at::Tensor& out, at::IntArrayRef sizes, const at::Tensor& like) {
  if (out.numel() == 0) {
    out.resize_(sizes, like.suggest_memory_format());
  } else {
    at::native::resize_output(out, sizes);
  }
}

at::Tensor& pad_out(const PaddingOp& op, const at::Tensor& input, at::IntArrayRef padding, at::Tensor& out) {
  const at::Tensor shape = op.forward(meta_like(input), padding);  // PyTorch's checks and output size
  if (native(input) && out.device() == input.device() && out.scalar_type() == input.scalar_type()) {
    prepare_output(out, shape.sizes(), input);
    if (out.numel() == 0) return out;
    TensorKernel k(TensorKernel::name_for(op.name, input), out.sizes().vec(), 0);
    const GatheredIndex index = gathered_index(k, op, input, out.sizes(), padding, input.device());
    k.store(k.gather(input, index.index), out, out.strides());
    if (k.launch(input)) return out;
  }
  torch::jit::Stack stack{input, padding.vec(), out};
  call_cpu_fallback(c10::str("aten::", op.name).c_str(), "out", stack);
  return out;
}

at::Tensor& pad_backward_out(const PaddingOp& op, const at::Tensor& grad_output, const at::Tensor& input,
                             at::IntArrayRef padding, at::Tensor& grad_input) {
  op.backward(meta_like(grad_output), meta_like(input), padding);  // PyTorch's checks of the gradient's size
  if (native(grad_output) && grad_input.device() == grad_output.device() &&
      grad_input.scalar_type() == grad_output.scalar_type()) {
    prepare_output(grad_input, input.sizes(), input);
    grad_input.zero_();
    if (grad_output.numel() == 0) return grad_input;
    TensorKernel k(TensorKernel::name_for(c10::str(op.name, "_backward").c_str(), grad_output),
                   grad_output.sizes().vec(), 0);
    const GatheredIndex index = gathered_index(k, op, grad_input, grad_output.sizes(), padding, grad_output.device());
    k.scatter_add(k.load(grad_output, grad_output.strides()), grad_input, index.index);
    if (k.launch(grad_output)) return grad_input;
  }
  torch::jit::Stack stack{grad_output, input, padding.vec(), grad_input};
  call_cpu_fallback(c10::str("aten::", op.name, "_backward").c_str(), "grad_input", stack);
  return grad_input;
}

// The registrations of one op: functional and out= variants, each way.
template <const PaddingOp& op>
struct Registration {
  static at::Tensor forward(const at::Tensor& input, at::IntArrayRef padding) {
    at::Tensor out = at::empty({0}, input.options());
    return pad_out(op, input, padding, out);
  }
  static at::Tensor& forward_out(const at::Tensor& input, at::IntArrayRef padding, at::Tensor& out) {
    return pad_out(op, input, padding, out);
  }
  static at::Tensor backward(const at::Tensor& grad_output, const at::Tensor& input, at::IntArrayRef padding) {
    at::Tensor grad_input = at::empty({0}, grad_output.options());
    return pad_backward_out(op, grad_output, input, padding, grad_input);
  }
  static at::Tensor& backward_out(const at::Tensor& grad_output, const at::Tensor& input, at::IntArrayRef padding,
                                  at::Tensor& grad_input) {
    return pad_backward_out(op, grad_output, input, padding, grad_input);
  }
  static void add(torch::Library& m) {
    m.impl(op.name, forward);
    m.impl(c10::str(op.name, ".out").c_str(), forward_out);
    m.impl(c10::str(op.name, "_backward").c_str(), backward);
    m.impl(c10::str(op.name, "_backward.grad_input").c_str(), backward_out);
  }
};

at::Tensor reflection_1d(const at::Tensor& x, at::IntArrayRef p) { return at::reflection_pad1d(x, p); }
at::Tensor replication_1d(const at::Tensor& x, at::IntArrayRef p) { return at::replication_pad1d(x, p); }

constexpr PaddingOp kReflection1d{"reflection_pad1d", 1, at::reflection_pad1d, at::reflection_pad1d_backward,
                                  reflection_1d};
constexpr PaddingOp kReflection2d{"reflection_pad2d", 2, at::reflection_pad2d, at::reflection_pad2d_backward,
                                  reflection_1d};
constexpr PaddingOp kReflection3d{"reflection_pad3d", 3, at::reflection_pad3d, at::reflection_pad3d_backward,
                                  reflection_1d};
constexpr PaddingOp kReplication1d{"replication_pad1d", 1, at::replication_pad1d, at::replication_pad1d_backward,
                                   replication_1d};
constexpr PaddingOp kReplication2d{"replication_pad2d", 2, at::replication_pad2d, at::replication_pad2d_backward,
                                   replication_1d};
constexpr PaddingOp kReplication3d{"replication_pad3d", 3, at::replication_pad3d, at::replication_pad3d_backward,
                                   replication_1d};

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  Registration<kReflection1d>::add(m);
  Registration<kReflection2d>::add(m);
  Registration<kReflection3d>::add(m);
  Registration<kReplication1d>::add(m);
  Registration<kReplication2d>::add(m);
  Registration<kReplication3d>::add(m);
}

}  // namespace npusim::bridge

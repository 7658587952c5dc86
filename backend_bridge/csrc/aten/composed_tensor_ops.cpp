// Operators the CPU runs as kernels of their own that npusim composes from native ones, on the device:
//   trace                  the diagonal's sum
//   count_nonzero          a comparison with 0 summed (int64; complex64 too)
//   aminmax                amin and amax
//   addbmm                 one GEMM over the batch laid side by side (the batch sum is the contraction), then
//                          beta self + alpha product (float32 and complex64)
//   take                   a gather from the flattened tensor, negative indices wrapped
//   glu                    a sigmoid(b), and its gradient, one formula kernel per half
//   linalg_cross           one formula kernel per component
//   isin                   an equality test against every test element, any()
//   bucketize, searchsorted  the count of boundaries below (or at) each value, NaN counting past the end as in the
//                          CPU's binary search
// Unusual dtypes, devices and shapes take the CPU fallback, which also raises PyTorch's own errors.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/any.h>
#include <ATen/ops/diagonal.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/le.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include "bridge.h"
#include "pointwise_formula.h"

namespace npusim::bridge {
namespace {

bool on_npusim(const at::Tensor& t) { return t.device().is_privateuseone(); }

template <typename... Tensors>
bool on_one_npusim(const at::Tensor& first, const Tensors&... others) {
  return on_npusim(first) && ((others.device() == first.device()) && ...);
}

at::Tensor fallback(const char* name, const char* overload, torch::jit::Stack stack) {
  call_cpu_fallback(name, overload, stack);
  return stack[0].toTensor();
}

at::Tensor npusim_trace(const at::Tensor& self) {
  if (on_npusim(self) && self.dim() == 2) return at::sum(at::diagonal(self));
  return fallback("aten::trace", "", {self});
}

at::Tensor& npusim_count_nonzero_out(const at::Tensor& self, at::IntArrayRef dim, at::Tensor& out) {
  const bool numbers = !self.is_complex() || self.scalar_type() == at::kComplexFloat;
  if (on_one_npusim(self, out) && numbers && out.scalar_type() == at::kLong) {
    const at::Tensor counts = at::sum(at::ne(self, 0), dim);
    at::native::resize_output(out, counts.sizes());
    return out.copy_(counts);
  }
  torch::jit::Stack stack{self, dim.vec(), out};
  call_cpu_fallback("aten::count_nonzero", "dim_IntList_out", stack);
  return out;
}
at::Tensor npusim_count_nonzero(const at::Tensor& self, at::IntArrayRef dim) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return npusim_count_nonzero_out(self, dim, out);
}

std::tuple<at::Tensor&, at::Tensor&> npusim_aminmax_out(const at::Tensor& self, std::optional<int64_t> dim,
                                                        bool keepdim, at::Tensor& min, at::Tensor& max) {
  if (on_one_npusim(self, min, max) && self.numel() > 0 && min.scalar_type() == self.scalar_type() &&
      max.scalar_type() == self.scalar_type()) {
    const std::vector<int64_t> dims = dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{};
    at::amin_out(min, self, dims, keepdim);
    at::amax_out(max, self, dims, keepdim);
    return {min, max};
  }
  torch::jit::Stack stack{self, dim, keepdim, min, max};
  call_cpu_fallback("aten::aminmax", "out", stack);
  return {min, max};
}
std::tuple<at::Tensor, at::Tensor> npusim_aminmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  at::Tensor min = at::empty({0}, self.options()), max = at::empty({0}, self.options());
  npusim_aminmax_out(self, dim, keepdim, min, max);
  return {min, max};
}

// sum over b of batch1[b] @ batch2[b] is [n, B*m] @ [B*m, p]: the batch's matrices side by side, one GEMM.
at::Tensor& npusim_addbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                              const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  const bool shapes =
      batch1.dim() == 3 && batch2.dim() == 3 && batch1.size(0) == batch2.size(0) && batch1.size(2) == batch2.size(1);
  const at::ScalarType type = out.scalar_type();
  const bool computes = type == at::kFloat || type == at::kComplexFloat;  // complex64: four real GEMMs (mm's)
  if (shapes && on_one_npusim(self, batch1, batch2, out) && computes && self.scalar_type() == type &&
      batch1.scalar_type() == type && batch2.scalar_type() == type) {
    const int64_t n = batch1.size(1), p = batch2.size(2);
    const at::Tensor side_by_side = batch1.permute({1, 0, 2}).reshape({n, -1});
    const at::Tensor product = at::mm(side_by_side, batch2.reshape({-1, p}));
    // beta 0 ignores self (its NaN and infinities too), as PyTorch's addbmm does.
    const at::Tensor result =
        beta.equal(0) ? at::mul(product, alpha) : at::add(at::mul(self.expand({n, p}), beta), product, alpha);
    at::native::resize_output(out, {n, p});
    return out.copy_(result);
  }
  torch::jit::Stack stack{self, batch1, batch2, beta, alpha, out};
  call_cpu_fallback("aten::addbmm", "out", stack);
  return out;
}
at::Tensor npusim_addbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                         const at::Scalar& beta, const at::Scalar& alpha) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_addbmm_out(self, batch1, batch2, beta, alpha, out);
}
at::Tensor& npusim_addbmm_(at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const at::Scalar& beta,
                           const at::Scalar& alpha) {
  const at::Tensor result = npusim_addbmm(self, batch1, batch2, beta, alpha);
  return self.copy_(result);
}

at::Tensor& npusim_take_out(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  if (on_one_npusim(self, index, out) && index.scalar_type() == at::kLong && self.numel() > 0 &&
      out.scalar_type() == self.scalar_type()) {
    const int64_t n = self.numel();
    const at::Tensor flat_index = index.reshape({-1});
    const at::Tensor wrapped = at::where(at::lt(flat_index, 0), at::add(flat_index, n), flat_index);
    const at::Tensor taken = at::index_select(self.reshape({-1}), 0, wrapped);
    at::native::resize_output(out, index.sizes());
    return out.copy_(taken.view(index.sizes()));
  }
  torch::jit::Stack stack{self, index, out};
  call_cpu_fallback("aten::take", "out", stack);
  return out;
}
at::Tensor npusim_take(const at::Tensor& self, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_take_out(self, index, out);
}

Value sigmoid(Value x) { return x.formula->apply(emitter::FusedOpcode::Sigmoid, x); }

at::Tensor& npusim_glu_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  const int64_t wrapped = self.dim() > 0 ? at::maybe_wrap_dim(dim, self.dim()) : 0;
  if (self.dim() > 0 && self.size(wrapped) % 2 == 0 && self.scalar_type() == at::kFloat) {
    const int64_t half = self.size(wrapped) / 2;
    const at::Tensor a = self.narrow(wrapped, 0, half), b = self.narrow(wrapped, half, half);
    if (launch_formula("glu", {a, b}, {}, out, [](Formula& f) { return f.x(0) * sigmoid(f.x(1)); })) return out;
  }
  torch::jit::Stack stack{self, dim, out};
  call_cpu_fallback("aten::glu", "out", stack);
  return out;
}
at::Tensor npusim_glu(const at::Tensor& self, int64_t dim) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_glu_out(self, dim, out);
}

// d/da = g sigmoid(b); d/db = g a sigmoid(b) (1 - sigmoid(b)), into the two halves of the gradient.
at::Tensor& npusim_glu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, int64_t dim,
                                    at::Tensor& grad_input) {
  const int64_t wrapped = self.dim() > 0 ? at::maybe_wrap_dim(dim, self.dim()) : 0;
  if (self.dim() > 0 && self.size(wrapped) % 2 == 0 && self.scalar_type() == at::kFloat &&
      grad_output.scalar_type() == at::kFloat && grad_input.scalar_type() == at::kFloat &&
      on_one_npusim(self, grad_output, grad_input)) {
    const int64_t half = self.size(wrapped) / 2;
    at::native::resize_output(grad_input, self.sizes());
    const at::Tensor a = self.narrow(wrapped, 0, half), b = self.narrow(wrapped, half, half);
    at::Tensor grad_a = grad_input.narrow(wrapped, 0, half), grad_b = grad_input.narrow(wrapped, half, half);
    const bool done = launch_formula("glu_backward", {grad_output, b}, {}, grad_a,
                                     [](Formula& f) { return f.x(0) * sigmoid(f.x(1)); }) &&
                      launch_formula("glu_backward", {grad_output, a, b}, {}, grad_b, [](Formula& f) {
                        const Value s = sigmoid(f.x(2));
                        return f.x(0) * f.x(1) * s * (1.0 - s);
                      });
    if (done) return grad_input;
  }
  torch::jit::Stack stack{grad_output, self, dim, grad_input};
  call_cpu_fallback("aten::glu_backward", "grad_input", stack);
  return grad_input;
}
at::Tensor npusim_glu_backward(const at::Tensor& grad_output, const at::Tensor& self, int64_t dim) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return npusim_glu_backward_out(grad_output, self, dim, grad_input);
}

// Component k of a x b is a[k+1] b[k+2] - a[k+2] b[k+1] (indices mod 3), over the broadcast shape.
at::Tensor& npusim_linalg_cross_out(const at::Tensor& self, const at::Tensor& other, int64_t dim, at::Tensor& out) {
  if (on_one_npusim(self, other, out) && self.scalar_type() == at::kFloat && other.scalar_type() == at::kFloat &&
      out.scalar_type() == at::kFloat && self.dim() == other.dim() && self.dim() > 0) {
    const std::vector<int64_t> shape = at::infer_size(self.sizes(), other.sizes());
    const int64_t d = at::maybe_wrap_dim(dim, static_cast<int64_t>(shape.size()));
    if (shape[d] == 3) {
      const at::Tensor a = self.expand(shape), b = other.expand(shape);
      at::native::resize_output(out, shape);
      bool done = true;
      for (int64_t k = 0; k < 3 && done; ++k) {
        at::Tensor component = out.select(d, k);
        done = launch_formula(
            "cross",
            {a.select(d, (k + 1) % 3), b.select(d, (k + 2) % 3), a.select(d, (k + 2) % 3), b.select(d, (k + 1) % 3)},
            {}, component, [](Formula& f) { return f.x(0) * f.x(1) - f.x(2) * f.x(3); });
      }
      if (done) return out;
    }
  }
  if (on_one_npusim(self, other, out) && self.scalar_type() == at::kComplexFloat &&
      other.scalar_type() == at::kComplexFloat && out.scalar_type() == at::kComplexFloat && self.dim() == other.dim() &&
      self.dim() > 0) {  // the same components from complex products
    const std::vector<int64_t> shape = at::infer_size(self.sizes(), other.sizes());
    const int64_t d = at::maybe_wrap_dim(dim, static_cast<int64_t>(shape.size()));
    if (shape[d] == 3) {
      const at::Tensor a = self.expand(shape), b = other.expand(shape);
      std::vector<at::Tensor> components;
      for (int64_t k = 0; k < 3; ++k)
        components.push_back(at::sub(at::mul(a.select(d, (k + 1) % 3), b.select(d, (k + 2) % 3)),
                                     at::mul(a.select(d, (k + 2) % 3), b.select(d, (k + 1) % 3))));
      at::native::resize_output(out, shape);
      return out.copy_(at::stack(components, d));
    }
  }
  torch::jit::Stack stack{self, other, dim, out};
  call_cpu_fallback("aten::linalg_cross", "out", stack);
  return out;
}
at::Tensor npusim_linalg_cross(const at::Tensor& self, const at::Tensor& other, int64_t dim) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_linalg_cross_out(self, other, dim, out);
}

// Whether each element equals any test element: one comparison against all of them (elements x tests booleans,
// kept below 2^26), then any().
at::Tensor& npusim_isin_out(const at::Tensor& elements, const at::Tensor& test_elements, bool assume_unique,
                            bool invert, at::Tensor& out) {
  if (on_one_npusim(elements, test_elements, out) && out.scalar_type() == at::kBool && !elements.is_complex() &&
      !test_elements.is_complex() && elements.numel() * test_elements.numel() < (int64_t{1} << 26)) {
    at::native::resize_output(out, elements.sizes());
    if (elements.numel() == 0) return out;
    if (test_elements.numel() == 0) return out.fill_(invert);
    const at::Tensor found =
        at::any(at::eq(elements.reshape({-1, 1}), test_elements.reshape({1, -1})), 1).view(elements.sizes());
    return out.copy_(invert ? at::logical_not(found) : found);
  }
  torch::jit::Stack stack{elements, test_elements, assume_unique, invert, out};
  call_cpu_fallback("aten::isin", "Tensor_Tensor_out", stack);
  return out;
}
at::Tensor npusim_isin(const at::Tensor& elements, const at::Tensor& test_elements, bool assume_unique, bool invert) {
  at::Tensor out = at::empty({0}, elements.options().dtype(at::kBool));
  return npusim_isin_out(elements, test_elements, assume_unique, invert, out);
}

// How many of each row's sorted boundaries lie below each value of the matching row of `values` (at or below it when
// `right`): the index the CPU's binary search returns; a NaN value goes past the end, as there. `boundaries` [..., B]
// and `values` [..., V] have the same leading dimensions, or boundaries is 1-D.
at::Tensor insertion_points(const at::Tensor& boundaries, const at::Tensor& values, bool right, bool out_int32) {
  const at::Tensor rows = boundaries.dim() == 1 ? boundaries : boundaries.unsqueeze(-2);  // [..., 1, B]
  const at::Tensor points = values.unsqueeze(-1);                                         // [..., V, 1]
  const at::Tensor below = right ? at::le(rows, points) : at::lt(rows, points);
  const at::Tensor counts = at::sum(below, -1);
  const at::Tensor past_end = at::full_like(counts, boundaries.size(-1));
  const at::Tensor index = at::where(at::isnan(values), past_end, counts);
  return out_int32 ? index.to(at::kInt) : index;
}

bool searches_natively(const at::Tensor& sorted, const at::Tensor& values) {
  const bool shapes =
      sorted.dim() == 1 || (sorted.dim() == values.dim() &&
                            sorted.sizes().slice(0, sorted.dim() - 1) == values.sizes().slice(0, values.dim() - 1));
  return shapes && sorted.dim() > 0 && on_one_npusim(sorted, values) && sorted.scalar_type() == values.scalar_type() &&
         !sorted.is_complex() && values.numel() * sorted.size(-1) < (int64_t{1} << 26);
}

at::Tensor npusim_bucketize(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  if (boundaries.dim() == 1 && searches_natively(boundaries, self.dim() == 0 ? self.reshape({1}) : self))
    return insertion_points(boundaries, self.reshape({-1}), right, out_int32).view(self.sizes());
  return fallback("aten::bucketize", "Tensor", {self, boundaries, out_int32, right});
}

at::Tensor npusim_searchsorted(const at::Tensor& sorted_sequence, const at::Tensor& self, bool out_int32, bool right,
                               std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  const bool right_side = right || (side && *side == "right");
  const bool sides_agree = !(side && *side == "left" && right);  // PyTorch's error for a contradiction
  if (sides_agree && self.dim() > 0 && searches_natively(sorted_sequence, self) &&
      (!sorter || on_one_npusim(sorted_sequence, *sorter))) {
    const at::Tensor sorted = sorter ? at::gather(sorted_sequence, -1, *sorter) : sorted_sequence;
    return insertion_points(sorted, self, right_side, out_int32).contiguous();  // as PyTorch allocates it
  }
  return fallback(
      "aten::searchsorted", "Tensor",
      {sorted_sequence, self, out_int32, right, side ? c10::IValue(std::string(*side)) : c10::IValue(), sorter});
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("trace", npusim_trace);
  m.impl("count_nonzero.dim_IntList", npusim_count_nonzero);
  m.impl("count_nonzero.dim_IntList_out", npusim_count_nonzero_out);
  m.impl("aminmax", npusim_aminmax);
  m.impl("aminmax.out", npusim_aminmax_out);
  m.impl("addbmm", npusim_addbmm);
  m.impl("addbmm.out", npusim_addbmm_out);
  m.impl("addbmm_", npusim_addbmm_);
  m.impl("take", npusim_take);
  m.impl("take.out", npusim_take_out);
  m.impl("glu", npusim_glu);
  m.impl("glu.out", npusim_glu_out);
  m.impl("glu_backward", npusim_glu_backward);
  m.impl("glu_backward.grad_input", npusim_glu_backward_out);
  m.impl("linalg_cross", npusim_linalg_cross);
  m.impl("linalg_cross.out", npusim_linalg_cross_out);
  m.impl("isin.Tensor_Tensor", npusim_isin);
  m.impl("isin.Tensor_Tensor_out", npusim_isin_out);
  m.impl("bucketize.Tensor", npusim_bucketize);
  m.impl("searchsorted.Tensor", npusim_searchsorted);
}

}  // namespace npusim::bridge

// torch.fft on the device: each transformed dimension is a matrix product on the matrix engine, the signal's values
// (a complex value as its two reals, through view_as_real) times the matrix of the discrete Fourier transform, its
// entries exp(-+2 pi i k n / N) computed on the host in double and rounded once, the normalisation folded in. A product
// costs N multiply-adds per output value where an FFT costs log N, but it is what an NPU's matrix engine does well,
// and for the signal lengths of models (a spectrogram's window, a layer mixing tokens) it is one product (and the
// copy of its matrix) per dimension.
// A length whose matrix would exceed kLargestMatrix is split in two factors (the "six-step" FFT: a transform along
// each factor, a twiddle factor between them), so that a 16384-point signal takes two products with 128-point
// matrices. Like the CPU's kernels, the results are laid out as the meta functions predict (MKL's layout: the
// untransformed dimensions outermost, by their input strides, then the transformed ones). complex64 and float32
// only: other dtypes take the CPU fallback, and so does a length that splits into no factors small enough (a large
// prime).
#include <ATen/TensorOperators.h>
#include <ATen/native/Resize.h>
#include <ATen/native/SpectralOpsUtils.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/complex.h>
#include <ATen/ops/conj_physical.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/real.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "bridge.h"

namespace npusim::bridge {
namespace {

using at::native::fft_norm_mode;

// The most elements of a DFT matrix (a 2048-point complex transform's): longer signals are split in factors.
constexpr int64_t kLargestMatrix = int64_t{1} << 24;

// The factor each transformed dimension of n points contributes to the normalisation.
double scale_of(fft_norm_mode mode, int64_t n) {
  switch (mode) {
    case fft_norm_mode::none: return 1.0;
    case fft_norm_mode::by_root_n: return 1.0 / std::sqrt(static_cast<double>(n));
    case fft_norm_mode::by_n: return 1.0 / static_cast<double>(n);
  }
  TORCH_CHECK(false, "unknown FFT normalization mode");
}

// cos and sin of 2 pi m / n, exact where they are 0 or +-1 (so that, say, the imaginary part of a real signal's
// Nyquist term is exactly 0).
std::pair<double, double> unit_root(int64_t m, int64_t n) {
  m %= n;
  if (m == 0) return {1.0, 0.0};
  if (2 * m == n) return {-1.0, 0.0};
  if (4 * m == n) return {0.0, 1.0};
  if (4 * m == 3 * n) return {0.0, -1.0};
  const double angle = 2.0 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(n);
  return {std::cos(angle), std::sin(angle)};
}

// The three products. Values of a complex signal are interleaved (real, imaginary), as view_as_real lays them out;
// sign is -1 for the forward transform (exp(-2 pi i k n / N)) and +1 for the inverse.
enum class Product { ComplexToComplex, RealToComplex, ComplexToReal };

// The matrix that takes `inputs` values of an n-point signal to `outputs` values of its transform, on the device.
at::Tensor dft_matrix(Product product, int64_t n, int64_t inputs, int64_t outputs, int sign, double scale,
                      const at::TensorOptions& device) {
  const bool complex_in = product != Product::RealToComplex, complex_out = product != Product::ComplexToReal;
  const int64_t rows = complex_in ? 2 * inputs : inputs, cols = complex_out ? 2 * outputs : outputs;
  at::Tensor matrix = at::empty({rows, cols}, at::TensorOptions().dtype(at::kFloat));
  auto entry = matrix.accessor<float, 2>();
  for (int64_t in = 0; in < inputs; ++in) {
    // A one-sided spectrum's terms other than 0 and N/2 stand for their conjugates too.
    const double weight = product == Product::ComplexToReal && in != 0 && 2 * in != n ? 2.0 * scale : scale;
    for (int64_t out = 0; out < outputs; ++out) {
      const auto [c, s] = unit_root(in * out, n);
      const double re = weight * c, im = weight * sign * s;  // the entry is re + i im
      switch (product) {
        case Product::ComplexToComplex:  // (a + ib)(re + i im)
          entry[2 * in][2 * out] = static_cast<float>(re);
          entry[2 * in][2 * out + 1] = static_cast<float>(im);
          entry[2 * in + 1][2 * out] = static_cast<float>(-im);
          entry[2 * in + 1][2 * out + 1] = static_cast<float>(re);
          break;
        case Product::RealToComplex:
          entry[in][2 * out] = static_cast<float>(re);
          entry[in][2 * out + 1] = static_cast<float>(im);
          break;
        case Product::ComplexToReal:  // the real part of (a + ib)(re + i im)
          entry[2 * in][out] = static_cast<float>(re);
          entry[2 * in + 1][out] = static_cast<float>(-im);
          break;
      }
    }
  }
  return matrix.to(device.device());
}

bool matrix_fits(int64_t rows, int64_t cols) { return rows * cols <= kLargestMatrix; }

// n as first * second with first the largest factor not above sqrt(n) (1 for a prime).
std::pair<int64_t, int64_t> factors(int64_t n) {
  int64_t first = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
  while (first > 1 && n % first != 0) --first;
  return {first, n / first};
}

// Whether an n-point complex transform runs natively: one product, or two of its factors' transforms.
bool transformable(int64_t n) {
  if (matrix_fits(2 * n, 2 * n)) return true;
  const auto [first, second] = factors(n);
  return first > 1 && transformable(first) && transformable(second);
}

at::Tensor transform_dimension(const at::Tensor& signal, int64_t dim, Product product, int64_t n, int64_t outputs,
                               int sign, double scale);

// `grid` (..., first, second) times exp(sign 2 pi i k1 n2 / n) at (k1, n2), in the reals of its values.
at::Tensor twiddled(const at::Tensor& grid, int64_t n, int sign) {
  const int64_t first = grid.size(-2), second = grid.size(-1);
  at::Tensor cosines = at::empty({first, second}, at::TensorOptions().dtype(at::kFloat));
  at::Tensor sines = at::empty({first, second}, at::TensorOptions().dtype(at::kFloat));
  auto c = cosines.accessor<float, 2>(), s = sines.accessor<float, 2>();
  for (int64_t k = 0; k < first; ++k)
    for (int64_t j = 0; j < second; ++j) {
      const auto [cosine, sine] = unit_root(k * j, n);
      c[k][j] = static_cast<float>(cosine);
      s[k][j] = static_cast<float>(sign * sine);
    }
  cosines = cosines.to(grid.device());
  sines = sines.to(grid.device());
  const at::Tensor parts = at::view_as_real(grid);
  const at::Tensor re = parts.select(-1, 0), im = parts.select(-1, 1);
  return at::complex(re * cosines - im * sines, re * sines + im * cosines);
}

// An n-point complex transform along `dim` as two: with n = first * second, the point n2 + second * n1 and the
// frequency k1 + first * k2, a transform of length first along n1, the twiddle factor, then one of length second
// along n2.
at::Tensor two_factor_transform(const at::Tensor& signal, int64_t dim, int64_t n, int sign, double scale) {
  const auto [first, second] = factors(n);
  const at::Tensor moved = signal.movedim(dim, -1);
  std::vector<int64_t> sizes(moved.sizes().begin(), moved.sizes().end() - 1);
  sizes.push_back(first);
  sizes.push_back(second);
  at::Tensor grid = moved.reshape(sizes);
  grid = transform_dimension(grid, -2, Product::ComplexToComplex, first, first, sign, scale);
  grid = twiddled(grid, n, sign);
  grid = transform_dimension(grid, -1, Product::ComplexToComplex, second, second, sign, 1.0);
  sizes.pop_back();
  sizes.back() = n;
  return grid.transpose(-1, -2).reshape(sizes).movedim(-1, dim);
}

// The whole spectrum of a real signal of n points from its terms 0..n/2 along `dim`: X[n - k] = conj(X[k]).
at::Tensor hermitian_extension(const at::Tensor& half, int64_t dim, int64_t n) {
  const int64_t terms = half.size(dim);
  const at::Tensor mirrored =
      at::view_as_complex(at::view_as_real(half.narrow(dim, 1, n - terms)).flip(dim < 0 ? dim - 1 : dim));
  return at::cat({half, at::conj_physical(mirrored)}, dim);
}

// Transforms dimension `dim` of `signal` (complex, or real for RealToComplex) with one product: the dimension moved
// last, its values as rows of reals, times the matrix.
at::Tensor transform_dimension(const at::Tensor& signal, int64_t dim, Product product, int64_t n, int64_t outputs,
                               int sign, double scale) {
  // Lengths too long for one matrix: a complex transform in two factors; a real signal made complex, then one; a
  // one-sided spectrum made whole, then one.
  if (product == Product::ComplexToComplex && !matrix_fits(2 * n, 2 * n))
    return two_factor_transform(signal, dim, n, sign, scale);
  if (product == Product::RealToComplex && !matrix_fits(n, 2 * outputs)) {
    const at::Tensor complex = at::complex(signal, at::zeros_like(signal));
    return transform_dimension(complex, dim, Product::ComplexToComplex, n, n, sign, scale).narrow(dim, 0, outputs);
  }
  if (product == Product::ComplexToReal && !matrix_fits(2 * signal.size(dim), n)) {
    const at::Tensor whole = hermitian_extension(signal, dim, n);
    return at::real(transform_dimension(whole, dim, Product::ComplexToComplex, n, n, sign, scale));
  }
  const at::Tensor moved = signal.movedim(dim, -1);
  const int64_t inputs = moved.size(-1);
  const bool complex_in = product != Product::RealToComplex;
  const at::Tensor rows = complex_in ? at::view_as_real(moved).reshape({-1, 2 * inputs}) : moved.reshape({-1, inputs});
  const at::Tensor values = at::mm(rows, dft_matrix(product, n, inputs, outputs, sign, scale, signal.options()));
  std::vector<int64_t> sizes(moved.sizes().begin(), moved.sizes().end());
  sizes.back() = outputs;
  if (product == Product::ComplexToReal) return values.view(sizes).movedim(-1, dim);
  sizes.push_back(2);
  return at::view_as_complex(values.view(sizes)).movedim(-1, dim);
}

// The order of the output's dimensions, outermost first, as MKL's kernels (and the meta functions) lay them out: the
// dimensions not transformed, by decreasing input stride, then `transformed` in the order given.
std::vector<int64_t> mkl_order(const at::Tensor& self, const std::vector<int64_t>& transformed) {
  std::vector<int64_t> order;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (std::find(transformed.begin(), transformed.end(), d) == transformed.end()) order.push_back(d);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return self.stride(a) > self.stride(b); });
  order.insert(order.end(), transformed.begin(), transformed.end());
  return order;
}

// `dims` by decreasing stride of `self`, but for the last `kept_last` ones (MKL transforms in that order).
std::vector<int64_t> by_stride(const at::Tensor& self, at::IntArrayRef dims, int64_t kept_last = 0) {
  std::vector<int64_t> sorted(dims.begin(), dims.end());
  std::stable_sort(sorted.begin(), sorted.end() - kept_last,
                   [&](int64_t a, int64_t b) { return self.stride(a) > self.stride(b); });
  return sorted;
}

// Where dimension `dim` of the original tensor is in `order`.
int64_t position_in(const std::vector<int64_t>& order, int64_t dim) {
  return std::find(order.begin(), order.end(), dim) - order.begin();
}

// `permuted`, whose dimensions are the original ones in `order`, seen in the original order with the strides MKL's
// kernel gives (a view when the transforms left it contiguous, as they do but for a multidimensional r2c).
at::Tensor restored(const at::Tensor& permuted, const std::vector<int64_t>& order) {
  std::vector<int64_t> inverse(order.size());
  for (size_t p = 0; p < order.size(); ++p) inverse[order[p]] = static_cast<int64_t>(p);
  return permuted.contiguous().permute(inverse);
}

bool native_complex(const at::Tensor& self) { return self.scalar_type() == at::kComplexFloat; }

at::Tensor fallback(const char* name, torch::jit::Stack stack) {
  call_cpu_fallback(name, "", stack);
  return stack[0].toTensor();
}

at::Tensor npusim_fft_c2c(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, bool forward) {
  TORCH_CHECK(self.is_complex(), "_fft_c2c expects a complex input, got ", self.scalar_type());
  if (dim.empty()) return self.clone();
  const bool fits = std::all_of(dim.begin(), dim.end(), [&](int64_t d) { return transformable(self.size(d)); });
  if (!native_complex(self) || !fits) return fallback("aten::_fft_c2c", {self, dim, normalization, forward});
  const auto mode = static_cast<fft_norm_mode>(normalization);
  // Computed with the dimensions in the output's order, the innermost transformed last, so that its product lays
  // the result out.
  const std::vector<int64_t> order = mkl_order(self, by_stride(self, dim));
  at::Tensor result = self.permute(order);
  for (int64_t p = self.dim() - static_cast<int64_t>(dim.size()); p < self.dim(); ++p) {
    const int64_t n = result.size(p);
    result = transform_dimension(result, p, Product::ComplexToComplex, n, n, forward ? -1 : 1, scale_of(mode, n));
  }
  return restored(result, order);
}

at::Tensor npusim_fft_r2c(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, bool onesided) {
  TORCH_CHECK(self.is_floating_point(), "_fft_r2c expects a floating point input, got ", self.scalar_type());
  TORCH_CHECK(!dim.empty(), "_fft_r2c needs at least one dimension to transform");
  const int64_t n = self.size(dim.back());
  const int64_t outputs = onesided ? n / 2 + 1 : n;
  const bool fits = std::all_of(dim.begin(), dim.end(), [&](int64_t d) { return transformable(self.size(d)); });
  if (self.scalar_type() != at::kFloat || !fits)
    return fallback("aten::_fft_r2c", {self, dim, normalization, onesided});
  const auto mode = static_cast<fft_norm_mode>(normalization);
  const std::vector<int64_t> order = mkl_order(self, by_stride(self, dim, /*kept_last=*/1));
  // The real dimension (last in the order) first, as it makes the signal complex, then the others.
  const int64_t last = self.dim() - 1;
  at::Tensor result =
      transform_dimension(self.permute(order), last, Product::RealToComplex, n, outputs, -1, scale_of(mode, n));
  for (int64_t p = self.dim() - static_cast<int64_t>(dim.size()); p < last; ++p) {
    const int64_t size = result.size(p);
    result = transform_dimension(result, p, Product::ComplexToComplex, size, size, -1, scale_of(mode, size));
  }
  return restored(result, order);
}

at::Tensor npusim_fft_c2r(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, int64_t last_dim_size) {
  TORCH_CHECK(self.is_complex(), "_fft_c2r expects a complex input, got ", self.scalar_type());
  TORCH_CHECK(!dim.empty(), "_fft_c2r needs at least one dimension to transform");
  TORCH_CHECK(last_dim_size >= 1, "Invalid number of data points (", last_dim_size, ") specified");
  const int64_t terms = last_dim_size / 2 + 1;
  const bool fits = transformable(last_dim_size) &&
                    std::all_of(dim.begin(), dim.end() - 1, [&](int64_t d) { return transformable(self.size(d)); });
  if (!native_complex(self) || !fits) return fallback("aten::_fft_c2r", {self, dim, normalization, last_dim_size});
  const auto mode = static_cast<fft_norm_mode>(normalization);
  // MKL transforms the other dimensions first (complex to complex), then the last one, which ends innermost; the
  // rest keep the order the first step gave them.
  const std::vector<int64_t> leading(dim.begin(), dim.end() - 1);
  std::vector<int64_t> order;
  for (const int64_t d : mkl_order(self, by_stride(self, leading)))
    if (d != dim.back()) order.push_back(d);
  order.push_back(dim.back());
  at::Tensor result = self.permute(order);
  for (const int64_t d : leading) {
    const int64_t p = position_in(order, d), n = result.size(p);
    result = transform_dimension(result, p, Product::ComplexToComplex, n, n, 1, scale_of(mode, n));
  }
  // The spectrum's terms 0..N/2 (more are ignored; missing ones are zero).
  const int64_t last = self.dim() - 1, available = result.size(last);
  if (available > terms) result = result.narrow(last, 0, terms);
  if (available < terms) result = at::constant_pad_nd(result, {0, terms - available}, 0);
  result = transform_dimension(result, last, Product::ComplexToReal, last_dim_size, last_dim_size, 1,
                               scale_of(mode, last_dim_size));
  return restored(result, order);
}

template <typename Transform, typename... Arguments>
at::Tensor& into(at::Tensor& out, Transform transform, const at::Tensor& self, Arguments... arguments) {
  const at::Tensor result = transform(self, arguments...);
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

at::Tensor& npusim_fft_c2c_out(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, bool forward,
                               at::Tensor& out) {
  return into(out, npusim_fft_c2c, self, dim, normalization, forward);
}

at::Tensor& npusim_fft_r2c_out(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, bool onesided,
                               at::Tensor& out) {
  return into(out, npusim_fft_r2c, self, dim, normalization, onesided);
}

at::Tensor& npusim_fft_c2r_out(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization,
                               int64_t last_dim_size, at::Tensor& out) {
  return into(out, npusim_fft_c2r, self, dim, normalization, last_dim_size);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fft_c2c", npusim_fft_c2c);
  m.impl("_fft_c2c.out", npusim_fft_c2c_out);
  m.impl("_fft_r2c", npusim_fft_r2c);
  m.impl("_fft_r2c.out", npusim_fft_r2c_out);
  m.impl("_fft_c2r", npusim_fft_c2r);
  m.impl("_fft_c2r.out", npusim_fft_c2r_out);
}

}  // namespace npusim::bridge

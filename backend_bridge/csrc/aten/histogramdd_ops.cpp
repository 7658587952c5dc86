// torch.histogram and torch.histogramdd of float32 tensors, composed from native kernels as the CPU defines them: with
// bin counts, the outer edges are the range given or the data's minimum and maximum per dimension (read on the host,
// as the CPU reads them; widened by half a unit each side when equal) and the edges a linspace between them; or the
// edges are given. Each point's bin per dimension is the last edge at or below it (a searchsorted, which is what the
// CPU's interpolation with its local search finds), the top edge in the last bin; points outside the edges or NaN
// count nowhere. The bins' counts (or summed weights) are an index_add into the flattened histogram; density divides
// by the total and by each bin's widths. Other dtypes take the CPU fallback.
#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/diff.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/le.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "bridge.h"

namespace npusim::bridge {
namespace {

bool histograms_natively(const at::Tensor& self, const std::optional<at::Tensor>& weight) {
  return self.device().is_privateuseone() && self.scalar_type() == at::kFloat &&
         (!weight || (weight->scalar_type() == at::kFloat && weight->device() == self.device()));
}

// Edges given as tensors: each one-dimensional, float32 on self's device (else the fallback, with PyTorch's errors).
bool edges_natively(const at::Tensor& self, at::TensorList edges) {
  return std::all_of(edges.begin(), edges.end(), [&](const at::Tensor& e) {
    return e.device() == self.device() && e.scalar_type() == at::kFloat && e.dim() == 1 && e.numel() > 0;
  });
}

// self as M points of N coordinates (histogram's 1-D data: N = 1).
at::Tensor as_points(const at::Tensor& self, int64_t dimensions) { return self.reshape({-1, dimensions}); }

// Each dimension's edges: bins + 1 evenly spaced values over the range given or the points' extent.
std::vector<at::Tensor> bin_edges(const at::Tensor& points, at::IntArrayRef bins,
                                  std::optional<at::ArrayRef<double>> range) {
  const int64_t dimensions = points.size(1);
  TORCH_CHECK(static_cast<int64_t>(bins.size()) == dimensions, "torch.histogramdd: expected ", dimensions,
              " sequences of bin edges for a ", dimensions, "-dimensional histogram but got ", bins.size());
  std::vector<double> lowest(dimensions, 0.0), highest(dimensions, 1.0);  // an empty input's, as numpy's
  if (range) {
    TORCH_CHECK(static_cast<int64_t>(range->size()) == 2 * dimensions, "torch.histogramdd: for a ", dimensions,
                "-dimensional histogram range should have ", 2 * dimensions, " elements, but got ", range->size());
    for (int64_t d = 0; d < dimensions; ++d)
      std::tie(lowest[d], highest[d]) = std::pair((*range)[2 * d], (*range)[2 * d + 1]);
  } else if (points.numel() > 0) {
    const auto [minimum, maximum] = at::aminmax(points, 0);
    const at::Tensor low = minimum.cpu(), high = maximum.cpu();
    for (int64_t d = 0; d < dimensions; ++d)
      std::tie(lowest[d], highest[d]) = std::pair(low[d].item<double>(), high[d].item<double>());
  }
  std::vector<at::Tensor> edges;
  for (int64_t d = 0; d < dimensions; ++d) {
    TORCH_CHECK(std::isfinite(lowest[d]) && std::isfinite(highest[d]), "torch.histogramdd: dimension ", d, "'s range [",
                lowest[d], ", ", highest[d], "] is not finite");
    TORCH_CHECK(lowest[d] <= highest[d], "torch.histogramdd: min should not exceed max, but got min ", lowest[d],
                " max ", highest[d], " for dimension ", d);
    TORCH_CHECK(bins[d] > 0, "torch.histogram(): bins must be > 0, but got ", bins[d], " for dimension ", d);
    if (lowest[d] == highest[d]) std::tie(lowest[d], highest[d]) = std::pair(lowest[d] - 0.5, highest[d] + 0.5);
    edges.push_back(at::linspace(lowest[d], highest[d], bins[d] + 1, points.options()));
  }
  return edges;
}

// The histogram of the points over the edges, of shape (bins per dimension).
at::Tensor counts(const at::Tensor& points, const std::vector<at::Tensor>& edges,
                  const std::optional<at::Tensor>& weight, bool density) {
  const int64_t dimensions = points.size(1);
  std::vector<int64_t> shape;
  int64_t total = 1;
  for (const at::Tensor& e : edges) {
    shape.push_back(e.numel() - 1);
    total *= e.numel() - 1;
  }
  if (total == 0) return at::zeros(shape, points.options());
  at::Tensor flat = at::zeros({points.size(0)}, points.options().dtype(at::kLong));
  at::Tensor inside = at::ones({points.size(0)}, points.options().dtype(at::kBool));
  int64_t stride = total;
  for (int64_t d = 0; d < dimensions; ++d) {
    const at::Tensor x = points.select(1, d).contiguous();
    const int64_t last = edges[d].numel() - 1;
    at::Tensor bin = at::sub(at::searchsorted(edges[d], x, /*out_int32=*/false, /*right=*/true), 1);
    bin = at::where(at::eq(bin, last), last - 1, bin);  // the top edge is in the last bin
    inside =
        at::logical_and(inside, at::logical_and(at::ge(x, edges[d].select(0, 0)), at::le(x, edges[d].select(0, last))));
    stride /= last;
    flat = at::add(flat, at::mul(bin, stride));
  }
  const at::Tensor weights =
      at::where(inside, weight ? weight->reshape({-1}) : at::ones({points.size(0)}, points.options()), 0.0);
  at::Tensor hist =
      at::zeros({total}, points.options()).index_add_(0, at::where(inside, flat, 0), weights).reshape(shape);
  if (!density) return hist;
  hist = at::div(hist, at::sum(hist));
  for (int64_t d = 0; d < dimensions; ++d) {
    std::vector<int64_t> along(dimensions, 1);
    along[d] = shape[d];
    hist = at::div(hist, at::diff(edges[d]).reshape(along));
  }
  return hist;
}

std::tuple<at::Tensor, at::Tensor> npusim_histogram(const at::Tensor& self, int64_t bins,
                                                    std::optional<at::ArrayRef<double>> range,
                                                    const std::optional<at::Tensor>& weight, bool density) {
  if (!histograms_natively(self, weight)) {
    torch::jit::Stack stack{self, bins, range, weight, density};
    call_cpu_fallback("aten::histogram", "bin_ct", stack);
    return {stack[0].toTensor(), stack[1].toTensor()};
  }
  const at::Tensor points = as_points(self, 1);
  const std::vector<at::Tensor> edges = bin_edges(points, {bins}, range);
  return {counts(points, edges, weight, density), edges[0]};
}

// Edges given: any increasing sequence, each point's bin found by the same search.
std::tuple<at::Tensor, at::Tensor> npusim_histogram_edges(const at::Tensor& self, const at::Tensor& bins,
                                                          const std::optional<at::Tensor>& weight, bool density) {
  if (!histograms_natively(self, weight) || !edges_natively(self, {bins})) {
    torch::jit::Stack stack{self, bins, weight, density};
    call_cpu_fallback("aten::histogram", "bins_tensor", stack);
    return {stack[0].toTensor(), stack[1].toTensor()};
  }
  const at::Tensor edges = bins.contiguous();
  return {counts(as_points(self, 1), {edges}, weight, density), edges.clone()};
}

std::vector<at::Tensor> npusim_histogramdd_bin_edges(const at::Tensor& self, at::IntArrayRef bins,
                                                     std::optional<at::ArrayRef<double>> range,
                                                     const std::optional<at::Tensor>& weight, bool density) {
  if (!histograms_natively(self, weight) || self.dim() < 2) {
    torch::jit::Stack stack{self, bins, range, weight, density};
    call_cpu_fallback("aten::_histogramdd_bin_edges", "", stack);
    return stack[0].toTensorVector();
  }
  return bin_edges(as_points(self, self.size(-1)), bins, range);
}

at::Tensor npusim_histogramdd_from_bin_cts(const at::Tensor& self, at::IntArrayRef bins,
                                           std::optional<at::ArrayRef<double>> range,
                                           const std::optional<at::Tensor>& weight, bool density) {
  if (!histograms_natively(self, weight) || self.dim() < 2) {
    torch::jit::Stack stack{self, bins, range, weight, density};
    call_cpu_fallback("aten::_histogramdd_from_bin_cts", "", stack);
    return stack[0].toTensor();
  }
  const at::Tensor points = as_points(self, self.size(-1));
  return counts(points, bin_edges(points, bins, range), weight, density);
}

at::Tensor npusim_histogramdd_from_bin_tensors(const at::Tensor& self, at::TensorList bins,
                                               const std::optional<at::Tensor>& weight, bool density) {
  const bool native = histograms_natively(self, weight) && edges_natively(self, bins) && self.dim() >= 2 &&
                      static_cast<int64_t>(bins.size()) == self.size(-1);
  if (!native) {
    torch::jit::Stack stack{self, bins, weight, density};
    call_cpu_fallback("aten::_histogramdd_from_bin_tensors", "", stack);
    return stack[0].toTensor();
  }
  std::vector<at::Tensor> edges;
  for (const at::Tensor& e : bins) edges.push_back(e.contiguous());
  return counts(as_points(self, self.size(-1)), edges, weight, density);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histogram.bin_ct", npusim_histogram);
  m.impl("histogram.bins_tensor", npusim_histogram_edges);
  m.impl("_histogramdd_from_bin_tensors", npusim_histogramdd_from_bin_tensors);
  m.impl("_histogramdd_bin_edges", npusim_histogramdd_bin_edges);
  m.impl("_histogramdd_from_bin_cts", npusim_histogramdd_from_bin_cts);
}

}  // namespace npusim::bridge

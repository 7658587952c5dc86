// grid_sampler_3d (F.grid_sample of 5-D inputs: trilinear and nearest, zeros, border and reflection padding, either
// alignment), composed from native kernels as the CPU's kernel computes it: each grid point's coordinates unnormalised
// to the input's voxels, padded (clipped, or reflected then clipped), then the voxels around it gathered from the
// input seen as (N, C, D*H*W) and weighted, corners outside the input counting zero; the eight trilinear corners are
// summed in the CPU's order (tnw, tne, tsw, tse, bnw, bne, bsw, bse) with its weights (products of distances to the
// opposite corner). Nearest rounds half to even, as nearbyint does. Other dtypes and modes (bicubic, which PyTorch
// refuses in 3-D) take the CPU fallback, as do volumes of more than 2^24 voxels (whose numbers, computed in float32,
// would not be exact). The backward differentiates this composition (composition_gradients.h).
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/div.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/floor.h>
#include <ATen/ops/fmod.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/le.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/remainder.h>
#include <ATen/ops/round.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "bridge.h"
#include "composition_gradients.h"

namespace npusim::bridge {
namespace {

enum Padding { Zeros = 0, Border = 1, Reflection = 2 };

// A grid coordinate in [-1, 1] as a position in voxels of a dimension of `size`.
at::Tensor unnormalise(const at::Tensor& coordinate, int64_t size, bool align_corners) {
  if (align_corners) return at::mul(at::div(at::add(coordinate, 1), 2), static_cast<double>(size - 1));
  return at::div(at::sub(at::mul(at::add(coordinate, 1), static_cast<double>(size)), 1), 2);
}

// Reflects x about the edges of [twice_low / 2, twice_high / 2] until it lies inside, as the CPU's
// reflect_coordinates does.
at::Tensor reflect(const at::Tensor& x, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return at::zeros_like(x);
  const double low = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
  const at::Tensor distance = at::abs(at::sub(x, low));
  const at::Tensor extra = at::fmod(distance, span);
  const at::Tensor flips = at::floor(at::div(distance, span));
  const at::Tensor even = at::eq(at::remainder(flips, 2), 0);
  return at::where(even, at::add(extra, low), at::add(at::rsub(extra, span), low));
}

at::Tensor clip(const at::Tensor& x, int64_t size) { return at::clamp(x, 0, static_cast<double>(size - 1)); }

at::Tensor source_position(const at::Tensor& coordinate, int64_t size, int64_t padding, bool align_corners) {
  at::Tensor x = unnormalise(coordinate, size, align_corners);
  if (padding == Border) return clip(x, size);
  if (padding == Reflection) {
    x = align_corners ? reflect(x, 0, 2 * (size - 1)) : reflect(x, -1, 2 * size - 1);
    return clip(x, size);
  }
  return x;
}

// The input's values at integer voxel positions (z, y, x) of each grid point, zero where a position is outside:
// (N, C, points).
at::Tensor gather_voxels(const at::Tensor& flat_input, c10::IntArrayRef sizes, const at::Tensor& z, const at::Tensor& y,
                         const at::Tensor& x) {
  const int64_t depth = sizes[2], height = sizes[3], width = sizes[4];
  const auto within = [](const at::Tensor& p, int64_t size) {
    return at::logical_and(at::ge(p, 0), at::le(p, static_cast<double>(size - 1)));
  };
  const at::Tensor inside = at::logical_and(within(z, depth), at::logical_and(within(y, height), within(x, width)));
  const at::Tensor linear = at::add(at::add(at::mul(clip(z, depth), static_cast<double>(height * width)),
                                            at::mul(clip(y, height), static_cast<double>(width))),
                                    clip(x, width));
  const int64_t batch = flat_input.size(0), channels = flat_input.size(1);
  const at::Tensor index =
      linear.to(at::kLong).reshape({batch, 1, -1}).expand({batch, channels, linear.numel() / batch});
  const at::Tensor values = at::gather(flat_input, 2, index);
  return at::where(inside.reshape({batch, 1, -1}), values, 0.0);
}

bool composable(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation_mode, int64_t padding_mode) {
  return input.device().is_privateuseone() && grid.device() == input.device() && input.scalar_type() == at::kFloat &&
         grid.scalar_type() == at::kFloat && input.dim() == 5 && grid.dim() == 5 && grid.size(4) == 3 &&
         grid.size(0) == input.size(0) && (interpolation_mode == 0 || interpolation_mode == 1) && padding_mode >= 0 &&
         padding_mode <= 2 && input.numel() > 0 && grid.numel() > 0 &&
         input.size(2) * input.size(3) * input.size(4) <= (int64_t{1} << 24);  // voxel numbers exact
}

// The composition itself, for inputs composable() takes.
at::Tensor sample_volume(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation_mode,
                         int64_t padding_mode, bool align_corners) {
  const c10::IntArrayRef sizes = input.sizes();
  const int64_t batch = sizes[0], channels = sizes[1];
  const at::Tensor flat_input = input.reshape({batch, channels, -1});
  const at::Tensor ix = source_position(grid.select(4, 0), sizes[4], padding_mode, align_corners);
  const at::Tensor iy = source_position(grid.select(4, 1), sizes[3], padding_mode, align_corners);
  const at::Tensor iz = source_position(grid.select(4, 2), sizes[2], padding_mode, align_corners);
  std::vector<int64_t> out_shape{batch, channels, grid.size(1), grid.size(2), grid.size(3)};
  if (interpolation_mode == 1)  // nearest
    return gather_voxels(flat_input, sizes, at::round(iz), at::round(iy), at::round(ix)).reshape(out_shape);

  const at::Tensor x0 = at::floor(ix), y0 = at::floor(iy), z0 = at::floor(iz);
  const at::Tensor x1 = at::add(x0, 1), y1 = at::add(y0, 1), z1 = at::add(z0, 1);
  // Distances to each side: "west/east" along x, "north/south" along y, "top/bottom" along z.
  const at::Tensor to_east = at::sub(x1, ix), to_west = at::sub(ix, x0);
  const at::Tensor to_south = at::sub(y1, iy), to_north = at::sub(iy, y0);
  const at::Tensor to_bottom = at::sub(z1, iz), to_top = at::sub(iz, z0);
  struct Corner {
    const at::Tensor &z, &y, &x, &dz, &dy, &dx;
  };
  const Corner corners[] = {
      {z0, y0, x0, to_bottom, to_south, to_east}, {z0, y0, x1, to_bottom, to_south, to_west},
      {z0, y1, x0, to_bottom, to_north, to_east}, {z0, y1, x1, to_bottom, to_north, to_west},
      {z1, y0, x0, to_top, to_south, to_east},    {z1, y0, x1, to_top, to_south, to_west},
      {z1, y1, x0, to_top, to_north, to_east},    {z1, y1, x1, to_top, to_north, to_west},
  };
  at::Tensor out;
  for (const Corner& c : corners) {
    const at::Tensor weight = at::mul(at::mul(c.dx, c.dy), c.dz).reshape({batch, 1, -1});
    const at::Tensor term = at::mul(gather_voxels(flat_input, sizes, c.z, c.y, c.x), weight);
    out = out.defined() ? at::add(out, term) : term;
  }
  return out.reshape(out_shape);
}

at::Tensor npusim_grid_sampler_3d(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation_mode,
                                  int64_t padding_mode, bool align_corners) {
  if (composable(input, grid, interpolation_mode, padding_mode))
    return sample_volume(input, grid, interpolation_mode, padding_mode, align_corners);
  torch::jit::Stack stack{input, grid, interpolation_mode, padding_mode, align_corners};
  call_cpu_fallback("aten::grid_sampler_3d", "", stack);
  return stack[0].toTensor();
}

// The gradients of the input and the grid, by autograd over the composition above (the gathers' gradients are
// scatter-adds; nearest's rounding gives the grid zeros, as the CPU's kernel does).
std::tuple<at::Tensor, at::Tensor> npusim_grid_sampler_3d_backward(const at::Tensor& grad_output,
                                                                   const at::Tensor& input, const at::Tensor& grid,
                                                                   int64_t interpolation_mode, int64_t padding_mode,
                                                                   bool align_corners,
                                                                   std::array<bool, 2> output_mask) {
  if (composable(input, grid, interpolation_mode, padding_mode) && grad_output.device() == input.device() &&
      grad_output.scalar_type() == at::kFloat) {
    const std::vector<at::Tensor> gradients = composition_gradients(
        [&](const std::vector<at::Tensor>& leaves) {
          return sample_volume(leaves[0], leaves[1], interpolation_mode, padding_mode, align_corners);
        },
        {input, grid}, {output_mask[0], output_mask[1]}, grad_output);
    return {gradients[0], gradients[1]};
  }
  torch::jit::Stack stack{grad_output,
                          input,
                          grid,
                          interpolation_mode,
                          padding_mode,
                          align_corners,
                          c10::List<bool>({output_mask[0], output_mask[1]})};
  call_cpu_fallback("aten::grid_sampler_3d_backward", "", stack);
  return {stack[0].toTensor(), stack[1].toTensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("grid_sampler_3d", npusim_grid_sampler_3d);
  m.impl("grid_sampler_3d_backward", npusim_grid_sampler_3d_backward);
}

}  // namespace npusim::bridge

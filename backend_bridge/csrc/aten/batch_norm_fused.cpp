// Batch norm's training forward and backward as one fused kernel each (batch_norm_fused.h). Each formula is the one
// the composed path (batch_norm_ops.cpp) computes, operation for operation; only the channel sums add in another
// order (a whole row at once rather than per sample, then over the batch).
#include "batch_norm_fused.h"

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "bridge.h"
#include "runtime/kernel_launcher.h"
#include "tensor_kernel.h"

namespace npusim::bridge {
namespace {

using emitter::FusedOpcode;

// A fused kernel over [C, N, S] of a contiguous [N, C, ...] float32 input.
class ChannelKernel : public TensorKernel {
 public:
  ChannelKernel(const char* name, const at::Tensor& input)
      : TensorKernel(name, {input.size(1), input.size(0), input.numel() / (input.size(0) * input.size(1))}, 2) {
    const int64_t batch = input.size(0), channels = input.size(1), spatial = input.numel() / (batch * channels);
    full_ = {spatial, channels * spatial, 1};
    count_ = static_cast<double>(batch * spatial);
  }

  double count() const { return count_; }
  // A tensor shaped like the input, element by element; a [C] vector, one value per channel.
  int load_full(const at::Tensor& tensor) { return load(tensor, full_); }
  int load_per_channel(const at::Tensor& vector) { return load(vector, kPerChannel); }
  void store_full(int value, const at::Tensor& tensor) { store(value, tensor, full_); }
  void store_per_channel(int value, const at::Tensor& vector) { store(value, vector, kPerChannel); }

 private:
  static constexpr int64_t kPerChannel[] = {1, 0, 0};
  std::vector<int64_t> full_;
  double count_ = 0;
};

// The input and the tensors shaped like it contiguous, the per-channel vectors (those defined) too: the kernel walks
// them with the strides of [N, C, S] and [C].
bool walkable(const at::Tensor& input, std::initializer_list<at::Tensor> like_input,
              std::initializer_list<at::Tensor> vectors) {
  if (input.dim() < 2 || input.numel() == 0 || !input.is_contiguous()) return false;
  for (const at::Tensor& tensor : like_input)
    if (!tensor.is_contiguous() || tensor.sizes() != input.sizes()) return false;
  for (const at::Tensor& vector : vectors)
    if (vector.defined() && (!vector.is_contiguous() || vector.numel() != input.size(1))) return false;
  return true;
}

}  // namespace

bool batch_norm_forward_in_one_kernel(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                                      const at::Tensor& running_mean, const at::Tensor& running_var, double momentum,
                                      double eps, const at::Tensor& output, const at::Tensor& mean,
                                      const at::Tensor& invstd) {
  if (!walkable(input, {output}, {weight, bias, running_mean, running_var, mean, invstd})) return false;
  ChannelKernel k("batch_norm_f32", input);
  using enum FusedOpcode;
  const int x = k.load_full(input), count = k.constant(k.count());
  const int batch_mean = k.op(Div, k.op(ReduceSum, x), count);
  const int centered = k.op(Sub, x, batch_mean);
  const int variance = k.op(Div, k.op(ReduceSum, k.op(Mul, centered, centered)), count);
  const int batch_invstd = k.op(Rsqrt, k.op(Add, variance, k.constant(eps)));
  const int scale = weight.defined() ? k.op(Mul, batch_invstd, k.load_per_channel(weight)) : batch_invstd;
  const int scaled = k.op(Mul, centered, scale);
  k.store_full(bias.defined() ? k.op(Add, scaled, k.load_per_channel(bias)) : scaled, output);
  k.store_per_channel(batch_mean, mean);
  k.store_per_channel(batch_invstd, invstd);
  // running = running (1 - momentum) + statistic factor, the second step a fused multiply-add as the CPU's add_ with
  // alpha computes it.
  const auto update = [&](const at::Tensor& running, int statistic, double factor) {
    if (!running.defined()) return;
    const int kept = k.op(Mul, k.load_per_channel(running), k.constant(1 - momentum));
    k.store_per_channel(k.op(MulAdd, statistic, k.constant(factor), kept), running);
  };
  update(running_mean, batch_mean, momentum);
  update(running_var, variance, momentum * k.count() / std::max(k.count() - 1, 1.0));
  return k.launch(input);
}

bool batch_norm_backward_in_one_kernel(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                                       const at::Tensor& mean, const at::Tensor& invstd, const at::Tensor& grad_input,
                                       const at::Tensor& grad_weight, const at::Tensor& grad_bias) {
  if (!walkable(input, {grad_output, grad_input}, {weight, mean, invstd, grad_weight, grad_bias})) return false;
  ChannelKernel k("batch_norm_backward_f32", input);
  using enum FusedOpcode;
  const int dy = k.load_full(grad_output), count = k.constant(k.count());
  const int saved_invstd = k.load_per_channel(invstd);
  const int normalized = k.op(Mul, k.op(Sub, k.load_full(input), k.load_per_channel(mean)), saved_invstd);
  const int bias_sum = k.op(ReduceSum, dy), weight_sum = k.op(ReduceSum, k.op(Mul, dy, normalized));
  const int centered_grad = k.op(Sub, k.op(Sub, k.op(Mul, dy, count), bias_sum), k.op(Mul, normalized, weight_sum));
  const int scale = weight.defined() ? k.op(Mul, saved_invstd, k.load_per_channel(weight)) : saved_invstd;
  k.store_full(k.op(Mul, centered_grad, k.op(Div, scale, count)), grad_input);
  k.store_per_channel(weight_sum, grad_weight);
  k.store_per_channel(bias_sum, grad_bias);
  return k.launch(input);
}

}  // namespace npusim::bridge

// The fused LSTM cell that nn.LSTM calls on accelerators (PyTorch has it only for CUDA; it has no CPU kernel for the
// fallback to run), composed from native kernels: gate sums, sigmoid and tanh, products and sums. Its workspace is
// the activated gates [input, forget, cell, output] side by side, as CUDA's, for the backward.
#include <ATen/ops/add.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

namespace npusim::bridge {
namespace {

// gates = input_gates + hidden_gates (+ biases) as [batch, 4 hidden]: i, f, o = sigmoid, g = tanh;
// cy = f cx + i g, hy = o tanh(cy).
std::tuple<at::Tensor, at::Tensor, at::Tensor> npusim_fused_lstm_cell(const at::Tensor& input_gates,
                                                                      const at::Tensor& hidden_gates,
                                                                      const at::Tensor& cx,
                                                                      const std::optional<at::Tensor>& input_bias,
                                                                      const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor gates = at::add(input_gates, hidden_gates);
  if (input_bias.has_value() && input_bias->defined()) gates = at::add(gates, *input_bias);
  if (hidden_bias.has_value() && hidden_bias->defined()) gates = at::add(gates, *hidden_bias);
  const auto chunks = gates.chunk(4, 1);
  const at::Tensor in = at::sigmoid(chunks[0]), forget = at::sigmoid(chunks[1]), cell = at::tanh(chunks[2]),
                   out = at::sigmoid(chunks[3]);
  const at::Tensor cy = at::add(at::mul(forget, cx), at::mul(in, cell));
  const at::Tensor hy = at::mul(out, at::tanh(cy));
  return {hy, cy, at::cat({in, forget, cell, out}, 1)};
}

// The derivative of sigmoid from its value s: s (1 - s); of tanh from its value t: 1 - t^2.
at::Tensor sigmoid_slope(const at::Tensor& s) { return at::mul(s, at::rsub(s, 1)); }
at::Tensor tanh_slope(const at::Tensor& t) { return at::rsub(at::mul(t, t), 1); }

// Returns the gradients of the gate sums, of cx, and (with a bias) of the bias: the gate gradients summed over the
// batch.
std::tuple<at::Tensor, at::Tensor, at::Tensor> npusim_fused_lstm_cell_backward(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy, const at::Tensor& cx,
    const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  const auto gates = workspace.chunk(4, 1);
  const at::Tensor &in = gates[0], &forget = gates[1], &cell = gates[2], &out = gates[3];
  const bool has_grad_hy = grad_hy.has_value() && grad_hy->defined();
  const bool has_grad_cy = grad_cy.has_value() && grad_cy->defined();
  const at::Tensor tanh_cy = at::tanh(cy);
  const at::Tensor grad_h = has_grad_hy ? *grad_hy : at::zeros_like(cy);
  // d/d cy: through hy = o tanh(cy), plus what comes in directly.
  at::Tensor grad_c = at::mul(at::mul(grad_h, out), tanh_slope(tanh_cy));
  if (has_grad_cy) grad_c = at::add(grad_c, *grad_cy);
  const at::Tensor grad_gates =
      at::cat({at::mul(at::mul(grad_c, cell), sigmoid_slope(in)), at::mul(at::mul(grad_c, cx), sigmoid_slope(forget)),
               at::mul(at::mul(grad_c, in), tanh_slope(cell)), at::mul(at::mul(grad_h, tanh_cy), sigmoid_slope(out))},
              1);
  const at::Tensor grad_cx = at::mul(grad_c, forget);
  return {grad_gates, grad_cx, has_bias ? at::sum(grad_gates, {0}) : at::Tensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", npusim_fused_lstm_cell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", npusim_fused_lstm_cell_backward);
}

}  // namespace npusim::bridge

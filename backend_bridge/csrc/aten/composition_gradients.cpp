#include "composition_gradients.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/autograd.h>

namespace npusim::bridge {

std::vector<at::Tensor> composition_gradients(const std::function<at::Tensor(const std::vector<at::Tensor>&)>& forward,
                                              const std::vector<at::Tensor>& inputs, const std::vector<bool>& needed,
                                              const at::Tensor& grad_output) {
  const c10::impl::LocalDispatchKeySet keys = c10::impl::tls_local_dispatch_key_set();
  const c10::impl::ForceDispatchKeyGuard with_autograd(
      keys.included_, keys.excluded_ - c10::autograd_dispatch_keyset_with_ADInplaceOrView);
  const at::AutoGradMode grad_mode(true);
  std::vector<at::Tensor> leaves, wanted;
  for (size_t i = 0; i < inputs.size(); ++i) {
    leaves.push_back(inputs[i].detach().requires_grad_(needed[i]));
    if (needed[i]) wanted.push_back(leaves.back());
  }
  const at::Tensor output = forward(leaves);
  std::vector<at::Tensor> found;
  if (!wanted.empty() && output.requires_grad())
    found = torch::autograd::grad({output}, wanted, {grad_output}, /*retain_graph=*/false, /*create_graph=*/false,
                                  /*allow_unused=*/true);
  std::vector<at::Tensor> gradients;
  size_t next = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!needed[i]) {
      gradients.emplace_back();
      continue;
    }
    const at::Tensor gradient = next < found.size() ? found[next] : at::Tensor();
    ++next;
    gradients.push_back(gradient.defined() ? gradient : at::zeros_like(inputs[i]));
  }
  return gradients;
}

}  // namespace npusim::bridge

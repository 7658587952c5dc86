// A libtorch C++ program on npusim: a torch::nn::Linear forward and backward on the simulated NPU, checked against
// the same on the CPU. Link against libnpusim_torch.
#include <torch/torch.h>

#include "npusim_torch.h"

#include <iostream>

int main() {
  npusim::register_backend();
  const torch::Device npu(c10::DeviceType::PrivateUse1, 0);
  torch::manual_seed(0);

  torch::nn::Linear on_cpu(16, 8);
  torch::nn::Linear on_npu(16, 8);
  {
    torch::NoGradGuard no_grad;
    on_npu->weight.copy_(on_cpu->weight);
    on_npu->bias.copy_(on_cpu->bias);
  }
  on_npu->to(npu);

  const torch::Tensor input = torch::randn({4, 16});
  const torch::Tensor expected = on_cpu->forward(input);
  const torch::Tensor output = on_npu->forward(input.to(npu));
  expected.sum().backward();
  output.sum().backward();

  const bool on_device = output.device() == npu && on_npu->weight.grad().device() == npu;
  const bool forward_ok = torch::allclose(output.cpu(), expected, 1e-5, 1e-5);
  const bool backward_ok = torch::allclose(on_npu->weight.grad().cpu(), on_cpu->weight.grad(), 1e-5, 1e-5) &&
                           torch::allclose(on_npu->bias.grad().cpu(), on_cpu->bias.grad(), 1e-5, 1e-5);
  std::cout << "output on " << output.device() << ": forward " << (forward_ok ? "matches" : "DIFFERS")
            << " the CPU, backward " << (backward_ok ? "matches" : "DIFFERS") << "\n";
  return on_device && forward_ok && backward_ok ? 0 : 1;
}

"""How close convolutions come to their roofline bound in timed mode: forward and backward of float32 conv2d layers
of ResNet-like shapes, against max(2 x MACs / peak, bytes of input, weights and output / DRAM bandwidth) for the
forward, and twice that for the backward (two products of the same size: the input's and the weights' gradients).

    python bench/conv_roofline.py              # default config
    python bench/conv_roofline.py datacenter

Each figure is the device time of all commands the operator issued (padding, layout copies, products) divided by
the bound: 1.0 would be the roofline itself. Not a test: a report.
"""

import os
import sys

os.environ["NPUSIM_MODE"] = "timed"
os.environ["NPUSIM_CONFIG"] = sys.argv[1] if len(sys.argv) > 1 else "default"

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import npusim  # noqa: E402

# (batch, channels in, height = width, channels out, kernel size)
SHAPES = [(8, 64, 32, 64, 3), (8, 128, 16, 128, 3), (4, 256, 14, 256, 3), (8, 64, 56, 64, 1)]


def main():
    print(f"{'N x C x H x W -> O, kernel':<32}{'forward':>10}{'backward':>10}   (x roofline bound)")
    for batch, channels, size, outputs, kernel in SHAPES:
        torch.manual_seed(0)
        x = torch.randn(batch, channels, size, size).to("npusim").requires_grad_()
        weight = torch.randn(outputs, channels, kernel, kernel).to("npusim").requires_grad_()
        grad = torch.randn(batch, outputs, size, size).to("npusim")
        F.conv2d(x, weight, padding=kernel // 2).backward(grad)  # warm-up: the kernel cache
        x.grad = weight.grad = None  # as optimizer.zero_grad() leaves them: the backward writes, not accumulates
        with npusim.profile() as forward:
            y = F.conv2d(x, weight, padding=kernel // 2)
            torch.npusim.synchronize()
        with npusim.profile() as backward:
            y.backward(grad)
            torch.npusim.synchronize()
        flops = 2 * batch * outputs * channels * kernel * kernel * size * size
        bytes_moved = 4 * (x.numel() + weight.numel() + y.numel())
        seconds = max(
            flops / (forward.peak_gflops() * 1e9), bytes_moved / (forward.parameters["dram.bandwidth_gbps"] * 1e9)
        )
        bound = seconds * forward.clock_ghz * 1e9
        shape = f"{batch} x {channels} x {size} x {size} -> {outputs}, {kernel}x{kernel}"
        print(
            f"{shape:<32}{forward.total_device_cycles / bound:>9.2f}x"
            f"{backward.total_device_cycles / (2 * bound):>9.2f}x"
        )


if __name__ == "__main__":
    main()

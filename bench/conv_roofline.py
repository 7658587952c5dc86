"""How close convolutions come to their roofline bound in timed mode: forward and backward of float32 conv2d layers
of ResNet-like shapes, against max(2 x MACs / peak, bytes of input, weights and output / DRAM bandwidth) for the
forward, and twice that for the backward (two products of the same size: the input's and the weights' gradients).

    python bench/conv_roofline.py              # default config
    python bench/conv_roofline.py datacenter
    python bench/conv_roofline.py --smoke      # one tiny layer: CI's check that it still works

Each figure is the device time of all commands the operator issued (padding, layout copies, products) divided by
the bound: 1.0 would be the roofline itself. The output and both gradients are checked against torch on the CPU, and a
layer whose forward or backward ran no kernel on the device stops the run without a figure. Not a test: a report.
"""

import argparse
import os
import sys

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("config", nargs="?", default="default", help="a preset name or a config file")
parser.add_argument("--smoke", action="store_true", help="one tiny layer (seconds, not minutes)")
arguments = parser.parse_args()
os.environ["NPUSIM_MODE"] = "timed"
os.environ["NPUSIM_CONFIG"] = arguments.config

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import npusim  # noqa: E402

# (batch, channels in, height = width, channels out, kernel size); the first is the ResNet example's (examples/)
SHAPES = [(8, 16, 32, 16, 3), (8, 64, 32, 64, 3), (8, 128, 16, 128, 3), (4, 256, 14, 256, 3), (8, 64, 56, 64, 1)]
SMOKE_SHAPES = [(1, 8, 6, 8, 3)]


def check_against_cpu(y, x, weight, grad, padding, name):
    """A figure from a run that computed something else would be no figure at all."""
    cpu_x, cpu_weight = x.detach().cpu().requires_grad_(), weight.detach().cpu().requires_grad_()
    expected = F.conv2d(cpu_x, cpu_weight, padding=padding)
    expected.backward(grad.cpu())
    for actual, wanted, what in [(y, expected, "output"), (x.grad, cpu_x.grad, "input gradient"),
                                 (weight.grad, cpu_weight.grad, "weight gradient")]:  # fmt: skip
        torch.testing.assert_close(actual.detach().cpu(), wanted, rtol=1e-3, atol=1e-3, msg=f"{name}: wrong {what}")


def main():
    print(f"{'N x C x H x W -> O, kernel':<32}{'forward':>10}{'backward':>10}   (x roofline bound)")
    for batch, channels, size, outputs, kernel in SMOKE_SHAPES if arguments.smoke else SHAPES:
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
        shape = f"{batch} x {channels} x {size} x {size} -> {outputs}, {kernel}x{kernel}"
        for report, what in [(forward, "forward"), (backward, "backward")]:
            if not report.kernels or report.total_device_cycles <= 0 or report.fallbacks:
                sys.exit(f"{shape}: the {what} ran {len(report.kernels)} kernels, {report.total_device_cycles} cycles, "
                         f"CPU fallbacks {report.fallbacks}: no figure")  # fmt: skip
        check_against_cpu(y, x, weight, grad, kernel // 2, shape)
        flops = 2 * batch * outputs * channels * kernel * kernel * size * size
        bytes_moved = 4 * (x.numel() + weight.numel() + y.numel())
        seconds = max(
            flops / (forward.peak_gflops() * 1e9), bytes_moved / (forward.parameters["dram.bandwidth_gbps"] * 1e9)
        )
        bound = seconds * forward.clock_ghz * 1e9
        print(
            f"{shape:<32}{forward.total_device_cycles / bound:>9.2f}x"
            f"{backward.total_device_cycles / (2 * bound):>9.2f}x"
        )


if __name__ == "__main__":
    main()

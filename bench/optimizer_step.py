"""The simulated cost of one optimizer step, per implementation PyTorch offers, measured in one run.

    python bench/optimizer_step.py              # default config
    python bench/optimizer_step.py datacenter
    python bench/optimizer_step.py --smoke      # a tiny model: CI's check that it still works

For Adam, AdamW (amsgrad too) and SGD with momentum over the parameters of an nn.TransformerEncoderLayer(256, 4, 1024)
and a Linear head, it times `optimizer.step()` in timed mode three ways — a per-tensor loop (foreach=False), the
foreach operators (foreach=True) and the fused step (fused=True: one multi-tensor kernel) — and prints each one's
device cycles, kernel launches and CPU fallbacks, and its cycles as a ratio of the per-tensor loop's. Every variant
starts from the same weights and gradients, and its updated parameters must match the CPU's step (a step that
changed nothing, or something else, stops the run without a figure). Not a test: the figures depend only on the
config.
"""

import argparse
import copy
import os
import sys


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="default", help="a preset name or a config file")
    parser.add_argument("--smoke", action="store_true", help="a tiny model (seconds, not minutes)")
    return parser.parse_args()


ARGUMENTS = parse_arguments()
os.environ["NPUSIM_MODE"], os.environ["NPUSIM_CONFIG"] = "timed", ARGUMENTS.config

import torch  # noqa: E402  (after the environment that selects the chip)

import npusim  # noqa: E402

OPTIMIZERS = {
    "Adam": (torch.optim.Adam, {"lr": 1e-3}),
    "AdamW, amsgrad": (torch.optim.AdamW, {"lr": 1e-3, "amsgrad": True}),
    "SGD, momentum": (torch.optim.SGD, {"lr": 1e-2, "momentum": 0.9}),
}
VARIANTS = {"per tensor": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def model():
    torch.manual_seed(0)
    if ARGUMENTS.smoke:
        return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Linear(32, 4))
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
    return torch.nn.Sequential(layer, torch.nn.Linear(256, 10))


def gradients(net):
    """The same random gradient for each parameter in every run."""
    generator = torch.Generator().manual_seed(1)
    return [torch.randn(p.shape, generator=generator) for p in net.parameters()]


def step_twice(optimizer_class, options, variant, device):
    """Two steps (so that the state is not fresh), the second profiled on the device: the parameters and the report."""
    net = model().to(device)
    grads = gradients(net)
    optimizer = optimizer_class(net.parameters(), **options, **variant)
    report = None
    for step in range(2):
        for parameter, grad in zip(net.parameters(), grads, strict=True):
            parameter.grad = (grad * (step + 1)).to(device)
        if step == 1 and device == "npusim":
            with npusim.profile() as report:
                optimizer.step()
                torch.npusim.synchronize()  # launches are asynchronous
        else:
            optimizer.step()
    return [p.detach().cpu() for p in net.parameters()], report


def main():
    print(
        f"{ARGUMENTS.config}: one step of each optimizer over {sum(p.numel() for p in model().parameters())} parameters"
    )
    print(
        f"{'optimizer':16s} {'variant':11s} {'device cycles':>14s} {'launches':>9s} {'vs per tensor':>14s}  fallbacks"
    )
    for name, (optimizer_class, options) in OPTIMIZERS.items():
        expected, _ = step_twice(optimizer_class, options, {}, "cpu")
        baseline = None
        for variant_name, variant in VARIANTS.items():
            actual, report = step_twice(optimizer_class, options, copy.deepcopy(variant), "npusim")
            for got, want in zip(actual, expected, strict=True):
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=f"{name} ({variant_name}): wrong step")
            cycles, launches = report.total_device_cycles, len(report.kernels)
            if cycles == 0 or launches == 0:
                sys.exit(f"{name} ({variant_name}): the step ran no kernel on the device")
            baseline = baseline or cycles
            print(
                f"{name:16s} {variant_name:11s} {cycles:14d} {launches:9d} {cycles / baseline:13.2f}x  "
                f"{dict(report.fallbacks) or 'none'}"
            )


if __name__ == "__main__":
    main()

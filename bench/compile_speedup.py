"""What torch.compile buys on npusim: launches and simulated time per training step, eager against compiled.

    python bench/compile_speedup.py              # default config
    python bench/compile_speedup.py datacenter
    python bench/compile_speedup.py --smoke      # a tiny MLP only: CI's check that it still works
    python bench/compile_speedup.py --dropout 0.1  # the transformer and GPT-2 with their default dropout

For a transformer block (nn.TransformerEncoderLayer, no dropout, AdamW), a small GPT-2 from transformers (AdamW) and
the ResNet-style CNN (SGD), it runs the same training step eagerly and through torch.compile (the loss's forward and
backward, and the optimizer's step, each compiled by Inductor into npusim kernels), in timed mode, from the same
weights and data. For each it prints the device commands (kernel launches and copies) and the simulated device time
of one profiled step after a warm-up, their ratios, the wall time of the compiled run's first step (compiling
included), and the two losses, which must agree with each other and with the same steps run on the CPU (with
--dropout, whose masks differ between the three runs, within 25 % of the CPU's); a step that ran no command on the
device stops the run without a figure. Not a test: a measurement, in one run, against its own baseline.
"""

import argparse
import copy
import os
import sys
import time

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("config", nargs="?", default="default", help="a preset name or a config file")
parser.add_argument("--smoke", action="store_true", help="a tiny MLP only (seconds, not minutes)")
parser.add_argument("--dropout", type=float, default=0.0, help="the transformer's and GPT-2's dropout (default 0)")
arguments = parser.parse_args()
os.environ["NPUSIM_MODE"] = "timed"
os.environ["NPUSIM_CONFIG"] = arguments.config
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import npusim  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from model_breakdown import cnn, encoder, gpt2, tiny_mlp  # noqa: E402  the same models, same sizes


def loss_of(model, loss, inputs, targets):
    return model(inputs, labels=targets).loss if loss is None else loss(model(inputs), targets)


def measure(model, optimizer, forward, update, inputs, targets):
    """(loss, commands, device cycles, wall seconds of the first step) over a warm-up step and a profiled one."""
    started = time.perf_counter()

    def step():
        optimizer.zero_grad()
        value = forward(model, inputs, targets)
        value.backward()
        update()
        return value

    step()
    torch.npusim.synchronize()
    first_step = time.perf_counter() - started
    with npusim.profile() as report:
        value = step()
    assert report.fallbacks == {}, report.fallbacks
    if not report.records or report.total_device_cycles <= 0:
        sys.exit(
            f"the profiled step ran {len(report.records)} commands in {report.total_device_cycles} cycles: no figure"
        )
    return value.item(), len(report.records), report.total_device_cycles, first_step, report


def cpu_loss(model, optimizer_class, loss, inputs, targets):
    """The loss of the second of two training steps on the CPU: the profiled step's counterpart."""
    model = copy.deepcopy(model)
    optimizer = optimizer_class(model.parameters(), lr=1e-3)
    for _ in range(2):
        optimizer.zero_grad()
        value = loss_of(model, loss, inputs, targets)
        value.backward()
        optimizer.step()
    return value.item()


MODELS = [
    # No dropout by default: eager and compiled steps draw different random numbers, so their losses differ.
    ("Transformer block", lambda: encoder(dropout=arguments.dropout)),
    ("GPT-2 (2 layers)", lambda: gpt2(dropout=arguments.dropout)),
    ("ResNet-style CNN", cnn),
]
SMOKE_MODELS = [("MLP (16-32-32-10)", tiny_mlp)]


def main():
    for name, build in SMOKE_MODELS if arguments.smoke else MODELS:
        torch.manual_seed(0)
        model, optimizer_class, cpu_inputs, cpu_targets, loss = build()
        expected = cpu_loss(model, optimizer_class, loss, cpu_inputs, cpu_targets)
        inputs, targets = cpu_inputs.to("npusim"), cpu_targets.to("npusim")
        results = {}
        for mode in ("eager", "compiled"):
            torch._dynamo.reset()
            net = copy.deepcopy(model).to("npusim")
            optimizer = optimizer_class(net.parameters(), lr=1e-3)

            def forward(m, x, y, loss=loss):
                return loss_of(m, loss, x, y)

            if mode == "compiled":
                results[mode] = measure(
                    net, optimizer, torch.compile(forward), torch.compile(optimizer.step), inputs, targets
                )
            else:
                results[mode] = measure(net, optimizer, forward, optimizer.step, inputs, targets)
        eager, compiled = results["eager"], results["compiled"]
        tolerance = 0.25 if arguments.dropout else 1e-3
        for mode, result in results.items():  # a figure from a run that computed something else would be none at all
            if not abs(result[0] - expected) <= tolerance * max(1.0, abs(expected)):
                sys.exit(f"{name}: the {mode} step's loss {result[0]:.6f} differs from the CPU's {expected:.6f}")
        clock = eager[4].clock_ghz
        print(f"\n{name} on {os.environ['NPUSIM_CONFIG']}: losses {eager[0]:.5f} (eager), {compiled[0]:.5f} (compiled)")
        print(f"  commands per step: {eager[1]} eager, {compiled[1]} compiled: {eager[1] / compiled[1]:.2f}x fewer")
        print(
            f"  simulated time per step: {eager[2] / clock / 1e3:.1f} us eager, {compiled[2] / clock / 1e3:.1f} us "
            f"compiled: {eager[2] / compiled[2]:.2f}x less"
        )
        print(f"  first step's wall time: {eager[3]:.1f} s eager, {compiled[3]:.1f} s compiled (compiling included)")
        top = list(compiled[4].by_kernel().items())[:6]
        print("  compiled step's largest kernels: " + ", ".join(f"{k} {v['count']}x" for k, v in top))


if __name__ == "__main__":
    main()

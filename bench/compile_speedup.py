"""What torch.compile buys on npusim: launches and simulated time per training step, eager against compiled.

    python bench/compile_speedup.py              # default config
    python bench/compile_speedup.py datacenter

For a transformer block (nn.TransformerEncoderLayer, no dropout, AdamW), a small GPT-2 from transformers (AdamW) and
the ResNet-style CNN (SGD), it runs the same training step eagerly and through torch.compile (the loss's forward and
backward, and the optimizer's step, each compiled by Inductor into npusim kernels), in timed mode, from the same
weights and data. For each it prints the device commands (kernel launches and copies) and the simulated device time
of one profiled step after a warm-up, their ratios, the wall time of the compiled run's first step (compiling
included), and the two losses, which agree. Not a test: a measurement, in one run, against its own baseline.
"""

import copy
import os
import sys
import time

os.environ["NPUSIM_MODE"] = "timed"
os.environ["NPUSIM_CONFIG"] = sys.argv[1] if len(sys.argv) > 1 else "default"
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import npusim  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from model_breakdown import cnn, encoder, gpt2  # noqa: E402  the same models, same sizes


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
    return value.item(), len(report.records), report.total_device_cycles, first_step, report


def main():
    for name, build in [
        # No dropout: eager and compiled steps draw different random numbers.
        ("Transformer block", lambda: encoder(dropout=0.0)),
        ("GPT-2 (2 layers)", lambda: gpt2(dropout=0.0)),
        ("ResNet-style CNN", cnn),
    ]:
        torch.manual_seed(0)
        model, optimizer_class, inputs, targets, loss = build()
        inputs, targets = inputs.to("npusim"), targets.to("npusim")
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

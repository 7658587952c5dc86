"""Rows longer than the scratchpad (docs/kernel_builder.md, "Rows longer than the scratchpad"), in timed mode, measured
in one run:

- what walking a row in chunks costs: each workload on the chip given (default: the default preset, whose 256 KiB
  scratchpad its rows do not fit) against the same chip with a scratchpad large enough for whole rows, where the
  tiled kernel reads each row once;
- what one kernel saves over passes: batch norm's training step as the looped kernel against the composed path a
  channels-last input takes on the same chip (a pass of native kernels per step of the formula).

    python bench/long_rows.py               # default chip
    python bench/long_rows.py edge
    python bench/long_rows.py --smoke       # small shapes: CI's check that it still works

Each run's results are checked against the CPU, and a workload of zero kernel cycles stops the run without a figure.
Each chip runs in its own process (SystemC builds one timed chip per process). Not a test: the figures are the
model's, and shapes matter.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

WORKER = """
import json, os, sys
os.environ["NPUSIM_MODE"], os.environ["NPUSIM_CONFIG"] = "timed", sys.argv[1]
shapes = json.loads(sys.argv[2])
import torch, torch.nn.functional as F, npusim

def measure(name, run, reference, tolerance):
    with npusim.profile() as report:
        result = run()
        torch.npusim.synchronize()  # launches are asynchronous
    if report.fallbacks:
        sys.exit(f"{name}: fell back to the CPU: {report.fallbacks}")
    for got, want in zip(result, reference(), strict=True):
        torch.testing.assert_close(got.cpu(), want, rtol=tolerance, atol=tolerance, msg=f"{name}: wrong result")
    kernels = [r for r in report.kernels if not r.name.startswith("copy_")]
    cycles = sum(r.kernel_cycles for r in kernels)
    if cycles == 0:
        sys.exit(f"{name}: no kernel cycles: nothing was measured")
    return {"kernels": len(kernels), "cycles": cycles, "bytes": sum(r.bytes for r in kernels),
            "names": sorted({r.name for r in kernels})}

generator = torch.Generator().manual_seed(0)
results = {}
rows, vocabulary = shapes["softmax"]
x = torch.randn(rows, vocabulary, generator=generator) * 4
results["log_softmax"] = measure("log_softmax", lambda: [torch.log_softmax(x.to("npusim"), -1)],
                                 lambda: [torch.log_softmax(x, -1)], 1e-4)

rows, width = shapes["layer_norm"]
x, w, b, dy = (torch.randn(s, generator=generator) for s in ((rows, width), width, width, (rows, width)))
def layer_norm(on):
    inputs = [t.to(on, copy=True).requires_grad_() for t in (x, w, b)]
    y = F.layer_norm(inputs[0], (width,), inputs[1], inputs[2])
    y.backward(dy.to(on))
    return [y.detach()] + [t.grad for t in inputs]
results["layer_norm"] = measure("layer_norm", lambda: layer_norm("npusim"), lambda: layer_norm("cpu"), 2e-3)

shape = shapes["batch_norm"]
x, dy = torch.randn(shape, generator=generator) + 2, torch.randn(shape, generator=generator)
def batch_norm(on, layout):
    norm = torch.nn.BatchNorm2d(shape[1]).to(on)
    inputs = x.to(on, copy=True).contiguous(memory_format=layout).detach().requires_grad_()
    y = norm(inputs)
    y.backward(dy.to(on).contiguous(memory_format=layout))
    return [y.detach(), inputs.grad, norm.weight.grad, norm.bias.grad]
for label, layout in (("batch_norm", torch.contiguous_format), ("batch_norm composed", torch.channels_last)):
    results[label] = measure(label, lambda: batch_norm("npusim", layout), lambda: batch_norm("cpu", layout), 2e-3)
print(json.dumps(results))
"""

FULL = {"softmax": [8, 50257], "layer_norm": [8, 70000], "batch_norm": [8, 16, 112, 112]}
SMOKE = {"softmax": [2, 20000], "layer_norm": [2, 20000], "batch_norm": [2, 2, 64, 64]}


def run(config_path, shapes):
    process = subprocess.run(
        [sys.executable, "-c", WORKER, str(config_path), json.dumps(shapes)], capture_output=True, text=True
    )
    if process.returncode != 0:
        sys.exit(f"worker on {config_path} failed (exit {process.returncode}):\n{process.stderr.strip()[-3000:]}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def preset_path(name):
    import npusim  # noqa: PLC0415  the installed presets

    return Path(npusim.config_dirs()[0]) / f"{name}.yaml"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", nargs="?", default="default", help="a preset name (npusim configs)")
    parser.add_argument("--smoke", action="store_true", help="small shapes")
    arguments = parser.parse_args()
    shapes = SMOKE if arguments.smoke else FULL
    preset = preset_path(arguments.config)
    parameters = yaml.safe_load(preset.read_text())
    small = parameters["core"]["scratchpad_kib"]
    parameters["name"] = f"{parameters['name']}-whole-rows"
    parameters["core"]["scratchpad_kib"] = 16384  # 16 MiB: every workload's rows fit whole with their slots
    with tempfile.TemporaryDirectory() as directory:
        large = Path(directory) / "whole_rows.yaml"
        large.write_text(yaml.safe_dump(parameters, sort_keys=False))
        looped, whole = run(preset, shapes), run(large, shapes)
    print(f"timed mode, {arguments.config} chip ({small} KiB scratchpad) against the same chip with 16 MiB\n")
    print(
        f"{'workload':<22}{'kernels':>8}{'cycles':>12}{'MB moved':>10}   {'whole rows: cycles':>18}{'MB':>8}"
        f"{'looped / whole':>16}"
    )
    for name, figures in looped.items():
        other = whole[name]
        print(
            f"{name:<22}{figures['kernels']:>8}{figures['cycles']:>12}{figures['bytes'] / 1e6:>10.1f}   "
            f"{other['cycles']:>18}{other['bytes'] / 1e6:>8.1f}{figures['cycles'] / other['cycles']:>15.2f}x"
        )
    fused, composed = looped["batch_norm"], looped["batch_norm composed"]
    print(
        f"\nbatch norm, one looped kernel each way against the composed passes on the {arguments.config} chip: "
        f"{composed['kernels']} -> {fused['kernels']} kernels, {composed['cycles'] / fused['cycles']:.2f}x fewer "
        f"cycles, {composed['bytes'] / fused['bytes']:.2f}x fewer bytes"
    )


if __name__ == "__main__":
    main()

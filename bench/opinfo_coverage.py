"""Native coverage of PyTorch's OpInfo database: the share of float32 entries (or of another dtype's) that run on
npusim with NPUSIM_FALLBACK=error and match the CPU, forward or (--gradients) backward.

    python bench/opinfo_coverage.py                    # every entry (a few minutes on two cores)
    python bench/opinfo_coverage.py --samples 2        # fewer sample inputs per entry
    python bench/opinfo_coverage.py --dtype bfloat16   # the entries' bfloat16 forms (float16, complex64, ...)
    python bench/opinfo_coverage.py --gradients        # the gradients of the entries' samples (first order)
    python bench/opinfo_coverage.py --smoke            # the first 15 entries: CI's check that it still works

For every entry of `op_db` whose form in that dtype the CPU supports (with --gradients: differentiates), it makes the
entry's first sample inputs on the CPU, moves each tensor to npusim with its whole storage, offset and strides (a
slice's base comes along, so ops on views see the same elements), runs the samples there with the CPU fallback
forbidden and on the CPU, and compares the results (torch.testing.assert_close, its tolerances for the dtype, NaN
equal to NaN; for an op whose two CPU runs differ, random numbers and `empty`, the shapes and dtypes). With
--gradients the results compared are the gradients of the inputs that require them, for the same random weights of
the outputs. An entry passes when every sample it ran matches; an entry none of whose samples the CPU can run is not
counted. Entries run in a child interpreter, restarted after one that kills it. It prints the share that passes,
then the failing entries grouped by cause: the operators that would have fallen back to the CPU (most entries first:
what to make native next), mismatches, and other errors. A measurement of where coverage stands, against the issue's
goal of 85 %; tests/python/test_opinfo.py holds the float32 counts of passing entries, forward and backward, at or
above their recorded values and names the operators that still fall back.
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import json, sys, warnings
    import torch, npusim
    from torch.testing._internal.common_methods_invocations import op_db

    warnings.filterwarnings("ignore")
    first, last, samples_per_entry = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    dtype, gradients = getattr(torch, sys.argv[4]), sys.argv[5] == "gradients"

    def to_cpu(value):
        if isinstance(value, torch.Tensor):
            return value.cpu()
        if isinstance(value, (tuple, list)):  # structseqs (max's values and indices) as plain lists
            return [to_cpu(v) for v in value]
        return value

    def same_view_on_device(value):
        # A sample tensor, made on the CPU (so that making it never needs npusim), on npusim with its whole storage,
        # offset and strides: ops on views (as_strided of a slice) see the same elements there.
        if not isinstance(value, torch.Tensor) or value.device.type != "cpu":
            return value
        if value.layout != torch.strided:
            return value.detach().to("npusim").requires_grad_(value.requires_grad)
        if value.is_conj() or value.is_neg():  # a lazy view's flag: moved resolved, set again on the device
            flip = torch.conj if value.is_conj() else torch._neg_view
            return flip(same_view_on_device(flip(value.detach()))).requires_grad_(value.requires_grad)
        raw = torch.empty(0, dtype=torch.uint8).set_(value.detach().untyped_storage()).to("npusim")
        moved = torch.empty(0, dtype=value.dtype, device="npusim")
        moved.set_(raw.untyped_storage(), value.storage_offset(), value.size(), value.stride())
        return moved.requires_grad_(value.requires_grad)

    def random(op, cpu, expected):
        # OpInfo seeds its random ops' calls (wrapper_set_seed): the CPU's generator and npusim's differ. The empty
        # factories' values are whatever memory held.
        if "wrapper_set_seed" in getattr(getattr(op.op, "__code__", None), "co_names", ()) or "empty" in op.name:
            return True
        again = to_cpu(op(cpu.input, *cpu.args, **cpu.kwargs))
        try:
            torch.testing.assert_close(again, expected, equal_nan=True)
            return False
        except Exception:
            return True

    def shapes(value):
        if isinstance(value, torch.Tensor):
            return torch.tensor(list(value.shape) + [hash(str(value.dtype)) % 1000])
        if isinstance(value, (tuple, list)):
            return [shapes(v) for v in value]
        return value

    def needing_grad(sample):
        return [t for t in [sample.input, *sample.args, *sample.kwargs.values()]
                if isinstance(t, torch.Tensor) and t.requires_grad]  # fmt: skip

    def differentiable(outputs):
        outputs = outputs if isinstance(outputs, (tuple, list)) else [outputs]
        return [t for t in outputs if isinstance(t, torch.Tensor) and t.requires_grad]

    def result(op, sample, weights=None):
        # The forward results, or with `weights` the gradients of the sample's inputs that need them, weighted so.
        outputs = op(sample.input, *sample.args, **sample.kwargs)
        if weights is None:
            return to_cpu(outputs)
        outputs = differentiable(outputs)
        weights = [w.to(o.device) for w, o in zip(weights, outputs)]  # an output may be elsewhere (Tensor.to)
        grads = torch.autograd.grad(outputs, needing_grad(sample), weights, allow_unused=True)
        return [to_cpu(g) for g in grads]

    def weights_for(op, sample):
        inputs, outputs = needing_grad(sample), differentiable(op(sample.input, *sample.args, **sample.kwargs))
        if not inputs or not outputs:
            return None
        return [torch.randn(t.shape, generator=torch.Generator().manual_seed(k)).to(t.dtype)
                for k, t in enumerate(outputs)]  # fmt: skip

    def outcome(op):
        if dtype not in (op.supported_backward_dtypes("cpu") if gradients else op.supported_dtypes("cpu")):
            return None
        if gradients and not op.supports_autograd:
            return None
        try:
            samples = list(op.sample_inputs("cpu", dtype, requires_grad=gradients))[:samples_per_entry]
        except Exception:
            return None
        compared = 0
        for cpu in samples:
            try:
                weights = weights_for(op, cpu) if gradients else None
                if gradients and weights is None:
                    continue  # nothing to differentiate
                expected = result(op, cpu, weights)
            except Exception:
                continue  # the CPU cannot run this sample either
            try:
                moved = cpu.transform(same_view_on_device)
                actual = result(op, moved, weights)
                torch.npusim.synchronize()
            except Exception as error:
                return ["error", str(error).splitlines()[0][:300] if str(error) else type(error).__name__]
            if random(op, cpu, to_cpu(op(cpu.input, *cpu.args, **cpu.kwargs)) if gradients else expected):
                actual, expected = shapes(actual), shapes(expected)  # random numbers: shapes and dtypes must match
            try:
                torch.testing.assert_close(actual, expected, equal_nan=True, check_device=False)
            except Exception as error:
                return ["mismatch", str(error).splitlines()[0][:200]]
            compared += 1
        if not compared:
            return None
        return ["pass", ""]

    for index in range(first, min(last, len(op_db))):
        op = op_db[index]
        name = f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name
        print("START", index, flush=True)
        verdict = outcome(op)
        if verdict is not None:
            print("RESULT", json.dumps([index, name, *verdict]), flush=True)
    print("DONE", flush=True)
    """
)

FALLBACK = re.compile(r"npusim: (\S+(?: \([^)]*\))?) has no native npusim kernel")


def run(first, last, samples, dtype="float32", gradients=False):
    """{index: (name, verdict, detail)} for entries first..last-1, a child interpreter restarted after a crash."""
    results, start = {}, first
    environment = dict(os.environ, NPUSIM_FALLBACK="error", PYTHONWARNINGS="ignore")
    while start < last:
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD,
                str(start),
                str(last),
                str(samples),
                dtype,
                "gradients" if gradients else "forward",
            ],
            capture_output=True,
            text=True,
            env=environment,
        )
        started = start
        for line in child.stdout.splitlines():
            if line.startswith("START "):
                started = int(line.split()[1])
            elif line.startswith("RESULT "):
                index, name, verdict, detail = json.loads(line[len("RESULT ") :])
                results[index] = (name, verdict, detail)
        if "DONE" in child.stdout.splitlines():
            break
        results[started] = (f"entry {started}", "crash", f"exit status {child.returncode}")
        start = started + 1
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=4, help="sample inputs per entry (default 4)")
    parser.add_argument("--dtype", default="float32", help="the entries' dtype (default float32)")
    parser.add_argument("--gradients", action="store_true", help="the gradients of the entries' samples, not results")
    parser.add_argument("--smoke", action="store_true", help="the first 15 entries only")
    arguments = parser.parse_args()
    import torch

    if not isinstance(getattr(torch, arguments.dtype, None), torch.dtype):
        parser.error(f"--dtype {arguments.dtype}: not a torch dtype")
    from torch.testing._internal.common_methods_invocations import op_db

    last = 15 if arguments.smoke else len(op_db)
    results = run(0, last, arguments.samples, arguments.dtype, arguments.gradients)
    if not results:
        sys.exit("no entry ran: no figure")
    verdicts = collections.Counter(verdict for _, verdict, _ in results.values())
    passed = verdicts["pass"]
    what = "entries' gradients" if arguments.gradients else "entries"
    print(f"OpInfo {arguments.dtype} {what} passing with NPUSIM_FALLBACK=error: {passed} of {len(results)} "
          f"({100 * passed / len(results):.1f} %); goal 85 %")  # fmt: skip
    print("  " + ", ".join(f"{verdict} {count}" for verdict, count in verdicts.most_common()))
    fallbacks = collections.defaultdict(list)
    for name, verdict, detail in results.values():
        found = FALLBACK.search(detail) if verdict == "error" else None
        if found:
            fallbacks[found.group(1)].append(name)
    print(f"\nOperators that would fall back, by entries ({len(fallbacks)} operators):")
    for operator, names in sorted(fallbacks.items(), key=lambda item: (-len(item[1]), item[0])):
        print(f"  {len(names):3d}  {operator}: {' '.join(sorted(names))}")
    for kind in ("mismatch", "error", "crash"):
        rows = [(name, detail) for name, verdict, detail in results.values() if verdict == kind]
        rows = [(name, detail) for name, detail in rows if not (kind == "error" and FALLBACK.search(detail))]
        if rows:
            print(f"\n{kind} ({len(rows)}):")
            for name, detail in sorted(rows):
                print(f"  {name}: {detail}")


if __name__ == "__main__":
    main()

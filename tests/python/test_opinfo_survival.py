"""No operator kills the process: every entry of PyTorch's OpInfo database runs on npusim (its sample inputs made on
the device, in float32, complex64, bfloat16, int64 and bool where the CPU supports them, and float32 gradients), each
in a child interpreter. An op may raise or take the CPU fallback (other tests check results); it may not crash or
hang. A child that dies is restarted after the op it died in, so one run names every op that dies. The database is
walked in interleaved shards (entries s, s + SHARDS, ...), one test each, so that parallel test workers share it."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

SHARDS = 6

# The child prints each entry's index and name before running it, so that the parent knows where it died.
CHILD = textwrap.dedent(
    """
    import sys, warnings
    import torch, npusim
    from torch.testing._internal.common_methods_invocations import op_db

    warnings.filterwarnings("ignore")
    DTYPES = (torch.float32, torch.complex64, torch.bfloat16, torch.int64, torch.bool)
    SAMPLES_PER_DTYPE = 8

    def run(op, dtype):
        with_grad = dtype == torch.float32 and op.supports_autograd
        try:
            samples = list(op.sample_inputs("npusim", dtype, requires_grad=with_grad))[:SAMPLES_PER_DTYPE]
        except Exception:
            return
        for sample in samples:
            try:
                result = op(sample.input, *sample.args, **sample.kwargs)
                outputs = result if isinstance(result, (tuple, list)) else [result]
                outputs = [t for t in outputs if isinstance(t, torch.Tensor) and t.requires_grad]
                if outputs:
                    torch.autograd.backward(outputs, [torch.ones_like(t) for t in outputs])
                torch.npusim.synchronize()
            except Exception:
                pass

    start, step = int(sys.argv[1]), int(sys.argv[2])
    for index in range(start, len(op_db), step):
        op = op_db[index]
        print(index, op.full_name, flush=True)
        for dtype in DTYPES:
            if dtype in op.supported_dtypes("cpu"):
                run(op, dtype)
    print("done", flush=True)
    """
)

CHILD_TIMEOUT_S = 900


def run_child(start):
    """Runs op_db's entries start, start + SHARDS, ...; returns (exit status, whether it finished, the last entry
    started, the end of stderr)."""
    try:
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(start), str(SHARDS)],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            env={name: value for name, value in os.environ.items() if name != "NPUSIM_FALLBACK"},  # allowed
        )
        status, stdout, stderr = child.returncode, child.stdout, child.stderr
    except subprocess.TimeoutExpired as expired:
        status, stdout, stderr = "hang", (expired.stdout or b"").decode(), (expired.stderr or b"").decode()
    lines = stdout.splitlines()
    last = next((line for line in reversed(lines) if line[:1].isdigit()), None)
    return status, (lines[-1:] == ["done"]), last, stderr[-1500:]


def describe(status):
    if status == "hang":
        return f"no progress for {CHILD_TIMEOUT_S} s"
    if status < 0:
        return f"killed by {signal.Signals(-status).name}"
    return f"exit status {status}"


@pytest.mark.parametrize("shard", range(SHARDS))
def test_no_opinfo_entry_kills_the_process(shard):
    deaths = []
    start = shard
    while True:
        status, finished, last, stderr = run_child(start)
        if finished and status == 0:
            break
        assert last is not None, f"the child died before its first op ({describe(status)}):\n{stderr}"
        index, name = last.split(" ", 1)
        deaths.append(f"{name} (op_db[{index}]): {describe(status)}\n{stderr}")
        start = int(index) + SHARDS
    assert not deaths, "OpInfo entries that killed the process:\n" + "\n".join(deaths)

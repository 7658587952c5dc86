"""A program that ran a backward pass on npusim exits cleanly, every time. PyTorch 2.13's autograd engine can abort
the process at exit after a backward pass on a device other than the CPU (npusim/autograd_exit.py says why and what
npusim does about it); without that, about a third of these runs aborted ("terminate called without an active
exception", status -6). One interpreter after another (the race needs an idle core for the engine's thread), each a
short training step that exits right after it."""

import subprocess
import sys

SCRIPT = """
import torch, npusim
x = torch.randn(8, 4, device="npusim", requires_grad=True)
(x @ torch.randn(4, 3, device="npusim")).tanh().sum().backward()
print(tuple(x.grad.shape))
"""
RUNS = 12


def test_a_script_that_ran_a_backward_pass_exits_cleanly_every_time():
    runs = [
        subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300) for _ in range(RUNS)
    ]
    failed = [
        (run.returncode, run.stderr[-300:]) for run in runs if run.returncode != 0 or run.stdout.strip() != "(8, 4)"
    ]
    assert not failed, f"{len(failed)} of {RUNS} runs did not exit cleanly: {failed[:2]}"

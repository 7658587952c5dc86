"""A clean process exit after a backward pass on npusim, despite a race in PyTorch's autograd engine at shutdown.

A backward pass on a device other than the CPU runs on the engine's thread for that device (``pt_autograd_0``).
PyTorch 2.13 stores a Python object (the caller's ``contextvars`` context) in the state each backward pass carries to
that thread, and the thread may drop its last reference to that state just after the caller's ``backward()`` has
returned. When the program then exits, the thread can be destroying the Python object while the interpreter
finalises, and the process aborts with "terminate called without an active exception" (pytorch/pytorch#190489): a
third of the runs of a two-line training script did, measured on this machine. Before the interpreter finalises,
this runs one more backward pass on each open npusim device, through the engine directly so that it carries no Python
object, over a view of an empty tensor so that it launches nothing (an exit does not wait for queued work). The
engine's device thread releases each pass before it takes the next one's tasks, so when this pass returns, every
earlier pass has been released while the interpreter was still whole.
"""

import atexit

import torch

from . import _C


def _release_backward_passes():
    if not _C.devices_open():
        return  # no device, so no backward pass on one
    engine = torch.autograd.Variable._execution_engine
    for index in range(_C.device_count()):
        try:
            leaf = torch.empty((1,), device=f"npusim:{index}", requires_grad=True)
            output = leaf.view(())
            gradient = torch.empty((), device=f"npusim:{index}")
            engine.run_backward((output,), (gradient,), False, False, (), True, True)
        except Exception:  # noqa: BLE001  a device broken by the program (or a forked child's): exit anyway
            return


def install():
    atexit.register(_release_backward_passes)

"""A process that has used npusim and then forks (multiprocessing, DataLoader workers): the child gets a clear error
if it touches the device, instead of blocking forever, and can exit; CPU work in the child and the parent's device
are unaffected. Each case runs in its own interpreter, under a timeout, so that a hang fails the test."""

import subprocess
import sys
import textwrap

PARENT_THEN_FORK = textwrap.dedent(
    """
    import os, sys, torch, npusim
    x = torch.ones(4, device="npusim") * 2
    busy = torch.randn(256, 256, device="npusim") @ torch.randn(256, 256, device="npusim")  # in flight at the fork
    pid = os.fork()
    if pid == 0:
        assert torch.npusim._is_in_bad_fork()
        assert torch.equal(torch.ones(2) + 1, torch.full((2,), 2.0))  # the CPU still works
        try:
            torch.ones(4, device="npusim")
        except RuntimeError as error:
            print("child:", error, flush=True)
            sys.exit(0)  # exits although the parent's tensors and work are still referenced here
        sys.exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, status
    assert not torch.npusim._is_in_bad_fork()
    assert torch.equal((x + 1).cpu(), torch.full((4,), 3.0)) and busy.cpu().shape == (256, 256)
    print("parent: ok")
    """
)

DATALOADER_WORKERS = textwrap.dedent(
    """
    import torch, npusim
    from torch.utils.data import DataLoader, TensorDataset
    torch.multiprocessing.set_start_method("fork", force=True)
    model = torch.nn.Linear(8, 2).to("npusim")  # the parent opens the device before the workers fork
    data = TensorDataset(torch.randn(64, 8), torch.randn(64, 2))
    total = 0.0
    for inputs, targets in DataLoader(data, batch_size=16, num_workers=2):
        loss = torch.nn.functional.mse_loss(model(inputs.to("npusim")), targets.to("npusim"))
        total += loss.item()
    print("loss sum", total)
    """
)


def run(script):
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def test_a_forked_child_gets_a_clear_error_and_the_parent_keeps_its_device():
    result = run(PARENT_THEN_FORK)
    assert result.returncode == 0, result.stderr
    assert "forked after its parent opened the npusim devices" in result.stdout
    assert "'spawn'" in result.stdout
    assert "parent: ok" in result.stdout


def test_dataloader_workers_forked_from_a_process_using_npusim():
    result = run(DATALOADER_WORKERS)
    assert result.returncode == 0, result.stderr
    assert "loss sum" in result.stdout

"""Several Python threads using npusim at once, each on its own device and its own stream (the datacenter preset has
4 devices): every thread's results equal the CPU's, in both modes, and the streams' work is all there afterwards.
The runtime under it is checked for data races by ThreadSanitizer (docs/runtime.md)."""

import pytest
from conftest import run_python

THREADS_ON_DEVICES_AND_STREAMS = """
import threading, torch, npusim
THREADS, STEPS = 8, 20
errors, losses = [], {}

def train_steps(model, x, y):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    return loss

def train(thread):
    try:
        device = torch.device("npusim", thread % torch.npusim.device_count())
        generator = torch.Generator().manual_seed(thread)
        inputs, targets = torch.randn(32, 16, generator=generator), torch.randn(32, 4, generator=generator)
        reference = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
        model.load_state_dict(reference.state_dict())
        stream = torch.npusim.Stream(device)
        with torch.npusim.device(device.index), torch.npusim.stream(stream):
            model.to(device)
            x, y = inputs.to(device), targets.to(device)
            loss = train_steps(model, x, y)
            stream.synchronize()
        cpu_loss = train_steps(reference, inputs, targets)
        for mine, theirs in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(mine.cpu(), theirs, rtol=1e-4, atol=1e-5)
        losses[thread] = (loss.item(), cpu_loss.item())
    except Exception as error:
        errors.append(f"thread {thread}: {error!r}")

threads = [threading.Thread(target=train, args=(k,)) for k in range(THREADS)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
assert not errors, errors
assert len(losses) == THREADS, losses
torch.npusim.synchronize()
print("ok", sorted(losses))
"""


@pytest.mark.parametrize("mode", ["functional", "timed"])
def test_threads_on_their_own_devices_and_streams(mode):
    result = run_python(THREADS_ON_DEVICES_AND_STREAMS, NPUSIM_CONFIG="datacenter", NPUSIM_MODE=mode)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ok" in result.stdout

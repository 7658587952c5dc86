"""Shared helpers for the npusim pytest suite."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import npusim  # registers the device


def run_python(code, **env):
    """Runs `code` in a fresh interpreter (the chip is chosen once per process) with extra environment."""
    environment = {**os.environ, **{key: str(value) for key, value in env.items()}}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=environment, timeout=600
    )


@pytest.fixture
def device():
    return torch.device("npusim")


@pytest.fixture
def no_fallback():
    """Fails the test if any operator it ran took the CPU fallback."""
    npusim._C.reset_fallback_counts()
    yield
    assert npusim._C.fallback_counts() == {}


def train_side_by_side(model, reference, optimizer, reference_optimizer, loss, inputs, targets, steps=5):
    """Trains `model` (on npusim) and `reference` (the same weights, on the CPU) for `steps` identical steps of
    `loss(net, inputs, targets)`, asserting that every device step ran without CPU fallback. Returns the losses, device
    first; the npusim.profile() report of the last device step is the third value."""
    losses = {True: [], False: []}
    report = None
    for _ in range(steps):
        for on_device in (True, False):
            net, opt = (model, optimizer) if on_device else (reference, reference_optimizer)
            x, y = (inputs.to("npusim"), targets.to("npusim")) if on_device else (inputs, targets)
            with npusim.profile() as step_report:
                opt.zero_grad()
                value = loss(net, x, y)
                value.backward()
                opt.step()
            losses[on_device].append(value.item())
            if on_device:
                assert step_report.fallbacks == {}
                report = step_report
    return losses[True], losses[False], report

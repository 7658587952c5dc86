"""Shared helpers for the npusim pytest suite."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import npusim  # noqa: F401  registers the device


def run_python(code, **env):
    """Runs `code` in a fresh interpreter (the chip is chosen once per process) with extra environment."""
    environment = {**os.environ, **{key: str(value) for key, value in env.items()}}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=environment, timeout=600
    )


@pytest.fixture
def device():
    return torch.device("npusim")

"""Helpers shared by the sweep tests: writing sweep files and running `npusim sweep` as a user would."""

import contextlib
import io
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

from npusim import cli

# A workload that fails on purpose on 32 x 32 arrays (and runs a small product elsewhere), to test failures.
PICKY_SCRIPT = """
import sys
import torch
import npusim

rows = npusim._C.device_configuration()["core.systolic_rows"]
if rows == 32:
    print(f"picky: refusing a {rows}-row array", file=sys.stderr)
    raise SystemExit(3)
a = torch.randn(16, 24).to("npusim")
(torch.relu(a @ a.t()) + 1).cpu()
"""


def write(path, text):
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def sweep_command(*args, env=None, **kwargs):
    """Runs `npusim sweep ARGS` and returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "npusim.cli", "sweep", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
        timeout=300,
        **kwargs,
    )


def sweep_in_process(*args):
    """`npusim sweep ARGS` in this interpreter (saving a second start of torch per call; the runs are still child
    processes); returns its exit code, stdout and stderr."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main(["sweep", *map(str, args)])
    return SimpleNamespace(returncode=code, stdout=stdout.getvalue(), stderr=stderr.getvalue())

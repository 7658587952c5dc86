"""The same script gives the same figures: a training step's report, written as JSON, is byte for byte the same in two
processes, on a chip with several cores and devices where host thread timing varies most (launches are asynchronous),
and with another NPUSIM_THREADS; its results are bit for bit the same too."""

import os
import subprocess
import sys
import textwrap

TRAINING_STEP_REPORT = textwrap.dedent(
    """
    import sys, torch, npusim
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 10)).to("npusim")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    inputs, targets = torch.randn(64, 256).to("npusim"), torch.randint(0, 10, (64,)).to("npusim")
    for step in range(2):  # the first warms the kernel cache
        with npusim.profile() as report:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
    report.to_json(sys.argv[1])
    torch.save([p.detach().cpu() for p in model.parameters()], sys.argv[2])
    """
)


def run(tmp_path, name, threads):
    environment = dict(os.environ, NPUSIM_MODE="timed", NPUSIM_CONFIG="datacenter", NPUSIM_THREADS=threads)
    report, weights = tmp_path / f"{name}.json", tmp_path / f"{name}.pt"
    subprocess.run(
        [sys.executable, "-c", TRAINING_STEP_REPORT, str(report), str(weights)],
        env=environment,
        check=True,
        timeout=300,
    )
    return report.read_bytes(), weights


def test_a_training_steps_report_is_the_same_byte_for_byte_across_processes(tmp_path):
    import torch

    first, first_weights = run(tmp_path, "first", "2")
    second, second_weights = run(tmp_path, "second", "1")
    assert b'"device_cycles"' in first
    assert first == second
    for a, b in zip(torch.load(first_weights), torch.load(second_weights), strict=True):
        assert torch.equal(a, b)

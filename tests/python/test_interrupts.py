"""Ctrl-C during a long simulation: the waiting call raises KeyboardInterrupt at once (not when the queued work is
done), the work the script gave up on is abandoned and reported once, and the device stays usable; uncaught, the
process exits without finishing the queue; under `npusim run` the report of what ran is still written. Each case runs
in its own interpreter, interrupted by a real SIGINT, under a timeout far below the queued work's simulation time."""

import json
import signal
import subprocess
import sys
import textwrap
import time

# Some minutes of timed simulation queued at once (launches return immediately), then a wait for the last result.
QUEUE_AND_WAIT = """
import time, torch, npusim
npusim.init(mode="timed")
x = torch.randn(1024, 1024, device="npusim")
results = [x @ x for _ in range(1000)]
print("waiting", flush=True)
"""

CAUGHT = textwrap.dedent(
    QUEUE_AND_WAIT
    + """
try:
    results[-1].cpu()
    print("finished the queue")
except KeyboardInterrupt:
    print("interrupted", flush=True)
try:
    torch.npusim.synchronize()
except RuntimeError as error:
    print("reported:", error, flush=True)
print("usable:", (torch.ones(4, device="npusim") * 2).cpu().tolist(), flush=True)
"""
)

UNCAUGHT = textwrap.dedent(QUEUE_AND_WAIT + "results[-1].cpu()\n")

TIMEOUT_S = 60  # the queue alone simulates for minutes


def interrupt_while_waiting(command):
    """Starts `command`, sends SIGINT a second after it prints "waiting", and returns its exit status and output."""
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background shell passes it on ignored
    )
    lines = []
    for line in child.stdout:
        lines.append(line)
        if line.startswith("waiting"):
            break
    time.sleep(1)
    child.send_signal(signal.SIGINT)
    try:
        stdout, stderr = child.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        raise AssertionError(f"still running {TIMEOUT_S} s after Ctrl-C") from None
    return child.returncode, "".join(lines) + stdout, stderr


def test_ctrl_c_raises_keyboard_interrupt_and_the_device_stays_usable():
    status, stdout, stderr = interrupt_while_waiting([sys.executable, "-c", CAUGHT])
    assert status == 0, stderr
    assert "interrupted" in stdout and "finished the queue" not in stdout
    assert "unfinished commands were abandoned" in stdout
    assert "usable: [2.0, 2.0, 2.0, 2.0]" in stdout


def test_uncaught_ctrl_c_exits_without_finishing_the_queue():
    status, _, stderr = interrupt_while_waiting([sys.executable, "-c", UNCAUGHT])
    assert status == -signal.SIGINT, stderr  # how Python exits on an uncaught KeyboardInterrupt
    assert "KeyboardInterrupt" in stderr


def test_npusim_run_writes_the_report_of_an_interrupted_script(tmp_path):
    script = tmp_path / "long.py"
    script.write_text(UNCAUGHT)
    report = tmp_path / "report.json"
    status, stdout, stderr = interrupt_while_waiting(
        [sys.executable, "-m", "npusim.cli", "run", "--mode", "timed", "--report", str(report), str(script)]
    )
    assert status != 0 and "KeyboardInterrupt" in stderr
    assert f"report written to {report}" in stdout
    kernels = [record["name"] for record in json.loads(report.read_text())["records"]]
    assert any("matmul" in name or "mm" in name for name in kernels), kernels  # what ran before the interrupt

"""A progress line on stderr for long runs of ``npusim run``: every few seconds, the commands the device has
completed and the simulated time they took, read from the device's thread-safe counters."""

import sys
import threading
import time

from . import _C


class Progress:
    """A context manager printing ``npusim: 12 s, 3456 commands, 7.890 ms simulated`` every `interval` seconds
    (none at all for runs shorter than that, or with interval 0)."""

    def __init__(self, interval, clock_ghz, stream=None):
        self.interval, self.clock_ghz = interval, clock_ghz
        self.stream = stream or sys.stderr
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.report, name="npusim-progress", daemon=True)

    def report(self):
        started = time.monotonic()
        while not self.stop.wait(self.interval):
            now = _C.progress(0)
            simulated_ms = now["cycles"] / (self.clock_ghz * 1e6)
            elapsed = time.monotonic() - started
            print(
                f"npusim: {elapsed:.0f} s, {now['commands']} commands, {simulated_ms:.3f} ms simulated",
                file=self.stream,
                flush=True,
            )

    def __enter__(self):
        if self.interval > 0:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()
        return False

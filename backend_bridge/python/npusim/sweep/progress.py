"""The sweep's progress on stderr: a bar of runs finished with how many were cached and how many failed, and an
ETA; or, with --quiet, nothing but the closing line."""

import sys

from tqdm import tqdm


class SweepProgress:
    def __init__(self, total, cached, failed_cached, quiet, description):
        self.counts = {"done": 0, "cached": cached, "failed": failed_cached}
        self.quiet = quiet
        self.bar = None
        if not quiet:
            self.bar = tqdm(total=total, initial=cached + failed_cached, desc=description, unit="run", file=sys.stderr)
            self.bar.set_postfix(self.counts)

    def finished(self, status):
        self.counts["done" if status == "ok" else "failed"] += 1
        if self.bar:
            self.bar.update(1)
            self.bar.set_postfix(self.counts)

    def skipped(self, cached, failed):
        """Runs found in the cache (a search learns of them batch by batch)."""
        self.counts["cached"] += cached
        self.counts["failed"] += failed
        if self.bar:
            self.bar.update(cached + failed)
            self.bar.set_postfix(self.counts)

    def close(self):
        if self.bar:
            self.bar.close()
        c = self.counts
        print(f"npusim sweep: {c['done']} ran, {c['cached']} cached, {c['failed']} failed", file=sys.stderr)

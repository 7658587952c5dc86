"""The sweep's progress on stderr: a bar of runs finished, how many came from the cache and how many failed, with
an ETA; with --quiet, nothing but the closing line."""

import sys

from tqdm import tqdm


class SweepProgress:
    """Counts runs: `ran` (children this session), `cached` (found in the cache, succeeded or failed), `failed`
    (whose latest outcome, run now or cached, is a failure)."""

    def __init__(self, total, cached, failed_cached, quiet, description):
        self.counts = {"ran": 0, "cached": cached + failed_cached, "failed": failed_cached}
        self.bar = None
        if not quiet:
            self.bar = tqdm(total=total, initial=cached + failed_cached, desc=description, unit="run", file=sys.stderr)
            self.bar.set_postfix(self.counts)

    def finished(self, status):
        self.counts["ran"] += 1
        self.counts["failed"] += status != "ok"
        self._advance(1)

    def skipped(self, cached, failed):
        """Runs found in the cache (a search learns of them batch by batch)."""
        self.counts["cached"] += cached + failed
        self.counts["failed"] += failed
        self._advance(cached + failed)

    def _advance(self, runs):
        if self.bar:
            self.bar.update(runs)
            self.bar.set_postfix(self.counts)

    def close(self):
        if self.bar:
            self.bar.close()
        c = self.counts
        print(f"npusim sweep: {c['ran']} ran, {c['cached']} cached, {c['failed']} failed", file=sys.stderr)

"""The content-addressed store of finished runs: a run's key is the hash of its normalised configuration, its
workload (script contents and arguments), the mode and the npusim build, so a sweep re-run or resumed finds every
run it already did. Each entry is one JSON file, written atomically: a run is either wholly there or absent."""

import functools
import hashlib
import json
import os
import tempfile
from importlib.metadata import version
from pathlib import Path

import npusim


@functools.cache
def npusim_version():
    """The package version and a digest of its native libraries (simulator, kernels, bindings): a rebuilt simulator
    may time differently, so its runs are not reused."""
    digest = hashlib.sha256()
    for library in sorted(Path(npusim.__file__).resolve().parent.glob("*.so")):
        digest.update(library.read_bytes())
    return f"{version('npusim')}+{digest.hexdigest()[:12]}"


def normalised(config):
    """The configuration as the cache sees it: every parameter, numbers as numbers, keys sorted."""
    return {name: (float(value) if isinstance(value, float) else value) for name, value in sorted(config.items())}


def run_key(config, workload, mode):
    material = {
        "config": normalised(config),
        "workload": workload.digest(),
        "mode": mode,
        "npusim": npusim_version(),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]


def write_atomically(path, text):
    """Writes `text` to `path` through a temporary file in the same directory and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


class RunCache:
    """`DIR/<key>.json` per finished run (succeeded or failed), with its outcome and report."""

    def __init__(self, directory):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def path(self, key):
        return self.directory / f"{key}.json"

    def get(self, key):
        path = self.path(key)
        if not path.exists():
            return None
        return json.loads(path.read_text())

    def put(self, key, outcome):
        write_atomically(self.path(key), json.dumps(outcome))

    def wall_seconds(self, workload_name):
        """Wall times of this workload's finished runs, for run-time estimates."""
        times = []
        for path in self.directory.glob("*.json"):
            entry = json.loads(path.read_text())
            if entry.get("workload") == workload_name and entry.get("status") == "ok":
                times.append(entry["wall_seconds"])
        return times

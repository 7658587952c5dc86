"""Workloads a sweep runs on every design point: PyTorch scripts with their arguments, run unchanged as
``npusim run`` runs them, or built-in ones shipped with the package (``workloads/*.py``)."""

import hashlib
from dataclasses import dataclass
from pathlib import Path

BUILTIN_DIR = Path(__file__).resolve().parent / "workloads"


def builtin_names():
    return sorted(path.stem for path in BUILTIN_DIR.glob("*.py") if not path.stem.startswith("_"))


@dataclass(frozen=True)
class Workload:
    name: str
    script: str  # absolute path
    args: tuple = ()
    map_device: str | None = None  # "cuda" or "cpu", as `npusim run --map-device`

    def digest(self):
        """Identifies what runs: the script's contents and the arguments (not the script's path)."""
        content = hashlib.sha256(Path(self.script).read_bytes()).hexdigest()
        return {"script_sha256": content, "args": list(self.args), "map_device": self.map_device}


def resolve(entry, sweep_dir, fail):
    """A Workload from one `workloads:` entry of a sweep file; `fail(message, *key)` raises a located error."""
    if isinstance(entry, str):
        entry = {"builtin": entry}
    if not isinstance(entry, dict):
        raise fail("a workload is a builtin name or a map with 'builtin' or 'script'")
    unknown = set(entry) - {"builtin", "script", "args", "name", "map_device"}
    if unknown:
        raise fail(f"unknown workload key '{sorted(unknown)[0]}'", sorted(unknown)[0])
    if ("builtin" in entry) == ("script" in entry):
        raise fail("a workload names exactly one of 'builtin' and 'script'")
    if "builtin" in entry:
        if entry["builtin"] not in builtin_names():
            raise fail(
                f"unknown builtin workload '{entry['builtin']}'; builtins: {', '.join(builtin_names())}", "builtin"
            )
        script = BUILTIN_DIR / f"{entry['builtin']}.py"
        default_name = entry["builtin"]
    else:
        script = (Path(sweep_dir) / str(entry["script"])).resolve()
        if not script.is_file():
            raise fail(f"script '{entry['script']}' not found (looked at {script})", "script")
        default_name = script.stem
    args = entry.get("args", [])
    if not isinstance(args, list):
        raise fail("'args' must be a list", "args")
    map_device = entry.get("map_device")
    if map_device not in (None, "cuda", "cpu"):
        raise fail("'map_device' must be 'cuda' or 'cpu'", "map_device")
    return Workload(str(entry.get("name", default_name)), str(script), tuple(str(a) for a in args), map_device)

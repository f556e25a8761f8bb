"""Run records: every output directory says what made it, and a rerun checks it before any compute.

    record = open_run(out, "eval", identity={"seed": 0, "wm": file_digest(wm), ...}, force_new=cfg.force_new)
    record["resumed"]    # True: out already held this very run, go on with what it lacks

`out/run.json` holds the command line, the `identity` (everything that decides the run's figures:
settings, seeds, and the content hash of every input: dataset, world model, policy checkpoints)
and `state` (what the run fixed when it began, e.g. the first episode index of an appending
collection). A rerun with the same identity resumes; a different one is refused with one error that
names every difference, unless the user passes --force-new (the old run is moved aside, never
deleted) or picks a fresh --out. Keys listed in `growable` hold dicts that a rerun may extend with
new entries (an evaluation given one more policy) while the recorded entries must still match.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

RECORD = "run.json"


class RunMismatchError(ValueError):
    """The output directory holds a run made with other settings or inputs."""


def ensure_writable(path: str | Path, what: str = "--out") -> Path:
    """Create directory `path` if needed and prove a file can be written there, so a read-only or
    misspelled output fails before any compute."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".wmsuite-write-check-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise ValueError(f"{what} {path} is not writable ({err.strerror or err}); choose another {what}") from err
    return path


def dumps_strict(obj: Any, indent: int | None = 2) -> str:
    """JSON that any strict reader accepts: non-finite floats become null (NaN is not JSON)."""
    return json.dumps(_finite(obj), indent=indent, sort_keys=True, allow_nan=False, default=_plain)


def write_json(path: str | Path, obj: Any) -> Path:
    """Write `obj` as strict JSON to `path` atomically (temp file + rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(dumps_strict(obj) + "\n")
    os.replace(tmp, path)
    return path


def open_run(out: str | Path, command: str, identity: dict[str, Any], force_new: bool = False,
             adopt: bool = False, growable: tuple[str, ...] = (), state: dict[str, Any] | None = None) -> dict[str, Any]:
    """Check `out/run.json` against `identity`, or start a run there; returns the record with
    `resumed` set. `adopt`: a directory with files but no record (written before records existed)
    is taken as this run (the user asked to resume it) instead of refused. `state` is stored when
    the run starts and returned unchanged on every resume."""
    out = ensure_writable(out)
    path = out / RECORD
    identity = json.loads(dumps_strict(identity))  # compare what would be read back
    if path.exists():
        try:
            old = json.loads(path.read_text())
            old_identity = old["identity"]
        except (ValueError, KeyError, TypeError) as err:
            raise RunMismatchError(f"{path} is not a readable run record ({err}); pass --force-new to start over "
                                   "(the old run is moved aside) or choose a fresh --out") from err
        diffs = _differences(old_identity, identity, growable)
        if not diffs:
            for key in growable:  # the run now also covers the new entries
                old_identity[key] = {**old_identity.get(key, {}), **identity.get(key, {})}
            write_json(path, old)
            return {**old, "resumed": True}
        if not force_new:
            raise RunMismatchError(
                f"{out} holds another {old.get('command', '?')} run: {'; '.join(diffs)}. Rerun with the recorded "
                "settings to resume it, pass --force-new to start over (the old run is moved aside), or choose a "
                "fresh --out")
        _move_aside(out)
    elif any(not p.name.startswith(".") for p in out.iterdir()):
        if adopt:
            return {**_write_record(out, command, identity, state), "resumed": True}
        if not force_new:
            raise RunMismatchError(
                f"{out} already holds files but no {RECORD} (written by an older wmsuite or another tool), so "
                "whether they belong to this run cannot be checked; pass --force-new to start over (they are "
                "moved aside) or choose a fresh --out")
        _move_aside(out)
    return {**_write_record(out, command, identity, state), "resumed": False}


def holds_run(out: str | Path, identity: dict[str, Any]) -> bool:
    """Whether `out` holds a readable record of the run `identity` names: the run `open_run` would
    resume there (an unreadable or missing record is no run)."""
    try:
        old = json.loads((Path(out) / RECORD).read_text())["identity"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return not _differences(old, json.loads(dumps_strict(identity)), ())


def _write_record(out: Path, command: str, identity: dict[str, Any], state: dict[str, Any] | None) -> dict[str, Any]:
    from wmsuite import __version__

    out.mkdir(parents=True, exist_ok=True)
    record = {"command": command, "argv": sys.argv[1:], "wmsuite_version": __version__,
              "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "identity": identity, "state": state or {}}
    write_json(out / RECORD, record)
    return record


def _move_aside(out: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = out.with_name(f"{out.name}.replaced-{stamp}")
    k = 1
    while target.exists():
        k += 1
        target = out.with_name(f"{out.name}.replaced-{stamp}-{k}")
    os.replace(out, target)
    out.mkdir(parents=True)
    print(f"--force-new: the earlier run in {out} was moved to {target}", file=sys.stderr)
    return target


def _differences(old: dict[str, Any], new: dict[str, Any], growable: tuple[str, ...]) -> list[str]:
    """Human-readable 'key: now X, recorded Y' for every flattened key that differs."""
    a, b = _flatten(old), _flatten(new)
    diffs = []
    for key in sorted(set(a) | set(b)):
        if key.split(".", 1)[0] in growable and (key not in a or key not in b):
            continue  # an entry only one side has: the run grows (or a rerun names fewer)
        if a.get(key, "<absent>") != b.get(key, "<absent>"):
            diffs.append(f"{key}: now {_short(b.get(key, '<absent>'))}, recorded {_short(a.get(key, '<absent>'))}")
    return diffs


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, dict) and d:
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: d}


def _short(v: Any) -> str:
    text = json.dumps(v) if not isinstance(v, str) else v
    if isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v):
        return f"content {v[:12]}"  # a sha256
    return text if len(text) <= 80 else text[:77] + "..."


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return _finite(obj.tolist())
    return obj


def _plain(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot write {type(obj).__name__} as JSON")

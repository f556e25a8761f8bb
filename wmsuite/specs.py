"""Policy specs: what `--policy` and zoo manifests name, checked before anything runs.

A spec is one of

    expert | expert@<skill>             the env's scripted expert
    assets:<path>                       a checkpoint shipped in the installed package
    <dir>                               a checkpoint or training-run directory
    package.module:attr{json kwargs}    code: a class or factory called with the kwargs

Importing and calling `module:attr` runs arbitrary code. A spec the user typed on the command line
is theirs to run; a spec read from a file someone else wrote (a zoo manifest) or nested in another
spec's kwargs (a wrapper's `inner`) is untrusted: it may name checkpoints, `assets:` entries,
experts and the built-in wrappers in BUILTIN_CODE, and any other `module:attr` runs only when the
user passes `--trust-code` (the convention of transformers' `trust_remote_code`).

`spec_fingerprint(spec)` names a spec's content (the sha256 of every checkpoint it reaches and of
the source file of its code), so a run directory can tell whether it was made with the same policy.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ASSETS_PREFIX = "assets:"
# `module:attr` targets that hold no code of their own: they build policies from data (offsets,
# skills) and resolve their nested specs under the same trust rules.
BUILTIN_CODE = frozenset({
    "wmsuite.policies.wrappers:ActionOffset", "wmsuite.policies.wrappers:ActionNoise",
    "wmsuite.policies.wrappers:ActionScale", "wmsuite.policies.verifier:Verified",
    "wmsuite.envs.experts:make_expert", "wmsuite.envs.play:make_play",
    "wmsuite.envs.behaviours:make_behaviour",
})
_CODE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*(\{.*)?$", re.S)
_TRUST_CODE: contextvars.ContextVar[bool] = contextvars.ContextVar("wmsuite_trust_code", default=False)


class UntrustedCodeError(ValueError):
    """An untrusted spec names code and the user did not pass --trust-code."""


def is_code_spec(spec: str) -> bool:
    """True for `package.module:attr` with optional JSON kwargs (and not `assets:...`)."""
    return not spec.startswith(ASSETS_PREFIX) and bool(_CODE.match(spec)) and not Path(spec).exists()


def split_code_spec(spec: str) -> tuple[str, str, dict[str, Any]]:
    """`pkg.mod:Attr{"k": 1}` -> ("pkg.mod", "Attr", {"k": 1}); a ValueError naming the spec otherwise."""
    if ":" not in spec:
        raise ValueError(f"policy spec {spec!r} is not of the form 'package.module:attr' or 'module:attr{{json}}'")
    module, _, rest = spec.partition(":")
    attr, brace, kw_text = rest.partition("{")
    kwargs: Any = {}
    if brace:
        try:
            kwargs = json.loads("{" + kw_text)
        except json.JSONDecodeError as err:
            raise ValueError(f"keyword arguments in {spec!r} are not valid JSON: {err}") from err
    if not isinstance(kwargs, dict):
        raise ValueError(f"keyword arguments in {spec!r} must be a JSON object")
    return module, attr, kwargs


def nested_specs(value: Any) -> Iterator[str]:
    """Every string inside a spec's JSON kwargs that is itself a spec naming code or a checkpoint."""
    if isinstance(value, str):
        if is_code_spec(value) or value.startswith(ASSETS_PREFIX) or checkpoint_dir(value) is not None:
            yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from nested_specs(v)
    elif isinstance(value, list):
        for v in value:
            yield from nested_specs(v)


def check_trust(spec: str, trusted: bool, source: str = "the command line") -> None:
    """Refuse, without importing anything, an untrusted spec (or one nested in `spec`) that names
    code outside BUILTIN_CODE while --trust-code is off. `trusted`: the spec itself came from the
    user's own command line; nested specs never are."""
    if not is_code_spec(spec):
        return
    module, attr, kwargs = split_code_spec(spec)
    target = f"{module}:{attr}"
    if not (trusted or _TRUST_CODE.get() or target in BUILTIN_CODE):
        raise UntrustedCodeError(
            f"policy spec {spec!r} from {source} names code to run ({target}); a spec read from a manifest or "
            "nested in another spec runs code only with --trust-code (read the code first), or name a "
            "checkpoint, 'assets:...' or 'expert@<skill>' instead")
    for inner in nested_specs(kwargs):
        check_trust(inner, trusted=False, source=f"{source} (inside {target})")


@contextlib.contextmanager
def trust_code(enabled: bool) -> Iterator[None]:
    """Within the block, untrusted specs may name code when `enabled` (the --trust-code flag)."""
    token = _TRUST_CODE.set(bool(enabled))
    try:
        yield
    finally:
        _TRUST_CODE.reset(token)


def resolve_asset(spec: str | Path) -> Path:
    """`assets:policies/x` -> <installed wmsuite.assets>/policies/x; anything else is a plain path."""
    text = str(spec)
    if text.startswith(ASSETS_PREFIX):
        import wmsuite.assets

        return Path(wmsuite.assets.__file__).parent / text[len(ASSETS_PREFIX):]
    return Path(text)


def checkpoint_dir(path: str | Path) -> Path | None:
    """The checkpoint directory `path` names: itself, or a training run's latest/; None if neither."""
    path = resolve_asset(path)
    for cand in (path, path / "latest"):
        if (cand / "model.safetensors").is_file() and (cand / "config.json").is_file():
            return cand
    return None


CALIBRATION = "calibration.json"
"""A world model's trust calibrator, beside its weights (world_models/calibrator.py)."""


NOVELTY = "novelty.safetensors"
"""The scene-novelty bank a calibrator's novelty gate reads, beside it (world_models/novelty.py)."""


BESIDE = (CALIBRATION, NOVELTY, "README.md")
"""Files beside a model that a digest skips: its trust calibrator, the calibrator's novelty bank and
its model card, all written after the runs whose figures they hold."""


def file_digest(path: str | Path) -> str:
    """sha256 of a file, or of a directory's files (relative names and bytes, sorted; hidden ones,
    train_state/ and the `BESIDE` files at the top skipped: they do not change what the directory
    holds as a model or dataset, and a calibrator may be refitted, or a model card written, beside a
    model whose runs stand)."""
    path = Path(path)
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(
        p for p in path.rglob("*") if p.is_file() and str(p.relative_to(path)) not in BESIDE
        and not any(part.startswith(".") or part == "train_state" for part in p.relative_to(path).parts))
    for f in files:
        if f != path:
            h.update(str(f.relative_to(path)).encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def spec_fingerprint(spec: str) -> dict[str, str]:
    """{reference: sha256} for every checkpoint a spec reaches and the source file of its code
    (call after check_trust: finding a module's file imports its parent packages)."""
    out: dict[str, str] = {}
    ckpt = None if spec == "expert" or spec.startswith("expert@") or is_code_spec(spec) else checkpoint_dir(spec)
    if ckpt is not None:
        out[spec] = file_digest(ckpt)
    elif is_code_spec(spec):
        module, attr, kwargs = split_code_spec(spec)
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        if found is not None and found.origin and Path(found.origin).is_file():
            out[f"{module}:{attr}"] = file_digest(found.origin)
        for inner in nested_specs(kwargs):
            out.update(spec_fingerprint(inner))
    return out

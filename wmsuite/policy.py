"""The Policy contract, the chunk queue behind `select_action`, and `module:attr` policy specs.

A policy maps a batch of observations to a chunk of future actions:

    obs = {"pixels": {camera: (B, H, W, 3) uint8}, "agent_pos": (B, D) float32,
           "environment_state": (B, E) float32, "task": list[str] (optional)}
    predict_action_chunk(obs) -> (B, H, A)   numpy float32 or a torch tensor

Any object with `reset()` and `predict_action_chunk()` can be evaluated. Policies that keep
per-environment state across calls (the scripted experts) also define `reset_envs(indices)`; the
rollout engine then calls them with `env_indices=` naming each row's environment where
`predict_action_chunk` takes it (only the environments that need a chunk), else on the full batch
so that batch row i is environment i.
"""

from __future__ import annotations

import importlib
import inspect
from collections import deque
from typing import Any, Protocol, runtime_checkable

import numpy as np

from wmsuite.specs import check_trust, split_code_spec


@runtime_checkable
class Policy(Protocol):
    """What the rollout engine needs from a policy."""

    def reset(self) -> None:
        """Forget all internal state (queues, per-env memory) before a new batch of episodes."""

    def predict_action_chunk(self, obs: dict[str, Any]) -> Any:
        """Return a (B, H, A) chunk of actions for a batch of observations."""


def as_numpy_chunk(chunk: Any, batch: int) -> np.ndarray:
    """Convert a policy's output to float32 numpy (B, H, A) and check it."""
    if hasattr(chunk, "detach"):
        chunk = chunk.detach().float().cpu().numpy()
    chunk = np.asarray(chunk, dtype=np.float32)
    if chunk.ndim == 2:
        chunk = chunk[:, None, :]
    if chunk.ndim != 3 or chunk.shape[0] != batch:
        raise ValueError(f"policy returned an action chunk of shape {chunk.shape}, expected ({batch}, H, A)")
    if not np.all(np.isfinite(chunk)):
        raise ValueError("policy returned NaN or inf actions")
    return chunk


def takes_env_indices(policy: Any) -> bool:
    """Does `policy.predict_action_chunk` take env_indices= (for a wrapper, the policy it wraps too)?"""
    takes = "env_indices" in inspect.signature(policy.predict_action_chunk).parameters
    inner = getattr(policy, "inner", None)
    return takes and (inner is None or takes_env_indices(inner))


def query_chunk(policy: Any, obs: dict[str, Any], batch: int, length: int | None, action_dim: int,
           **kwargs: Any) -> np.ndarray:
    """(batch, H, A) actions from one observation: one chunk, or exactly `length` actions: the first
    `length` of a longer chunk, or repeated queries on the same observation for a policy whose chunks
    are shorter (a one-action expert driving a world model that steps whole chunks)."""
    parts, total = [], 0
    while not parts or (length is not None and total < length):
        chunk = as_numpy_chunk(policy.predict_action_chunk(obs, **kwargs), batch)  # (batch, h, A)
        if chunk.shape[-1] != action_dim:
            raise ValueError(f"policy returned actions of size {chunk.shape[-1]}; the env takes {action_dim}")
        parts.append(chunk)
        total += chunk.shape[1]
    out = np.concatenate(parts, axis=1)
    return out if length is None else out[:, :length].copy()


class ChunkQueue:
    """Execute the first `n_action_steps` actions of each predicted chunk, then predict again.

    Backs `select_action` for policies used in lockstep over a batch (all envs reset together).
    """

    def __init__(self, n_action_steps: int | None = None) -> None:
        if n_action_steps is not None and n_action_steps < 1:
            raise ValueError(f"n_action_steps must be >= 1, got {n_action_steps}")
        self.n_action_steps = n_action_steps
        self._queue: deque[np.ndarray] = deque()

    def reset(self) -> None:
        self._queue.clear()

    def pop(self, predict: Any, obs: dict[str, Any]) -> np.ndarray:
        """Return the next (B, A) action, calling `predict(obs) -> (B, H, A)` when the queue is empty."""
        if not self._queue:
            batch = len(obs["agent_pos"])
            chunk = as_numpy_chunk(predict(obs), batch)  # (B, H, A)
            steps = chunk.shape[1] if self.n_action_steps is None else min(self.n_action_steps, chunk.shape[1])
            self._queue.extend(chunk[:, i] for i in range(steps))
        return self._queue.popleft()


def load_object(spec: str, trusted: bool = False) -> Any:
    """Resolve `package.module:attr` or `package.module:attr{"kw": 1}` to a policy object.

    `trusted`: the spec is the user's own (typed on the command line); otherwise it must pass
    `wmsuite.specs.check_trust` (built-in wrappers only, unless --trust-code). A class that lacks the
    Policy methods is refused before it is called, keyword arguments are checked against the
    signature before the call, and whatever a factory returns must be a Policy.
    """
    check_trust(spec, trusted)
    module_name, attr, kwargs = split_code_spec(spec)
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"cannot import module {module_name!r} from spec {spec!r}: {err}") from err
    if not hasattr(module, attr):
        raise ValueError(f"module {module_name!r} has no attribute {attr!r} (spec {spec!r})")
    obj = getattr(module, attr)
    if isinstance(obj, type) and not all(hasattr(obj, m) for m in ("reset", "predict_action_chunk")):
        raise ValueError(f"{spec!r}: {obj.__name__} is not a policy (it lacks reset() or predict_action_chunk()); "
                         "see wmsuite/policy.py for the Policy contract")
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, Policy)):
        try:
            inspect.signature(obj).bind(**kwargs)
        except TypeError as err:
            raise ValueError(f"{spec!r}: the keyword arguments do not fit {attr}{_signature(obj)}: {err}") from err
        except ValueError:
            pass  # no signature to check (a builtin): the call reports
        obj = obj(**kwargs)
    elif kwargs:
        raise ValueError(f"{spec!r}: {attr!r} is not callable and cannot take keyword arguments")
    if not isinstance(obj, Policy):
        raise ValueError(f"{spec!r} gave a {type(obj).__name__}, not a policy (it needs reset() and "
                         "predict_action_chunk(); see wmsuite/policy.py)")
    return obj


def _signature(obj: Any) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"

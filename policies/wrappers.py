"""Policy wrappers, named on the command line as `module:attr{json}` like any policy.

    wmsuite.policies.wrappers:ActionOffset{"inner": "assets:policies/flow-pushcube", "offset": [0.3, 0.0]}

`inner` is any spec `--policy` accepts except the bare word 'expert' (name the expert as
`wmsuite.envs.experts:make_expert{...}` instead): a checkpoint path, an `assets:` path, or a
`module:attr{json}`, which, nested, runs only with --trust-code (wmsuite/specs.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmsuite.checkpoint import is_checkpoint
from wmsuite.policy import as_numpy_chunk, load_object


def load_spec(spec: str, device: str = "cpu") -> Any:
    """A policy from a checkpoint path, a run directory (its latest/, as `--policy` takes one), an
    `assets:` path or a `module:attr{json}` spec."""
    from wmsuite.policies import ASSETS_PREFIX, load_policy, resolve_path

    if spec.startswith(ASSETS_PREFIX) or is_checkpoint(spec) or is_checkpoint(Path(spec) / "latest"):
        return load_policy(resolve_path(spec), device=device)
    return load_object(spec)


class _Wrapper:
    """Forwards the Policy contract to `inner` (reset, per-env memory, n_action_steps) and returns its
    chunks through `_transform`, clipped to [low, high]."""

    def __init__(self, inner: str | Any, low: float = -1.0, high: float = 1.0, device: str = "cpu") -> None:
        if low >= high:
            raise ValueError(f"low must be < high, got {low} >= {high}")
        self.inner = load_spec(inner, device=device) if isinstance(inner, str) else inner  # a spec or a policy
        self.low, self.high = low, high
        if hasattr(self.inner, "n_action_steps"):
            self.n_action_steps = self.inner.n_action_steps
        if hasattr(self.inner, "reset_envs"):
            self.reset_envs = self.inner.reset_envs

    def reset(self) -> None:
        self.inner.reset()

    def select_action(self, obs: dict[str, Any]) -> np.ndarray:
        return self.predict_action_chunk(obs)[:, 0]

    def predict_action_chunk(self, obs: dict[str, Any], env_indices: Sequence[int] | None = None) -> np.ndarray:
        """(B, H, A) the inner chunk, transformed, clipped to [low, high]; `env_indices` (which
        environment each row is) goes to an inner policy with per-env memory."""
        kwargs = {} if env_indices is None else {"env_indices": env_indices}
        chunk = as_numpy_chunk(self.inner.predict_action_chunk(obs, **kwargs), len(obs["agent_pos"]))  # (B, H, A)
        return np.clip(self._transform(chunk), self.low, self.high).astype(np.float32)

    def _transform(self, chunk: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class ActionOffset(_Wrapper):
    """A deliberately biased policy: the inner policy's actions plus a constant offset, clipped.

    Used in the policy zoo to get a policy whose failures come from a systematic error rather
    than from poor training.
    """

    def __init__(self, inner: str, offset: Sequence[float], low: float = -1.0, high: float = 1.0,
                 device: str = "cpu") -> None:
        self.offset = np.asarray(offset, np.float32)  # (A,)
        if self.offset.ndim != 1:
            raise ValueError(f"offset must be a list of per-dimension floats, got {offset!r}")
        super().__init__(inner, low, high, device)

    def _transform(self, chunk: np.ndarray) -> np.ndarray:
        if chunk.shape[-1] != self.offset.shape[0]:
            raise ValueError(f"offset has {self.offset.shape[0]} entries, the inner policy's actions have "
                             f"{chunk.shape[-1]}")
        return chunk + self.offset


class ActionNoise(_Wrapper):
    """The inner policy's actions plus Gaussian noise of standard deviation `std`, clipped to [low, high]:
    a shaky policy. The noise comes from numpy's global generator, which `wmsuite eval` seeds per wave."""

    def __init__(self, inner: str, std: float, low: float = -1.0, high: float = 1.0, device: str = "cpu") -> None:
        if not std >= 0:
            raise ValueError(f"std must be >= 0, got {std!r}")
        self.std = float(std)
        super().__init__(inner, low, high, device)

    def _transform(self, chunk: np.ndarray) -> np.ndarray:
        return chunk + np.random.normal(0.0, self.std, chunk.shape)  # noqa: NPY002  (seeded by the caller)


class ActionScale(_Wrapper):
    """The inner policy's actions times `scale` per dimension (a float or a list), clipped: a slow
    (scale < 1), hasty (> 1) or mirrored (< 0) policy."""

    def __init__(self, inner: str, scale: float | Sequence[float], low: float = -1.0, high: float = 1.0,
                 device: str = "cpu") -> None:
        self.scale = np.asarray(scale, np.float32)  # () or (A,)
        if self.scale.ndim > 1:
            raise ValueError(f"scale must be a float or a list of per-dimension floats, got {scale!r}")
        super().__init__(inner, low, high, device)

    def _transform(self, chunk: np.ndarray) -> np.ndarray:
        return chunk * self.scale


class Instructed(_Wrapper):
    """The inner policy told `instruction` instead of the env's task: obs["task"] replaced on every
    row. The env still judges its own task, so a policy that follows language succeeds only where the
    two ask for the same thing (`wmsuite eval-policy --instruction`); a language-blind one is unchanged."""

    def __init__(self, inner: str | Any, instruction: str, device: str = "cpu") -> None:
        if not isinstance(instruction, str) or not instruction.strip():
            raise ValueError(f"instruction must be a non-empty string, got {instruction!r}")
        self.instruction = instruction
        super().__init__(inner, -np.inf, np.inf, device)

    def predict_action_chunk(self, obs: dict[str, Any], env_indices: Sequence[int] | None = None) -> np.ndarray:
        told = {**obs, "task": [self.instruction] * len(obs["agent_pos"])}
        return super().predict_action_chunk(told, env_indices)

    def _transform(self, chunk: np.ndarray) -> np.ndarray:
        return chunk

"""The chunk verifier (Pre-VLA / FFDC-style): score candidate chunks for one observation before any
runs, execute the best, and replan sooner when even the best is doubtful.

    chunk, confidence = best_of_n(policy, obs, candidates=8)        # (B, H, A), (B,)
    # as a policy spec (evaluate it like any other):
    #   wmsuite.policies.verifier:Verified{"inner": "runs/habc", "candidates": 8, "replan_below": 0.5}

A policy trained with critics (`train-policy --method habc|both`) holds a chunk critic: the logit
that executing a chunk from an observation succeeds, learnt from its rollouts' credited outcomes
(improve.py). `best_of_n` samples `candidates` chunks per observation (all rows and candidates in
one batch; a failure head guides each as usual), scores them and keeps the highest. The chunk's
confidence is that score's probability. Adaptive execution: where the best confidence is below
`replan_below`, `Verified` hands back only the first `short` actions, so the policy plans again
sooner; rows asked for together share that choice (the engine asks for every row that needs a chunk
in one call).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from wmsuite.policies.model import ChunkPolicy


@torch.no_grad()
def best_of_n(policy: ChunkPolicy, obs: dict[str, Any], candidates: int,
              generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """obs (B rows) -> (the best-scored of `candidates` sampled chunks per row, (B, H, A) env actions;
    its success confidence (B,))."""
    _check(policy)
    if candidates < 1:
        raise ValueError(f"candidates must be >= 1, got {candidates}")
    rows = len(obs["agent_pos"])
    dev = policy.device
    if policy.head.backbone is not None:  # a VLA: the N chunks after one prefix, through the shared-prefix op
        chunks = policy.sample_candidates(obs, candidates, generator).flatten(0, 1)  # (B*N, H, A)
        feats = policy.features(policy.encode(obs)).repeat_interleave(candidates, dim=0)  # (B*N, F)
    else:
        many = _repeat(obs, candidates)  # row b's candidates are rows b*N .. b*N + N-1
        chunks = torch.as_tensor(policy.predict_action_chunk(many, generator=generator))  # (B*N, H, A)
        feats = policy.features(policy.encode(many))  # (B*N, C)
    score = torch.sigmoid(policy.critics.chunk_logit(feats, policy.normalizer.action_to_unit(chunks.to(dev))))
    score = score.view(rows, candidates)  # (B, N)
    best = score.argmax(dim=1)  # (B,)
    picked = chunks.view(rows, candidates, *chunks.shape[1:])[torch.arange(rows), best.cpu()]
    return picked, score[torch.arange(rows, device=dev), best].cpu()


def _check(policy: ChunkPolicy) -> None:
    if policy.critics is None:
        raise ValueError("this policy has no chunk critic to score candidates with; train it with "
                         "`wmsuite train-policy --rollouts ... --method habc` (or both)")


def _repeat(tree: Any, n: int) -> Any:
    """Every leaf's rows repeated n times each, in place (row b -> rows b*n .. b*n + n-1)."""
    if isinstance(tree, dict):
        return {k: _repeat(v, n) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [x for x in tree for _ in range(n)]
    if torch.is_tensor(tree):
        return tree.repeat_interleave(n, dim=0)
    return np.repeat(np.asarray(tree), n, axis=0)


class Verified:
    """A policy that runs `inner`'s best-scored of `candidates` chunks (module docstring)."""

    def __init__(self, inner: str, candidates: int = 8, replan_below: float = 0.0, short: int = 1,
                 device: str = "cpu") -> None:
        from wmsuite.policies.wrappers import load_spec

        if not 0.0 <= replan_below <= 1.0 or short < 1:
            raise ValueError(f"need 0 <= replan_below <= 1 and short >= 1, got {replan_below}, {short}")
        self.inner = load_spec(inner, device=device)
        if not isinstance(self.inner, ChunkPolicy):
            raise ValueError(f"{inner} is not a trained policy; the verifier scores a ChunkPolicy's candidates")
        _check(self.inner)  # refused here, before any episode, with what to do
        self.candidates, self.replan_below, self.short = int(candidates), float(replan_below), int(short)
        self.n_action_steps = self.inner.n_action_steps
        self.confidence: np.ndarray = np.zeros(0)  # the last call's per-row confidence

    def reset(self) -> None:
        self.inner.reset()

    def predict_action_chunk(self, obs: dict[str, Any]) -> np.ndarray:
        chunk, conf = best_of_n(self.inner, obs, self.candidates)
        self.confidence = conf.numpy()
        if (self.confidence < self.replan_below).any():
            chunk = chunk[:, : self.short]
        return chunk.numpy()

    def select_action(self, obs: dict[str, Any]) -> np.ndarray:
        return self.predict_action_chunk(obs)[:, 0]

"""Hierarchical advantage-weighted behaviour cloning (HABC, arXiv 2606.17043): per-transition weights
on the flow-matching loss from two critics and a state-adaptive gate, with intervention-aware credit.

Data: demonstrations, and the policy's own rollouts with their success labels and intervention
masks (`wmsuite collect --intervene`). Each action has a *source*: DEMO, INTERVENTION (the expert
acted) or AUTONOMOUS (the policy acted).

Credit (`credit`). An intervened episode's outcome belongs only to what the policy executed toward
it: a stretch of autonomous actions that ends where the expert takes over is a failure (the policy
drifted: that is why the expert stepped in), and the stretch that reaches the episode's end gets the
episode's outcome. The expert's actions are the expert's, not the policy's.

Critics, on the policy's observation features:
- viability V_v(s) in (0, 1), BCE on autonomous states against their credited outcome;
- efficiency V_e(s) <= 0, Huber on states of successful stretches against -n + V_e(s') (n actions
  to the next state, bootstrapped), 0 at the successful end (`efficiency_targets`), in units of the
  task's horizon so that it lies in [-1, 0].

Advantages of a transition s -> s' of n actions: A_v = V_v(s') - V_v(s) (did it keep the task
viable?), A_e = -n + V_e(s') - V_e(s) (did it get there faster than usual?). The gate trusts
efficiency where success is likely and viability where it is not:
    g = 1 + tanh((1 - p_v) A_v + p_v A_e),   p_v = V_v(s)        (`gate`, in (0, 2))
Weights (`transition_weights`): g on successful autonomous transitions, 0 on failed ones, 1 on
demonstrations and interventions; divided by the mean positive weight so the loss keeps its scale.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

DEMO, INTERVENTION, AUTONOMOUS = 0, 1, 2
"""Sources of an action (`credit`)."""


def credit(success: bool, intervention: np.ndarray | None, demonstration: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """One episode's (T,) intervention mask -> (source (T,) int, outcome (T,) float): each action's
    source, and the outcome credited to it (module docstring; NaN where the expert acted). A
    demonstration's actions are all DEMO with its own outcome."""
    if intervention is None:
        raise ValueError("credit needs the episode's intervention mask (Episode.intervention)")
    took = np.asarray(intervention, bool)
    t = len(took)
    if demonstration:
        return np.full(t, DEMO), np.full(t, float(success))
    source = np.where(took, INTERVENTION, AUTONOMOUS)
    outcome = np.full(t, np.nan)
    start = 0
    while start < t:
        if took[start]:
            start += 1
            continue
        end = start
        while end < t and not took[end]:
            end += 1
        # a stretch cut short by the expert failed; the one that reaches the end gets the episode's outcome
        outcome[start:end] = float(success) if end == t else 0.0
        start = end
    return source, outcome


def efficiency_targets(v_next: torch.Tensor, steps: torch.Tensor, success_end: torch.Tensor,
                       horizon: int) -> torch.Tensor:
    """(N,) each: V_e of the next state, actions to it, whether it is the successful end -> the
    efficiency critic's targets -steps / horizon + V_e(s') (V_e(s') = 0 at the successful end)."""
    return -steps.float() / horizon + torch.where(success_end, torch.zeros_like(v_next), v_next)


def advantages(v_v: torch.Tensor, v_v_next: torch.Tensor, v_e: torch.Tensor, v_e_next: torch.Tensor,
               steps: torch.Tensor, success_end: torch.Tensor, horizon: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(N,) critic values at s and s' -> (A_v, A_e) of the transitions (module docstring)."""
    a_v = torch.where(success_end, torch.ones_like(v_v), v_v_next) - v_v
    a_e = efficiency_targets(v_e_next, steps, success_end, horizon) - v_e
    return a_v, a_e


def gate(p_v: torch.Tensor, a_v: torch.Tensor, a_e: torch.Tensor) -> torch.Tensor:
    """g = 1 + tanh((1 - p_v) A_v + p_v A_e), elementwise, in (0, 2)."""
    return 1.0 + torch.tanh((1.0 - p_v) * a_v + p_v * a_e)


def transition_weights(source: torch.Tensor, outcome: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """(N,) sources, credited outcomes (NaN where not autonomous) and gates -> (N,) weights: g on
    successful autonomous transitions, 0 on failed ones, 1 on demonstrations and interventions, all
    divided by the mean positive weight (1 when none is positive)."""
    autonomous = source == AUTONOMOUS
    w = torch.where(autonomous, torch.where(outcome > 0.5, g, torch.zeros_like(g)), torch.ones_like(g))
    positive = w[w > 0]
    return w / positive.mean() if len(positive) else w


class Critics(nn.Module):
    """HABC's two critics on observation features (B, C) (viability logits, efficiency values <= 0), and
    the chunk critic the verifier scores candidates with (policies/verifier.py): the logit that
    executing a chunk (B, H * A), in the policy's normalised action space, from here succeeds."""

    def __init__(self, cond_dim: int, chunk_dim: int, hidden: int = 128) -> None:
        super().__init__()

        def mlp(width: int) -> nn.Sequential:
            return nn.Sequential(nn.Linear(width, hidden), nn.Mish(), nn.Linear(hidden, hidden), nn.Mish(),
                                 nn.Linear(hidden, 1))

        self.viability, self.efficiency, self.chunk = mlp(cond_dim), mlp(cond_dim), mlp(cond_dim + chunk_dim)

    def forward(self, cond: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, C) -> (viability logit (B,), efficiency (B,) in (-inf, 0])."""
        return self.viability(cond).squeeze(-1), -nn.functional.softplus(self.efficiency(cond).squeeze(-1))

    def chunk_logit(self, cond: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
        """(B, C) features and (B, H, A) normalised chunks -> (B,) success logits."""
        return self.chunk(torch.cat([cond, chunk.flatten(1)], dim=-1)).squeeze(-1)

"""`wmsuite bench policies`: action-chunk inference latency per policy, sampler step count and batch size.

    wmsuite bench policies --out runs/bench-policies
    wmsuite bench policies --policies runs/flow-pushcube runs/diffusion-pushcube --steps 1 5 10 --batch-sizes 1 64

Each policy is timed on random observations of its own input shape (latency does not depend on
the weights, so untrained default-size policies stand in when no checkpoint is given). Figures
are medians over --repeats calls after one warm-up call, all measured in the same process.
OUT/metrics.json keys: "<policy>/steps<K>/batch<B>_ms" (<policy>: the kind, the checkpoint folder's name, or
<run>-s<N> for runs/<run>/checkpoints/step_N) (median milliseconds per chunk) and
"<policy>/steps<K>/batch<B>_chunks_per_s" (B / median seconds), plus "threads".
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from wmsuite.logging import write_metrics


@dataclass
class BenchPoliciesConfig:
    policies: list[str] = field(default_factory=lambda: ["flow", "diffusion"])
    """Checkpoint directories / 'assets:' paths, or a kind ('flow', 'diffusion') for an untrained
    policy of the default size with the input shapes of --env's task."""
    env: str = ""
    """Task (env id) whose probe gives an untrained policy its action, agent_pos and environment_state
    sizes. Empty: the built-in default task (wmsuite.envs.DEFAULT_ENV_ID)."""
    steps: list[int] = field(default_factory=lambda: [1, 5, 10, 20])
    """Sampler step counts (Euler steps for flow, DDIM steps for diffusion)."""
    batch_sizes: list[int] = field(default_factory=lambda: [1, 64])
    """Observation batch sizes."""
    repeats: int = 10
    """Timed calls per setting (the median is reported)."""
    threads: int = 1
    """torch.set_num_threads."""
    device: str = "cpu"
    """Torch device."""
    out: str | None = None
    """Directory for metrics.json (optional)."""

    def __post_init__(self) -> None:
        if not self.policies:
            raise ValueError("policies must name at least one policy")
        if not self.steps or any(s < 1 for s in self.steps):
            raise ValueError(f"steps must be positive integers, got {self.steps}")
        if not self.batch_sizes or any(b < 1 for b in self.batch_sizes):
            raise ValueError(f"batch_sizes must be positive integers, got {self.batch_sizes}")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")


CONFIG = BenchPoliciesConfig


def run(cfg: BenchPoliciesConfig) -> int:
    from wmsuite.envs import DEFAULT_ENV_ID, get_probe
    from wmsuite.policies import POLICY_KINDS, load_policy, make_policy

    probe = get_probe(cfg.env or DEFAULT_ENV_ID)  # an untrained policy takes this task's input shapes
    dims = {"action": probe.action_dim, "agent_pos": probe.agent_dim, "environment_state": probe.env_state_dim}
    a, d = probe.action_dim, probe.agent_dim
    stats = {"action": {"min": [-1.0] * a, "max": [1.0] * a}, "agent_pos": {"mean": [0.0] * d, "std": [1.0] * d}}

    torch.set_num_threads(cfg.threads)
    metrics: dict[str, float] = {"threads": cfg.threads}
    rows = []
    for spec in cfg.policies:
        if spec in POLICY_KINDS:
            policy = make_policy(spec, dims, stats, cameras=(probe.camera,)).to(cfg.device).eval()
            name = spec
        else:
            policy = load_policy(spec, device=cfg.device)
            path = Path(spec.split(":", 1)[-1])
            name = f"{path.parent.parent.name}-s{int(path.name[5:])}" if path.parent.name == "checkpoints" else path.name
        if any(r[0] == name for r in rows):
            raise ValueError(f"two policies would both be reported as {name!r}; give distinct checkpoint paths")
        params = sum(p.numel() for p in policy.parameters())
        for batch in cfg.batch_sizes:
            obs = _random_obs(policy, batch)
            for steps in cfg.steps:
                if policy.cfg.kind == "diffusion" and steps > policy.cfg.num_train_timesteps:
                    continue
                policy.predict_action_chunk(obs, num_inference_steps=steps)  # warm-up
                times = []
                for _ in range(cfg.repeats):
                    t0 = time.perf_counter()
                    policy.predict_action_chunk(obs, num_inference_steps=steps)
                    times.append(time.perf_counter() - t0)
                med = statistics.median(times)
                key = f"{name}/steps{steps}/batch{batch}"
                metrics[f"{key}_ms"] = 1000 * med
                metrics[f"{key}_chunks_per_s"] = batch / med
                rows.append((name, policy.cfg.kind, params, steps, batch, 1000 * med, batch / med))
    print(f"{'policy':<28} {'kind':<9} {'params':>8} {'steps':>5} {'batch':>5} {'ms/call':>9} {'chunks/s':>9}")
    for name, kind, params, steps, batch, ms, cps in rows:
        print(f"{name:<28} {kind:<9} {params:>8} {steps:>5} {batch:>5} {ms:>9.2f} {cps:>9.1f}")
    if cfg.out:
        print(f"wrote {write_metrics(cfg.out, metrics)}")
    return 0


def _random_obs(policy, batch: int) -> dict[str, object]:
    rng = np.random.default_rng(0)
    size = policy.cfg.image_size
    obs: dict[str, object] = {
        "pixels": {c: rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8) for c in policy.cfg.cameras},
        "agent_pos": rng.normal(size=(batch, policy.dims["agent_pos"])).astype(np.float32),
        "environment_state": rng.normal(size=(batch, policy.dims["environment_state"])).astype(np.float32),
    }
    return obs

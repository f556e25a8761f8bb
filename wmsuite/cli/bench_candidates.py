"""`wmsuite bench candidates`: scoring N candidate chunks of a VLA, packed after one prefix vs replicated.

    wmsuite bench candidates --out runs/bench-candidates
    wmsuite bench candidates --policy runs/vla-colors --candidates 16

One denoiser pass of a VLA policy (`--policy`, or an untrained one of PolicyConfig's default VLA
size for PushColors' observations when empty) on B observations x N candidate chunks, two ways,
timed side by side in one process: *packed*, each observation's prefix once and its N chunks as
suffixes through the shared-prefix op (P + N*H tokens per observation), and *replicated*, every
chunk with its own copy of the prefix (N*(P + H) tokens), as N separate sequences would run. Both
compute the same outputs (checked here before timing). The *ideal* speedup is the ratio of the two
layouts' FLOPs (`BlockConfig.flops` over tokens and attended pairs, blocks only); `efficiency` is the
measured speedup over it. metrics.json keys: packed_ms, replicated_ms, speedup, ideal_speedup,
efficiency, prefix_tokens, chunk_tokens, candidates, batch, threads (medians over --repeats passes).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from wmsuite.logging import write_metrics


@dataclass
class BenchCandidatesConfig:
    policy: str = ""
    """A VLA policy (checkpoint, run directory or assets: spec); empty: an untrained one of the default size."""
    candidates: int = 16
    """N: candidate chunks per observation."""
    batch: int = 1
    """B: observations."""
    repeats: int = 20
    """Timed passes per layout (the median is reported), alternating packed and replicated."""
    threads: int = 1
    """torch.set_num_threads."""
    out: str = ""
    """Directory for metrics.json (nothing written when empty)."""

    def __post_init__(self) -> None:
        if self.candidates < 1 or self.batch < 1 or self.repeats < 1 or self.threads < 1:
            raise ValueError(f"candidates, batch, repeats and threads must be >= 1, got {self.candidates}, "
                             f"{self.batch}, {self.repeats}, {self.threads}")


CONFIG = BenchCandidatesConfig


def run(cfg: BenchCandidatesConfig) -> int:
    from wmsuite.cuda_ops import SharedPrefixLayout
    from wmsuite.nn import BlockConfig

    torch.set_num_threads(cfg.threads)
    policy = _policy(cfg.policy)
    den, pcfg = policy.head.backbone, policy.cfg
    b, n, h, a = cfg.batch, cfg.candidates, pcfg.horizon, policy.dims["action"]
    p = policy.encoder.tokens
    gen = torch.Generator().manual_seed(0)
    prefix = torch.randn(b, p, pcfg.vla_dim, generator=gen)
    x = torch.randn(b, n, h, a, generator=gen)
    t = torch.full((b,), 500.0)
    packed = lambda: den(x, t, prefix)  # noqa: E731
    replicated = lambda: den(x.flatten(0, 1)[:, None], t.repeat_interleave(n), prefix.repeat_interleave(n, 0))  # noqa: E731
    with torch.no_grad():
        same = torch.allclose(packed(), replicated().view(b, n, h, a), atol=1e-4, rtol=1e-4)
        if not same:
            raise RuntimeError("packed and replicated candidates disagree: the benchmark would time different work")
        times = {"packed": [], "replicated": []}
        for _ in range(2):  # warm-up
            packed(), replicated()
        for _ in range(cfg.repeats):
            for name, fn in (("packed", packed), ("replicated", replicated)):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    block = BlockConfig(dim=pcfg.vla_dim, heads=pcfg.vla_heads)
    flops = {}
    for name, layout in (("packed", SharedPrefixLayout.uniform(b, n, p, h, "full", "full")),
                         ("replicated", SharedPrefixLayout.uniform(b * n, 1, p, h, "full", "full"))):
        flops[name] = pcfg.vla_layers * block.flops(layout.num_tokens, layout.attended_pairs())
    m = {"packed_ms": 1e3 * statistics.median(times["packed"]),
         "replicated_ms": 1e3 * statistics.median(times["replicated"]),
         "ideal_speedup": flops["replicated"] / flops["packed"], "prefix_tokens": p, "chunk_tokens": h,
         "candidates": n, "batch": b, "threads": cfg.threads}
    m["speedup"] = m["replicated_ms"] / m["packed_ms"]
    m["efficiency"] = m["speedup"] / m["ideal_speedup"]
    print(f"{b} observation(s) x {n} candidate chunks, prefix {p} tokens, chunk {h}: packed {m['packed_ms']:.2f} ms, "
          f"replicated {m['replicated_ms']:.2f} ms -> {m['speedup']:.2f}x (ideal {m['ideal_speedup']:.2f}x by FLOPs, "
          f"efficiency {m['efficiency']:.2f})")
    if cfg.out:
        print(f"wrote {write_metrics(cfg.out, m)}")
    return 0


def _policy(spec: str):
    if spec:
        from wmsuite.policies import load_policy

        policy = load_policy(spec)
        if policy.cfg.backbone != "vla":
            raise ValueError(f"{spec} is a {policy.cfg.backbone!r} policy; candidates share a prefix only in a VLA "
                             "(train one with --policy.backbone vla)")
        return policy
    from wmsuite.envs import get_probe
    from wmsuite.policies import make_policy

    probe = get_probe("wmsuite/PushColors-v0")
    dims = {"action": probe.action_dim, "agent_pos": probe.agent_dim, "environment_state": probe.env_state_dim}
    stats = {"action": {"min": [-1.0] * probe.action_dim, "max": [1.0] * probe.action_dim},
             "agent_pos": {"mean": [0.0] * probe.agent_dim, "std": [1.0] * probe.agent_dim}}
    torch.manual_seed(0)
    return make_policy("flow", dims, stats, backbone="vla", cameras=("top",)).eval()

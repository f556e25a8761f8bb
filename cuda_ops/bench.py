"""Benchmark of shared-prefix attention against SDPA on the replicated batch (no CLI needed).

For each (N, P, R): one group, causal prefix and suffixes. The packed op (forward + backward)
and `scaled_dot_product_attention(is_causal=True)` on the N replicated sequences (forward +
backward; the flash backend on CUDA) are timed alternately in the same loop; each reports its
median. speedup = t_replicated / t_packed; ideal = replicated / packed attended pairs (counted
exactly from the masks; N(P+R)^2 / (P^2 + 2NPR + NR^2) in the continuum limit).

    rows = [bench_op(n, p, r, OpSpec(heads=2, head_dim=64)) for n, p, r in DEFAULT_GRID]
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .attention import select_backend, shared_prefix_attention
from .layout import SharedPrefixLayout

# (N, P, R): GRPO-like (16, 1024, 128), long context (8, 4096, 1024), many long branches
# (28, 4096, 2048), plus a short-prefix point (P < 4R) where little can be saved.
DEFAULT_GRID: tuple[tuple[int, int, int], ...] = (
    (16, 1024, 128), (8, 4096, 1024), (28, 4096, 2048), (4, 2048, 128), (8, 256, 256))
QUICK_GRID: tuple[tuple[int, int, int], ...] = ((4, 96, 16), (2, 32, 32))

# Backward of attention = 2.5 x forward in matmul FLOPs (FlashAttention-2's convention: recompute
# of QK^T plus dV, dP, dQ, dK).
FWD_BWD_FACTOR = 3.5


@dataclass
class OpSpec:
    heads: int = 2
    """Query heads."""
    kv_heads: int | None = None
    """Key/value heads; None = heads."""
    head_dim: int = 64
    """Head dimension."""
    dtype: torch.dtype = torch.float32
    """Input dtype."""
    device: str = "cpu"
    """Device of the tensors."""
    backend: str | None = None
    """Shared-prefix backend (None: the dispatcher's choice)."""


def causal_pair_ratio(n: int, p: int, r: int) -> float:
    """Continuum ratio of attended pairs, replicated / packed, for causal attention."""
    return n * (p + r) ** 2 / (p * p + 2 * n * p * r + n * r * r)


def token_ratio(n: int, p: int, r: int) -> float:
    """rho = N(P+R) / (P + NR)."""
    return n * (p + r) / (p + n * r)


def synchronize(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def clock_for(device: str) -> tuple[Callable[[], float], str]:
    """The timer of a measurement: on CPU with one torch thread, the thread's CPU time (robust to
    other processes on a shared machine: time spent descheduled is not counted); otherwise wall
    time (with CUDA synchronisation around each call)."""
    if torch.device(device).type == "cpu" and torch.get_num_threads() == 1:
        return time.thread_time, "thread CPU time"
    return time.perf_counter, "wall time"


def time_interleaved(fns: dict[str, Callable[[], None]], repeats: int, device: str, warmup: int = 1
                     ) -> dict[str, float]:
    """Median seconds of each function, run alternately (a, b, a, b, ...) after `warmup` rounds."""
    clock, _ = clock_for(device)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for i in range(warmup + repeats):
        for name, fn in fns.items():
            synchronize(device)
            t0 = clock()
            fn()
            synchronize(device)
            if i >= warmup:
                times[name].append(clock() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def sdpa_context(device: str):
    """The flash backend on CUDA (fails loudly if it cannot run); the default elsewhere."""
    if torch.device(device).type == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    return nullcontext()


def bench_op(n: int, p: int, r: int, spec: OpSpec, repeats: int = 3, seed: int = 0) -> dict:
    """Forward+backward of the packed op vs replicated SDPA for one (N, P, R); one metrics row."""
    layout = SharedPrefixLayout.uniform(1, n, p, r)
    hq, hkv, d = spec.heads, spec.kv_heads or spec.heads, spec.head_dim
    g = torch.Generator(device=spec.device).manual_seed(seed)

    def leaf(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, device=spec.device, dtype=spec.dtype).requires_grad_()

    T, L = layout.num_tokens, p + r
    q, k, v = leaf(T, hq, d), leaf(T, hkv, d), leaf(T, hkv, d)  # packed (T, H, D)
    do = torch.randn(T, hq, d, generator=g, device=spec.device, dtype=spec.dtype)
    qr, kr, vr = leaf(n, hq, L, d), leaf(n, hkv, L, d), leaf(n, hkv, L, d)  # replicated (N, H, L, D)
    dor = torch.randn(n, hq, L, d, generator=g, device=spec.device, dtype=spec.dtype)
    backend, _ = select_backend(q, spec.backend, layout)

    def packed() -> None:
        for x in (q, k, v):
            x.grad = None
        shared_prefix_attention(q, k, v, layout, backend=backend).backward(do)

    def replicated() -> None:
        for x in (qr, kr, vr):
            x.grad = None
        with sdpa_context(spec.device):
            o = F.scaled_dot_product_attention(qr, kr, vr, is_causal=True, enable_gqa=hq != hkv)
        o.backward(dor)

    t = time_interleaved({"packed": packed, "replicated": replicated}, repeats, spec.device)
    pairs, rep_pairs = layout.attended_pairs(), layout.attended_pairs(replicated=True)
    flops = FWD_BWD_FACTOR * 4 * d * hq * pairs
    return {
        "N": n, "P": p, "R": r, "what": "op", "backend": f"{backend} vs sdpa",
        "rho": layout.token_ratio, "ideal": rep_pairs / pairs, "ideal_formula": causal_pair_ratio(n, p, r),
        "speedup": t["replicated"] / t["packed"],
        "ms_packed": 1e3 * t["packed"], "ms_replicated": 1e3 * t["replicated"],
        "tflops_packed": flops / t["packed"] / 1e12,
        "tflops_replicated": FWD_BWD_FACTOR * 4 * d * hq * rep_pairs / t["replicated"] / 1e12,
    }

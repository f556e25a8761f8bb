"""`wmsuite bench attention`: shared-prefix attention vs SDPA on the replicated batch.

For every (N, P, R) of the grid, forward+backward of (a) the attention op alone and (b) a whole
transformer block (`wmsuite.nn.SharedPrefixBlock`), packed vs replicated, timed alternately in the
same run (medians). Prints rho, the ideal speedup from counted work and the measured speedup;
`--out DIR` writes the same rows to DIR/metrics.json:

    rows: [{N, P, R, rho, what: "op"|"block", backend, ideal, speedup,
            ms_packed, ms_replicated, tflops_packed, tflops_replicated}]

ideal (op) = replicated / packed attended pairs; ideal (block) = replicated / packed forward
FLOPs of the block (projections + MLP per token, attention per pair). TFLOP/s count the
deduplicated (packed) work for the packed side and the replicated work for SDPA.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from wmsuite.cuda_ops import SharedPrefixLayout, select_backend
from wmsuite.cuda_ops.bench import (
    DEFAULT_GRID,
    FWD_BWD_FACTOR,
    QUICK_GRID,
    OpSpec,
    bench_op,
    clock_for,
    sdpa_context,
    time_interleaved,
)
from wmsuite.logging import write_metrics
from wmsuite.nn import BlockConfig, SharedPrefixBlock

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass
class BenchAttentionConfig:
    out: str | None = None
    """Directory for metrics.json (None: print only)."""
    quick: bool = False
    """Tiny grid (N, P, R) in {(4, 96, 16), (2, 32, 32)} for smoke tests."""
    shapes: list[str] = field(default_factory=list)
    """Custom grid as N,P,R triples, e.g. 16,1024,128 8,4096,1024 (empty: the default grid)."""
    device: str = "auto"
    """cpu, cuda or auto (cuda when available)."""
    heads: int | None = None
    """Query heads (None: 1 on CPU, 16 on CUDA)."""
    head_dim: int | None = None
    """Head dimension (None: 64 on CPU, 128 on CUDA)."""
    dtype: str | None = None
    """fp32, fp16 or bf16 (None: fp32 on CPU, bf16 on CUDA)."""
    repeats: int | None = None
    """Timed rounds per measurement, after one warm-up round; medians are reported (None: 3 on CPU, 10 on CUDA)."""
    threads: int = 1
    """CPU threads for torch. With 1, CPU runs are timed by the thread's CPU time, which other
    processes on a shared machine do not disturb; with more, by wall time."""
    block: bool = True
    """Also benchmark the whole transformer block (MLP ratio 4, width heads x head_dim)."""
    backend: str | None = None
    """Force the shared-prefix backend (reference or triton); None: the dispatcher's choice."""

    def __post_init__(self) -> None:
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be auto, cpu or cuda, got {self.device!r}")
        if self.dtype is not None and self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}")
        for name in ("heads", "head_dim", "repeats"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        for s in self.shapes:
            parse_shape(s)

    def grid(self) -> list[tuple[int, int, int]]:
        if self.shapes:
            return [parse_shape(s) for s in self.shapes]
        return list(QUICK_GRID if self.quick else DEFAULT_GRID)


CONFIG = BenchAttentionConfig


def parse_shape(text: str) -> tuple[int, int, int]:
    try:
        n, p, r = (int(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"a shape is N,P,R (three integers), got {text!r}") from None
    if n < 1 or p < 0 or r < 0:
        raise ValueError(f"shape needs N >= 1, P >= 0, R >= 0, got {text!r}")
    return n, p, r


def bench_block(n: int, p: int, r: int, spec: OpSpec, repeats: int, seed: int = 0) -> dict:
    """Forward+backward of one SharedPrefixBlock on packed tokens vs the replicated batch."""
    layout = SharedPrefixLayout.uniform(1, n, p, r)
    cfg = BlockConfig(dim=spec.heads * spec.head_dim, heads=spec.heads, kv_heads=spec.kv_heads)
    torch.manual_seed(seed)
    block = SharedPrefixBlock(cfg).to(device=spec.device, dtype=spec.dtype)
    T, L = layout.num_tokens, p + r
    x = torch.randn(T, cfg.dim, device=spec.device, dtype=spec.dtype, requires_grad=True)  # packed (T, C)
    dy = torch.randn_like(x)
    xr = torch.randn(n, L, cfg.dim, device=spec.device, dtype=spec.dtype, requires_grad=True)  # (N, L, C)
    dyr = torch.randn_like(xr)
    pos = torch.arange(L, device=spec.device).expand(n, L)
    backend, _ = select_backend(x.view(T, spec.heads, spec.head_dim), spec.backend, layout)

    def clear() -> None:
        for t in (x, xr, *block.parameters()):
            t.grad = None

    def packed() -> None:
        clear()
        block(x, layout, backend=backend).backward(dy)

    def replicated() -> None:
        clear()
        with sdpa_context(spec.device):
            y = block.forward_replicated(xr, pos, is_causal=True)
        y.backward(dyr)

    t = time_interleaved({"packed": packed, "replicated": replicated}, repeats, spec.device)
    pairs, rep_pairs = layout.attended_pairs(), layout.attended_pairs(replicated=True)
    f_packed, f_rep = cfg.flops(T, pairs), cfg.flops(layout.replicated_tokens, rep_pairs)
    # fwd+bwd: 3x forward for the projections/MLP, FWD_BWD_FACTOR x for attention.
    attn = 4 * cfg.heads * cfg.head_dim

    def fwd_bwd(tokens: int, pairs_: int) -> float:
        return 3 * (cfg.flops(tokens, pairs_) - attn * pairs_) + FWD_BWD_FACTOR * attn * pairs_

    return {
        "N": n, "P": p, "R": r, "what": "block", "backend": f"{backend} vs sdpa",
        "rho": layout.token_ratio, "ideal": f_rep / f_packed,
        "speedup": t["replicated"] / t["packed"],
        "ms_packed": 1e3 * t["packed"], "ms_replicated": 1e3 * t["replicated"],
        "tflops_packed": fwd_bwd(T, pairs) / t["packed"] / 1e12,
        "tflops_replicated": fwd_bwd(layout.replicated_tokens, rep_pairs) / t["replicated"] / 1e12,
    }


def run(cfg: BenchAttentionConfig) -> int:
    device = ("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda but torch sees no CUDA device; use --device cpu")
    gpu = device == "cuda"
    if not gpu:
        torch.set_num_threads(cfg.threads)
    spec = OpSpec(heads=cfg.heads or (16 if gpu else 1), head_dim=cfg.head_dim or (128 if gpu else 64),
                  dtype=DTYPES[cfg.dtype or ("bf16" if gpu else "fp32")], device=device, backend=cfg.backend)
    repeats = cfg.repeats or (10 if gpu else 3)
    clock = clock_for(device)[1]
    print(f"shared-prefix attention vs replicated SDPA, forward+backward, {device}"
          f"{'' if gpu else f' ({torch.get_num_threads()} thread(s))'}, heads={spec.heads}, "
          f"head_dim={spec.head_dim}, {str(spec.dtype).replace('torch.', '')}, median of {repeats} ({clock})")
    header = (f"{'N':>3} {'P':>5} {'R':>5} {'rho':>5} {'what':>5} {'ideal':>6} {'speedup':>8} {'ratio':>6} "
              f"{'ms packed':>10} {'ms repl.':>10} {'TF/s pk':>8} {'TF/s rep':>8}  backend")
    print(header)
    rows = []
    for n, p, r in cfg.grid():
        for fn in (bench_op, bench_block) if cfg.block else (bench_op,):
            row = fn(n, p, r, spec, repeats)
            rows.append(row)
            print(f"{n:>3} {p:>5} {r:>5} {row['rho']:>5.2f} {row['what']:>5} {row['ideal']:>6.2f} "
                  f"{row['speedup']:>8.2f} {row['speedup'] / row['ideal']:>6.2f} {row['ms_packed']:>10.1f} "
                  f"{row['ms_replicated']:>10.1f} {row['tflops_packed']:>8.3f} {row['tflops_replicated']:>8.3f}  "
                  f"{row['backend']}", flush=True)
    print("ratio = speedup / ideal (target >= 0.8 where P >= 4R)")
    if cfg.out:
        path = write_metrics(cfg.out, {
            "rows": rows, "device": device, "heads": spec.heads, "head_dim": spec.head_dim,
            "dtype": str(spec.dtype).replace("torch.", ""), "repeats": repeats, "clock": clock,
            "threads": torch.get_num_threads() if not gpu else None})
        print(f"wrote {path}")
    return 0

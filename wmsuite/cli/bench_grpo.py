"""`wmsuite bench grpo`: one GRPO update step, packed groups vs the replicated batch, side by side.

One group of N responses of R tokens after a prompt of P tokens (random tokens, rewards and
behaviour log-probs) through a transformers Llama of the given size: the loss, its backward and an
AdamW step, (a) packed through the shared-prefix op (P + N R tokens) and (b) replicated (N rows of
P + R tokens, SDPA), timed alternately in one run (medians of thread CPU time with one thread).
Printed, and with `--out DIR` written to DIR/metrics.json:

    speedup             replicated step time / packed step time
    ideal               replicated / packed FLOPs of the model's forward at this shape (projections,
                        MLP and LM head per token, attention per attended pair): what deduplicating
                        the prompt can save at best
    ratio               speedup / ideal
    max_rel_grad_error  largest relative difference, over the parameters, of the packed gradient from
                        the replicated one (fp32)
    loss_rel_error      the same for the loss
    ms_packed, ms_replicated, N, P, R, hidden, layers, heads, kv_heads, threads, repeats

and, when `trl` is installed (it is optional; without it one line says the comparison is skipped), the
same step through TRL's GRPOTrainer on a copy of the model and the same batch (`bench_grpo_trl`: its
`compute_loss` with SDPA, backward, the same AdamW), timed in the same rounds:

    ms_trl                  TRL's step time
    trl_over_packed         TRL step time / packed step time
    trl_loss_rel_error      relative difference of TRL's loss from the packed one (fp32)
    trl_max_rel_grad_error  the same for the gradients, the largest over the parameters
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from wmsuite.cli.bench_grpo_trl import trl_available, trl_step
from wmsuite.cuda_ops.bench import clock_for, time_interleaved
from wmsuite.logging import write_metrics
from wmsuite.policies.lm.grpo import GRPOConfig, grpo_loss, pack_groups
from wmsuite.policies.lm.model import LMConfig, build_lm
from wmsuite.rollout.tokens import Group, Response


@dataclass
class BenchGRPOConfig:
    out: str | None = None
    """Directory for metrics.json (None: print only)."""
    n: int = 16
    """Responses per prompt (N)."""
    prompt: int = 256
    """Prompt tokens (P)."""
    response: int = 64
    """Tokens per response (R)."""
    hidden: int = 256
    """Model width."""
    layers: int = 2
    """Decoder layers."""
    heads: int = 4
    """Query heads."""
    kv_heads: int = 2
    """Key/value heads."""
    vocab: int = 512
    """Vocabulary size."""
    repeats: int = 5
    """Timed rounds after one warm-up (medians)."""
    threads: int = 1
    """CPU threads (1: timed by the thread's CPU time, which other processes do not disturb)."""
    quick: bool = False
    """A tiny shape for smoke tests (N 4, P 32, R 8, hidden 64)."""

    def __post_init__(self) -> None:
        for name in ("n", "prompt", "response", "hidden", "layers", "heads", "kv_heads", "vocab", "repeats", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


CONFIG = BenchGRPOConfig


def model_flops(cfg: LMConfig, vocab: int, tokens: int, pairs: int) -> float:
    """Forward FLOPs of the model on `tokens` tokens attending `pairs` (query, key) pairs."""
    d = cfg.hidden // cfg.heads
    proj = 2 * cfg.hidden * (cfg.hidden + 2 * cfg.kv_heads * d) + 2 * cfg.hidden * cfg.hidden  # q, k, v, o
    mlp = 2 * 3 * cfg.hidden * cfg.mlp  # gate, up, down
    per_layer = tokens * (proj + mlp) + 4 * pairs * cfg.heads * d  # q k^T and p v
    return cfg.layers * per_layer + tokens * 2 * cfg.hidden * vocab


def _group(n: int, p: int, r: int, vocab: int, gen: torch.Generator) -> Group:
    prompt = torch.randint(3, vocab, (p,), generator=gen).tolist()
    responses = [Response(torch.randint(3, vocab, (r,), generator=gen).tolist(),
                          (-2 - torch.rand(r, generator=gen)).tolist(), True) for _ in range(n)]
    return Group(0, prompt, responses)


def run(cfg: BenchGRPOConfig) -> int:
    if cfg.quick:
        cfg.n, cfg.prompt, cfg.response, cfg.hidden, cfg.repeats = 4, 32, 8, 64, 2
    torch.set_num_threads(cfg.threads)
    lm = LMConfig(hidden=cfg.hidden, layers=cfg.layers, heads=cfg.heads, kv_heads=cfg.kv_heads, mlp=4 * cfg.hidden,
                  max_positions=cfg.prompt + cfg.response)
    model = build_lm(lm, cfg.vocab, seed=0)
    gen = torch.Generator().manual_seed(0)
    group = _group(cfg.n, cfg.prompt, cfg.response, cfg.vocab, gen)
    batch = pack_groups([group], torch.rand(1, cfg.n, generator=gen))
    grpo = GRPOConfig(prompts=1, group_size=max(cfg.n, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)

    def step(packed: bool) -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss, _ = grpo_loss(model, batch, grpo, packed=packed)
        loss.backward()
        return loss.detach()

    def grads(packed: bool) -> tuple[float, dict[str, torch.Tensor]]:
        loss = step(packed)
        return float(loss), {n: p.grad.detach().clone() for n, p in model.named_parameters()}

    # exactness first, on the same weights
    (la, ga), (lb, gb) = grads(True), grads(False)
    grad_err = max(float((ga[k] - gb[k]).norm() / gb[k].norm().clamp(min=1e-30)) for k in ga)
    loss_err = abs(la - lb) / max(abs(lb), 1e-30)

    def timed(packed: bool):
        def fn() -> None:
            step(packed)
            opt.step()
        return fn

    fns = {"packed": timed(True), "replicated": timed(False)}
    # TRL's GRPOTrainer step on a copy of the model and the same batch (optional: bench_grpo_trl)
    trl = None
    if not trl_available():
        skipped = "trl is not installed (pip install trl)"
    elif cfg.n < 2:
        skipped = "TRL's GRPO needs N >= 2"
    else:
        skipped = None
        trl = trl_step(model, group, batch, grpo, lr=opt.defaults["lr"], weight_decay=opt.defaults["weight_decay"])
        fns["trl"] = trl.step
    t = time_interleaved(fns, cfg.repeats, "cpu")
    layout = batch.layout
    ideal = (model_flops(lm, cfg.vocab, layout.replicated_tokens, layout.attended_pairs(replicated=True))
             / model_flops(lm, cfg.vocab, layout.num_tokens, layout.attended_pairs()))
    speedup = t["replicated"] / t["packed"]
    row = {"speedup": speedup, "ideal": ideal, "ratio": speedup / ideal, "max_rel_grad_error": grad_err,
           "loss_rel_error": loss_err, "ms_packed": 1e3 * t["packed"], "ms_replicated": 1e3 * t["replicated"],
           "N": cfg.n, "P": cfg.prompt, "R": cfg.response, "hidden": cfg.hidden, "layers": cfg.layers,
           "heads": cfg.heads, "kv_heads": cfg.kv_heads, "threads": torch.get_num_threads(), "repeats": cfg.repeats,
           "clock": clock_for("cpu")[1]}
    if trl is not None:
        row.update(ms_trl=1e3 * t["trl"], trl_over_packed=t["trl"] / t["packed"],
                   trl_loss_rel_error=abs(trl.loss - la) / max(abs(la), 1e-30),
                   trl_max_rel_grad_error=max(float((trl.grads[k] - ga[k]).norm() / ga[k].norm().clamp(min=1e-30))
                                              for k in ga))
    print(f"GRPO update step (loss, backward, AdamW), N={cfg.n} P={cfg.prompt} R={cfg.response}, Llama "
          f"{cfg.layers}x{cfg.hidden} ({cfg.heads}/{cfg.kv_heads} heads), {row['threads']} thread(s), "
          f"median of {cfg.repeats} ({row['clock']})")
    print(f"  packed {row['ms_packed']:.1f} ms, replicated {row['ms_replicated']:.1f} ms: speedup {speedup:.2f}x, "
          f"ideal {ideal:.2f}x, ratio {speedup / ideal:.2f}")
    print(f"  packed vs replicated: max relative gradient error {grad_err:.2e}, loss {loss_err:.2e}")
    if trl is None:
        print(f"  TRL GRPOTrainer comparison skipped: {skipped}")
    else:
        print(f"  TRL GRPOTrainer step {row['ms_trl']:.1f} ms: {row['trl_over_packed']:.2f}x the packed step, "
              f"{t['trl'] / t['replicated']:.2f}x the replicated; TRL vs packed: max relative gradient error "
              f"{row['trl_max_rel_grad_error']:.2e}, loss {row['trl_loss_rel_error']:.2e}")
    if cfg.out:
        print(f"wrote {write_metrics(cfg.out, row)}")
    return 0

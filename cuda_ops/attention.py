"""`shared_prefix_attention`: the one entry point; picks the Triton kernel, the dense path or the reference.

    layout = SharedPrefixLayout.uniform(groups=1, n=16, p=1024, r=128)
    out = shared_prefix_attention(q, k, v, layout)  # q: (T, Hq, D); k, v: (T, Hkv, D) -> (T, Hq, D)

Backend choice, first match wins:
1. the `backend=` argument,
2. `use_backend(name)` (a context manager; tests),
3. the environment variable WMSUITE_ATTENTION_BACKEND,
4. automatic: "triton" for CUDA tensors the kernel supports; otherwise "dense" for a uniform layout
   (one P, N and R for every group: plain tensor products without padding, dense.py) small enough
   to hold every score at once (`dense.MAX_SCORES`), and "reference" for the rest.

"triton" on CPU tensors runs the kernel in the Triton interpreter (slow; for tests). The choice is
logged once per (backend, device, reason) on the `wmsuite.cuda_ops` logger; a CUDA input that
falls back to the reference is a warning, never silent.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

import torch

from .dense import dense_attention, dense_fits
from .layout import SharedPrefixLayout, constant_under_compile
from .reference import _check_inputs, reference_attention

BACKENDS = ("reference", "triton", "dense")
ENV_VAR = "WMSUITE_ATTENTION_BACKEND"

log = logging.getLogger("wmsuite.cuda_ops")
_forced: list[str] = []
_logged: set[tuple[str, str, str]] = set()


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Force a backend inside the block: `with use_backend("triton"): ...`."""
    _validate(name, "use_backend")
    _forced.append(name)
    try:
        yield
    finally:
        _forced.pop()


def _validate(name: str, where: str) -> None:
    if name not in BACKENDS:
        raise ValueError(f"{where}: backend must be one of {BACKENDS}, got {name!r}")


def _triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def select_backend(q: torch.Tensor, backend: str | None = None, layout: SharedPrefixLayout | None = None
                   ) -> tuple[str, str]:
    """(backend, why) for these inputs (`layout`: off the GPU the automatic choice depends on whether
    the dense path fits it; None: it does not). Under torch.compile it is decided once, when traced."""
    return _select(q.device.type, q.dtype, q.shape[-1], backend, layout is not None and dense_fits(layout, q.shape[1]))


@constant_under_compile
def _select(device: str, dtype: torch.dtype, head_dim: int, backend: str | None, dense: bool = False
            ) -> tuple[str, str]:
    requested, source = backend, "backend= argument"
    if requested is None and _forced:
        requested, source = _forced[-1], "use_backend()"
    if requested is None and os.environ.get(ENV_VAR):
        requested, source = os.environ[ENV_VAR], ENV_VAR
    if requested is not None:
        _validate(requested, source)
        if requested == "triton":
            if not _triton_available():
                raise ImportError(f"backend 'triton' requested by {source} but triton is not installed: "
                                  "pip install 'wmsuite[gpu]'")
            reason = _unsupported(device, dtype, head_dim)
            if reason is not None:
                raise ValueError(f"backend 'triton' requested by {source} does not support {reason}; "
                                 "use backend='reference'")
            where = "compiled" if device == "cuda" else "Triton interpreter (slow, for tests)"
            return "triton", f"requested by {source}; {where}"
        return requested, f"requested by {source}"
    if device != "cuda":
        return ("dense", f"{device} tensors, a small uniform layout") if dense else ("reference", f"{device} tensors")
    if not _triton_available():
        return "reference", "triton is not installed (pip install 'wmsuite[gpu]')"
    reason = _unsupported(device, dtype, head_dim)
    if reason is not None:
        return "reference", f"the Triton kernel does not support {reason}"
    return "triton", "CUDA tensors"


def _unsupported(device: str, dtype: torch.dtype, head_dim: int) -> str | None:
    from .triton_op import unsupported

    return unsupported(device, dtype, head_dim)


def shared_prefix_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: SharedPrefixLayout,
                            scale: float | None = None, backend: str | None = None) -> torch.Tensor:
    """Attention of packed shared-prefix tokens (semantics in `layout.py`).

    q: (T, Hq, D); k, v: (T, Hkv, D), Hq a multiple of Hkv; T = layout.num_tokens.
    scale: softmax scale, 1/sqrt(D) by default. Returns (T, Hq, D) in q's dtype. Differentiable.
    """
    _check_inputs(q, k, v, layout)
    name, why = select_backend(q, backend, layout)
    _log_once(name, q.device.type, why)
    if name == "triton":
        from .triton_op import triton_attention

        return triton_attention(q, k, v, layout, scale)
    if name == "dense":
        return dense_attention(q, k, v, layout, scale)  # refuses a ragged layout, naming the reference
    return reference_attention(q, k, v, layout, scale)


@constant_under_compile  # under torch.compile: runs (and logs) when traced
def _log_once(name: str, device: str, why: str) -> None:
    key = (name, device, why)
    if key in _logged:
        return
    _logged.add(key)
    fallback = device == "cuda" and name == "reference" and not why.startswith("requested")
    log.log(logging.WARNING if fallback else logging.INFO, "shared_prefix_attention: using %s on %s (%s)",
            name, device, why)

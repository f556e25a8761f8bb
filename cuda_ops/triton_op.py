"""Host side of the Triton kernels, registered as `torch.ops.wmsuite.shared_prefix_attention`.

The op is a `torch.library.custom_op` with an autograd formula (a second custom op for the
backward) and fake implementations, so it works under `torch.compile` and passes
`torch.library.opcheck`. On CUDA tensors it launches the compiled kernels; on CPU tensors it runs
the same kernels in the Triton interpreter (slow; for tests without a GPU).
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
from types import ModuleType

import torch

from .layout import SharedPrefixLayout

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MIN_HEAD_DIM, MAX_HEAD_DIM = 16, 256

_kernel_modules: dict[bool, ModuleType] = {}


def kernels(interpret: bool) -> ModuleType:
    """The kernels module, compiled (`interpret=False`) or under the Triton interpreter.

    triton decides at `@triton.jit` time whether a kernel is interpreted, so the interpreted copy
    is a second load of `kernels.py` with the interpreter knob set while it executes."""
    if interpret not in _kernel_modules:
        try:
            import triton
        except ImportError as err:
            raise ImportError("the Triton kernel needs triton: pip install 'wmsuite[gpu]' "
                              "(or use backend='reference')") from err
        if not interpret:
            _kernel_modules[False] = importlib.import_module(f"{__package__}.kernels")
        else:
            name = f"{__package__}.kernels_interpreted"
            spec = importlib.util.find_spec(f"{__package__}.kernels")
            spec = importlib.util.spec_from_file_location(name, spec.origin)
            module = importlib.util.module_from_spec(spec)
            with triton.knobs.runtime.scope():
                triton.knobs.runtime.interpret = True
                spec.loader.exec_module(module)
            sys.modules[name] = module
            _kernel_modules[True] = module
    return _kernel_modules[interpret]


def block_sizes(device: torch.device, head_dim: int, dtype: torch.dtype) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N): 64 x 64 on GPU for fp16/bf16 (32 x 64 above head dim 128), 32 x 32 for
    fp32 (exact fp32 products use many registers), 16 x 16 in the interpreter (the smallest tl.dot
    tile; keeps interpreted tests fast)."""
    if device.type != "cuda":
        return 16, 16
    if dtype == torch.float32:
        return 32, 32
    return (64, 64) if head_dim <= 128 else (32, 64)


def unsupported(device: str, dtype: torch.dtype, head_dim: int) -> str | None:
    """Why the Triton kernel cannot take such inputs, or None."""
    if dtype not in SUPPORTED_DTYPES:
        return f"dtype {dtype} (the kernel takes fp16, bf16, fp32)"
    if not MIN_HEAD_DIM <= head_dim <= MAX_HEAD_DIM:
        return f"head dim {head_dim} (the kernel takes {MIN_HEAD_DIM}..{MAX_HEAD_DIM})"
    if device == "cpu" and dtype == torch.bfloat16:
        return "bf16 on CPU (the Triton interpreter computes bf16 wrongly)"
    if device not in ("cuda", "cpu"):
        return f"device {device}"
    return None


def triton_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: SharedPrefixLayout,
                     scale: float | None = None, split: int | None = None) -> torch.Tensor:
    """Shared-prefix attention through the Triton op. q: (T, Hq, D); k, v: (T, Hkv, D) -> (T, Hq, D).

    split: programs sharing one prefix key block's suffix queries in dK/dV (None: layout heuristic)."""
    reason = unsupported(q.device.type, q.dtype, q.shape[-1])
    if reason is not None:
        raise ValueError(f"the Triton shared-prefix kernel does not support {reason}; use backend='reference'")
    if max(q.numel(), k.numel()) >= 2**31:
        raise ValueError(f"the Triton kernel indexes with int32: T x H x D must stay below 2^31, got q "
                         f"{tuple(q.shape)}; split the batch into several layouts")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    bm, bn = block_sizes(q.device, q.shape[-1], q.dtype)
    split = layout.default_split(bm) if split is None else int(split)
    q_table = layout.query_table(bm, q.device)
    k_table = layout.key_table(bn, bm, split, q.device)
    prefix_index = layout.prefix_index(q.device)
    out, _ = torch.ops.wmsuite.shared_prefix_attention(q, k, v, q_table, k_table, prefix_index,
                                                       scale, bm, bn, split)
    return out


def _contig(x: torch.Tensor) -> torch.Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()


def _precision(dtype: torch.dtype) -> str | None:
    # fp32 inputs: exact fp32 products (as torch's default matmul), not tf32.
    return "ieee" if dtype == torch.float32 else None


def _block_d(d: int) -> int:
    return max(16, 1 << (d - 1).bit_length())


@torch.library.custom_op("wmsuite::shared_prefix_attention", mutates_args=())
def shared_prefix_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_table: torch.Tensor,
                               k_table: torch.Tensor, prefix_index: torch.Tensor, scale: float,
                               block_m: int, block_n: int, split: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward: (out (T, Hq, D), lse (Hq, T) fp32 in log2 units). k_table, prefix_index and split
    are carried for the backward."""
    q, k, v = _contig(q), _contig(k), _contig(v)
    T, Hq, D = q.shape
    out = torch.empty_like(q)
    lse = torch.empty((Hq, T), dtype=torch.float32, device=q.device)
    if T == 0 or q_table.shape[0] == 0:
        return out, lse
    mod = kernels(interpret=q.device.type != "cuda")
    mod._fwd_kernel[(q_table.shape[0], Hq)](
        q, k, v, out, lse, q_table,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), out.stride(0), out.stride(1),
        T, scale * math.log2(math.e), D,
        GQA=Hq // k.shape[1], BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=_block_d(D),
        PRECISION=_precision(q.dtype), num_warps=4, num_stages=2, enable_fp_fusion=True,
    )
    return out, lse


@shared_prefix_attention_op.register_fake
def _(q, k, v, q_table, k_table, prefix_index, scale, block_m, block_n, split):
    return torch.empty_like(q), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)


@torch.library.custom_op("wmsuite::shared_prefix_attention_backward", mutates_args=())
def shared_prefix_attention_backward_op(
        do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
        lse: torch.Tensor, q_table: torch.Tensor, k_table: torch.Tensor, prefix_index: torch.Tensor,
        scale: float, block_m: int, block_n: int, split: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Backward: (dq, dk, dv). Deterministic: no atomics; split prefix blocks are summed in order."""
    do, q, k, v = _contig(do), _contig(q), _contig(k), _contig(v)
    T, Hq, D = q.shape
    Hkv = k.shape[1]
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    if T == 0 or q_table.shape[0] == 0:
        return dq.zero_(), dk.zero_(), dv.zero_()
    # delta_i = sum_d dO_id O_id: the softmax backward's row term. # (Hq, T)
    delta = (do.float() * out.float()).sum(-1).transpose(0, 1).contiguous()
    mod = kernels(interpret=q.device.type != "cuda")
    common = dict(GQA=Hq // Hkv, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=_block_d(D),
                  PRECISION=_precision(q.dtype), num_warps=4, num_stages=2, enable_fp_fusion=True)
    qk_scale = scale * math.log2(math.e)
    mod._dq_kernel[(q_table.shape[0], Hq)](
        q, k, v, do, dq, lse, delta, q_table,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        do.stride(0), do.stride(1), dq.stride(0), dq.stride(1),
        T, qk_scale, scale, D, **common)
    n_prefix = prefix_index.shape[0]
    parts = split > 1 and n_prefix > 0
    # fp32 partial dK/dV of split prefix blocks. # (split * n_prefix, Hkv, D)
    dkp = torch.empty((split * n_prefix if parts else 1, Hkv, D), dtype=torch.float32, device=q.device)
    dvp = torch.empty_like(dkp)
    if k_table.shape[0] > 0:
        mod._dkdv_kernel[(k_table.shape[0], Hkv)](
            q, k, v, do, dk, dv, dkp, dvp, lse, delta, k_table,
            q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
            do.stride(0), do.stride(1), dk.stride(0), dk.stride(1), dv.stride(0), dv.stride(1),
            dkp.stride(0), dkp.stride(1),
            T, qk_scale, scale, D, **common)
    if parts:
        # Fixed-order sum over chunks; prefix indices are unique, so the scatter is deterministic.
        dk[prefix_index] = dkp.view(split, n_prefix, Hkv, D).sum(0).to(dk.dtype)
        dv[prefix_index] = dvp.view(split, n_prefix, Hkv, D).sum(0).to(dv.dtype)
    return dq, dk, dv


@shared_prefix_attention_backward_op.register_fake
def _(do, q, k, v, out, lse, q_table, k_table, prefix_index, scale, block_m, block_n, split):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    q, k, v, q_table, k_table, prefix_index, scale, block_m, block_n, split = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, q_table, k_table, prefix_index)
    ctx.params = (scale, block_m, block_n, split)
    ctx.mark_non_differentiable(lse)


def _backward(ctx, dout, _dlse):
    q, k, v, out, lse, q_table, k_table, prefix_index = ctx.saved_tensors
    dq, dk, dv = shared_prefix_attention_backward_op(dout, q, k, v, out, lse, q_table, k_table,
                                                     prefix_index, *ctx.params)
    return dq, dk, dv, None, None, None, None, None, None, None


torch.library.register_autograd("wmsuite::shared_prefix_attention", _backward, setup_context=_setup_context)

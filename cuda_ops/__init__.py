"""wmsuite.cuda_ops: fused shared-prefix attention (PyTorch reference + Triton kernel).

Imports nothing of wmsuite: torch, and triton only when the Triton backend runs.

    from wmsuite.cuda_ops import SharedPrefixLayout, shared_prefix_attention
    layout = SharedPrefixLayout.uniform(groups=1, n=16, p=1024, r=128)
    out = shared_prefix_attention(q, k, v, layout)  # (T, Hq, D), T = 1024 + 16 * 128
"""

from .attention import BACKENDS, select_backend, shared_prefix_attention, use_backend
from .layout import SharedPrefixLayout, mask_block, visible_pairs
from .reference import merge, reference_attention

__all__ = [
    "BACKENDS",
    "SharedPrefixLayout",
    "mask_block",
    "merge",
    "reference_attention",
    "select_backend",
    "shared_prefix_attention",
    "use_backend",
    "visible_pairs",
]

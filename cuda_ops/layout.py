"""Shared-prefix token layout: one prefix of P tokens per group, N suffix segments after it.

A *replicated* batch holds one sequence per suffix, `[prefix_g, suffix_gi]`, so the prefix is
stored (and attended) N times. The *packed* layout stores every group once:

    packed tokens   [ prefix_0 | s_00 | s_01 | ... | prefix_1 | s_10 | ... ]      # (T, ...)
    replicated      [[prefix_0, s_00], [prefix_0, s_01], ..., [prefix_1, s_10], ...]   # (S, L_max, ...)

`T = sum_g (P_g + sum_i R_gi)` against `sum_g sum_i (P_g + R_gi)` replicated tokens. Position ids
of the packed tokens are those of the replicated sequences: a prefix token at `t`, a suffix token
at `P_g + t`.

Attention semantics (what the op computes and the replicated mask it is equivalent to):
- prefix tokens attend only within their prefix, with `prefix_mask`;
- suffix tokens attend to the whole prefix of their group plus their own segment (with
  `suffix_mask`), never to another suffix.

A mask is `"causal"`, `"full"` or `"block:<n>"` (block-causal by frames of n tokens, counted from
the start of the region: a token sees every token of its own and earlier frames). Internally a
mask is one integer `blk`: 0 = full, 1 = causal, n = block-causal; key j is visible to query i
(both counted from the region start) iff `blk == 0 or i // blk >= j // blk`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import torch

FULL = 0


def constant_under_compile(fn):
    """Mark `fn` for torch.compile as run-at-trace-time, result-is-a-constant.

    Host-side metadata (index maps, block tables, the backend choice) is Python over the layout's
    lengths; under torch.compile these functions run once, when traced, instead of being traced.
    This sets the attribute `torch._dynamo.assume_constant_result` sets, without importing
    torch._dynamo (seconds) for programs that never compile; `test_torch_compile_fullgraph`
    fails if torch renames it."""
    fn._dynamo_marked_constant = True
    return fn


def mask_block(spec: str) -> int:
    """Parse a mask spec into its block size: "full" -> 0, "causal" -> 1, "block:16" -> 16."""
    if spec == "full":
        return FULL
    if spec == "causal":
        return 1
    if spec.startswith("block:"):
        try:
            n = int(spec[len("block:"):])
        except ValueError:
            n = 0
        if n >= 1:
            return n
    raise ValueError(f"mask must be 'causal', 'full' or 'block:<n>' with n >= 1, got {spec!r}")


def visible_pairs(length: int, blk: int) -> int:
    """Number of (query, key) pairs a region of `length` tokens attends to itself with mask `blk`."""
    if blk == FULL:
        return length * length
    rows = torch.arange(length, dtype=torch.int64)
    return int(torch.clamp((rows // blk + 1) * blk, max=length).sum())


@dataclass(frozen=True)
class SharedPrefixLayout:
    """A batch of G groups; group g is a prefix of `prefix_lens[g]` tokens and the suffix segments
    `suffix_lens[g]` (N_g >= 1 of them, lengths may differ, 0 allowed)."""

    prefix_lens: tuple[int, ...]
    """Prefix length P_g of each group (0 allowed)."""
    suffix_lens: tuple[tuple[int, ...], ...]
    """Suffix lengths R_gi of each group; every group has at least one suffix."""
    prefix_mask: str = "causal"
    """Mask inside the prefix: 'causal', 'full' or 'block:<n>'."""
    suffix_mask: str = "causal"
    """Mask inside each suffix segment: 'causal', 'full' or 'block:<n>'. Suffix -> prefix is always full."""
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix_lens", tuple(int(p) for p in self.prefix_lens))
        object.__setattr__(self, "suffix_lens", tuple(tuple(int(r) for r in rs) for rs in self.suffix_lens))
        if len(self.prefix_lens) != len(self.suffix_lens):
            raise ValueError(f"prefix_lens has {len(self.prefix_lens)} groups but suffix_lens has "
                             f"{len(self.suffix_lens)}")
        if any(p < 0 for p in self.prefix_lens):
            raise ValueError(f"prefix lengths must be >= 0, got {self.prefix_lens}")
        for g, rs in enumerate(self.suffix_lens):
            if len(rs) == 0:
                raise ValueError(f"group {g} has no suffix; every group needs N >= 1 suffixes "
                                 "(a prefix alone is an ordinary sequence)")
            if any(r < 0 for r in rs):
                raise ValueError(f"suffix lengths must be >= 0, got {rs} in group {g}")
        mask_block(self.prefix_mask)
        mask_block(self.suffix_mask)

    @classmethod
    def uniform(cls, groups: int, n: int, p: int, r: int, prefix_mask: str = "causal",
                suffix_mask: str = "causal") -> SharedPrefixLayout:
        """`groups` groups of one prefix of `p` tokens and `n` suffixes of `r` tokens each."""
        if groups < 1 or n < 1:
            raise ValueError(f"groups and n must be >= 1, got groups={groups}, n={n}")
        return cls((p,) * groups, ((r,) * n,) * groups, prefix_mask, suffix_mask)

    @classmethod
    def from_lists(cls, prefix_lens: Sequence[int], suffix_lens: Sequence[Sequence[int]],
                   prefix_mask: str = "causal", suffix_mask: str = "causal") -> SharedPrefixLayout:
        return cls(tuple(prefix_lens), tuple(tuple(r) for r in suffix_lens), prefix_mask, suffix_mask)

    # ---- sizes ----------------------------------------------------------------------------------

    @property
    def num_groups(self) -> int:
        return len(self.prefix_lens)

    @property
    def num_sequences(self) -> int:
        """S: number of replicated sequences (one per suffix)."""
        return sum(len(rs) for rs in self.suffix_lens)

    @property
    def prefix_blk(self) -> int:
        return mask_block(self.prefix_mask)

    @property
    def suffix_blk(self) -> int:
        return mask_block(self.suffix_mask)

    @cached_property
    def group_starts(self) -> tuple[int, ...]:
        """Packed index of each group's first token (its prefix), plus the total at the end."""
        starts = [0]
        for p, rs in zip(self.prefix_lens, self.suffix_lens):
            starts.append(starts[-1] + p + sum(rs))
        return tuple(starts)

    @property
    def is_uniform(self) -> bool:
        """Every group has the same prefix length, suffix count and suffix length (`uniform()`)."""
        return len(set(self.prefix_lens)) == 1 and len(set(self.suffix_lens)) == 1 and len(set(self.suffix_lens[0])) == 1

    @property
    def num_tokens(self) -> int:
        """T: packed tokens, sum_g P_g + sum R_gi."""
        return self.group_starts[-1]

    @property
    def num_prefix_tokens(self) -> int:
        return sum(self.prefix_lens)

    @property
    def replicated_tokens(self) -> int:
        """Tokens of the replicated layout, sum_g sum_i (P_g + R_gi)."""
        return sum(p * len(rs) + sum(rs) for p, rs in zip(self.prefix_lens, self.suffix_lens))

    @property
    def max_len(self) -> int:
        """L_max: longest replicated sequence."""
        return max((p + r for p, rs in zip(self.prefix_lens, self.suffix_lens) for r in rs), default=0)

    @property
    def token_ratio(self) -> float:
        """rho = replicated tokens / packed tokens (N(P+R)/(P+NR) for uniform groups)."""
        return self.replicated_tokens / max(self.num_tokens, 1)

    def segments(self) -> list[tuple[int, int, int, int, int]]:
        """(group, kind, start, length, prefix_start) for every segment in packed order;
        kind 0 = prefix, 1 = suffix."""
        out = []
        for g, (p, rs) in enumerate(zip(self.prefix_lens, self.suffix_lens)):
            ps = self.group_starts[g]
            out.append((g, 0, ps, p, ps))
            s = ps + p
            for r in rs:
                out.append((g, 1, s, r, ps))
                s += r
        return out

    # ---- index maps -----------------------------------------------------------------------------

    @cached_property
    def _replicated_index_cpu(self) -> torch.Tensor:
        idx = torch.full((self.num_sequences, self.max_len), -1, dtype=torch.int64)
        s = 0
        for g, (p, rs) in enumerate(zip(self.prefix_lens, self.suffix_lens)):
            ps = self.group_starts[g]
            off = ps + p
            for r in rs:
                idx[s, :p] = torch.arange(ps, ps + p)
                idx[s, p:p + r] = torch.arange(off, off + r)
                off += r
                s += 1
        return idx

    @cached_property
    def _position_ids_cpu(self) -> torch.Tensor:
        pos = torch.empty(self.num_tokens, dtype=torch.int64)
        for g, (p, rs) in enumerate(zip(self.prefix_lens, self.suffix_lens)):
            ps = self.group_starts[g]
            pos[ps:ps + p] = torch.arange(p)
            off = ps + p
            for r in rs:
                pos[off:off + r] = torch.arange(p, p + r)
                off += r
        return pos

    @cached_property
    def _pack_index_cpu(self) -> torch.Tensor:
        # Flat replicated slot (s * L_max + t) of each packed token's first copy.
        rep = self._replicated_index_cpu.flatten()
        out = torch.full((self.num_tokens,), -1, dtype=torch.int64)
        slots = torch.nonzero(rep >= 0).squeeze(1)
        # Walking slots in reverse makes the first copy win the scatter.
        out[rep[slots.flip(0)]] = slots.flip(0)
        assert bool((out >= 0).all()), "every packed token appears in some replicated sequence"
        return out

    @cached_property
    def _prefix_index_cpu(self) -> torch.Tensor:
        """Packed indices of all prefix tokens, group by group. # (sum_g P_g,)"""
        parts = [torch.arange(s, s + p) for s, p in zip(self.group_starts, self.prefix_lens)]
        return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64)

    @constant_under_compile
    def _on(self, name: str, device: torch.device | str) -> torch.Tensor:
        device = torch.device(device)
        key = (name, str(device))
        if key not in self._cache:
            self._cache[key] = getattr(self, f"_{name}_cpu").to(device)
        return self._cache[key]

    def position_ids(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """Position of every packed token in its replicated sequence. # (T,) int64"""
        return self._on("position_ids", device)

    def replicated_index(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """Packed token index of every replicated slot, -1 on padding. # (S, L_max) int64"""
        return self._on("replicated_index", device)

    def replicated_position_ids(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """Positions 0..P+R-1 of each replicated sequence (padding included). # (S, L_max)"""
        return torch.arange(self.max_len, device=device).expand(self.num_sequences, -1)

    def replicated_valid(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """True on real tokens of the replicated layout. # (S, L_max) bool"""
        return self.replicated_index(device) >= 0

    def prefix_index(self, device: torch.device | str = "cpu") -> torch.Tensor:
        return self._on("prefix_index", device)

    # ---- packing --------------------------------------------------------------------------------

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """Packed -> replicated: (T, ...) -> (S, L_max, ...), zeros on padding.

        Differentiable; its gradient sums the prefix gradients over all suffixes of the group."""
        if x.shape[0] != self.num_tokens:
            raise ValueError(f"expected {self.num_tokens} packed tokens, got shape {tuple(x.shape)}")
        idx = self.replicated_index(x.device)
        out = x[idx.clamp(min=0)]  # (S, L_max, ...)
        valid = (idx >= 0).view(*idx.shape, *([1] * (x.dim() - 1)))
        return out * valid.to(out.dtype) if out.dtype.is_floating_point else out.masked_fill(~valid, 0)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """Replicated -> packed: (S, L_max, ...) -> (T, ...), taking each prefix token from the first
        suffix of its group (all copies agree for inputs and for the outputs of prefix tokens)."""
        if tuple(x.shape[:2]) != (self.num_sequences, self.max_len):
            raise ValueError(f"expected replicated shape ({self.num_sequences}, {self.max_len}, ...), "
                             f"got {tuple(x.shape)}")
        return x.flatten(0, 1)[self._on("pack_index", x.device)]

    # ---- counted work ---------------------------------------------------------------------------

    def attended_pairs(self, replicated: bool = False) -> int:
        """(query, key) pairs attended: packed = work of the shared-prefix op; replicated = work of
        attention over the replicated sequences with the equivalent mask."""
        pb, sb = self.prefix_blk, self.suffix_blk
        total = 0
        for p, rs in zip(self.prefix_lens, self.suffix_lens):
            copies = len(rs) if replicated else 1
            total += copies * visible_pairs(p, pb) + sum(p * r + visible_pairs(r, sb) for r in rs)
        return total

    # ---- kernel block tables --------------------------------------------------------------------

    @constant_under_compile
    def query_table(self, block_m: int, device: torch.device | str) -> torch.Tensor:
        """One row per query block (blocks never straddle segments) for the forward and dq kernels:
        [q_start, q_end, a_start, a_len, a_blk, b_start, b_len, b_blk]; region A is the prefix a
        suffix sees (empty for prefix blocks), region B the block's own segment. # (n_qblocks, 8) int32"""
        key = ("qtab", block_m, str(torch.device(device)))
        if key not in self._cache:
            rows = []
            pb, sb = self.prefix_blk, self.suffix_blk
            for _g, kind, start, length, ps in self.segments():
                p = self.prefix_lens[_g]
                for qs in range(start, start + length, block_m):
                    if kind == 0:
                        rows.append([qs, start + length, 0, 0, FULL, start, length, pb])
                    else:
                        rows.append([qs, start + length, ps, p, FULL, start, length, sb])
            self._cache[key] = _int_table(rows, 8, device)
        return self._cache[key]

    @constant_under_compile
    def default_split(self, block_m: int) -> int:
        """How many programs share the suffix queries of one prefix key block in the dK/dV kernel,
        so that prefix blocks (which see every suffix) are not the long tail of the grid."""
        longest = max((sum(rs) for rs in self.suffix_lens), default=0)
        target = max(max(self.prefix_lens, default=0), 2048)
        return max(1, min(16, math.ceil(longest / target)))

    @constant_under_compile
    def key_table(self, block_n: int, block_m: int, split: int, device: torch.device | str) -> torch.Tensor:
        """One row per (key block, split chunk) for the dK/dV kernel:
        [kv_start, kv_end, a_start, a_len, a_blk, b_start, b_len, b_blk, out_slot]. Region A is the
        self region (queries of the block's own segment), region B the queries of every suffix of the
        group (prefix key blocks only, full mask), cut into `split` chunks. out_slot = -1: write dK/dV
        in place; else row of the fp32 partial buffer (split, prefix tokens) summed afterwards.
        # (n_rows, 9) int32"""
        if split < 1:
            raise ValueError(f"split must be >= 1, got {split}")
        key = ("ktab", block_n, block_m, split, str(torch.device(device)))
        if key not in self._cache:
            rows = []
            pb, sb = self.prefix_blk, self.suffix_blk
            prefix_slot = 0
            n_prefix = self.num_prefix_tokens
            for g, kind, start, length, _ps in self.segments():
                end = start + length
                if kind == 1:
                    for ks in range(start, end, block_n):
                        rows.append([ks, end, start, length, sb, 0, 0, FULL, -1])
                    continue
                q_lo, q_hi = end, self.group_starts[g + 1]  # all suffix queries of the group
                chunk = -(-max(q_hi - q_lo, 1) // split)
                chunk = -(-chunk // block_m) * block_m
                for ks in range(start, end, block_n):
                    slot = prefix_slot + (ks - start)
                    for c in range(split):
                        lo = min(q_lo + c * chunk, q_hi)
                        hi = min(lo + chunk, q_hi)
                        a_start, a_len = (start, length) if c == 0 else (0, 0)
                        out = -1 if split == 1 else c * n_prefix + slot
                        rows.append([ks, end, a_start, a_len, pb, lo, hi - lo, FULL, out])
                prefix_slot += length
            self._cache[key] = _int_table(rows, 9, device)
        return self._cache[key]


def _int_table(rows: list[list[int]], cols: int, device: torch.device | str) -> torch.Tensor:
    t = torch.tensor(rows, dtype=torch.int32) if rows else torch.zeros((0, cols), dtype=torch.int32)
    return t.to(device)

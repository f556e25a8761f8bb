"""Token generation for the rollout engine: groups of N sampled responses per prompt.

    groups = [Group.new(problem, prompt_ids, n=16) for problem, prompt_ids in batch]
    done, carried = generate(model, groups, SampleConfig(max_new_tokens=8, eos_id=2, pad_id=0), gen)

This is the engine's side for language models, with the same contract as `rollout` for robots:
every response is an episode (its tokens are the actions, the behaviour log-probability of each is
recorded), sub-sequences advance in one batch with a KV cache, each stops at its own length (EOS or
`max_new_tokens`), and a run can stop at a target count of finished episodes, handing back the
unfinished ones to be resumed later (recycling).

- Batching: every unfinished response of every group is one row: its prompt and the tokens it has
  so far, left-padded, position ids counted over real tokens only, so a row's logits do not depend on
  which rows share its batch. A group's responses that have no tokens yet share one prefill of its
  prompt (its KV cache is repeated for each of them); responses carried over with tokens are
  prefilled row by row. Then one cached step per token.
- Stopping: without `target_groups` the call returns when every response is finished; with it (partial
  rollouts, APRIL), as soon as that many groups are complete. Unfinished responses keep their tokens
  and behaviour log-probs and continue, under whatever model the caller passes next, when their
  group is handed to the next call; every token a group had before a call is marked recycled.
- The model is any transformers-style causal LM: `model(input_ids=, attention_mask=, position_ids=,
  cache=, use_cache=True)` returning `.logits` and `.cache`. Nothing here imports transformers.
- `temperature=0` decodes greedily (evaluation); log-probs are then those of the untempered model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class SampleConfig:
    max_new_tokens: int = 8
    """Most tokens a response may have (EOS included); a response that reaches it is finished, truncated."""
    eos_id: int = 2
    """Token that ends a response."""
    pad_id: int = 0
    """Token fed on padding and after a row has finished (masked out)."""
    temperature: float = 1.0
    """Sampling temperature (0: greedy); behaviour log-probs are of the tempered distribution."""
    target_groups: int | None = None
    """Stop when this many groups are complete and hand the rest back unfinished (partial rollouts);
    None: finish every response."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.target_groups is not None and self.target_groups < 1:
            raise ValueError(f"target_groups must be >= 1 or None, got {self.target_groups}")


@dataclass
class Response:
    """One episode of token generation."""

    tokens: list[int] = field(default_factory=list)
    """Sampled tokens, EOS included when it was sampled."""
    logprobs: list[float] = field(default_factory=list)
    """Behaviour log-probability of each token under the model that sampled it."""
    finished: bool = False
    """EOS sampled or max_new_tokens reached."""
    recycled: int = 0
    """Leading tokens sampled before the latest call (by an older model, for a group carried over):
    the tokens the importance-sampling correction is about."""


@dataclass
class Group:
    """N responses to one prompt (a GRPO group)."""

    key: Any
    """The caller's handle (the task's problem)."""
    prompt: list[int]
    """Prompt token ids."""
    responses: list[Response]

    @classmethod
    def new(cls, key: Any, prompt: list[int], n: int) -> Group:
        if n < 1:
            raise ValueError(f"a group needs n >= 1 responses, got {n}")
        if not prompt:
            raise ValueError("a prompt needs at least one token (BOS)")
        return cls(key, list(prompt), [Response() for _ in range(n)])

    @property
    def complete(self) -> bool:
        return all(r.finished for r in self.responses)


@torch.no_grad()
def generate(model: Any, groups: list[Group], cfg: SampleConfig,
             generator: torch.Generator | None = None) -> tuple[list[Group], list[Group]]:
    """Advance the unfinished responses of `groups` (in place); return (complete, incomplete) groups,
    each list in the order given. See the module docstring for batching and stopping."""
    for g in groups:
        for r in g.responses:  # whatever was sampled before this call came from an older model
            r.recycled = len(r.tokens)
    rows = [(g, r) for g in groups for r in g.responses if not r.finished]
    if rows:
        _advance(model, groups, rows, cfg, generator)
    return [g for g in groups if g.complete], [g for g in groups if not g.complete]


def _advance(model: Any, groups: list[Group], rows: list[tuple[Group, Response]], cfg: SampleConfig,
             generator: torch.Generator | None) -> None:
    device = next(model.parameters()).device
    # Responses with no tokens yet share their group's prompt: it is prefilled once and its cache
    # repeated for each of them; responses carried with tokens are prefilled row by row.
    fresh = [(g, r) for g, r in rows if not r.tokens]
    rows[:] = fresh + [(g, r) for g, r in rows if r.tokens]
    prompts: dict[int, int] = {}  # group id -> index among the prompts prefilled once
    for g, _ in fresh:
        prompts.setdefault(id(g), len(prompts))
    owners = {id(g): g for g, _ in fresh}
    parts = []
    if fresh:
        shared = _prefill(model, [owners[k].prompt for k in prompts], cfg.pad_id, device)
        parts.append(_select(shared, torch.tensor([prompts[id(g)] for g, _ in fresh], device=device)))
    if len(fresh) < len(rows):
        parts.append(_prefill(model, [g.prompt + r.tokens for g, r in rows[len(fresh):]], cfg.pad_id, device))
    cache, logits, mask, last = _concat(parts)
    budget = torch.tensor([cfg.max_new_tokens - len(r.tokens) for _, r in rows], device=device)
    alive = budget > 0
    for (_, r), a in zip(rows, alive.tolist()):
        r.finished = r.finished or not a
    done_groups = sum(g.complete for g in groups)
    row_group = [id(g) for g, _ in rows]
    open_rows = {k: 0 for k in row_group}
    for k, a in zip(row_group, alive.tolist()):
        open_rows[k] += int(a)
    taken = torch.zeros(len(rows), dtype=torch.long, device=device)
    while bool(alive.any()):
        if cfg.target_groups is not None and done_groups >= cfg.target_groups:
            break
        logp = torch.log_softmax(logits.float() / (cfg.temperature or 1.0), -1)  # (B, V)
        if cfg.temperature == 0:
            tok = logp.argmax(-1)
        else:
            tok = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)  # (B,)
        tok_logp = logp.gather(1, tok[:, None]).squeeze(1)
        taken += alive.long()
        ended = alive & ((tok == cfg.eos_id) | (taken >= budget))
        toks, logps, ends = tok.tolist(), tok_logp.tolist(), ended.tolist()  # one host copy per step
        for i in torch.nonzero(alive).squeeze(1).tolist():
            _, r = rows[i]
            r.tokens.append(toks[i])
            r.logprobs.append(logps[i])
            if ends[i]:
                r.finished = True
                open_rows[row_group[i]] -= 1
                done_groups += open_rows[row_group[i]] == 0
        alive = alive & ~ended
        if not bool(alive.any()):
            break
        feed = torch.where(alive, tok, torch.full_like(tok, cfg.pad_id))
        mask = torch.cat([mask, alive.long()[:, None]], 1)
        last = last + alive.long()
        out = model(input_ids=feed[:, None], attention_mask=mask, position_ids=last[:, None], cache=cache,
                    use_cache=True)
        cache, logits = out.cache, out.logits[:, -1]


_Prefill = tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]  # cache, last logits (B, V), mask (B, L), last position (B,)


def _prefill(model: Any, seqs: list[list[int]], pad_id: int, device: torch.device) -> _Prefill:
    """One forward over left-padded rows (every row's last real token at the end; positions counted
    over real tokens only)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, width - len(s):] = torch.tensor(s)
        mask[i, width - len(s):] = 1
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, L)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1)
    return out.cache, out.logits[:, -1], mask, pos[:, -1]


def _select(part: _Prefill, index: torch.Tensor) -> _Prefill:
    """Rows `index` of a prefill (a row may be taken several times)."""
    cache, logits, mask, last = part
    for layer in cache.layers:
        layer.keys, layer.values = layer.keys[index], layer.values[index]
    return cache, logits[index], mask[index], last[index]


def _concat(parts: list[_Prefill]) -> _Prefill:
    """Prefills stacked on the batch dimension, the shorter ones left-padded (masked) to the longest."""
    if len(parts) == 1:
        return parts[0]
    width = max(p[2].shape[1] for p in parts)
    cache = parts[0][0]
    for li, layer in enumerate(cache.layers):
        keys, values = [], []
        for c, _, mask, _ in parts:
            pad = width - mask.shape[1]
            k, v = c.layers[li].keys, c.layers[li].values  # (B, H, L, D)
            keys.append(torch.nn.functional.pad(k, (0, 0, pad, 0)))
            values.append(torch.nn.functional.pad(v, (0, 0, pad, 0)))
        layer.keys, layer.values = torch.cat(keys), torch.cat(values)
    mask = torch.cat([torch.nn.functional.pad(p[2], (width - p[2].shape[1], 0)) for p in parts])
    return cache, torch.cat([p[1] for p in parts]), mask, torch.cat([p[3] for p in parts])

"""Token generation for the rollout engine: groups of N sampled responses per prompt.

    groups = [Group.new(problem, prompt_ids, n=16) for problem, prompt_ids in batch]
    done, carried = generate(model, groups, SampleConfig(max_new_tokens=8, eos_id=2, pad_id=0), gen)

This is the engine's side for language models, with the same contract as `rollout` for robots:
every response is an episode (its tokens are the actions, the behaviour log-probability of each is
recorded), sub-sequences advance in one batch with a KV cache, each stops at its own length (EOS or
`max_new_tokens`), and a run can stop at a target count of finished episodes, handing back the
unfinished ones to be resumed later (recycling).

- Batching: every unfinished response of every group is one row. Each group's prompt is prefilled
  once (prompts left-padded, position ids counted over real tokens only, so a row's logits do not
  depend on which rows share its batch) and its KV cache repeated for every response of the group; a
  response carried over with tokens feeds them again, under the current model, in the batch's first
  steps (while the others sample). Then one cached step per token; finished rows leave the batch.
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
    for _, r in rows:  # a carried response may already be at its budget
        r.finished = r.finished or len(r.tokens) >= cfg.max_new_tokens
    done_groups = sum(g.complete for g in groups)
    rows = [(g, r) for g, r in rows if not r.finished]
    if not rows:
        return
    # Each group's prompt is prefilled once and its cache repeated for every row of the group; a
    # response carried over with tokens feeds them again (under this model) before it samples.
    index: dict[int, int] = {}  # group id -> its prompt's row in the prefill
    owners = {id(g): g for g, _ in rows}
    for g, _ in rows:
        index.setdefault(id(g), len(index))
    rows_of = torch.tensor([index[id(g)] for g, _ in rows], device=device)
    cache, logits, mask, last = _select(_prefill(model, [owners[k].prompt for k in index], cfg.pad_id, device), rows_of)
    pending = [list(r.tokens) for _, r in rows]  # tokens to feed again, not to sample
    fed = [0] * len(rows)
    open_rows: dict[int, int] = {}
    for g, _ in rows:
        open_rows[id(g)] = open_rows.get(id(g), 0) + 1
    live = list(range(len(rows)))  # the row at each batch position
    while live:
        if cfg.target_groups is not None and done_groups >= cfg.target_groups:
            break
        toks: list[int] = []
        logps: list[float] = []
        if any(fed[i] >= len(pending[i]) for i in live):  # some row samples this step
            logp = torch.log_softmax(logits.float() / (cfg.temperature or 1.0), -1)  # (B, V)
            if cfg.temperature == 0:
                tok = logp.argmax(-1)
            else:
                tok = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)  # (B,)
            toks, logps = tok.tolist(), logp.gather(1, tok[:, None]).squeeze(1).tolist()  # one host copy
        feed, keep = [], []
        for b, i in enumerate(live):
            if fed[i] < len(pending[i]):
                feed.append(pending[i][fed[i]])
                fed[i] += 1
                keep.append(b)
                continue
            g, r = rows[i]
            r.tokens.append(toks[b])
            r.logprobs.append(logps[b])
            if toks[b] == cfg.eos_id or len(r.tokens) >= cfg.max_new_tokens:
                r.finished = True
                open_rows[id(g)] -= 1
                done_groups += open_rows[id(g)] == 0
            else:
                feed.append(toks[b])
                keep.append(b)
        if not keep:
            break
        if len(keep) < len(live):  # finished rows leave the batch
            cache, _, mask, last = _select((cache, logits, mask, last), torch.tensor(keep, device=device))
            live = [live[b] for b in keep]
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
        last = last + 1
        out = model(input_ids=torch.tensor(feed, device=device)[:, None], attention_mask=mask,
                    position_ids=last[:, None], cache=cache, use_cache=True)
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

"""TRL's GRPO step on our batch: the baseline `wmsuite bench grpo` times against (optional: needs `trl`).

    trl = trl_step(model, group, batch, GRPOConfig())   # a real trl.GRPOTrainer around a copy of `model`
    trl.loss, trl.grads                                 # TRL's loss and gradients at the model's weights
    trl.step()                                          # one update: TRL's compute_loss, backward, AdamW step

The trainer is built offline (a WordLevel tokenizer over the model's vocabulary, a one-column dataset,
a constant reward function; nothing is downloaded or generated) around a deep copy of the model whose
attention is transformers' "sdpa" (ours runs the shared-prefix op; the copy leaves the caller's
model, which TRL would otherwise patch with its fused LM head, untouched). Each step hands
`GRPOTrainer.compute_loss` the group as TRL's own generation step would lay it out: prompt_ids (N, P)
and its mask, completion_ids (N, R_max) right-padded with its mask, advantages (N,) = ours,
old_per_token_logps (N, R_max) = our behaviour log-probs (and ref_per_token_logps with kl > 0), then
backward and an AdamW step of the same settings as the bench's own optimizer.

The settings that make TRL's loss ours (`wmsuite.policies.lm.grpo`): loss_type "grpo" (each
response's token mean, then the mean over responses), epsilon = epsilon_high = clip (two-sided
clipping, no `delta`), token-level importance sampling, the same temperature (TRL divides the logits
by it in its fused LM head), the k3 KL estimate not multiplied by the ratio (use_bias_correction_kl
off; TRL's default weights it by the ratio, DeepSeek-V3.2's unbiased estimator, where ours is
DeepSeekMath's), no entropy bonus, entropy mask or off-policy mask, fp32 (bf16 off),
gradient checkpointing off (TRL's default is on; ours does not recompute) and one gradient
accumulation step. With these its loss equals our replicated and packed losses to fp32 rounding.

Differences that remain, none of which enters the loss on a given batch:
- TRL scales rewards by std + 1e-4 where `group_advantages` uses std + 1e-6; the advantages are
  handed over as ours, so TRL's reward path is not run.
- With kl > 0 the trainer is built with beta = 0 and given beta afterwards: building it with beta > 0
  would load a reference model by name (a download); the reference log-probs come with the batch as
  `ref_per_token_logps`, which is all its loss reads.
- `recycled_is=False` (the current model's log-probs in place of recycled tokens' behaviour ones)
  has no TRL counterpart: refused when the batch has recycled tokens.
- TRL's step also computes each token's entropy (for its metrics) and logs a few statistics with
  `.item()`: part of its cost, as in its training loop.
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from wmsuite.policies.lm.grpo import GRPOConfig, PackedBatch
from wmsuite.rollout.tokens import Group


def trl_available() -> bool:
    try:
        import trl  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class TRLStep:
    step: Callable[[], None]
    """One update of TRL's model: zero the gradients, `compute_loss`, backward, AdamW step."""
    loss: float
    """TRL's loss on the batch at the weights the model had when built."""
    grads: dict[str, torch.Tensor]
    """Its gradients there, by parameter name (as `model.named_parameters()`)."""
    trainer: Any
    """The trl.GRPOTrainer."""
    model: Any
    """TRL's copy of the model (SDPA attention, TRL's fused LM head)."""
    _tmp: Any = field(default=None, repr=False)


def _tokenizer(vocab: int, pad_id: int, bos_id: int, eos_id: int):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    names = [f"t{i}" for i in range(vocab)]
    names[pad_id], names[bos_id], names[eos_id] = "[PAD]", "[BOS]", "[EOS]"
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(names)}, unk_token="[PAD]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", bos_token="[BOS]", eos_token="[EOS]",
                                   unk_token="[PAD]", padding_side="left")


def trl_inputs(group: Group, batch: PackedBatch, pad_id: int = 0) -> dict[str, torch.Tensor]:
    """`GRPOTrainer.compute_loss`'s inputs for one group (laid out as TRL's generation step would)."""
    n = len(group.responses)
    if batch.num_responses != n:
        raise ValueError(f"the batch has {batch.num_responses} responses, the group {n}: pass the one group it packs")
    r = max(len(x.tokens) for x in group.responses)
    prompt = torch.tensor(group.prompt, dtype=torch.long).expand(n, -1).contiguous()
    completion = torch.full((n, r), pad_id, dtype=torch.long)
    mask = torch.zeros(n, r, dtype=torch.long)
    old = torch.zeros(n, r)
    for i, x in enumerate(group.responses):
        k = len(x.tokens)
        completion[i, :k] = torch.tensor(x.tokens)
        mask[i, :k] = 1
    # the behaviour log-probs in the batch's (response-major) order: the ones the loss of ours reads
    rows = batch.seq
    cols = torch.cat([torch.arange(len(x.tokens)) for x in group.responses])
    old[rows, cols] = batch.behaviour
    out = {"prompt_ids": prompt, "prompt_mask": torch.ones_like(prompt), "completion_ids": completion,
           "completion_mask": mask, "advantages": batch.advantages.clone(), "old_per_token_logps": old,
           "num_items_in_batch": mask.sum()}
    if batch.ref_logp is not None:
        ref = torch.zeros(n, r)
        ref[rows, cols] = batch.ref_logp
        out["ref_per_token_logps"] = ref
    return out


def trl_step(model, group: Group, batch: PackedBatch, cfg: GRPOConfig, lr: float = 1e-6,
             weight_decay: float = 0.01) -> TRLStep:
    """A trl.GRPOTrainer around a copy of `model` and one step of it on `group` (see the module)."""
    import datasets
    import transformers
    import trl

    if not cfg.recycled_is and bool(batch.recycled.any()):
        raise ValueError("recycled_is=False has no TRL counterpart (see wmsuite.cli.bench_grpo_trl)")
    n = len(group.responses)
    if n < 2:
        raise ValueError(f"TRL's GRPO needs at least 2 responses per prompt, got {n}")
    if cfg.kl > 0 and batch.ref_logp is None:
        raise ValueError("kl > 0 needs the batch's reference log-probs (ref_logp)")
    conf = model.config
    ids = [conf.pad_token_id, conf.bos_token_id, conf.eos_token_id]
    tokenizer = _tokenizer(conf.vocab_size, *ids)
    trl_model = copy.deepcopy(model)
    trl_model.set_attn_implementation("sdpa")
    trl_model.train()
    tmp = tempfile.TemporaryDirectory(prefix="wmsuite-trl-")
    args = trl.GRPOConfig(
        output_dir=tmp.name, use_cpu=True, report_to="none", bf16=False, fp16=False, activation_checkpointing=False,
        per_device_train_batch_size=n, num_generations=n, gradient_accumulation_steps=1,
        max_completion_length=max(len(x.tokens) for x in group.responses), loss_type="grpo",
        epsilon=cfg.clip, epsilon_high=cfg.clip, beta=0.0, temperature=cfg.temperature,
        scale_rewards="group" if cfg.scale_rewards else "none", importance_sampling_level="token",
        use_bias_correction_kl=False,
        learning_rate=lr, weight_decay=weight_decay, seed=0, save_strategy="no", logging_strategy="no",
        disable_tqdm=True, dataloader_num_workers=0)
    data = datasets.Dataset.from_dict({"prompt": [" ".join(f"t{i}" for i in group.prompt)]})
    opt = torch.optim.AdamW(trl_model.parameters(), lr=lr, weight_decay=weight_decay)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        trainer = trl.GRPOTrainer(model=trl_model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                                  args=args, train_dataset=data, processing_class=tokenizer, optimizers=(opt, None))
    finally:
        transformers.logging.set_verbosity(verbosity)
    trainer.beta = cfg.kl  # see the module: a reference model is only needed to produce ref_per_token_logps
    trainer.current_gradient_accumulation_steps = 1  # what Trainer's loop sets with one accumulation step
    inputs = trl_inputs(group, batch, ids[0])
    tmodel = trainer.model

    def forward_backward() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss = trainer.compute_loss(tmodel, inputs)
        trainer.accelerator.backward(loss)
        return loss

    loss = forward_backward()
    grads = {k: p.grad.detach().clone() for k, p in tmodel.named_parameters() if p.grad is not None}

    def step() -> None:
        forward_backward()
        opt.step()

    return TRLStep(step, float(loss.detach()), grads, trainer, tmodel, tmp)

"""wmsuite.policies.lm: the language-model side (a transformers causal LM on the shared-prefix op,
a verifiable task, GRPO with packed groups). Needs the lm extra: pip install 'wmsuite[lm]'.

    model = build_lm(LMConfig(), vocab_size=task.vocab_size)
    loss, logs = grpo_loss(model, pack_groups(groups, rewards), GRPOConfig())

`wmsuite train-lm` trains one; docs/language_models.md is the manual.
"""

from wmsuite.policies.lm.grpo import (
           GRPOConfig,
           PackedBatch,
           group_advantages,
           grpo_loss,
           pack_groups,
           token_logprobs,
)
from wmsuite.policies.lm.model import (
           ATTENTION,
           LMConfig,
           build_lm,
           load_lm,
           packed_logits,
           register_attention,
           replicated_logits,
           save_lm,
)
from wmsuite.policies.lm.task import AdditionConfig, AdditionTask, Problem, make_tokenizer

__all__ = ["ATTENTION", "AdditionConfig", "AdditionTask", "GRPOConfig", "LMConfig", "PackedBatch", "Problem",
           "build_lm", "group_advantages", "grpo_loss", "load_lm", "make_tokenizer", "pack_groups", "packed_logits",
           "register_attention", "replicated_logits", "save_lm", "token_logprobs"]

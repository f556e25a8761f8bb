"""A verifiable task for the language-model side: multi-digit addition with a checked answer.

    task = AdditionTask(AdditionConfig(digits=2))
    prompts = task.sample(rng, 32)            # [Problem("37+5=", "24"), ...] (answer reversed)
    ids = task.encode(prompts[0].prompt)      # [BOS, '3', '7', '+', '5', '=']
    task.reward(prompts[0], task.decode(response_ids))

The answer is written least significant digit first (`reverse=True`, the default): a causal model
then produces each digit after the digits it depends on, the form in which small transformers learn
addition. The response ends with EOS; anything after EOS is cut before scoring.

Rewards (`reward=`): 'exact' is 1 for the exact answer, else 0; 'digits' gives each answer
position that matches 1/max(len(answer), len(response)), so a response of the right length with
one wrong digit earns (n-1)/n and padding an answer with extra digits costs. `accuracy` is always
the exact-match rate, whatever reward trains.

The tokenizer is a `tokenizers` WordLevel model over single characters (digits, '+', '=') plus
[PAD], [BOS], [EOS]; it is saved as tokenizer.json beside the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

REWARDS = ("exact", "digits")
LENGTHS = ("uniform", "long_tail")
PAD, BOS, EOS = "[PAD]", "[BOS]", "[EOS]"
SYMBOLS = tuple("0123456789+=")


@dataclass
class AdditionConfig:
    digits: int = 2
    """Largest operand length in digits."""
    lengths: str = "uniform"
    """How each operand's length is drawn from 1..digits: 'uniform', or 'long_tail' (P(k) proportional to
    1/k^2: mostly short answers, a few long ones; the length mix partial rollouts are for)."""
    reverse: bool = True
    """Write the sum least significant digit first (the order in which a causal model can compute it)."""
    reward: str = "digits"
    """'exact' (1 for the exact answer) or 'digits' (the share of answer positions right, see the module)."""

    def __post_init__(self) -> None:
        if not 1 <= self.digits <= 18:  # operands are drawn as int64
            raise ValueError(f"digits must be in 1..18, got {self.digits}")
        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {self.reward!r}")
        if self.lengths not in LENGTHS:
            raise ValueError(f"lengths must be one of {LENGTHS}, got {self.lengths!r}")

    @property
    def max_answer_tokens(self) -> int:
        """Digits of the longest sum plus EOS."""
        return self.digits + 2


@dataclass(frozen=True)
class Problem:
    prompt: str
    """'a+b=' as text."""
    answer: str
    """The expected response text (without EOS)."""


def make_tokenizer():
    """The task's character-level tokenizer (a `tokenizers.Tokenizer`)."""
    try:
        from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    except ImportError as err:
        raise ImportError("the language-model side needs the lm extra: pip install 'wmsuite[lm]'") from err
    vocab = {tok: i for i, tok in enumerate((PAD, BOS, EOS, *SYMBOLS))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=PAD))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.add_special_tokens([PAD, BOS, EOS])
    return tok


class AdditionTask:
    """Prompts, their answers, encoding and the reward (see the module docstring)."""

    def __init__(self, cfg: AdditionConfig, tokenizer=None) -> None:
        self.cfg = cfg
        self.tokenizer = tokenizer or make_tokenizer()
        self.pad_id, self.bos_id, self.eos_id = (self.tokenizer.token_to_id(t) for t in (PAD, BOS, EOS))
        if None in (self.pad_id, self.bos_id, self.eos_id):
            raise ValueError(f"the tokenizer lacks one of the special tokens {PAD}, {BOS}, {EOS}")

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def sample(self, rng: np.random.Generator, n: int) -> list[Problem]:
        """n problems, operand lengths drawn as `lengths` says."""
        out = []
        for _ in range(n):
            a, b = (self._operand(rng) for _ in range(2))
            s = str(a + b)
            out.append(Problem(f"{a}+{b}=", s[::-1] if self.cfg.reverse else s))
        return out

    def _operand(self, rng: np.random.Generator) -> int:
        if self.cfg.lengths == "uniform":
            length = int(rng.integers(1, self.cfg.digits + 1))
        else:
            k = np.arange(1, self.cfg.digits + 1)
            length = int(rng.choice(k, p=(1 / k**2) / (1 / k**2).sum()))
        low = 0 if length == 1 else 10 ** (length - 1)
        return int(rng.integers(low, 10**length))

    def encode(self, prompt: str) -> list[int]:
        """BOS then the prompt's characters."""
        return [self.bos_id, *self.tokenizer.encode(prompt, add_special_tokens=False).ids]

    def decode(self, ids: list[int]) -> str:
        """Response ids as text, cut at the first EOS (pad and BOS dropped)."""
        out = []
        for i in ids:
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                out.append(self.tokenizer.id_to_token(i))
        return "".join(out)

    def answer_ids(self, problem: Problem) -> list[int]:
        """The expected response as ids, EOS included (supervised warm starts, tests)."""
        return [*self.tokenizer.encode(problem.answer, add_special_tokens=False).ids, self.eos_id]

    def reward(self, problem: Problem, response: str) -> float:
        if self.cfg.reward == "exact":
            return float(response == problem.answer)
        width = max(len(problem.answer), len(response))
        return sum(a == b for a, b in zip(problem.answer, response)) / width

    def accuracy(self, problem: Problem, response: str) -> float:
        return float(response == problem.answer)

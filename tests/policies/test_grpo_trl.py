"""TRL's GRPOTrainer loss and gradients on our batch equal ours (packed and replicated), and
`wmsuite bench grpo` reports the TRL comparison. Skipped without trl (an optional baseline)."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytest.importorskip("trl")

from wmsuite.cli.bench_grpo_trl import trl_inputs, trl_step  # noqa: E402
from wmsuite.policies.lm import GRPOConfig, LMConfig, build_lm, grpo_loss, pack_groups, token_logprobs  # noqa: E402
from wmsuite.rollout.tokens import Group, Response  # noqa: E402

VOCAB = 40
TINY = LMConfig(hidden=32, layers=2, heads=4, kv_heads=2, mlp=64, max_positions=16)


def _case(lengths, seed: int = 0):
    """A model and one group of N = len(lengths) responses after a prompt of P = 6 tokens."""
    model = build_lm(TINY, VOCAB, seed=seed)
    g = torch.Generator().manual_seed(seed)
    prompt = [1, *torch.randint(3, VOCAB, (5,), generator=g).tolist()]
    responses = [Response(torch.randint(3, VOCAB, (r,), generator=g).tolist(), (-2 - torch.rand(r, generator=g)).tolist(),
                          True) for r in lengths]
    return model, Group(0, prompt, responses), torch.rand(1, len(lengths), generator=g)


def _ours(model, batch, cfg, packed):
    model.zero_grad(set_to_none=True)
    loss, _ = grpo_loss(model, batch, cfg, packed=packed)
    loss.backward()
    return float(loss.detach()), {n: p.grad.detach().clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("lengths,temperature,kl,scale", [
    ([3, 3, 3, 3], 1.0, 0.0, True),      # N=4, P=6, R=3
    ([3, 1, 2, 3], 0.7, 0.1, False),     # ragged responses (TRL right-pads), temperature, KL, Dr. GRPO advantages
])
def test_trl_loss_and_gradients_equal_ours(lengths, temperature, kl, scale):
    model, group, rewards = _case(lengths)
    cfg = GRPOConfig(prompts=1, group_size=len(lengths), clip=0.2, temperature=temperature, kl=kl, scale_rewards=scale)
    batch = pack_groups([group], rewards, scale_rewards=scale)
    with torch.no_grad():
        # behaviour log-probs near the model's, so that both sides of the clip are taken, and shifted with the
        # advantage's sign: the loss is then no small difference of large terms (a well-conditioned comparison)
        logp = token_logprobs(model, batch, temperature)
        noise = torch.rand(logp.shape, generator=torch.Generator().manual_seed(1)) - 0.5
        batch.behaviour = logp - 0.18 * batch.advantages[batch.seq].sign() + 0.24 * noise
        if kl:
            batch.ref_logp = token_logprobs(build_lm(TINY, VOCAB, seed=7), batch, temperature)
    ratio = torch.exp(logp - batch.behaviour)
    assert bool(((ratio - 1).abs() > cfg.clip).any()) and bool(((ratio - 1).abs() < cfg.clip).any())
    inputs = trl_inputs(group, batch)
    assert inputs["completion_mask"].sum() == sum(lengths)

    trl = trl_step(model, group, batch, cfg)
    assert model.config._attn_implementation != "sdpa" and trl.model.config._attn_implementation == "sdpa"
    assert trl.trainer.loss_type == "grpo" and trl.trainer.beta == kl
    for packed in (True, False):
        loss, grads = _ours(model, batch, cfg, packed)
        assert loss != 0.0
        assert abs(trl.loss - loss) <= 1e-5 * abs(loss), (packed, trl.loss, loss)
        assert set(trl.grads) == set(grads)
        for name, g in grads.items():
            err = float((trl.grads[name] - g).norm() / g.norm().clamp(min=1e-12))
            assert err <= 1e-5, f"{name} (packed={packed}): relative gradient error {err:.2e}"
    # a TRL step moves TRL's copy only
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trl.step()
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
    assert any(not torch.equal(p, before[n]) for n, p in trl.model.named_parameters())


def test_bench_grpo_reports_trl(tmp_path, capsys):
    from wmsuite.cli import main

    torch_threads = torch.get_num_threads()
    try:
        assert main(["bench", "grpo", "--quick", "--out", str(tmp_path)]) == 0
    finally:
        torch.set_num_threads(torch_threads)
    row = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("ms_trl", "trl_over_packed", "trl_loss_rel_error", "trl_max_rel_grad_error"):
        assert key in row, key
    assert row["ms_trl"] > 0 and row["trl_over_packed"] > 0
    assert row["trl_loss_rel_error"] <= 1e-5 and row["trl_max_rel_grad_error"] <= 1e-4
    assert "TRL GRPOTrainer step" in capsys.readouterr().out

"""The language-model side: task and tokenizer, the op inside a transformers model, packed GRPO
against the replicated update, KV-cached generation with groups, partial rollouts, train-lm."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from wmsuite.cuda_ops import SharedPrefixLayout  # noqa: E402
from wmsuite.policies.lm import (  # noqa: E402
    AdditionConfig,
    AdditionTask,
    GRPOConfig,
    LMConfig,
    Problem,
    build_lm,
    group_advantages,
    grpo_loss,
    load_lm,
    pack_groups,
    packed_logits,
    replicated_logits,
    save_lm,
)
from wmsuite.rollout.tokens import Group, Response, SampleConfig, generate  # noqa: E402

TINY = LMConfig(hidden=32, layers=2, heads=4, kv_heads=2, mlp=64, max_positions=48)


@pytest.fixture(scope="module")
def task():
    return AdditionTask(AdditionConfig(digits=2))


def _model(task, family="llama", seed=0, **sizes):
    from dataclasses import replace

    return build_lm(replace(TINY, family=family, **sizes), task.vocab_size, task.pad_id, task.bos_id, task.eos_id,
                    seed=seed).double()


def test_task_answers_tokens_and_rewards(task):
    rng = np.random.default_rng(0)
    for p in task.sample(rng, 200):
        a, b = map(int, p.prompt[:-1].split("+"))
        assert p.answer == str(a + b)[::-1] and p.prompt.endswith("=")
        assert task.decode(task.answer_ids(p)) == p.answer
        assert task.reward(p, p.answer) == 1.0
    ids = task.encode("37+5=")
    assert ids[0] == task.bos_id and len(ids) == 6
    assert task.decode(ids) == "37+5="
    p = Problem("37+5=", "24")
    assert task.reward(p, "25") == 0.5 and task.reward(p, "240") == pytest.approx(2 / 3) and task.reward(p, "") == 0
    exact = AdditionTask(AdditionConfig(reward="exact"), task.tokenizer)
    assert exact.reward(p, "25") == 0.0 and exact.reward(p, "24") == 1.0
    with pytest.raises(ValueError, match="reward"):
        AdditionConfig(reward="bleu")


def _groups(task, lengths, n_prompts=(5, 3, 6), seed=0):
    """Complete groups with random responses of the given lengths and behaviour log-probs."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for gi, (plen, rlens) in enumerate(zip(n_prompts, lengths)):
        prompt = [task.bos_id, *torch.randint(3, task.vocab_size, (plen - 1,), generator=g).tolist()]
        rs = [Response(torch.randint(2, task.vocab_size, (r,), generator=g).tolist(),
                       (-torch.rand(r, generator=g) * 3).tolist(), True, recycled=min(r, gi)) for r in rlens]
        out.append(Group(gi, prompt, rs))
    return out


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_packed_logits_equal_replicated(task, family):
    model = _model(task, family)
    layout = SharedPrefixLayout.from_lists([5, 3], [[3, 1, 4], [2, 6]])
    ids = torch.randint(0, task.vocab_size, (layout.num_tokens,))
    a, b = packed_logits(model, ids, layout), replicated_logits(model, ids, layout)
    assert torch.allclose(a, b, rtol=1e-10, atol=1e-10)
    # and the replicated batch equals each sequence run alone
    alone = model(input_ids=torch.cat([ids[:5], ids[5:8]])[None]).logits[0]
    assert torch.allclose(a[:8], alone, atol=1e-10)


@pytest.mark.parametrize("kl", [0.0, 0.1])
def test_packed_grpo_update_equals_replicated(task, kl):
    """Loss and every gradient of the packed update equal the replicated one (groups with different
    response lengths, recycled tokens, KL to a reference), fp32 relative error <= 1e-5."""
    model = _model(task).float()
    groups = _groups(task, [[3, 1, 4], [2, 5, 1], [4, 2, 3]], n_prompts=(5, 3, 7))  # groups 1, 2 recycle tokens
    rewards = torch.tensor([[1.0, 0.0, 0.5], [0.2, 0.2, 0.9], [0.0, 1.0, 1.0]])
    batch = pack_groups(groups, rewards)
    cfg = GRPOConfig(kl=kl, clip=0.2)
    if kl:
        ref = _model(task, seed=7).float()
        with torch.no_grad():
            from wmsuite.policies.lm import token_logprobs

            batch.ref_logp = token_logprobs(ref, batch)
    grads = []
    for packed in (True, False):
        model.zero_grad()
        loss, _ = grpo_loss(model, batch, cfg, packed=packed)
        loss.backward()
        grads.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (la, ga), (lb, gb) = grads
    assert abs(float(la - lb)) <= 1e-5 * abs(float(lb)) + 1e-8
    assert float(la) != 0.0
    for name in ga:
        err = (ga[name] - gb[name]).norm() / gb[name].norm().clamp(min=1e-12)
        assert err <= 1e-5, f"{name}: relative gradient error {float(err):.2e}"


def test_grpo_loss_by_hand(task):
    """One group of two one-token responses: the loss is what the formula gives by hand."""
    model = _model(task).float()
    g = Group(0, [task.bos_id, 5], [Response([7], [-2.0], True), Response([8], [-1.0], True)])
    batch = pack_groups([g], torch.tensor([[1.0, 0.0]]))
    adv = group_advantages(torch.tensor([[1.0, 0.0]]))[0]
    assert torch.allclose(adv, torch.tensor([1.0, -1.0]) * 0.5 / (0.5**0.5 + 1e-6))  # unbiased std of (1, 0)
    logits = model(input_ids=torch.tensor([[task.bos_id, 5]])).logits[0, -1]
    logp = torch.log_softmax(logits.double(), -1)
    r = torch.exp(logp[[7, 8]] - torch.tensor([-2.0, -1.0], dtype=torch.double))
    cfg = GRPOConfig(clip=0.2)
    expect = -torch.minimum(r * adv.double(), r.clamp(0.8, 1.2) * adv.double()).mean()
    loss, _ = grpo_loss(model, batch, cfg)
    assert float(loss) == pytest.approx(float(expect), rel=1e-5)
    assert torch.allclose(group_advantages(torch.tensor([[1.0, 0.0]]), scale=False), torch.tensor([[0.5, -0.5]]))
    # equal rewards leave only the entropy bonus: -c times the entropy of the one shared distribution
    same = pack_groups([g], torch.tensor([[1.0, 1.0]]))
    loss, logs = grpo_loss(model, same, GRPOConfig(entropy=0.1))
    entropy = float(-(logp.exp() * logp).sum())
    assert float(loss) == pytest.approx(-0.1 * entropy, rel=1e-5) and logs["entropy"] == pytest.approx(entropy, rel=1e-5)


def test_generation_rows_do_not_depend_on_their_batch(task):
    """Greedy responses to prompts of different lengths, generated together (left padding, KV cache),
    equal each prompt generated alone; behaviour log-probs equal a full forward's."""
    model = _model(task).float().eval()
    prompts = [task.encode(p) for p in ("7+8=", "12+45=", "3+61=", "99+99=")]
    cfg = SampleConfig(max_new_tokens=5, eos_id=task.eos_id, pad_id=task.pad_id, temperature=0.0)
    together = [Group.new(i, p, 1) for i, p in enumerate(prompts)]
    generate(model, together, cfg)
    for i, p in enumerate(prompts):
        alone = [Group.new(i, p, 1)]
        generate(model, alone, cfg)
        assert alone[0].responses[0].tokens == together[i].responses[0].tokens
        r = together[i].responses[0]
        seq = torch.tensor(p + r.tokens)[None]
        logp = torch.log_softmax(model(input_ids=seq).logits[0].float(), -1)
        want = [float(logp[len(p) - 1 + t, tok]) for t, tok in enumerate(r.tokens)]
        assert np.allclose(r.logprobs, want, atol=1e-4)
        assert r.finished and (r.tokens[-1] == task.eos_id or len(r.tokens) == 5)


def test_sampling_groups_is_seeded_and_stops_at_each_length(task):
    model = _model(task).float().eval()
    cfg = SampleConfig(max_new_tokens=6, eos_id=task.eos_id, pad_id=task.pad_id)

    def run(seed):
        groups = [Group.new(i, task.encode(p), 8) for i, p in enumerate(("1+2=", "40+33="))]
        done, left = generate(model, groups, cfg, torch.Generator().manual_seed(seed))
        assert len(done) == 2 and not left
        return [r.tokens for g in done for r in g.responses]

    a, b, c = run(0), run(0), run(1)
    assert a == b and a != c
    for toks in a:
        assert 1 <= len(toks) <= 6 and (task.eos_id not in toks[:-1])


def test_partial_rollouts_stop_at_target_and_resume(task):
    """With target_groups the call stops once that many groups are complete; the rest keep their
    tokens and log-probs, are marked recycled, and finish in the next call."""
    model = _model(task).float().eval()
    head = torch.nn.Linear(TINY.hidden, task.vocab_size, bias=True)  # every token p = 0.75 / 14, EOS 0.25:
    torch.nn.init.zeros_(head.weight)                                  # lengths spread over the budget
    with torch.no_grad():
        head.bias.zero_()
        head.bias[task.eos_id] = float(np.log(0.25 * (task.vocab_size - 1) / 0.75))
    model.lm_head = head
    cfg = SampleConfig(max_new_tokens=12, eos_id=task.eos_id, pad_id=task.pad_id, target_groups=2)
    groups = [Group.new(i, task.encode(f"{i}+{i}="), 4) for i in range(6)]
    gen = torch.Generator().manual_seed(3)
    done, left = generate(model, groups, cfg, gen)
    assert len(done) >= 2 and left
    before = {id(r): (list(r.tokens), list(r.logprobs), r.finished) for g in left for r in g.responses}
    done2, left2 = generate(model, left, SampleConfig(max_new_tokens=12, eos_id=task.eos_id, pad_id=task.pad_id), gen)
    assert not left2 and len(done2) == len(left)
    for g in done2:
        for r in g.responses:
            old_tokens, old_logp, was_finished = before[id(r)]
            assert r.tokens[:len(old_tokens)] == old_tokens and r.logprobs[:len(old_logp)] == old_logp
            assert r.recycled == len(old_tokens)
            assert was_finished or len(r.tokens) > len(old_tokens)
    # tokens sampled after the carry-over have the log-probs of a full forward over prompt + all tokens
    for g in done2:
        for r in g.responses:
            seq = torch.tensor(g.prompt + r.tokens)[None]
            logp = torch.log_softmax(model(input_ids=seq).logits[0].float(), -1)
            want = [float(logp[len(g.prompt) - 1 + t, tok]) for t, tok in enumerate(r.tokens)]
            assert np.allclose(r.logprobs[r.recycled:], want[r.recycled:], atol=1e-4)
    # recycled tokens are flagged in the packed batch
    batch = pack_groups(done2, torch.rand(len(done2), 4))
    n_recycled = sum(r.recycled for g in done2 for r in g.responses)
    assert int(batch.recycled.sum()) == n_recycled


def test_checkpoint_round_trip(task, tmp_path):
    model = _model(task).float()
    save_lm(model, tmp_path / "m", {"note": "x"})
    assert (tmp_path / "m" / "model.safetensors").exists() and not list((tmp_path / "m").glob("*.bin"))
    loaded, extra = load_lm(tmp_path / "m")
    layout = SharedPrefixLayout.from_lists([4], [[2, 3]])
    ids = torch.randint(0, task.vocab_size, (layout.num_tokens,))
    assert extra["note"] == "x"
    assert torch.equal(packed_logits(model, ids, layout), packed_logits(loaded, ids, layout))
    with pytest.raises(FileNotFoundError, match="lm.json"):
        load_lm(tmp_path)


def test_op_inside_the_model_opcheck(task):
    """The Triton op (interpreter on CPU) inside the model: the same logits as the reference, and
    torch.library.opcheck on the q/k/v one of its layers hands the op."""
    pytest.importorskip("triton")
    from wmsuite.cuda_ops import use_backend
    from wmsuite.policies.lm import model as lm_model

    model = _model(task, hidden=64).float()  # head dim 16, the kernel's smallest
    layout = SharedPrefixLayout.from_lists([5], [[3, 2]])
    ids = torch.randint(0, task.vocab_size, (layout.num_tokens,))
    seen = []
    real = lm_model.shared_prefix_attention

    def spy(q, k, v, lay, scale=None, backend=None):
        seen.append((q.detach().clone(), k.detach().clone(), v.detach().clone(), scale))
        return real(q, k, v, lay, scale, backend)

    ref = packed_logits(model, ids, layout)
    lm_model.shared_prefix_attention = spy
    try:
        with use_backend("triton"):
            out = packed_logits(model, ids, layout)
    finally:
        lm_model.shared_prefix_attention = real
    assert torch.allclose(out, ref, atol=1e-4)
    q, k, v, scale = seen[0]
    args = (q, k, v, layout.query_table(16, "cpu"), layout.key_table(16, 16, 1, "cpu"), layout.prefix_index("cpu"),
            scale, 16, 16, 1)
    torch.library.opcheck(torch.ops.wmsuite.shared_prefix_attention.default, args)


def test_train_lm_cli_runs_and_resumes(tmp_path, capsys):
    from wmsuite.cli import main

    out = tmp_path / "lm"
    args = ["train-lm", "--out", str(out), "--threads", "1", "--lm.hidden", "32", "--lm.mlp", "64",
            "--grpo.prompts", "4", "--grpo.group-size", "4", "--eval-problems", "16", "--train.save-every", "2"]
    assert main([*args, "--train.steps", "2"]) == 0
    rows = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 2] and all(0 <= r["eval_accuracy"] <= 1 for r in rows)
    loaded, extra = load_lm(out / "latest")
    assert extra["step"] == 2
    assert main([*args, "--train.steps", "4", "--resume"]) == 0
    rows = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 2, 4]  # the resumed run's re-export of step 2 is not scored again
    assert rows[2]["seconds"] >= rows[1]["seconds"]  # one clock across the resume
    assert (out / "latest" / "tokenizer.json").exists()
    assert main([*args, "--train.steps", "4", "--grpo.clip", "0.3"]) == 2  # another recipe: refused
    assert "another train-lm run" in capsys.readouterr().err


def test_long_tail_operand_lengths_follow_the_power_law(task):
    long = AdditionTask(AdditionConfig(digits=4, lengths="long_tail"), task.tokenizer)
    problems = long.sample(np.random.default_rng(0), 4000)
    lengths = np.array([len(p.prompt.split("+")[0]) for p in problems])
    k = np.arange(1, 5)
    want = (1 / k**2) / (1 / k**2).sum()
    got = np.array([(lengths == i).mean() for i in k])
    assert np.abs(got - want).max() < 0.03, (got, want)
    with pytest.raises(ValueError, match="lengths"):
        AdditionConfig(lengths="zipf")


def test_supervised_cold_start_learns_the_answers(task):
    """Teacher-forced answers of 1-digit sums: greedy decoding then gets most held-out sums right."""
    from wmsuite.policies.lm.train import evaluate, held_out, supervised

    one = AdditionTask(AdditionConfig(digits=1), task.tokenizer)
    model = _model(one, hidden=64).float()
    before = evaluate(model, one, held_out(one, 64, 0), 3)["eval_accuracy"]
    losses = supervised(model, one, steps=400, lr=3e-3, batch=64)
    after = evaluate(model, one, held_out(one, 64, 0), 3)["eval_accuracy"]
    assert losses[-1] < 0.3 * losses[0] and before < 0.1 and after > 0.8, (losses[-1], before, after)

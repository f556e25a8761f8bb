"""Learning from rollouts (#30, policies/improve.py): window labels, what each method trains, a
failure head that steers sampling away from what failed, and train-policy --rollouts end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wmsuite.data import write_episodes
from wmsuite.policies.config import PolicyConfig
from wmsuite.policies.improve import LabelledWindows, improvement_loss, train_improved
from wmsuite.policies.train import build_policy
from wmsuite.policies.weighting import AUTONOMOUS, DEMO, INTERVENTION
from wmsuite.train import Trainer, TrainerConfig
from wmsuite.types import Episode


def episode(action: float, t: int = 6, success: bool = True, intervention=None, seed: int = 0,
            at: float = 0.0) -> Episode:
    """A state-only episode whose every action is (action, action), from states near (at, at)."""
    rng = np.random.default_rng(seed)
    state = rng.normal(at, 0.05, (t + 1, 2)).astype(np.float32)
    return Episode(obs={}, state=state, env_state=state.copy(), actions=np.full((t, 2), action, np.float32),
                   rewards=np.zeros(t, np.float32), success=success, terminated=success, truncated=not success,
                   intervention=None if intervention is None else np.asarray(intervention, bool))


CFG = PolicyConfig(kind="flow", horizon=2, n_action_steps=2, cameras=(), use_env_state=True, hidden_dim=64,
                   head_layers=2, feature_dim=32, num_inference_steps=8)


def test_windows_carry_source_credited_outcome_and_next_state():
    demo = episode(0.5)
    helped = episode(0.5, success=True, intervention=[0, 0, 1, 1, 0, 0])
    data = LabelledWindows([demo], [helped], horizon=2, n_steps=2, cameras=())
    items = {(int(it["episode_index"]), int(it["t"])): it for it in (data[i] for i in range(len(data)))}
    assert int(items[0, 3]["source"]) == DEMO and float(items[0, 3]["outcome"]) == 1.0
    assert int(items[1, 0]["source"]) == AUTONOMOUS and float(items[1, 0]["outcome"]) == 0.0  # cut short
    assert int(items[1, 2]["source"]) == INTERVENTION and np.isnan(float(items[1, 2]["outcome"]))
    assert float(items[1, 4]["outcome"]) == 1.0 and bool(items[1, 4]["success_end"]) and int(items[1, 4]["steps"]) == 2
    assert int(items[1, 5]["steps"]) == 1 and not bool(items[1, 1]["success_end"])


@pytest.mark.parametrize("method", ["bc", "afil", "habc", "both", "autoguide"])
def test_each_method_trains_its_heads_and_only_those(method):
    from wmsuite.policies.improve import improved_config

    demos = [episode(0.5, seed=s) for s in range(2)]
    rollouts = [episode(-0.5, success=False, intervention=np.zeros(6), seed=9)]
    torch.manual_seed(0)
    policy = build_policy(demos + rollouts, improved_config(CFG, method))
    data = LabelledWindows(demos, rollouts, 2, 2, ())
    batch = torch.utils.data.default_collate([data[i] for i in range(len(data))])
    loss, logs = improvement_loss(policy, batch, method, time_scale=6, weighted=True)
    loss.backward()
    assert torch.isfinite(loss)
    assert (policy.fail_head is not None) == (method in ("afil", "both", "autoguide")) == ("loss/failure_head" in logs)
    assert (policy.critics is not None) == (method in ("habc", "both")) == ("critic/viability" in logs)
    assert logs["failed_share"] == pytest.approx(6 / 18)
    if policy.critics is not None:  # the critics learn on detached features: the encoder gets the action loss only
        assert all(p.grad is not None for p in policy.critics.parameters())


@pytest.mark.parametrize("outcome", [True, False])
def test_the_guiding_head_learns_failures_under_afil_and_successes_under_autoguide(outcome):
    """A batch of only successful (or only failed) autonomous windows: afil's second head learns from
    the failed ones alone, its control's from the successful ones alone, with the loss the head gives
    those windows at weight 1."""
    from wmsuite.policies.improve import improved_config

    rollouts = [episode(0.5, success=outcome, intervention=np.zeros(6), seed=s) for s in range(2)]
    data = LabelledWindows([], rollouts, 2, 2, ())
    batch = torch.utils.data.default_collate([data[i] for i in range(len(data))])
    for method, learns in (("afil", not outcome), ("autoguide", outcome)):
        torch.manual_seed(0)
        policy = build_policy(rollouts, improved_config(CFG, method))
        _, logs = improvement_loss(policy, batch, method, time_scale=6, weighted=False,
                                   generator=torch.Generator().manual_seed(1))
        assert ("loss/failure_head" in logs) == learns
        if learns:  # the same draws: the head's own loss on every window
            cond = policy.encode(policy.batch_obs(batch), channels_first=True, augment=True)
            actions = policy.normalizer.action_to_unit(batch["actions"]).clamp(-1.0, 1.0)
            gen = torch.Generator().manual_seed(1)
            policy.head.loss(cond, actions, ~batch["action_is_pad"], torch.ones(len(actions)), gen)  # bc's draws first
            alone, _ = policy.fail_head.loss(cond, actions, ~batch["action_is_pad"], torch.ones(len(actions)), gen)
            assert logs["loss/failure_head"] == pytest.approx(float(alone.detach()), rel=1e-5)


def test_the_failure_head_steers_samples_away_from_what_failed(tmp_path):
    """Successes act +0.3, failures -0.8 from the same states (and successes elsewhere +1, so that the
    action range leaves room above +0.3): the guided policy's chunks lie further from the failures'
    actions than the same policy's unguided ones (same noise)."""
    demos = [episode(0.3, seed=s) for s in range(4)] + [episode(1.0, seed=20 + s, at=2.0) for s in range(2)]
    rollouts = [episode(-0.8, success=False, intervention=np.zeros(6), seed=10 + s) for s in range(4)]
    trainer = Trainer(tmp_path / "afil", seed=0)
    train_improved(trainer, demos, rollouts, CFG, TrainerConfig(steps=300, batch_size=32, lr=2e-3, warmup=10,
                                                                 save_every=300, log_every=100), method="afil")
    from wmsuite.policies import load_policy

    policy = load_policy(tmp_path / "afil")
    assert policy.fail_head is not None
    obs = {"agent_pos": np.zeros((64, 2), np.float32), "environment_state": np.zeros((64, 2), np.float32)}
    noise = torch.randn(64, 2, 2, generator=torch.Generator().manual_seed(0))
    plain = policy.predict_action_chunk(obs, noise=noise, guide=lambda x, t, pred: pred)
    steered = policy.predict_action_chunk(obs, noise=noise)
    assert abs(float(plain.mean()) - 0.3) < 0.15  # the success head learned the successes
    assert float((steered - -0.8).abs().mean()) > float((plain - -0.8).abs().mean()) + 0.05


def test_train_policy_with_rollouts_from_a_bc_start(tmp_path):
    from wmsuite.cli import main
    from wmsuite.policies import load_policy

    demos = tmp_path / "demos.hdf5"
    rollouts = tmp_path / "round.hdf5"
    write_episodes(demos, [episode(0.5, seed=s) for s in range(3)], {"env_name": "toy"})
    write_episodes(rollouts, [episode(-0.5, success=False, seed=7), episode(0.5, intervention=[1, 1, 0, 0, 0, 0], seed=8)],
                   {"env_name": "toy"})
    small = ["--policy.horizon", "2", "--policy.n-action-steps", "2", "--policy.hidden-dim", "32",
             "--policy.head-layers", "2", "--policy.feature-dim", "16", "--policy.use-env-state", "--train.steps", "4",
             "--train.batch-size", "8", "--train.save-every", "4", "--threads", "1"]
    assert main(["train-policy", "--data", str(demos), "--out", str(tmp_path / "bc"), *small]) == 0
    assert main(["train-policy", "--data", str(demos), "--rollouts", str(rollouts), "--method", "both",
                 "--init", str(tmp_path / "bc"), "--critic-warmup", "2", "--out", str(tmp_path / "both"), *small]) == 0
    both, bc = load_policy(tmp_path / "both"), load_policy(tmp_path / "bc")
    assert both.fail_head is not None and both.critics is not None and both.cfg.horizon == 2
    assert both.normalizer.stats == bc.normalizer.stats  # the start's statistics
    obs = {"agent_pos": np.zeros((2, 2), np.float32), "environment_state": np.zeros((2, 2), np.float32)}
    assert both.predict_action_chunk(obs).shape == (2, 2, 2)
    with pytest.raises(SystemExit):
        main(["train-policy", "--data", str(demos), "--rollouts", str(rollouts), "--method", "nope",
              "--out", str(tmp_path / "x")])


@pytest.mark.slow
def test_improve_rounds_in_the_real_and_the_learned_simulator(tmp_path, capsys):
    """One round from a (barely trained) BC state policy, rollouts with the expert intervening, in the
    real simulator (state only: --cameras empty) and in the shipped learned one; every round evaluated
    in the real simulator; a rerun does nothing again; other settings in the same --out are refused."""
    import json

    from wmsuite.cli import main
    from wmsuite.data import load_episodes

    demos = tmp_path / "demos.hdf5"
    assert main(["collect", "--policy", "expert", "--skill", "1.0", "--episodes", "4", "--num-envs", "1",
                 "--image-size", "16", "--out", str(demos)]) == 0
    small = ["--policy.horizon", "4", "--policy.n-action-steps", "4", "--policy.hidden-dim", "32",
             "--policy.head-layers", "2", "--policy.feature-dim", "16", "--policy.cameras", "--policy.use-env-state",
             "--train.steps", "3", "--train.batch-size", "8", "--threads", "1"]
    assert main(["train-policy", "--data", str(demos), "--out", str(tmp_path / "bc"), *small]) == 0
    for sim, cams in (("real", ["--cameras"]), ("wm", [])):
        out = tmp_path / f"improve-{sim}"
        args = ["improve", "--data", str(demos), "--init", str(tmp_path / "bc"), "--method", "both", "--rounds", "1",
                "--episodes", "3", "--eval-episodes", "3", "--num-envs", "1", "--sim", sim, "--intervene", "expert@1",
                "--train.steps", "3", "--train.batch-size", "8", "--critic-warmup", "1", *cams, "--out", str(out)]
        assert main(args) == 0
        rounds = json.loads((out / "metrics.json").read_text())["rounds"]
        assert set(rounds) == {"0", "1"} and rounds["1"]["rollouts"] == 3
        assert 0.0 <= rounds["1"]["expert_share"] <= 1.0 and len(rounds["0"]["real_ci"]) == 2
        assert (out / "round_1" / "policy" / "latest" / "model.safetensors").is_file()
        if cams:  # the state-only simulator rendered nothing
            assert not any(ep.obs for ep in load_episodes(out / "round_1" / "rollouts.hdf5"))
        stamp = (out / "round_1" / "rollouts.hdf5").stat().st_mtime_ns
        assert main(args) == 0 and (out / "round_1" / "rollouts.hdf5").stat().st_mtime_ns == stamp
    assert main([*args[:-2], "--method", "afil", "--out", str(out)]) == 2  # another method in the same --out
    other = tmp_path / "other.hdf5"  # demonstrations of another observation (environment_state of 2)
    write_episodes(other, [episode(0.1)], {"env_name": "elsewhere", "type": "wmsuite"})
    bad = [*args[:-2], "--out", str(tmp_path / "bad")]
    bad[bad.index("--data") + 1] = str(other)
    assert main(bad) == 2 and not (tmp_path / "bad" / "round_1").exists()
    assert "--init was trained on" in capsys.readouterr().err
    # only the last round evaluated: its figure is the one the full run scored (evaluations are seeded alike)
    real, last = tmp_path / "improve-real", tmp_path / "improve-last"
    args[args.index("--sim") + 1] = "real"
    assert main([*args[:-2], "--cameras", "--eval-rounds", "last", "--out", str(last)]) == 0
    scored, full = (json.loads((d / "metrics.json").read_text())["rounds"] for d in (last, real))
    assert "real_success" not in scored.get("0", {}) and scored["1"]["real_success"] == full["1"]["real_success"]
    assert scored["1"]["real_mean_length"] == full["1"]["real_mean_length"]


def test_each_round_is_evaluated_with_the_same_noise_whatever_ran_before():
    """The rounds' real evaluation seeds the policy's noise from --eval-seed: the same policy scores
    the same after any other work (a training, a rollout), so rounds and methods meet the same noise
    and a resumed run scores as an uninterrupted one. The policy here is an expert behind Gaussian
    noise drawn from numpy's global generator."""
    import json

    from wmsuite.cli.common import resolve_policy
    from wmsuite.cli.eval_policy import evaluate
    from wmsuite.cli.improve import ImproveConfig, _evaluate

    expert = json.dumps({"env_id": "wmsuite/PushCube-v0", "skill": 1.0, "horizon": 4, "seed": 0})
    inner = f"wmsuite.envs.experts:make_expert{expert}"
    policy = resolve_policy(f"wmsuite.policies.wrappers:ActionNoise{json.dumps({'inner': inner, 'std': 0.6})}")
    cfg = ImproveConfig(init="unused", eval_episodes=4, eval_seed=7, num_envs=2)
    unseeded = []
    for state in (1, 2):  # whatever ran before leaves the global generators somewhere else
        np.random.seed(state)  # noqa: NPY002
        unseeded.append(evaluate(policy, cfg.env, 4, cfg.eval_seed, out=None, num_envs=2, progress=False)["mean_length"])
    assert unseeded[0] != unseeded[1]  # the policy's outcomes do depend on that noise
    scored = []
    for state in (1, 2):
        np.random.seed(state)  # noqa: NPY002
        torch.manual_seed(state)
        scored.append(_evaluate(cfg, policy))
    assert scored[0] == scored[1]

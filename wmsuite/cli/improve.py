"""`wmsuite improve`: improvement rounds from a BC policy: rollouts (with interventions), an update
from them (bc | afil | habc | both), repeat; rollouts from the real simulator or the learned one.

    wmsuite improve --env wmsuite/PushCube-v0 --data data/pushcube_noisy.hdf5 --init runs/bc \
        --method habc --rounds 3 --episodes 200 --sim real --intervene expert@1 --out runs/improve-habc
    wmsuite improve ... --sim wm --wm assets:wm/pushcube      # the same rounds in the learned simulator

Round r (1..R) rolls out round r-1's policy (round 0: --init) for --episodes episodes, from seeds
`seed + 100000 r + i`, in --sim: `real` (labels from the simulator) or `wm` (the learned simulator as
`wmsuite eval` builds it: success from its judge, states from its heads). The update trains from
round r-1's weights on the demonstrations and every round's rollouts so far (policies/improve.py)
for --train.steps steps. Each policy, round 0 included, is then evaluated for --eval-episodes
episodes in the *real* simulator from seeds `eval_seed + i` (the same for every round, apart from
all rollout seeds), so rounds and methods compare on the same scenes.

Writes OUT/round_<r>/rollouts.hdf5, OUT/round_<r>/policy/ (a train-policy run: latest/ is the
policy) and OUT/metrics.json: per round, the rollouts' success and expert share, and the real
success with its Wilson 95% interval. A rerun goes on from the first unfinished round.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from wmsuite.config import to_dict
from wmsuite.logging import write_metrics
from wmsuite.policies.config import METHODS, POLICY_TRAINER
from wmsuite.runs import open_run
from wmsuite.specs import file_digest, spec_fingerprint
from wmsuite.train import TrainerConfig


@dataclass
class ImproveConfig:
    env: str = "wmsuite/PushCube-v0"
    """Gymnasium id of the task."""
    data: str = "data/pushcube.hdf5"
    """The demonstrations (kept in every update)."""
    init: str = ""
    """The round-0 policy: a trained policy's checkpoint, run directory or assets: spec (required)."""
    method: str = "habc"
    """How each update learns from the rollouts: bc (the control), afil, habc, both, or autoguide (afil's
    control: its guiding head learns the successes, not the failures)."""
    rounds: int = 3
    """Improvement rounds."""
    episodes: int = 200
    """Rollouts per round."""
    sim: Literal["real", "wm"] = "real"
    """Where rollouts come from: the real simulator, or the learned one (--wm)."""
    wm: str = "assets:wm/pushcube"
    """The learned simulator's world model (with --sim wm)."""
    intervene: str = ""
    """An expert that takes over where the policy drifts during rollouts ('expert@1'; empty: none)."""
    intervene_threshold: float = 0.5
    """Mean absolute chunk difference above which the expert takes over."""
    intervene_steps: int = 8
    """Actions the expert keeps control for once it takes over."""
    eval_episodes: int = 100
    """Real-simulator episodes evaluating each round's policy (0: none)."""
    eval_seed: int = 0
    """Seed of the first evaluation episode (the same for every round)."""
    eval_rounds: Literal["all", "last"] = "all"
    """Which rounds' policies are evaluated: all (0..R: the curve) or only the last (the figure a
    comparison of methods scores, the same as with all: each evaluation is seeded alike)."""
    seed: int = 0
    """Seed of training and of the rollouts' seeds."""
    num_envs: int = 8
    """Sub-environments for rollouts and evaluation."""
    cameras: tuple[str, ...] | None = None
    """Cameras the real simulator renders: unset, the env's own; empty (`--cameras` alone) for a state-only
    env, all a state policy needs and far faster in robosuite (its rollouts then hold no frames)."""
    critic_warmup: int = 200
    """HABC: steps of bc weights before the critics' weights act, in each update."""
    device: str = "cpu"
    """Torch device."""
    out: str = "runs/improve"
    """Output directory."""
    force_new: bool = False
    """Start over when --out holds rounds made with other settings (they are moved aside, not deleted)."""
    train: TrainerConfig = field(default_factory=lambda: replace(POLICY_TRAINER, steps=1000))
    """The trainer's settings of each update."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if not self.init:
            raise ValueError("--init is required: the round-0 policy (train one with `wmsuite train-policy`)")
        if self.rounds < 1 or self.episodes < 1 or self.eval_episodes < 0 or self.num_envs < 1:
            raise ValueError(f"need rounds, episodes, num_envs >= 1 and eval_episodes >= 0; got {self.rounds}, "
                             f"{self.episodes}, {self.num_envs}, {self.eval_episodes}")


CONFIG = ImproveConfig


def run(cfg: ImproveConfig) -> int:
    import wmsuite.envs  # noqa: F401  (registers the ids)
    from wmsuite.cli.common import check_env_id, check_policy_cameras, seed_everything
    from wmsuite.data import load_episodes, write_episodes
    from wmsuite.policies import load_policy

    check_env_id(cfg.env)
    if not Path(cfg.data).exists():
        raise FileNotFoundError(f"--data {cfg.data} does not exist; record demonstrations with `wmsuite collect`")
    seed_everything(cfg.seed)
    out = Path(cfg.out)
    # the rounds are this command's and no other's: a rerun goes on only with the same settings
    # (more rounds may be added later: the finished ones stay)
    identity = {k: v for k, v in to_dict(cfg).items() if k not in ("rounds", "device", "out", "force_new")}
    for key, default in (("cameras", None), ("eval_rounds", "all")):  # runs made before these flags keep their ids
        if identity[key] == default:
            identity.pop(key)
    identity.update(data=file_digest(cfg.data), init=spec_fingerprint(cfg.init),
                    wm=spec_fingerprint(cfg.wm) if cfg.sim == "wm" else "")
    open_run(out, "improve", identity, force_new=cfg.force_new)
    demos = [ep for ep in load_episodes(cfg.data) if ep.success]
    policy = load_policy(cfg.init, device=cfg.device)
    _check_demos(cfg.data, demos, policy.dims)
    check_policy_cameras(policy, cfg.cameras)
    make_env = _envs(cfg)
    metrics = _load(out)
    rollouts = []
    for r in range(cfg.rounds + 1):
        if r > 0:
            path = out / f"round_{r}" / "rollouts.hdf5"
            if not path.exists():
                guard = _guard(cfg, policy)
                seed_everything(cfg.seed + 100_000 * r)  # the rollouts' noise: this round's, whatever ran before
                eps = _rollouts(policy, make_env(), cfg, r, guard)
                path.parent.mkdir(parents=True, exist_ok=True)
                write_episodes(path, eps, {"env_name": cfg.env, "type": "wmsuite", "sim": cfg.sim})
            round_eps = load_episodes(path)
            rollouts += round_eps
            policy = _update(cfg, out / f"round_{r}" / "policy", demos, rollouts, policy)
            metrics["rounds"][r] = {**metrics["rounds"].get(r, {}), "rollouts": len(round_eps),
                                    "rollout_success": sum(e.success for e in round_eps) / len(round_eps),
                                    "expert_share": _expert_share(round_eps)}
        scored = cfg.eval_rounds == "all" or r == cfg.rounds
        if cfg.eval_episodes and scored and "real_success" not in metrics["rounds"].get(r, {}):
            metrics["rounds"].setdefault(r, {}).update(_evaluate(cfg, policy))
        row = metrics["rounds"].get(r, {})
        print(f"round {r}: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()))
        write_metrics(out, {"config": {"method": cfg.method, "sim": cfg.sim, "intervene": cfg.intervene},
                            "rounds": metrics["rounds"]})
    return 0


def _check_demos(path: str, demos: list, dims: dict[str, int]) -> None:
    """The demonstrations must be the policy's kind of data (sizes of action, agent_pos, environment_state)."""
    if not demos:
        raise ValueError(f"--data {path} holds no successful episode to keep as demonstrations")
    ep = demos[0]
    got = {"action": ep.actions.shape[1], "agent_pos": ep.state.shape[1], "environment_state": ep.env_state.shape[1]}
    if got != dims:
        raise ValueError(f"--data {path} has sizes {got}, but --init was trained on {dims}: pass the "
                         "demonstrations the policy was trained on (or of the same task and observation)")


def _load(out: Path) -> dict:
    path = out / "metrics.json"
    rounds = json.loads(path.read_text())["rounds"] if path.exists() else {}
    return {"rounds": {int(k): v for k, v in rounds.items()}}


def _envs(cfg: ImproveConfig):
    """A maker of the VectorEnv the rollouts run in (--sim); the real one drives the policy by its own
    chunk protocol, the learned one steps the world model's chunks."""
    from wmsuite.cli.common import env_kwargs_for
    from wmsuite.cli.eval import EvalConfig
    from wmsuite.cli.eval_setup import load_model, make_env_factory
    from wmsuite.rollout import make_vector_env

    if cfg.sim == "real":  # the env's own frame size, as before --cameras
        return lambda: make_vector_env(cfg.env, cfg.num_envs, env_kwargs=env_kwargs_for(None, cfg.cameras))
    ecfg = EvalConfig(env=cfg.env, wm=cfg.wm, num_envs=cfg.num_envs, seed=cfg.seed, device=cfg.device)
    model = load_model(ecfg)
    factory = make_env_factory(ecfg, model)  # the learned simulator as `wmsuite eval` builds it
    return lambda: factory("wm")


def _guard(cfg: ImproveConfig, policy):
    from wmsuite.cli.common import resolve_policy
    from wmsuite.rollout import Intervention

    if not cfg.intervene:
        return None
    expert = resolve_policy(cfg.intervene, env_id=cfg.env, seed=cfg.seed, device=cfg.device,
                            horizon=int(policy.n_action_steps))
    return Intervention(expert, cfg.intervene_threshold, cfg.intervene_steps)


def _rollouts(policy, env, cfg: ImproveConfig, r: int, guard) -> list:
    from wmsuite.rollout import RolloutConfig, rollout

    rcfg = RolloutConfig(episodes=cfg.episodes, seed=cfg.seed + 100_000 * r, policy_id=f"round{r - 1}",
                         env_id=cfg.env, episode_rng=True)
    try:
        return list(rollout(policy, env, rcfg, intervene=guard))
    finally:
        env.close()


def _update(cfg: ImproveConfig, run: Path, demos: list, rollouts: list, init):
    """Train round r's policy from `init` (skipped when its run finished), and load it."""
    from wmsuite.checkpoint import is_checkpoint
    from wmsuite.logging import RunLogger
    from wmsuite.policies import load_policy
    from wmsuite.policies.improve import train_improved
    from wmsuite.train import Trainer

    if not is_checkpoint(run / "latest") or not (run / "done").exists():
        log = RunLogger(run, config={"method": cfg.method, "rollouts": len(rollouts), "demos": len(demos)})
        try:
            state = run / "train_state" / "policy"
            train_improved(Trainer(run, device=cfg.device, seed=cfg.seed, logger=log), demos, rollouts, init.cfg,
                           cfg.train, cfg.method, init, cfg.critic_warmup, resume=is_checkpoint(state))
        finally:
            log.close()
        (run / "done").write_text("")
    return load_policy(run, device=cfg.device)


def _expert_share(eps: list) -> float:
    steps = sum(e.length for e in eps)
    return sum(int(e.intervention.sum()) for e in eps) / max(steps, 1)


def _evaluate(cfg: ImproveConfig, policy) -> dict:
    """The policy in the real simulator on the evaluation seeds, its sampling noise seeded from
    --eval-seed just before: every round and method meets the same scenes and the same noise (paired
    comparisons), and a resumed run scores as an uninterrupted one. (`wmsuite eval-policy --seed`
    seeds before it builds the policy, whose construction draws from the same generators, so its
    figures for the same checkpoint are another draw of the noise.)"""
    from wmsuite.cli.common import seed_everything
    from wmsuite.cli.eval_policy import evaluate

    seed_everything(cfg.eval_seed)
    m = evaluate(policy, cfg.env, cfg.eval_episodes, cfg.eval_seed, out=None, num_envs=cfg.num_envs,
                 cameras=cfg.cameras)
    return {"real_success": m["success_rate"], "real_ci": [m["ci_low"], m["ci_high"]],
            "real_mean_length": m["mean_length"]}

"""`wmsuite train-policy`: train a flow-matching or diffusion action-chunk policy on episodes.

    wmsuite train-policy --data data/pushcube.hdf5 --out runs/flow-pushcube
    wmsuite train-policy --data data/pushcube.hdf5 --out runs/diff --policy.kind diffusion \
        --policy.horizon 8 --policy.n-action-steps 4 --train.steps 6000
    wmsuite train-policy --data data/pushcube.hdf5 --rollouts data/round1.hdf5 --method habc \
        --init runs/bc --out runs/habc-1

`--policy.*` is every field of the library's PolicyConfig, `--train.*` the trainer's settings. The
run directory works wherever a policy checkpoint is accepted (it resolves to out/latest/); see
wmsuite/policies/train.py for the rest of its layout. out/run.json records the data's content hash,
the seed and the configs; --resume goes on only with the same ones (the step budget and time limit
may grow), and a killed run resumed this way ends with the weights an uninterrupted one has.

With `--rollouts` (the policy's own episodes, `wmsuite collect --policy P [--intervene expert@1]`)
and `--method bc|afil|habc|both|autoguide` the policy learns from its successes and failures too
(wmsuite/policies/improve.py); `--init` starts from a trained policy's weights and statistics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from wmsuite.checkpoint import is_checkpoint
from wmsuite.cli.common import seed_everything
from wmsuite.config import to_dict
from wmsuite.data import load_episodes
from wmsuite.logging import RunLogger
from wmsuite.policies.config import METHODS, POLICY_TRAINER, PolicyConfig
from wmsuite.runs import open_run
from wmsuite.specs import file_digest, spec_fingerprint
from wmsuite.train import RESUMABLE, TrainerConfig, dist


@dataclass
class TrainPolicyConfig:
    data: str = "data/pushcube.hdf5"
    """Episode file (robomimic-format HDF5 written by `wmsuite collect`, or a public Robomimic/LIBERO file)."""
    out: str = "runs/flow-pushcube"
    """Run directory (out/latest/ is the EMA policy to evaluate)."""
    max_episodes: int | None = None
    """Train on the first N episodes only (data-size ablations); None: all."""
    only_successes: bool = True
    """Drop failed episodes from the training data."""
    device: str = "cpu"
    """Torch device ('cpu', 'cuda')."""
    threads: int = 2
    """torch.set_num_threads on CPU (keep small on shared machines)."""
    seed: int = 0
    """Seed of initialisation, batch order and noise."""
    resume: bool = False
    """Go on with the run in --out from its train state (one killed before its first save starts over)."""
    force_new: bool = False
    """Start over when --out holds another run (it is moved aside, not deleted)."""
    drop_bad: bool = False
    """Skip episodes with non-finite or malformed values (counted) instead of refusing the data."""
    wandb: bool = False
    """Also log to wandb (offline unless configured)."""
    rollouts: tuple[str, ...] = ()
    """Episode files of the policy's own rollouts, failures included, with their intervention masks
    (`wmsuite collect --intervene`); they are learned from by --method."""
    method: str = "bc"
    """With --rollouts: 'bc' (demonstrations, interventions and successes, weight 1: the control),
    'afil' (plus a failure head that sampling steers away from), 'habc' (advantage-weighted by two
    critics and a gate), 'both', or 'autoguide' (afil's control: the second head learns the successes)
    (wmsuite/policies/improve.py)."""
    init: str = ""
    """A trained policy (checkpoint, run directory or assets: spec) to start from: its weights,
    statistics and --policy settings; heads the method adds start fresh."""
    critic_warmup: int = 200
    """HABC: steps the critics learn before their weights act (bc's weights until then)."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """The policy (the library's PolicyConfig)."""
    train: TrainerConfig = field(default_factory=lambda: replace(POLICY_TRAINER))
    """The trainer's settings."""

    def __post_init__(self) -> None:
        if self.max_episodes is not None and self.max_episodes < 1:
            raise ValueError(f"max_episodes must be >= 1 or None, got {self.max_episodes}")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.critic_warmup < 0:
            raise ValueError(f"critic_warmup must be >= 0, got {self.critic_warmup}")


CONFIG = TrainPolicyConfig


def run(cfg: TrainPolicyConfig) -> int:
    from wmsuite.policies.train import train_policy
    from wmsuite.train import Trainer

    torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)
    dist.init(cfg.device)  # a torchrun / accelerate launch: join its process group
    for path in (cfg.data, *cfg.rollouts):
        if not Path(path).exists():
            raise FileNotFoundError(f"{path} does not exist; record episodes with `wmsuite collect`")
    init = None
    if cfg.init:
        from wmsuite.policies import load_policy

        init = load_policy(cfg.init, device=cfg.device)
    identity = {"data": file_digest(cfg.data), "seed": cfg.seed, "max_episodes": cfg.max_episodes,
                "only_successes": cfg.only_successes, "drop_bad": cfg.drop_bad, "policy": to_dict(cfg.policy),
                "train": {k: v for k, v in to_dict(cfg.train).items() if k not in RESUMABLE}}
    if cfg.rollouts or init is not None:
        identity.update(rollouts=[file_digest(p) for p in cfg.rollouts], method=cfg.method, critic_warmup=cfg.critic_warmup,
                        init=spec_fingerprint(cfg.init) if init is not None else {})
    record = dist.on_main(open_run, cfg.out, "train-policy", identity, force_new=cfg.force_new, adopt=cfg.resume)
    state = Path(cfg.out) / "train_state" / "policy"
    if record["resumed"] and is_checkpoint(state) and not cfg.resume:
        raise FileExistsError(f"{cfg.out} already holds this training run; pass --resume to go on with it, "
                              "--force-new to start over, or choose another --out")
    t0 = time.perf_counter()
    episodes = load_episodes(cfg.data, drop_bad=cfg.drop_bad)
    total = len(episodes)
    if cfg.only_successes:
        episodes = [ep for ep in episodes if ep.success]
    if cfg.max_episodes is not None:
        episodes = episodes[: cfg.max_episodes]
    if not episodes:
        raise ValueError(f"{cfg.data}: no episodes left to train on ({total} read, only_successes={cfg.only_successes})")
    rollouts = [ep for path in cfg.rollouts for ep in load_episodes(path, drop_bad=cfg.drop_bad)]
    print(f"training {cfg.policy.kind} on {len(episodes)} of {total} episodes "
          f"({sum(ep.length for ep in episodes)} steps) read in {time.perf_counter() - t0:.1f}s"
          + (f", and {len(rollouts)} rollouts ({sum(ep.success for ep in rollouts)} successes, "
             f"{sum(int(ep.intervention.sum()) for ep in rollouts)} expert actions) by {cfg.method}"
             if cfg.rollouts or init is not None else ""))
    log = RunLogger(cfg.out, config={**to_dict(cfg), "train_episodes": len(episodes)}, use_wandb=cfg.wandb)
    try:
        trainer = Trainer(cfg.out, device=cfg.device, seed=cfg.seed, logger=log)
        resume = cfg.resume and is_checkpoint(state)
        if cfg.rollouts or init is not None:
            from wmsuite.policies.improve import train_improved

            result = train_improved(trainer, episodes, rollouts, cfg.policy, cfg.train, cfg.method, init,
                                    cfg.critic_warmup, resume=resume)
        else:
            result = train_policy(trainer, episodes, cfg.policy, cfg.train, resume=resume)
    finally:
        log.close()
    print(f"trained to step {result.steps} in {result.seconds:.1f}s (loss {result.logs.get('loss', float('nan')):.4f}); "
          f"policy: {cfg.out}/latest")
    return 0

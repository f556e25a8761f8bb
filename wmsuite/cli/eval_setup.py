"""What a `wmsuite eval` run is built from: its labelled policies, its world models (the simulator
and, for the round trip, an optional backward copy), the factories that make policies and envs in
this process and in the real simulator's worker, and the calibrated trust score.

The factories are plain picklable objects: the real simulator's worker process (eval_harness/
workers.py) rebuilds policies and real envs from them exactly as this process does.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from wmsuite.cli.common import memory_geometry, resolve_policy
from wmsuite.eval_harness.abstention import CalibratedTrust
from wmsuite.eval_harness.evaluate import PolicyEntry
from wmsuite.rollout import make_vector_env
from wmsuite.specs import CALIBRATION, check_trust, is_code_spec, resolve_asset, trust_code

if TYPE_CHECKING:
    from wmsuite.cli.eval import EvalConfig

_LABEL = re.compile(r"^([A-Za-z0-9._@+-]+)=(.+)$", re.S)


def policy_entries(cfg: EvalConfig) -> tuple[list[PolicyEntry], set[str], int]:
    """The labelled policies to evaluate, the specs among them that are the user's own (typed on
    the command line) and the seed of episode 0, after the trust check of every spec (nothing is
    imported here)."""
    seed = cfg.seed
    if cfg.policies:
        if cfg.split != "all":
            raise ValueError("--split picks policies from a zoo manifest; it does not apply to --policies")
        entries = [_labelled(s) for s in cfg.policies]
        trusted, source = {e.spec for e in entries}, "--policies"
    else:
        path = resolve_asset(cfg.zoo)
        if not path.is_file():
            raise FileNotFoundError(f"no zoo manifest at {path}; build one with `wmsuite zoo` or pass --policies")
        try:
            manifest = json.loads(path.read_text())
            entries = [PolicyEntry(name=str(p["name"]), spec=str(p["spec"]), family=str(p.get("family", "")),
                                   split=str(p.get("split", ""))) for p in manifest.get("policies", [])]
            splits = manifest.get("splits", {})
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"{path} is not a zoo manifest ({{'policies': [{{'name', 'spec'}}, ...]}}): {err}") from err
        if cfg.split != "all":
            if cfg.split not in splits:
                raise ValueError(f"{path} defines no {cfg.split!r} split (it has: {', '.join(splits) or 'none'}); "
                                 "use --split all")
            entries = [e for e in entries if e.split == cfg.split]
            if seed is None:
                seed = int(splits[cfg.split].get("seed", 0))
        if len(entries) < 2:
            raise ValueError(f"{path} lists {len(entries)} policies; comparing simulators needs at least 2")
        trusted, source = set(), str(path)
    seen: dict[str, str] = {}
    entries = unique_labels(entries)
    for e in entries:
        if e.name in seen:
            raise ValueError(f"the label {e.name!r} names two policies ({seen[e.name]!r} and {e.spec!r}); give "
                             "each a unique label with 'label=spec'")
        seen[e.name] = e.spec
        with trust_code(cfg.trust_code):
            check_trust(e.spec, trusted=e.spec in trusted, source=source)
    return entries, trusted, 0 if seed is None else seed


def _labelled(text: str) -> PolicyEntry:
    """'label=spec' as given, else a label derived from the spec (see the module docstring)."""
    m = _LABEL.match(text)
    if m and not Path(text).exists():
        return PolicyEntry(name=m.group(1), spec=m.group(2))
    return PolicyEntry(name="", spec=text)


def unique_labels(entries: list[PolicyEntry]) -> list[PolicyEntry]:
    """Fill in derived labels: a spec's attribute or last path part, or the whole spec (spaces
    dropped) for the specs whose short labels would collide with another's."""
    def short(spec: str) -> str:
        if is_code_spec(spec):
            return spec.split(":", 1)[1].split("{", 1)[0]
        return Path(spec.removeprefix("assets:")).name or spec

    derived = [e.name or short(e.spec) for e in entries]
    out = []
    for e, label in zip(entries, derived, strict=True):
        if not e.name and derived.count(label) > 1:
            label = re.sub(r"\s+", "", e.spec)
        out.append(PolicyEntry(name=label, spec=e.spec, family=e.family, split=e.split))
    return out


@dataclass(frozen=True)
class PolicyFactory:
    """(spec, seed) -> a fresh policy; a plain picklable object, so that the real-simulator worker
    process (eval_harness/evaluate.py) rebuilds policies exactly as this process does."""

    cfg: EvalConfig
    horizon: int
    trusted: frozenset[str] = frozenset()

    def __call__(self, spec: str, seed: int):
        return resolve_policy(spec, env_id=self.cfg.env, seed=seed, device=self.cfg.device, horizon=self.horizon,
                              trusted=spec in self.trusted, trust_code=self.cfg.trust_code)


def make_policy_factory(cfg: EvalConfig, horizon: int, trusted: set[str] = frozenset()) -> PolicyFactory:
    return PolicyFactory(cfg, horizon, frozenset(trusted))


def load_model(cfg: EvalConfig):
    """The world model, loaded once: its chunk sets both simulators' control protocol, and every
    learned-simulator env of the run (evaluation and videos) shares it."""
    from wmsuite.world_models import load_world_model

    model = load_world_model(resolve_asset(cfg.wm), device=cfg.device, sampling_steps=cfg.sampling_steps or None,
                             precision=cfg.precision or None)
    if cfg.compile:
        model.compile_inference()
    return model


def task_probe(env_id: str):
    """The task probe of `env_id` (also in Gymnasium's 'package.module:Ns/Name-v0' form), or None:
    a user's own env has none, and only the features that need one ask for it."""
    from wmsuite.envs import PROBES

    return PROBES.get(env_id.rpartition(":")[2])


def _holds_static(env_id: str) -> bool:
    """Whether --hold-static changes anything for `env_id` (its probe names a fixed state)."""
    probe = task_probe(env_id)
    return probe is not None and probe.static_state is not None


def resolve_judge(cfg: EvalConfig) -> str:
    """--judge with 'auto' replaced by the judge it stands for on `cfg.env` (see the field)."""
    if cfg.judge != "auto":
        return cfg.judge
    probe = task_probe(cfg.env)
    return probe.auto_judge if probe is not None else "head"


def load_round_trip_model(cfg: EvalConfig, model):
    """The model that plays imagined episodes back for --round-trip: --round-trip-wm loaded like
    --wm and checked against it (world_models/trust.py: check_backward_model), or None when --wm plays
    its own episodes back, which it can only if it was trained with backward windows. Fails before
    any rollout."""
    from wmsuite.world_models import load_world_model
    from wmsuite.world_models.trust import check_backward_model

    if not cfg.round_trip:
        return None
    back = None
    if cfg.round_trip_wm:
        back = load_world_model(resolve_asset(cfg.round_trip_wm), device=cfg.device,
                                sampling_steps=cfg.sampling_steps or None, precision=cfg.precision or None)
    try:
        check_backward_model(model, back)
    except ValueError as err:
        raise ValueError(f"--round-trip with --wm {cfg.wm}: {err} (the round-trip model is "
                         "--round-trip-wm)") from None
    return back


def env_kwargs(cfg: EvalConfig, model) -> dict:
    """The keywords both simulators make `cfg.env` with, so that the real env renders the frames the
    world model generates: `image_size` (--image-size, else the model's side) where the env's
    constructor takes it, nothing where it does not. One real env is made to check its frames; a
    mismatch fails here, before any rollout, with what to change."""
    import gymnasium as gym

    import wmsuite.envs  # noqa: F401  (registers wmsuite's ids)
    from wmsuite.rollout.engine import checked_env_id
    from wmsuite.world_models.config import camera_names

    size, camera = model.codec_cfg.image_size, model.cfg.camera
    if cfg.image_size and cfg.image_size != size:
        raise ValueError(f"--image-size {cfg.image_size}, but the world model {cfg.wm} generates {size}x{size} "
                         f"frames: leave --image-size out, or evaluate a world model trained at {cfg.image_size}")
    full_id, kwargs = checked_env_id(cfg.env), {"image_size": size}
    try:
        env = gym.make(full_id, **kwargs)
    except TypeError as err:  # a user's env with no image_size keyword renders what it renders
        if cfg.image_size:
            raise ValueError(f"--image-size: {cfg.env} takes no image_size keyword ({err})") from None
        env, kwargs = gym.make(full_id), {}
    try:
        space = getattr(env.observation_space, "spaces", {})
        pixels = dict(getattr(space.get("pixels"), "spaces", {}))  # camera -> Box (H, W, 3)
        for cam in camera_names(camera):
            if cam not in pixels:
                raise ValueError(f"the world model {cfg.wm} generates camera {cam!r}, which {cfg.env} does not "
                                 f"render (its cameras: {', '.join(pixels) or 'none'})")
            shape = pixels[cam].shape  # (H, W, 3)
            if shape[:2] != (size, size):
                raise ValueError(f"{cfg.env} renders {shape[0]}x{shape[1]} frames on {cam!r}, and the world model "
                                 f"{cfg.wm} generates {size}x{size}: make the env render {size}x{size}, or evaluate "
                                 "a world model trained on its frames")
    finally:
        env.close()
    return kwargs


def make_env_factory(cfg: EvalConfig, model, round_trip_model=None, novelty=None) -> EnvFactory:
    """sim ('real' | 'wm') -> a fresh VectorEnv of `cfg.num_envs` sub-envs; 'wm' wraps `model` (and
    `round_trip_model`, see `load_round_trip_model`; `novelty`, the trust score's bank, scores each
    real start frame). Bad judge settings and frames the world model cannot take (`env_kwargs`) fail
    here, before any rollout."""
    probe, judge = task_probe(cfg.env), resolve_judge(cfg)
    if probe is None and judge != "head":
        raise ValueError(f"--judge {judge} needs the task's success rule, and {cfg.env} has no task probe; "
                         "use --judge head")
    if judge in ("tracked", "latched") and (probe is None or probe.reach is None):
        raise ValueError(f"--judge {judge} needs the task probe's reach, and {cfg.env}'s probe defines none; "
                         "use --judge state")
    if judge == "latched" and probe.grasp_action is None:
        raise ValueError(f"--judge latched needs a gripper command to latch grasps on, and {cfg.env}'s probe "
                         "names none (grasp_action); use --judge tracked")
    if model.cfg.memory_frames:  # a model with memory on a task without a moving camera: refused before any episode
        memory_geometry(cfg.env, model.cfg.camera, model.cfg.start_map)
    return EnvFactory(replace(cfg, judge=judge), model, round_trip_model, env_kwargs(cfg, model), novelty)


class EnvFactory:
    """See `make_env_factory`. Picklable for the real-simulator worker process: pickled without the
    world models, which that worker never builds (it asks for 'real' only)."""

    def __init__(self, cfg: EvalConfig, model, round_trip_model=None, env_kwargs: dict | None = None,
                 novelty=None) -> None:
        self.cfg, self.model, self.round_trip_model, self.novelty = cfg, model, round_trip_model, novelty
        self.env_kwargs = dict(env_kwargs or {})

    def __getstate__(self) -> dict:
        return {"cfg": self.cfg, "model": None, "round_trip_model": None, "env_kwargs": self.env_kwargs,
                "novelty": None}

    def __call__(self, sim: str):
        # importing wmsuite.envs registers the ids the learned simulator takes its horizon and resets from
        import wmsuite.envs  # noqa: F401
        from wmsuite.world_models import ObjectTracking, make_world_model_env

        cfg = self.cfg
        if sim == "real":
            return make_vector_env(cfg.env, cfg.num_envs, asynchronous=False, env_kwargs=self.env_kwargs,
                                   backend=cfg.sim_backend())
        if self.model is None:
            raise RuntimeError("this env factory was pickled without its world model; it makes real envs only")
        probe = task_probe(cfg.env)
        tracking = None
        if probe is not None and probe.reach is not None:
            tracking = ObjectTracking.from_probe(probe)
        return make_world_model_env(self.model, cfg.env, cfg.num_envs, device=cfg.device,
                                    sampling_steps=cfg.sampling_steps or None, seed=cfg.seed, judge=cfg.judge,
                                    success_fn=probe.success_from_env_state if probe is not None else None,
                                    tracking=tracking,
                                    static_state=probe.static_state if probe is not None and cfg.hold_static
                                    else None, round_trip=cfg.round_trip, idm_stop=cfg.idm_stop or None,
                                    start_reading=probe.object_xy if probe is not None and cfg.round_trip else None,
                                    round_trip_model=self.round_trip_model, env_kwargs=self.env_kwargs,
                                    novelty=self.novelty, noise_seed=cfg.noise_seed,
                                    memory_geometry=memory_geometry(cfg.env, self.model.cfg.camera,
                                                                    self.model.cfg.start_map)
                                    if self.model.cfg.memory_frames else None,
                                    # a camera riding on the agent cannot show where it is: dead-reckon it
                                    agent_advance=probe.moving_camera_advance if probe is not None
                                    and probe.moving_camera == self.model.cfg.camera else None)


def calibrated_trust(cfg: EvalConfig, chunk: int, wm_digest: str) -> CalibratedTrust | None:
    """The trust score of --calibration (default: the file beside --round-trip-wm, else beside --wm),
    or None with a note when the default file is absent; an explicit file that is missing or bad, or
    one fitted on another simulator than --wm (whose digest is `wm_digest`), fails here."""
    from wmsuite.world_models import resolve_checkpoint

    beside = resolve_checkpoint(resolve_asset(cfg.round_trip_wm or cfg.wm))
    path = Path(cfg.calibration) if cfg.calibration else beside / CALIBRATION
    if not path.exists():
        if cfg.calibration:
            raise FileNotFoundError(f"--calibration {path} does not exist; write one with "
                                    "experiments/scripts/trust_study.py")
        print(f"note: {path} does not exist: round-trip errors are recorded, but no trust score (pass --calibration)")
        return None
    return CalibratedTrust.load(path, chunk, simulator=wm_digest)



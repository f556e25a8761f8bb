"""The real simulator's own agreement with an episode's outcome, from starts a frame cannot tell apart.

`eval-wm`'s success_agreement rolls a world model from an episode's first frame with the episode's
recorded actions and asks whether the task succeeds at the episode's last step. Here the real
simulator answers the same question from nudged starts: the episode's first simulator state with the
object shifted and turned by every step of a small grid (the task probe's `perturb_start`), keeping
only the nudges whose rendered first frame is bit-identical to the episode's own. Replaying the recorded actions open-loop from each of
them gives p, the share of frame-identical starts (the episode's own included) that succeed.

A model that sees the frame and the actions gets the same input from all of them, so over the
episode and its frame-identical replays it agrees with the real outcome on at most max(p, 1 - p):

    success_agreement_ceiling   mean over episodes of max(p, 1 - p)
    success_agreement_sampler   mean of p^2 + (1 - p)^2: the agreement over those replays of a perfect
                                simulator started from a random one of the frame-identical starts
    success_agreement_replays   a model's agreement over those replays: p where it predicts success,
                                1 - p where it predicts failure (computed in fidelity.py)
    replay_flip_rate_*          share of frame-identical replays whose outcome differs from the episode's
    replay_end_shift_median     median distance (m) between where a frame-identical replay leaves the
                                object and where the episode's own replay does (the probe's object_xy
                                of environment_state)

On the episodes alone, the figures to hold eval-wm's success_agreement against:

    success_agreement_sampler_episodes
        mean of p over the successes and of 1 - p over the failures: a perfect simulator started from
        a random one of the frame-identical starts
    success_agreement_mode_episodes
        share of episodes whose outcome is the one most of their frame-identical starts give (a tie
        counts a half): a perfect simulator that always answers with the frame's likelier outcome

The episode's own start is not a random one of its frame-identical starts: its actions were chosen
by a closed-loop policy for that exact state, and the episode ended the step it succeeded. So on the
episodes alone a model can score above both simulators by guessing that recorded pushes succeed,
which is not simulating. The ceiling is of the physics, not of the file.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple

import mujoco
import numpy as np
from tqdm.auto import tqdm

from wmsuite.envs.probes import TaskProbe
from wmsuite.types import Episode


def nudge_grid(shifts_mm: Sequence[float], turns_deg: Sequence[float]) -> list[tuple[float, float, float]]:
    """Every (dx m, dy m, dyaw rad) with dx, dy from `shifts_mm` and dyaw from `turns_deg`, but no nudge at all."""
    return [(dx / 1000, dy / 1000, float(np.radians(t))) for dx, dy, t in
            itertools.product(shifts_mm, shifts_mm, turns_deg) if (dx, dy, t) != (0, 0, 0)]


class Replay(NamedTuple):
    same: bool
    """The nudged start renders a first frame bit-identical to the episode's."""
    success: bool
    """Success at the episode's last step (False where not `same`: such starts are not replayed)."""
    env_state: np.ndarray | None
    """(E,) environment_state after the last action (None where not `same`)."""


def place_nudged(env: Any, sim_state: np.ndarray, nudge: tuple[float, float, float], probe: TaskProbe) -> None:
    """Restore `sim_state` in `env` (an unwrapped built-in task env) with the object nudged by
    (dx m, dy m, dyaw rad) through the probe's `perturb_start`, ready to render."""
    perturb = _perturbation(probe)
    env.set_sim_state(sim_state)
    perturb(env, nudge)
    mujoco.mj_forward(env.model, env.data)


def replay(env: Any, episode: Episode, nudge: tuple[float, float, float], probe: TaskProbe,
           camera: str | None = None) -> Replay:
    """One nudged start of `episode` in `env` (an unwrapped built-in task env: set_sim_state,
    render_camera), replayed with the episode's actions if its `camera` frame (default: the probe's)
    is the episode's."""
    first = episode.obs[camera or probe.camera][0]
    place_nudged(env, episode.sim_states[0], nudge, probe)
    same = bool(np.array_equal(env.render_camera(camera or probe.camera, first.shape[0]), first))
    if not same:  # not a start the model could mistake for the episode's: no need to replay it
        return Replay(False, False, None)
    for action in episode.actions:
        obs, _, _, _, info = env.step(action)
    return Replay(True, bool(info["is_success"]), obs["environment_state"])


def frame_identical_outcomes(env: Any, episodes: Sequence[Episode], nudges: Sequence[tuple[float, float, float]],
                             probe: TaskProbe, camera: str | None = None) -> dict[str, Any]:
    """Per episode, the outcomes of its frame-identical replays (see the module docstring).

    Returns replay_p_success (N,) floats, replay_identical_starts (N,) ints, success_agreement_ceiling,
    success_agreement_sampler, success_agreement_sampler_episodes, success_agreement_mode_episodes,
    replay_flip_rate_successes / _failures and replay_end_shift_median (None where no such replay
    exists), replay_nudges.
    `env` must be the episodes' task (`probe.env_id`), unwrapped, built without cameras in its
    observations (cameras=()) and reset once; every episode must carry sim_states (`wmsuite collect`
    records them). `camera`: the frames compared (the world model's; default the probe's camera).
    """
    _perturbation(probe)
    spec = getattr(env, "spec", None)
    if spec is not None and spec.id != probe.env_id:
        raise ValueError(f"the replay env is {spec.id} but the probe describes {probe.env_id}")
    for i, ep in enumerate(episodes):
        if ep.sim_states.shape[1] == 0 or ep.length == 0:
            raise ValueError(f"episode {i} has no simulator states or no actions; record episodes with "
                             "`wmsuite collect` to replay them")
    p, counts, flips, shifts = [], [], {True: [], False: []}, []
    for ep in tqdm(episodes, desc="replays", unit="ep", leave=False):
        own = replay(env, ep, (0.0, 0.0, 0.0), probe, camera)
        if not own.same or own.success != ep.success:
            raise RuntimeError("replaying an episode from its own start did not give back its first frame and "
                               "outcome: it was recorded with another scene, camera or simulator version")
        replays = [r for r in (replay(env, ep, n, probe, camera) for n in nudges) if r.same]
        outcomes = [r.success for r in replays]
        flips[ep.success].extend(s != ep.success for s in outcomes)
        own_xy = probe.object_xy_from_env_state(own.env_state)
        shifts.extend(float(np.linalg.norm(probe.object_xy_from_env_state(r.env_state) - own_xy)) for r in replays)
        p.append((ep.success + sum(outcomes)) / (1 + len(outcomes)))
        counts.append(len(outcomes))
    p_arr = np.asarray(p)
    return {
        "replay_p_success": p_arr, "replay_identical_starts": np.asarray(counts),
        **agreement_bounds(p_arr, np.array([ep.success for ep in episodes])),
        "replay_flip_rate_successes": float(np.mean(flips[True])) if flips[True] else None,
        "replay_flip_rate_failures": float(np.mean(flips[False])) if flips[False] else None,
        "replay_nudges": len(nudges),
        "replay_end_shift_median": float(np.median(shifts)) if shifts else None,
    }


def agreement_bounds(p: np.ndarray, success: np.ndarray) -> dict[str, float]:
    """success_agreement_ceiling, _sampler, _sampler_episodes and _mode_episodes (module docstring) from
    p (N,), each episode's share of frame-identical starts that succeed, and its real outcome (N,) bool."""
    p_real = np.where(success, p, 1 - p)  # share of the frame-identical starts with the episode's outcome
    return {
        "success_agreement_ceiling": float(np.mean(np.maximum(p, 1 - p))),
        "success_agreement_sampler": float(np.mean(p**2 + (1 - p) ** 2)),
        "success_agreement_sampler_episodes": float(np.mean(p_real)),
        "success_agreement_mode_episodes": float(np.mean(np.where(p_real == 0.5, 0.5, p_real > 0.5))),
    }


def _perturbation(probe: TaskProbe) -> Any:
    """The probe's `perturb_start`, or a ValueError saying that this task cannot be replayed from nudged starts."""
    if probe.perturb_start is None:
        raise ValueError(f"{probe.env_id}'s task probe defines no start perturbation (perturb_start), so its "
                         "episodes cannot be replayed from nudged starts; run eval-wm without --replays, or add a "
                         "perturb_start to its probe in wmsuite/envs/probes.py")
    return probe.perturb_start

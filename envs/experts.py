"""Scripted experts for the built-in tasks, with a `skill` knob spanning ~0% to ~100% success.

    expert = make_expert("wmsuite/PushCube-v0", skill=0.5, seed=0)
    chunk = expert.predict_action_chunk(obs_batch)  # (B, 1, A) float32
    # on the command line: wmsuite.envs.experts:make_expert{"env_id": "wmsuite/PushCube-v0", "skill": 0.5}

Experts follow the Policy contract of wmsuite/policy.py and act from the batched privileged
observation (`agent_pos`, `environment_state`), never from pixels. Each environment row of the batch
has its own memory: a phase, counters and a *personality* drawn when its episode starts from a
per-episode generator (spawned from `seed`, so a run is reproducible). `reset_envs(indices)` starts
new episodes for those rows; `reset()` forgets every row (the seed stream continues, so the next
batch of episodes gets fresh personalities). `reset_envs(indices, episodes=...)` (the rollout engine's
`episode_rng`) names each new episode's index k, whose generator is then the k-th child of `seed`
whatever ran before: what an uninterrupted run draws, and a resumed one too.

How skill acts. With probability `skill` an episode is *competent*; otherwise it gets one failure mode,
drawn uniformly from the task's list. Failure modes are systematic mistakes that a competent expert's
retry logic repeats rather than fixes, so they fail for qualitatively different reasons:
    PushCube:  wrong_side (approaches from the goal side and pushes the cube away), freeze (stops
               moving for good after a few steps), early_stop (believes the cube arrived when 9-13 cm short)
               and, only when asked for with `failure_modes` (world-model data that the default
               modes lack): hover (goes round to the cube but stands off 1-5 cm short of touching it,
               drifting about at that distance: the agent near the object, the object still) and poke
               (strokes through the cube from random sides, head-on to grazing, at random speeds:
               contact at every angle, where the experts push head-on along the goal line)
    PushTwoCubes: PushCube's, and one_cube (believes the task done once the first cube is in)
    PushCubeEgo: goes to look at the goal first, then PushCube's; and misremember (pushes the cube to
               a point 15-25 cm off the goal)
    PushColors: PushCube's on the named cube and goal, and wrong_cube (pushes another cube into the goal)
    PickPlace: misaligned (lines the fingers up 5-7 cm beside the cube), early_close (misjudges the
               grasp height and closes 5-7 cm too high), late_close (starts lifting before closing),
               early_release (opens the gripper while lifting, 4-10 cm up, dropping the cube), freeze
On top of that every episode, competent or not, gets Gaussian action noise of std
`NOISE * (1 - skill)` and hesitates (holds still for 2-5 steps) with per-step probability
`HESITATE * (1 - skill)`. Skill 1 is noise-free and competent; skill 0 always has a failure mode. `failure_modes` picks which
modes are drawn (default: the task's `FAILURE_MODES`; `EXTRA_MODES` are only drawn when named there).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from wmsuite.envs import make_env
from wmsuite.envs.expert_base import ScriptedExpert
from wmsuite.envs.pick_place import ACTION_SCALE as PP_SCALE
from wmsuite.envs.pick_place import CUBE_HALF as PP_CUBE_HALF
from wmsuite.envs.pick_place import is_success_from_env_state as pick_place_success
from wmsuite.envs.push_experts import PushColorsExpert, PushCubeEgoExpert, PushCubeExpert, PushTwoCubesExpert


class PickPlaceExpert(ScriptedExpert):
    """Hover over the cube, descend, close, lift, carry over the target, lower, open; retry on a lost cube."""

    ENV_ID = "wmsuite/PickPlace-v0"
    AGENT_POS_DIM = 4
    ENV_STATE_DIM = 6
    ACTION_DIM = 4
    MOTION_DIM = 3
    MOTION_SCALE = PP_SCALE
    FAILURE_MODES = ("misaligned", "early_close", "late_close", "early_release", "freeze")
    NOISE = 0.3
    Z_HOVER = 0.1  # m, fingertip height when lining up over the cube
    Z_CARRY = 0.12  # m, fingertip height while carrying
    GRASP_BELOW = 0.015  # m, fingertips this far below the cube's centre when grasping

    def _begin(self, mem: dict[str, Any], rng: np.random.Generator) -> None:
        mode = mem["mode"]
        mem.update(phase="reach", grip=-1.0, k=0)
        side = rng.choice([-1.0, 1.0])
        # misaligned: lines the fingers up this far beside the cube (across the closing direction).
        mem["offset"] = np.array([0.0, side * rng.uniform(0.05, 0.07)]) if mode == "misaligned" else np.zeros(2)
        # early_close: misjudges the grasp height by this much and closes there, above the cube.
        mem["close_above"] = rng.uniform(0.05, 0.07) if mode == "early_close" else 0.0
        # early_release: opens the gripper once the fingertips are this high during the lift.
        mem["release_at"] = rng.uniform(0.04, 0.1) if mode == "early_release" else np.inf

    def _hold(self, mem: dict[str, Any]) -> np.ndarray:
        return np.array([0.0, 0.0, 0.0, mem["grip"]])

    @staticmethod
    def _held(hand: np.ndarray, cube: np.ndarray) -> bool:
        """Is the cube between the fingers (its centre no lower than 1 cm under the fingertips, within 3 cm across)?"""
        return bool(cube[2] - hand[2] > -0.01 and np.linalg.norm(cube[:2] - hand[:2]) < 0.03)

    def _carry(self, agent_pos: np.ndarray, env_state: np.ndarray, move: np.ndarray, mem: dict[str, Any]) -> np.ndarray:
        """A cube held in closed fingers moves with the hand, down to the table and no further."""
        if mem["grip"] <= 0 or not self._held(agent_pos[:3], env_state[:3]):
            return env_state
        out = env_state.copy()
        out[:3] += move
        out[2] = max(out[2], PP_CUBE_HALF)
        return out

    def _act(self, agent_pos: np.ndarray, env_state: np.ndarray, mem: dict[str, Any]) -> np.ndarray:
        hand, opening, cube, target = agent_pos[:3], agent_pos[3], env_state[:3], env_state[3:6]
        phase, mode = mem["phase"], mem["mode"]
        held = self._held(hand, cube)
        z_grasp = cube[2] - self.GRASP_BELOW
        goal = hand.copy()
        if phase in ("lift", "carry", "lower") and not held:  # the cube is not in the hand: start over
            phase, mem["grip"] = "reach", -1.0
        if phase == "retreat" and not pick_place_success(env_state) and cube[2] < PP_CUBE_HALF + 0.005:
            phase = "reach"
        if phase == "reach":
            mem["grip"] = -1.0
            goal = np.array([*(cube[:2] + mem["offset"]), max(self.Z_HOVER, z_grasp + 0.05)])
            if np.linalg.norm(hand[:2] - goal[:2]) < 0.01 and opening > 0.07:
                phase = "descend"
        if phase == "descend":
            goal = np.array([*(cube[:2] + mem["offset"]), z_grasp + mem["close_above"]])
            if hand[2] - goal[2] < 0.006:
                phase, mem["k"] = "close", 0
        if phase == "close":
            mem["k"] += 1
            late = mode == "late_close" and mem["k"] <= 2
            mem["grip"] = -1.0 if late else 1.0
            goal = hand + [0.0, 0.0, PP_SCALE] if late else np.array([*hand[:2], hand[2]])
            if mem["k"] >= 5 or (mem["k"] >= 3 and opening < 0.06):
                phase = "lift"
        if phase == "lift":
            goal = np.array([*hand[:2], self.Z_CARRY])
            if hand[2] > mem["release_at"]:
                phase, mem["grip"], mem["k"] = "release", -1.0, 0
            elif hand[2] > self.Z_CARRY - 0.015:
                phase = "carry"
        if phase == "carry":
            offset = cube[:2] - hand[:2]  # where the cube sits in the hand
            goal = np.array([*(target[:2] - offset), self.Z_CARRY])
            if np.linalg.norm(cube[:2] - target[:2]) < 0.008:
                phase = "lower"
        if phase == "lower":
            offset = cube[:2] - hand[:2]
            goal = np.array([*(target[:2] - offset), hand[2] - (cube[2] - PP_CUBE_HALF) - 0.002])
            if cube[2] < PP_CUBE_HALF + 0.003:
                phase, mem["k"] = "release", 0
        if phase == "release":
            mem["grip"], mem["k"] = -1.0, mem["k"] + 1
            goal = hand.copy()
            if mem["k"] >= 2:
                phase = "retreat"
        if phase == "retreat":
            goal = np.array([*hand[:2], self.Z_HOVER])
        mem["phase"] = phase
        move = np.clip((goal - hand) / PP_SCALE, -1.0, 1.0)
        return np.array([*move, mem["grip"]])


# env id -> expert class: the one registry of experts; tests sweep it.
EXPERTS: dict[str, type[ScriptedExpert]] = {cls.ENV_ID: cls for cls in (PushCubeExpert, PickPlaceExpert,
                                                                        PushTwoCubesExpert, PushCubeEgoExpert,
                                                                        PushColorsExpert)}


def make_expert(env_id: str, skill: float = 1.0, seed: int = 0, horizon: int = 1, bias: float = 0.0,
                failure_modes: Iterable[str] | None = None) -> ScriptedExpert:
    """The scripted expert of a built-in task (a CLI policy spec: `wmsuite.envs.experts:make_expert{...}`)."""
    if env_id.startswith("wmsuite/robosuite-"):
        if bias or failure_modes is not None:
            raise ValueError("the robosuite experts act without bias, with their own failure modes")
        from wmsuite.envs.robosuite_experts import make_robosuite_expert

        return make_robosuite_expert(env_id, skill=skill, seed=seed, horizon=horizon)
    if env_id not in EXPERTS:
        raise ValueError(f"no scripted expert for {env_id!r}; experts exist for {', '.join(EXPERTS)} "
                         "and the robosuite Lift and Stack tasks")
    return EXPERTS[env_id](skill=skill, seed=seed, horizon=horizon, bias=bias, failure_modes=failure_modes)


def run_expert(env_id: str, skill: float, episodes: int, seed: int = 0, **env_kwargs: Any) -> list[dict[str, Any]]:
    """Run the expert for `episodes` episodes (env seeds seed, seed+1, ...) in one env.

    Returns one record per episode: {"success": bool, "length": int, "mode": str}. Pixels are not
    needed by the expert, so `cameras=()` is the default here.
    """
    env_kwargs.setdefault("cameras", ())
    env = make_env(env_id, **env_kwargs)
    expert = make_expert(env_id, skill=skill, seed=seed)
    records = []
    try:
        for ep in range(episodes):
            obs, info = env.reset(seed=seed + ep)
            expert.reset()
            success, length, done = bool(info["is_success"]), 0, False
            while not done:
                batch = {k: v[None] for k, v in obs.items() if k != "pixels"}
                action = expert.select_action(batch)[0]
                mode = expert.modes()[0]
                obs, _, terminated, truncated, info = env.step(action)
                success, length, done = bool(info["is_success"]), length + 1, terminated or truncated
            records.append({"success": success, "length": length, "mode": mode})
    finally:
        env.close()
    return records


def _main() -> None:
    """`python -m wmsuite.envs.experts [episodes]`: success rate per skill and failure mode, every task."""
    import sys
    from collections import Counter

    episodes = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    print(f"| task | skill | success ({episodes} episodes) | successes / episodes per mode |")
    print("|---|---|---|---|")
    for env_id in EXPERTS:
        for skill in (0.0, 0.25, 0.5, 0.75, 1.0):
            records = run_expert(env_id, skill, episodes, seed=0)
            wins, counts = Counter(r["mode"] for r in records if r["success"]), Counter(r["mode"] for r in records)
            modes = ", ".join(f"{m} {wins[m]}/{n}" for m, n in sorted(counts.items()))
            rate = sum(r["success"] for r in records) / episodes
            print(f"| {env_id} | {skill:.2f} | {rate:.2f} | {modes} |")


if __name__ == "__main__":
    _main()

"""Does the latched judge's rule keep real Lift outcomes when the policy's gripper command is noisy?

Plays the skill-1 robosuite expert behind ActionNoise (every action entry, the gripper's included, as
the zoo's noise wrappers do) in the real simulator, and applies the latched and tracked rules
(world_models/tracking.py) to each episode's true states and actions. Prints, per noise level, the real
successes and how many of them each rule keeps, and the real failures each rule calls a success;
writes them to --out DIR/metrics.json. Seeds 990,000.. (apart from the zoo's and the training data's).
With --finger-gap G it also scores a variant not in the judge yet: the latch held only while the
fingers read at least G m apart (a cube between them), emulated by treating the gripper command as
open on frames where they read closer.

    python experiments/scripts/latch_noise.py --stds 0.3 0.6 --episodes 10 --out runs/latch-noise
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import gymnasium as gym
import numpy as np

import wmsuite.envs  # noqa: F401  (registers the ids)
from wmsuite.envs.probes import get_probe
from wmsuite.policies.wrappers import ActionNoise
from wmsuite.world_models.tracking import ObjectTracker, ObjectTracking

ENV_ID = "wmsuite/robosuite-Lift-v0"


FINGERS = (7, 8)  # agent_pos entries of the two fingers' joint positions (robosuite_env.PROPRIO_KEYS)


def believed_success(probe, agent: np.ndarray, state: np.ndarray, actions: np.ndarray, latch: bool,
                     finger_gap: float = 0.0) -> bool:
    """The rule on one episode's true states (T+1, D), (T+1, E) and actions (T, A); with finger_gap > 0
    the gripper command counts as open on frames whose fingers read closer than that."""
    if finger_gap > 0:
        actions = actions.copy()
        gap = agent[1:, FINGERS[0]] - agent[1:, FINGERS[1]]  # (T,): frame t+1 follows action t
        actions[gap < finger_gap, probe.grasp_action] = -1.0
    tracker = ObjectTracker(ObjectTracking.from_probe(probe), 1, latch=latch)
    tracker.reset(np.zeros(1, int), state[:1])
    believed = tracker.update(agent[None, 1:], state[None, 1:], actions[None])[0]
    return bool(probe.success_from_env_state(believed).any())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stds", type=float, nargs="+", default=[0.3, 0.6])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--finger-gap", type=float, default=0.0, help="also score the latch held only while "
                        "the fingers read at least this many metres apart (0: not scored)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    probe = get_probe(ENV_ID)
    env = gym.make(ENV_ID, cameras=(), terminate_on_success=False)
    results = {}
    for std in args.stds:
        rules = {"latched": (True, 0.0), "tracked": (False, 0.0)}
        if args.finger_gap > 0:
            rules["fingers"] = (True, args.finger_gap)
        counts = {"real": 0, **{f"{r}_{k}": 0 for r in rules for k in ("kept", "false")}}
        for i in range(args.episodes):
            seed = 990_000 + int(std * 1000) + i
            np.random.seed(seed)  # noqa: NPY002  (ActionNoise draws from the global generator)
            spec = json.dumps({"env_id": ENV_ID, "skill": 1.0, "horizon": 4, "seed": seed})
            policy = ActionNoise(f"wmsuite.envs.experts:make_expert{spec}", std=std)
            policy.reset()
            obs, info = env.reset(seed=seed)
            agent, state, actions, success = [obs["agent_pos"]], [obs["environment_state"]], [], False
            for _ in range(env.spec.max_episode_steps // 4):
                chunk = policy.predict_action_chunk({k: v[None] for k, v in obs.items() if k != "pixels"})[0]
                for action in chunk:
                    obs, _, _, _, info = env.step(action)
                    actions.append(action), agent.append(obs["agent_pos"]), state.append(obs["environment_state"])
                    success |= bool(info["is_success"])
                if success:
                    break
            for name, (latch, gap) in rules.items():
                said = believed_success(probe, np.array(agent), np.array(state), np.array(actions), latch, gap)
                counts[f"{name}_kept"] += said and success
                counts[f"{name}_false"] += said and not success
            counts["real"] += success
        results[str(std)] = {**counts, "episodes": args.episodes}
        print(f"noise {std}: {counts['real']} of {args.episodes} real lifts; kept / false lifts: "
              + ", ".join(f"{r} {counts[r + '_kept']} / {counts[r + '_false']}" for r in rules))
    env.close()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

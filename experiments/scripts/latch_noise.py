"""Does the latched judge's rule keep real Lift outcomes when the policy's gripper command is noisy?

Plays the skill-1 robosuite expert behind ActionNoise (every action entry, the gripper's included, as
the zoo's noise wrappers do) in the real simulator, and applies the latched and tracked rules
(world_models/tracking.py) to each episode's true states and actions. Prints, per noise level, the real
successes and how many of them each rule keeps, and the real failures each rule calls a success;
writes them to --out DIR/metrics.json. Seeds 990,000.. (apart from the zoo's and the training data's).
The latched rule is scored as Lift's judge runs it and with the finger check ("latched-fingers": the
grasp held only while the fingers read robosuite_env.LIFT_HOLD_GAP apart), which Lift's probe does not
name (experiments/world_models_journal.md, session 24).

    python experiments/scripts/latch_noise.py --stds 0.3 0.6 --episodes 20 --out runs/latch-noise
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import numpy as np

import wmsuite.envs  # noqa: F401  (registers the ids)
from wmsuite.envs import robosuite_env
from wmsuite.envs.probes import get_probe
from wmsuite.policies.wrappers import ActionNoise
from wmsuite.world_models.tracking import ObjectTracking, track_episode

ENV_ID = "wmsuite/robosuite-Lift-v0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stds", type=float, nargs="+", default=[0.3, 0.6])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    probe = get_probe(ENV_ID)
    env = gym.make(ENV_ID, cameras=(), terminate_on_success=False)
    tracking = ObjectTracking.from_probe(probe)
    fingers = replace(tracking, fingers=robosuite_env.LIFT_FINGERS, hold_gap=robosuite_env.LIFT_HOLD_GAP)
    rules = {"latched": (tracking, True), "latched-fingers": (fingers, True), "tracked": (tracking, False)}
    results = {}
    for std in args.stds:
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
            for name, (rule, latch) in rules.items():
                believed = track_episode(rule, np.array(agent), np.array(state), np.array(actions), latch)
                said = bool(probe.success_from_env_state(believed).any())
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

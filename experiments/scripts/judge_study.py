"""Which success judge agrees with the real simulator, measured on the validation split only.

    OMP_NUM_THREADS=1 python experiments/scripts/judge_study.py --wm assets:wm/pushcube --episodes 16 \
        --out runs/judge-study/v1

Runs each policy of the families zoo's validation split in the real simulator and in the learned
one, the latter with termination off so that every imagined episode runs its whole horizon, and keeps
what the heads read on every generated frame (success probability, agent and object positions). Each
judge is then replayed offline on the same imagined frames, so all judges are compared on identical
episodes: `head`, `state`, `tracked` at several reaches, and `tracked` with a speed limit (the object
moves per frame by at most the agent's own displacement plus a slack: a pushed object does not outrun
its pusher, and one drawn next to a standing agent does not count). Figures per judge: Pearson, MMRV
and mean |error| over the validation policies, written to OUT/metrics.json; readings to OUT/readings.npz.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from wmsuite.cli.eval import EvalConfig
from wmsuite.cli.eval_setup import load_model, make_env_factory, make_policy_factory, policy_entries
from wmsuite.eval_harness.evaluate import EvalSetup, _run_waves
from wmsuite.eval_harness.metrics import all_metrics


def record_wm(env, model) -> dict[str, list]:
    """Make `env` (a WorldModelEnv) keep the heads' readings of every step in the returned dict."""
    log: dict[str, list] = {"init_state": [], "prob": [], "agent": [], "state": []}
    predict, step, reset = model.predict_heads, env.step, env.reset
    last: dict[str, torch.Tensor] = {}

    def predict_heads(lat):
        last.update(predict(lat))
        return last

    def step_and_log(actions):
        out = step(actions)
        log["prob"].append(torch.sigmoid(last["success_logit"]).cpu().numpy())  # (n, H)
        log["agent"].append(last["agent_pos"].cpu().numpy())  # (n, H, D)
        log["state"].append(last["environment_state"].cpu().numpy())  # (n, H, E)
        return out

    def reset_and_log(**kwargs):
        out = reset(**kwargs)
        log["init_state"].append(env._env_state.copy())
        return out

    model.predict_heads, env.step, env.reset = predict_heads, step_and_log, reset_and_log
    env.terminate_on_success = False
    return log


def tracked_success(agent, state, init_obj, success_fn, agent_xy, object_xy, reach, slack=None) -> bool:
    """agent (T, D), state (T, E), init_obj (2,): does the task's rule fire on the tracked object?"""
    obj, prev_agent, out = init_obj.copy(), None, state.copy()
    for t in range(len(agent)):
        a = agent[t, agent_xy]
        if np.linalg.norm(a - obj) < reach:
            target = state[t, object_xy]
            if slack is not None and prev_agent is not None:
                limit = np.linalg.norm(a - prev_agent) + slack
                d = target - obj
                n = np.linalg.norm(d)
                target = obj + d * min(1.0, limit / n) if n > 0 else target
            obj = target
        prev_agent = a
        out[t, object_xy] = obj
    return bool(np.asarray(success_fn(out[None])).any())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wm", default="assets:wm/pushcube")
    ap.add_argument("--zoo", default="assets:zoo/pushcube-families.json")
    ap.add_argument("--split", default="validation", choices=["validation"])
    ap.add_argument("--episodes", type=int, default=16)
    ap.add_argument("--out", required=True)
    ap.add_argument("--hold-static", action="store_true",
                    help="hold the task's static environment_state (the goal) at its real start value")
    args = ap.parse_args()
    from wmsuite.envs import PROBES

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = EvalConfig(zoo=args.zoo, wm=args.wm, split=args.split, episodes=args.episodes, num_envs=args.episodes)
    entries, trusted, seed = policy_entries(cfg)
    cfg = replace(cfg, seed=seed)
    model = load_model(cfg)
    probe = PROBES[cfg.env]
    chunk = model.cfg.chunk
    setup = EvalSetup(env_id=cfg.env, policies=entries, episodes=cfg.episodes, num_envs=cfg.num_envs, seed=seed,
                      make_policy=make_policy_factory(cfg, chunk, trusted), make_env=make_env_factory(cfg, model),
                      act_every=chunk)
    real_env, wm_env = setup.make_env("real"), setup.make_env("wm")
    wm_env.static_state = probe.static_state if args.hold_static else None
    log = record_wm(wm_env, model)
    readings, real = {}, {}
    start = time.perf_counter()
    for entry in entries:
        real[entry.name] = [ep.success for ep in _run_waves(setup, entry, real_env, list(range(cfg.episodes)))]
        for v in log.values():
            v.clear()
        n_eps = len(list(_run_waves(setup, entry, wm_env, list(range(cfg.episodes)))))
        assert n_eps == cfg.episodes and len(log["init_state"]) == 1, "one wave, one reset"
        readings[entry.name] = {
            "init_state": log["init_state"][0],  # (n, E)
            "prob": np.concatenate(log["prob"], 1),  # (n, T*H)
            "agent": np.concatenate(log["agent"], 1),  # (n, T*H, D)
            "state": np.concatenate(log["state"], 1),  # (n, T*H, E)
        }
        if args.hold_static:
            readings[entry.name]["state"][..., probe.static_state] = log["init_state"][0][:, None, probe.static_state]
        print(f"{entry.name}: real {np.mean(real[entry.name]):.2f}  ({time.perf_counter() - start:.0f} s)", flush=True)
    np.savez_compressed(out / "readings.npz", **{f"{p}/{k}": v for p, d in readings.items() for k, v in d.items()},
                        **{f"{p}/real": np.asarray(v) for p, v in real.items()})

    judges = {"head": None, "state": None}
    for reach in (0.06, 0.08, probe.reach):
        judges[f"tracked r={reach:.3f}"] = (reach, None)
        for slack in (0.005, 0.01, 0.02):
            judges[f"tracked r={reach:.3f} slack={slack}"] = (reach, slack)
    rates: dict[str, dict[str, float]] = {j: {} for j in judges}
    for name, d in readings.items():
        for j, params in judges.items():
            ok = []
            for i in range(len(d["prob"])):
                if j == "head":
                    ok.append(bool((d["prob"][i] > 0.5).any()))
                elif j == "state":
                    ok.append(bool(np.asarray(probe.success_from_env_state(d["state"][i][None])).any()))
                else:
                    ok.append(tracked_success(d["agent"][i], d["state"][i], d["init_state"][i][probe.object_xy],
                                              probe.success_from_env_state, probe.agent_xy, probe.object_xy,
                                              *params))
            rates[j][name] = float(np.mean(ok))
    names = list(readings)
    real_rates = [float(np.mean(real[n])) for n in names]
    result = {"split": args.split, "seed": seed, "episodes": cfg.episodes, "wm": args.wm,
              "real": dict(zip(names, real_rates)), "judges": {}}
    print(f"\n{'judge':<34} {'Pearson':>8} {'MMRV':>6} {'|err|':>6}")
    for j in judges:
        m = all_metrics([rates[j][n] for n in names], real_rates)
        result["judges"][j] = {"rates": rates[j], **m}
        print(f"{j:<34} {m['pearson']:>8.3f} {m['mmrv']:>6.3f} {m['mean_abs_error']:>6.3f}")
    print(f"\n{'policy':<32} {'real':>5} " + " ".join(f"{j[:14]:>14}" for j in judges))
    for n, r in zip(names, real_rates):
        print(f"{n:<32} {r:>5.2f} " + " ".join(f"{rates[j][n]:>14.2f}" for j in judges))
    (out / "metrics.json").write_text(json.dumps(result, indent=1))
    print(f"\nwrote {out / 'metrics.json'}  ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()

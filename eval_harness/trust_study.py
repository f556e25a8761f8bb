"""Do a world model's trust signals know when its rollout is wrong? Measured on recorded episodes.

Every recorded episode is imagined open loop from its first real frame (repeated to fill the
context, as a learned simulator's reset does) with its own actions, one chunk per step. At each
depth d of `depths` (in chunks) and for every episode still running there, three things are known:

    true error    the truth, from the recorded episode: `latent` = mean squared difference between the
                  imagined and the real latent of frame d*H; `object` = metres between the object
                  position the environment_state head reads off the imagined frame and the real one
    round trip    C_d (world_models/trust.py): back from the imagined frames to the start with the
                  actions reversed; `round_trip` latent MSE to the real first frame, and
                  `round_trip_object` in metres, through the same head
    idm           the mean inverse-dynamics error of the d chunks (recovered vs given actions)
    start         metres between the object position the heads read off the real first frame and
                  the real one: whether the model can read the scene it starts from at all
    novelty       with a bank (world_models/novelty.py), how unlike every training frame the real
                  first frame looks

`signal_figures` then says how well a signal ranks the true error: Spearman across episodes at each
depth, and within each episode across depths (median over episodes with three depths or more).
`calibration_figures` fits a `Calibrator` on the rows of one set of episodes and measures, on another,
the coverage of its 68% and 95% intervals and the selective-evaluation figures: the mean true error
of the 80% of rows it trusts most (lowest predicted error), against all rows and against the 80% a
depth-only score keeps (the shallowest).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from scipy.stats import spearmanr

from wmsuite.envs.probes import TaskProbe
from wmsuite.eval_harness.abstention import keep_mask
from wmsuite.types import Episode
from wmsuite.world_models import LatentWorldModel
from wmsuite.world_models.calibrator import GATES, RAMPS, Calibrator
from wmsuite.world_models.codec import stack_cameras
from wmsuite.world_models.model import FORWARD
from wmsuite.world_models.novelty import PatchNovelty
from wmsuite.world_models.rollout import WorldModelState, rollout
from wmsuite.world_models.trust import round_trip_error, start_reading_error

SIGNALS = ("round_trip", "round_trip_object", "idm", "start", "novelty")
TRUTHS = ("latent", "object")


@torch.no_grad()
def trust_rows(model: LatentWorldModel, episodes: Sequence[Episode], probe: TaskProbe, depths: Sequence[int],
               batch_size: int = 32, seed: int = 0, steps: int | None = None,
               samples: int = 1, backward: LatentWorldModel | None = None,
               novelty: PatchNovelty | None = None) -> dict[str, np.ndarray]:
    """One row per (episode, depth) where the episode runs at least `depth` chunks: arrays `episode`,
    `depth`, the true errors `latent` and `object`, and the signals `round_trip`, `round_trip_object`
    and `idm` (module docstring). Sampling noise: one generator per batch seeded with `seed + start`,
    the backward passes one of their own. `backward`: the model that plays rollouts back (None:
    `model`; see world_models/trust.py). `novelty`: a bank that adds the `novelty` signal."""
    h, cam, dev = model.cfg.chunk, model.cfg.camera, model.state_mean.device
    depths = sorted(set(int(d) for d in depths))
    if not depths or depths[0] < 1:
        raise ValueError(f"depths must be chunks >= 1, got {depths}")
    obj = probe.object_xy
    signals = [s for s in SIGNALS if s != "novelty" or novelty is not None]
    rows: dict[str, list] = {k: [] for k in ("episode", "depth", *TRUTHS, *signals)}
    for start in range(0, len(episodes), batch_size):
        batch = list(episodes[start : start + batch_size])
        reach = min(depths[-1], max(ep.length // h for ep in batch))
        if reach < depths[0]:
            continue
        begin, actions = _start(model, batch, reach)
        first = begin.context[:, -1].clone()  # (B, C, s, s): the real start's latent
        start_env = torch.as_tensor(np.stack([ep.env_state[0] for ep in batch]), dtype=torch.float32, device=dev)
        start_read = start_reading_error(model, first, start_env, obj)  # (B,)
        if novelty is not None:
            new = novelty.score(np.stack([stack_cameras(ep.obs, cam)[0] for ep in batch]))  # (B,)
        gen = torch.Generator(device=dev).manual_seed(seed + start)
        back = torch.Generator(device=dev).manual_seed(seed + start + 1)
        idm_sum = torch.zeros(len(batch), device=dev)
        for d, lat, idm, state in _open_loop(model, begin, actions, gen, steps):
            idm_sum += idm
            if d not in depths:
                continue
            live = [i for i, ep in enumerate(batch) if ep.length >= d * h]
            if not live:
                continue
            frames = np.stack([stack_cameras(batch[i].obs, cam)[d * h] for i in live])  # (m, S, S, 3): the real frame d*H
            real = model.codec.encode(torch.as_tensor(frames, device=dev).permute(0, 3, 1, 2))  # (m, C, s, s)
            img = lat[live, -1]  # (m, C, s, s)
            read = model.predict_heads(img)["environment_state"][:, obj].cpu().numpy()  # (m, 2)
            true_obj = np.stack([batch[i].env_state[d * h][obj] for i in live])
            rt = round_trip_error(model, first[live], state.context[live], actions[live, : d * h],
                                  start_env[live], steps, back, samples, backward)
            rows["episode"] += [start + i for i in live]
            rows["depth"] += [d] * len(live)
            rows["latent"] += ((img - real) ** 2).mean(dim=(1, 2, 3)).cpu().tolist()
            rows["object"] += np.linalg.norm(read - true_obj, axis=-1).tolist()
            rows["round_trip"] += rt["latent"].cpu().tolist()
            rows["round_trip_object"] += rt["env_state"][:, obj].norm(dim=-1).cpu().tolist()
            rows["idm"] += (idm_sum[live] / d).cpu().tolist()
            rows["start"] += start_read[live].cpu().tolist()
            if novelty is not None:
                rows["novelty"] += new[live].tolist()
    return {k: np.asarray(v, np.int64 if k in ("episode", "depth") else np.float64) for k, v in rows.items()}


@torch.no_grad()
def chunk_idm_errors(model: LatentWorldModel, episodes: Sequence[Episode], max_chunks: int = 20,
                     batch_size: int = 32, seed: int = 0, steps: int | None = None) -> np.ndarray:
    """The inverse-dynamics error of every chunk of every episode imagined open loop from its first
    frame with its own actions (up to `max_chunks` chunks, whole chunks inside the episode only), as a
    learned simulator reports it per step: (M,) mean |recovered - given action| over the chunk."""
    h = model.cfg.chunk
    out: list[float] = []
    for start in range(0, len(episodes), batch_size):
        batch = list(episodes[start : start + batch_size])
        state, actions = _start(model, batch, min(max_chunks, max(ep.length // h for ep in batch)))
        gen = torch.Generator(device=model.state_mean.device).manual_seed(seed + start)
        for d, _, idm, _ in _open_loop(model, state, actions, gen, steps):
            out += [float(e) for i, e in enumerate(idm.cpu().numpy()) if batch[i].length >= d * h]
    return np.asarray(out)


def _start(model: LatentWorldModel, batch: Sequence[Episode],
           reach: int) -> tuple[WorldModelState, torch.Tensor]:
    """The state of a rollout from the episodes' first real frames (repeated to fill the context, as
    at a reset) and their first `reach` chunks of actions (B, reach*H, A), zeros past an episode's end."""
    h, dev = model.cfg.chunk, model.state_mean.device
    actions = torch.zeros(len(batch), reach * h, batch[0].actions.shape[-1])
    for i, ep in enumerate(batch):
        n = min(ep.length, reach * h)
        actions[i, :n] = torch.as_tensor(ep.actions[:n], dtype=torch.float32)
    state = WorldModelState.from_frames(model, [stack_cameras(ep.obs, model.cfg.camera)[:1] for ep in batch], device=dev)
    return state, actions.to(dev)


def _open_loop(model: LatentWorldModel, state: WorldModelState, actions: torch.Tensor, gen: torch.Generator,
               steps: int | None):
    """Imagine chunk by chunk with `actions` (B, D*H, A); yields (d, latents (B, H, C, s, s) of chunk d,
    its inverse-dynamics error (B,) as the learned simulator reports it, the state after it), d = 1 .. D."""
    h = model.cfg.chunk
    for d in range(1, actions.shape[1] // h + 1):
        act = actions[:, (d - 1) * h : d * h]
        newest = state.newest
        lat, state = rollout(model, state, act, FORWARD, steps, gen)  # (B, H, C, s, s)
        yield d, lat, (model.inverse_dynamics(newest, lat) - act).abs().mean(dim=(1, 2)), state


def _rho(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def signal_figures(rows: dict[str, np.ndarray]) -> dict[str, Any]:
    """For every signal and true error: Spearman across episodes at each depth (`across`, keyed by
    depth), its median over depths, and the median within-episode Spearman across depths."""
    out: dict[str, Any] = {}
    for sig in (s for s in SIGNALS if s in rows):  # rows from before a signal existed lack it
        for truth in TRUTHS:
            across = {int(d): _rho(rows[sig][rows["depth"] == d], rows[truth][rows["depth"] == d])
                      for d in np.unique(rows["depth"])}
            within = [_rho(rows[sig][rows["episode"] == e], rows[truth][rows["episode"] == e])
                      for e in np.unique(rows["episode"]) if (rows["episode"] == e).sum() >= 3]
            out[f"{sig}_vs_{truth}"] = {
                "across_episodes": across,
                "across_episodes_median": float(np.nanmedian(list(across.values()))) if across else float("nan"),
                "within_episodes_median": float(np.nanmedian(within)) if np.isfinite(within).any() else float("nan"),
                "within_episodes_n": int(np.isfinite(within).sum()) if within else 0}
    return out


def _features(rows: dict[str, np.ndarray], names: Sequence[str]) -> dict[str, np.ndarray]:
    return {n: (rows[n] if n != "depth" else rows["depth"].astype(np.float64)) for n in names}


def calibration_figures(fit_rows: dict[str, np.ndarray], test_rows: dict[str, np.ndarray], truth: str = "object",
                        features: Sequence[str] = ("round_trip", "idm", "depth"), coverage: float = 0.8,
                        floor: float = 1e-4, residuals: str = "normal") -> tuple[Calibrator, dict[str, Any]]:
    """Fit a calibrator of the true error `truth` on `fit_rows` (`residuals`: Calibrator.fit's) and
    measure it on `test_rows`: interval coverage at 68% and 95%, and the mean true error of the
    `coverage` share of rows with the lowest predicted error, against all rows and the same share of
    the shallowest rows. True errors are floored at `floor` (a log model needs them positive; an exact
    frame has error 0)."""
    y_fit = np.maximum(fit_rows[truth], floor)
    y_test = np.maximum(test_rows[truth], floor)
    cal = Calibrator.fit(_features(fit_rows, features), y_fit, residuals=residuals)
    x_test = _features(test_rows, features)
    mu, _ = cal.predict(x_test)
    kept = keep_mask(-mu, coverage)
    shallow = keep_mask(-test_rows["depth"].astype(np.float64), coverage)
    return cal, {"truth": truth, "features": list(features), "n_fit": int(len(y_fit)), "n_test": int(len(y_test)),
                 "coverage_68": cal.coverage(x_test, y_test, 0.68), "coverage_95": cal.coverage(x_test, y_test, 0.95),
                 "selective_coverage": coverage, "error_all": float(y_test.mean()),
                 "error_kept": float(y_test[kept].mean()), "error_kept_depth_only": float(y_test[shallow].mean())}


def cross_validated_coverage(rows: dict[str, np.ndarray], truth: str, features: Sequence[str], residuals: str,
                             folds: int = 10, floor: float = 1e-4) -> float:
    """How far from nominal a calibrator's coverage lands on episodes it was not fitted on, measured
    inside one set of rows (so a choice made with it never sees the test rows): the episodes are
    split into `folds` groups, each group's rows are covered by a calibrator fitted on the others,
    and the result is the mean over 68% and 95% of |pooled coverage - level|, the coverage pooled
    over every held-out row (a per-group coverage of a few episodes is mostly noise)."""
    episodes = np.unique(rows["episode"])
    if not 2 <= folds <= len(episodes):
        raise ValueError(f"folds must be in [2, {len(episodes)}] (the number of episodes), got {folds}")
    group = {int(e): i % folds for i, e in enumerate(episodes)}
    fold_of = np.array([group[int(e)] for e in rows["episode"]])
    inside: dict[float, list[np.ndarray]] = {0.68: [], 0.95: []}
    for k in range(folds):
        fit = {n: v[fold_of != k] for n, v in rows.items()}
        held = {n: v[fold_of == k] for n, v in rows.items()}
        cal = Calibrator.fit(_features(fit, features), np.maximum(fit[truth], floor), residuals=residuals)
        err = np.maximum(held[truth], floor)
        for level, hits in inside.items():
            low, high = cal.interval(_features(held, features), level)
            hits.append((low <= err) & (err <= high))
    return float(np.mean([abs(np.concatenate(hits).mean() - level) for level, hits in inside.items()]))


@torch.no_grad()
def reset_scores(model: LatentWorldModel, bank: PatchNovelty | None, env_id: str, probe: TaskProbe, n: int,
                 seed: int) -> dict[str, np.ndarray]:
    """The gates' two scores on `n` fresh resets of the real env (seeds seed .. seed+n-1): the start
    reading error through the simulator's heads (`start`, (n,)) and, with a bank, the start frame's
    novelty (`novelty`, (n,)). Resets are free, so a gate's high quantile is estimated from many
    starts, not from a data file's few."""
    from wmsuite.envs import make_env

    env = make_env(env_id, image_size=model.codec_cfg.image_size)
    frames, states = [], []
    for i in range(n):
        obs, _ = env.reset(seed=seed + i)
        frames.append(stack_cameras(obs["pixels"], model.cfg.camera))
        states.append(obs["environment_state"])
    env.close()
    frames, states = np.stack(frames), np.stack(states)  # (n, h, w, 3), (n, E)
    errors = [start_reading_error(model, model.codec.encode(torch.as_tensor(frames[i : i + 64]).permute(0, 3, 1, 2)),
                                  states[i : i + 64], probe.object_xy) for i in range(0, n, 64)]
    out = {"start": torch.cat(errors).numpy()}
    if bank is not None:
        out["novelty"] = bank.score(frames)
    return out


def gate_settings(scores: dict[str, np.ndarray], quantile: float | None, ramp_quantile: float | None = None
                  ) -> dict[str, float]:
    """A calibrator's gate fields from in-distribution scores {feature: (n,)} (`reset_scores`): each
    gate's limit at `quantile` of its feature (None: limits left out, e.g. to keep a calibrator's
    own) and, with `ramp_quantile` (below `quantile`), its ramp's start at that quantile. Pass the
    result to `dataclasses.replace(calibrator, **settings)`."""
    top = 1.0 if quantile is None else quantile
    if not 0 < top <= 1 or (ramp_quantile is not None and not 0 <= ramp_quantile < top):
        raise ValueError(f"need 0 < quantile <= 1 and 0 <= ramp_quantile < quantile, got {quantile}, {ramp_quantile}")
    out = {}
    for feature, values in scores.items():
        if quantile is not None:
            out[GATES[feature]] = float(np.quantile(values, quantile))
        if ramp_quantile is not None:
            out[RAMPS[feature]] = float(np.quantile(values, ramp_quantile))
    return out


def auroc(inside: Sequence[float], outside: Sequence[float]) -> float:
    """Area under the ROC curve of a score meant to be higher `outside` the training distribution than
    `inside` it: P(outside score > inside score) + P(tie) / 2 over all pairs (Mann-Whitney U / n m)."""
    a, b = np.asarray(inside, np.float64), np.asarray(outside, np.float64)
    if a.ndim != 1 or b.ndim != 1 or not len(a) or not len(b):
        raise ValueError(f"auroc needs two non-empty 1-D score arrays, got shapes {a.shape} and {b.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("auroc needs finite scores")
    greater = (b[:, None] > a[None, :]).sum()
    ties = (b[:, None] == a[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(a) * len(b)))

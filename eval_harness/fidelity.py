"""Open-loop fidelity of a world model on held-out episodes of any task with a probe (wmsuite.envs.probes).

Every held-out episode starts from its first real frame (repeated to fill the context, as a rollout
from a real reset does) and the world model is rolled open-loop with the episode's true actions,
one chunk per step. The task's probe says where the object and the agent are in the episode's
environment_state and agent_pos, how success follows from environment_state, and how to read the
object off a frame. Against the real episode we measure, per horizon h (actions since the start):

    psnr, ssim           generated frame h vs real frame h
    object_error         |object xy detected in the generated frame - true object xy| in metres, with the
                         probe's detector (`object_xy_from_frames`), so blurry or hallucinated frames
                         cannot score well; `object_detect_rate` is the fraction of generated frames
                         where the object was found at all (misses are left out of the mean);
                         `object_error_windows` lists it per rollout (None where missed), in a fixed
                         order of (batch, repeat, episode), so two models evaluated alike pair up
    state_error          |object xy from the world model's environment_state head - true object xy|

and, teacher-forced (real context, one generated chunk):

    contact                    object displacement over the chunk, real vs generated (both by the
                               detector), and the end-position error, on windows where the real object
                               moves more than the probe's moving_threshold; the same error on windows
                               where it stays put. A model that never learned contact scores generated
                               displacement ~0. Split by how squarely the agent meets the object: the
                               median ratio of object to agent displacement, real and generated, on
                               head-on windows (object centre less than the probe's head_on_offset off
                               the agent's line of motion) and glancing ones (glancing_offset or more off).

and per episode / frame:

    success_agreement          success head on the last generated frame == the episode's real outcome
    success_agreement_replays  with `replay_p_success` (replays.py): the same prediction scored against the
                               real simulator replayed from every start whose first frame is the
                               episode's (p where it predicts success, 1 - p where failure)
    success_agreement_detector the task's success rule on the real last environment_state with the object
                               placed where it is detected in the last generated frame
    success_agreement_state    the task's success rule on the environment_state head's last prediction
    success_head_accuracy      success head on real frames vs the frame's true success (and balanced)
    idm_error_real / _generated  mean |action recovered by the inverse-dynamics head - true action|
                               from real frames / from the generated frames
    reconstruction_psnr        codec alone: decode(encode(real frame)) vs real frame

Horizons longer than an episode skip that episode; `count` says how many frames each figure averages
(episodes x repeats, where every episode is rolled out more than once). The detector figures
(object_error, object_error_median, object_detect_rate, success_agreement_detector, contact) are None
where the probe has no detector or the world model generates another camera than the detector reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from wmsuite.envs.probes import TaskProbe
from wmsuite.types import Episode
from wmsuite.world_models import LatentWorldModel
from wmsuite.world_models.codec import reconstruction_psnr, split_cameras, stack_cameras
from wmsuite.world_models.config import camera_names
from wmsuite.world_models.data import recorded_memory, time_reversed
from wmsuite.world_models.latent_memory import MemoryGeometry
from wmsuite.world_models.model import BACKWARD, FORWARD
from wmsuite.world_models.rollout import WorldModelState, rollout

DEFAULT_HORIZONS = (1, 8, 16, 32, 64)


def psnr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, H, W, C) uint8 pairs -> (N,) PSNR in dB (capped at 99 for identical frames)."""
    mse = ((a.astype(np.float64) - b.astype(np.float64)) ** 2).mean(axis=(1, 2, 3))
    return np.minimum(10 * np.log10(255.0**2 / np.maximum(mse, 1e-12)), 99.0)


def ssim(a: np.ndarray, b: np.ndarray, window: int = 7, sigma: float = 1.5) -> np.ndarray:
    """(N, H, W, C) uint8 pairs -> (N,) mean SSIM (Wang et al. 2004; Gaussian window, per channel).

    A 7-pixel window rather than 11 because our frames are 64 px; constants K1=0.01, K2=0.03.
    """
    x = torch.from_numpy(a).permute(0, 3, 1, 2).double() / 255.0  # (N, C, H, W)
    y = torch.from_numpy(b).permute(0, 3, 1, 2).double() / 255.0
    c = x.shape[1]
    g = torch.exp(-((torch.arange(window) - window // 2) ** 2) / (2 * sigma**2)).double()
    g = (g[:, None] * g[None]) / g.sum() ** 2  # (w, w), sums to 1
    kernel = g.expand(c, 1, window, window)

    def blur(t: torch.Tensor) -> torch.Tensor:
        return F.conv2d(t, kernel, groups=c)  # valid convolution, as in the reference implementation

    c1, c2 = 0.01**2, 0.03**2
    mx, my = blur(x), blur(y)
    sxx, syy, sxy = blur(x * x) - mx**2, blur(y * y) - my**2, blur(x * y) - mx * my
    s = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx**2 + my**2 + c1) * (sxx + syy + c2))
    return s.mean(dim=(1, 2, 3)).numpy()


@torch.no_grad()
def rollout_open_loop(model: LatentWorldModel, episodes: Sequence[Episode], seed: int = 0,
                      steps: int | None = None, direction: int = FORWARD,
                      geometry: MemoryGeometry | None = None) -> dict[str, Any]:
    """Roll every episode open-loop from its first frame with its true actions (one batch), in
    `direction` (BACKWARD for time-reversed episodes, world_models/data.py: time_reversed). A model with
    spatial memory rolls forward with it (`geometry`, the task's moving camera, required): each
    episode's memory holds its real first frame, then the generated frames, posed by the episode's
    recorded agent positions (the learned simulator dead-reckons them from the actions instead);
    backward, it reads no memory, as in training.

    The model generates a chunk of H frames from all H actions at once, so a chunk that runs past an
    episode's end would condition its frames on actions that never happened (the padding). Where an
    episode's length T is not a multiple of H, its frames after the last whole chunk therefore come
    from one more chunk re-anchored to end at T: generated from the rollout's frames up to T - H with
    the true actions T-H..T-1. Every frame an episode is scored on is then generated from its own
    actions, except in episodes shorter than H, which have no earlier frames to anchor to.

    Returns latents (N, T_max+1, C, s, s) (index 0 = the real first frame), idm errors of each
    generated step (N, n_chunks*H), success probabilities of every generated frame (N, T_max+1).
    """
    cam, k, h = model.cfg.camera, model.cfg.context, model.cfg.chunk
    n = len(episodes)
    t_max = max(ep.length for ep in episodes)
    n_chunks = -(-t_max // h)
    actions = np.zeros((n, n_chunks * h, model.cfg.action_dim), np.float32)  # zero past each episode's end
    for i, ep in enumerate(episodes):
        actions[i, : ep.length] = ep.actions
    act = torch.from_numpy(actions)
    first = torch.from_numpy(np.stack([stack_cameras(ep.obs, cam)[0] for ep in episodes])).permute(0, 3, 1, 2)  # (N, 3, S, S)
    z0 = model.codec.encode(first)  # (N, C, s, s)
    gen = torch.Generator().manual_seed(seed)
    with_memory = bool(model.cfg.memory_frames) and direction == FORWARD
    if with_memory and geometry is None:
        raise ValueError("a world model with spatial memory rolls out with it: pass geometry, the task's moving "
                         "camera (wmsuite.cli.common.memory_geometry)")
    memory = recorded_memory(model, geometry, episodes, z0[:, None], [0] * n, [0] * n) if with_memory else None
    lat, _ = rollout(model, WorldModelState.from_latents(z0[:, None], k), act, direction, steps, gen, memory)
    latents_t = torch.cat([z0[:, None], lat], dim=1)  # (N, n_chunks*H + 1, C, s, s)
    idm_t = torch.cat([(model.inverse_dynamics(latents_t[:, j * h], lat[:, j * h : (j + 1) * h])
                        - act[:, j * h : (j + 1) * h]).abs().mean(-1) for j in range(n_chunks)], 1)  # (N, n_chunks*H)
    # the re-anchored last chunk of every episode whose end falls inside a chunk
    ends = [ep.length for ep in episodes]
    partial = [i for i, t in enumerate(ends) if t % h and t >= h]
    if partial:
        ctx_idx = torch.tensor([[max(0, ends[i] - h - k + 1 + m) for m in range(k)] for i in partial])  # (P, K)
        ctx = latents_t[torch.tensor(partial)[:, None], ctx_idx]  # (P, K, C, s, s)
        last_act = torch.stack([act[i, ends[i] - h : ends[i]] for i in partial])  # (P, H, A)
        memory = recorded_memory(model, geometry, [episodes[i] for i in partial], latents_t[partial],
                                 [0] * len(partial), [ends[i] - h for i in partial]) if with_memory else None
        lat, _ = rollout(model, WorldModelState(ctx), last_act, direction, steps, gen, memory)  # (P, H, C, s, s)
        err = (model.inverse_dynamics(ctx[:, -1], lat) - last_act).abs().mean(-1)  # (P, H)
        for p, i in enumerate(partial):
            r = ends[i] % h  # frames after the last whole chunk
            latents_t[i, ends[i] - r + 1 : ends[i] + 1] = lat[p, -r:]
            idm_t[i, ends[i] - r : ends[i]] = err[p, -r:]
    heads = model.predict_heads(latents_t)
    return {"latents": latents_t, "idm_error": idm_t.numpy(),
            "success_prob": torch.sigmoid(heads["success_logit"]).numpy(),
            "env_state": heads["environment_state"].numpy()}


@torch.no_grad()
def evaluate_fidelity(model: LatentWorldModel, episodes: Sequence[Episode], probe: TaskProbe,
                      horizons: Sequence[int] = DEFAULT_HORIZONS, batch_size: int = 64, seed: int = 0,
                      steps: int | None = None, repeats: int = 1,
                      replay_p_success: np.ndarray | None = None, direction: int = FORWARD,
                      geometry: MemoryGeometry | None = None) -> dict[str, Any]:
    """All the figures of the module docstring, for episodes of the task `probe` describes (`geometry`:
    the task's moving camera, which a model with spatial memory rolls out with; rollout_open_loop).

    With `direction` BACKWARD, the open-loop figures only (psnr, ssim, object and state errors by
    horizon) of every episode played backward: from its last frame, with its actions reversed
    (`time_reversed`); a model trained with backward windows is asked what came before.

    `repeats` rolls every episode that many times with other sampling noise (repeat r of the batch at
    `start` uses seed `seed + start + 1_000_000 * r`, so repeat 0 is the single rollout's): the open-loop
    figures pool the repeats, and success_agreement_per_repeat lists each repeat's agreement.
    `replay_p_success` (N,): per episode, the share of its frame-identical real replays that succeed
    (replays.frame_identical_outcomes), for success_agreement_replays.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if replay_p_success is not None and len(replay_p_success) != len(episodes):
        raise ValueError(f"replay_p_success has {len(replay_p_success)} entries for {len(episodes)} episodes")
    check_task(model, probe)
    if direction == BACKWARD:
        if model.cfg.p_backward <= 0:
            raise ValueError("backward fidelity needs a model trained with backward windows (p_backward > 0)")
        episodes = [time_reversed(ep) for ep in episodes]
    model.eval()
    cam, h = model.cfg.camera, model.cfg.chunk
    detect = frame_detector(probe, cam)
    obj = probe.object_xy
    per_h: dict[int, dict[str, list[float]]] = {hz: {"psnr": [], "ssim": [], "obj": [], "found": [], "state": [],
                                                     "obj_windows": []} for hz in horizons}
    agree_by_repeat: list[list[bool]] = [[] for _ in range(repeats)]
    predicted = np.zeros((repeats, len(episodes)), bool)  # success head on each rollout's last frame
    agree_det, agree_state, idm_gen = [], [], []
    batches = [(start, r) for start in range(0, len(episodes), batch_size) for r in range(repeats)]
    for start, r in batches:
        eps = list(episodes[start : start + batch_size])
        out = rollout_open_loop(model, eps, seed=seed + start + 1_000_000 * r, steps=steps, direction=direction,
                                geometry=geometry)
        lat = out["latents"]
        for i, ep in enumerate(eps):
            t_end = ep.length
            idm_gen.extend(out["idm_error"][i, :t_end].tolist())
            wanted = [hz for hz in horizons if hz <= t_end] + [t_end]
            frames = model.codec.decode(lat[i, wanted]).permute(0, 2, 3, 1).numpy()  # (len, S, S, 3)
            real = stack_cameras(ep.obs, cam)[wanted]
            obj_gen = detect(frames) if detect is not None else None  # (len, 2)
            obj_true = ep.env_state[wanted, obj]  # (len, 2)
            p, s = psnr(frames, real), ssim(frames, real)
            for m, hz in enumerate(wanted[:-1]):
                rec = per_h[hz]
                rec["psnr"].append(float(p[m]))
                rec["ssim"].append(float(s[m]))
                if obj_gen is not None:
                    found = bool(np.isfinite(obj_gen[m]).all())
                    rec["found"].append(float(found))
                    err = float(np.linalg.norm(obj_gen[m] - obj_true[m])) if found else None
                    rec["obj_windows"].append(err)
                    if found:
                        rec["obj"].append(err)
                rec["state"].append(float(np.linalg.norm(out["env_state"][i, hz, obj] - obj_true[m])))
            predicted[r, start + i] = out["success_prob"][i, t_end] > 0.5
            agree_by_repeat[r].append(bool(predicted[r, start + i]) == ep.success)
            if obj_gen is not None:
                last_state = ep.env_state[t_end].copy()
                if np.isfinite(obj_gen[-1]).all():
                    last_state[obj] = obj_gen[-1]
                    agree_det.append(bool(probe.success_from_env_state(last_state)) == ep.success)
                else:
                    agree_det.append(not ep.success)  # no object seen: predicts failure
            agree_state.append(bool(probe.success_from_env_state(out["env_state"][i, t_end])) == ep.success)

    def by_h(key: str, reduce: Callable[[list[float]], float] = np.mean) -> dict[str, float | None]:
        return {str(hz): (float(reduce(v[key])) if v[key] else None) for hz, v in per_h.items()}

    open_loop = {"psnr": by_h("psnr"), "ssim": by_h("ssim"), "object_error": by_h("obj"),
                 "object_error_median": by_h("obj", np.median), "object_detect_rate": by_h("found"),
                 "object_error_windows": {str(hz): v["obj_windows"] for hz, v in per_h.items()} if detect else None,
                 "state_error": by_h("state"), "count": {str(hz): len(v["psnr"]) for hz, v in per_h.items()},
                 "episodes": len(episodes), "chunk": h, "sampling_steps": steps or model.cfg.sampling_steps,
                 "repeats": repeats}
    if direction == BACKWARD:
        return {**open_loop, "direction": "backward"}
    real_idm, head_acc, head_bal = _real_frame_metrics(model, episodes)
    contact = contact_fidelity(model, episodes, probe, seed=seed, steps=steps) if detect is not None else None
    frames = torch.from_numpy(np.concatenate([stack_cameras(ep.obs, cam) for ep in episodes[:64]])).permute(0, 3, 1, 2)
    replays = None
    if replay_p_success is not None:
        replays = float(np.mean(np.where(predicted, replay_p_success[None], 1 - replay_p_success[None])))
    return {
        **open_loop, "success_agreement_replays": replays,
        "success_agreement": float(np.mean(agree_by_repeat)),
        "success_agreement_per_repeat": [float(np.mean(a)) for a in agree_by_repeat],
        "success_agreement_detector": float(np.mean(agree_det)) if agree_det else None,
        "success_agreement_state": float(np.mean(agree_state)),
        "success_head_accuracy": head_acc, "success_head_balanced_accuracy": head_bal, "contact": contact,
        "idm_error_real": real_idm, "idm_error_generated": float(np.mean(idm_gen)),
        "reconstruction_psnr": reconstruction_psnr(model.codec, frames),
        "real_success_rate": float(np.mean([ep.success for ep in episodes])),
    }


@torch.no_grad()
def contact_fidelity(model: LatentWorldModel, episodes: Sequence[Episode], probe: TaskProbe,
                     batch_size: int = 128, seed: int = 0, steps: int | None = None) -> dict[str, float | int | None]:
    """Teacher-forced contact check: from K real context frames, generate one chunk with the true actions
    and compare the object's displacement over it (detected in the generated last frame, from the real
    object position at the window start) on windows every H steps of every episode.

    Returns moving_windows / still_windows (real displacement > the probe's moving_threshold / < 1 mm),
    real_displacement and generated_displacement (means over moving windows, m), moving_end_error and
    still_end_error (mean |generated - real| object position at the chunk's end, m; undetected objects
    left out), along_ratio (median over moving windows of the generated object's progress along the real
    displacement, divided by its length: 1 = as far as the real object, signed, so sideways errors do not
    inflate it), and for the moving windows where the agent (agent_pos[probe.agent_xy]) moves more than
    the probe's agent_moving_threshold and the object centre starts less than head_on_offset / at least
    glancing_offset metres off its line: headon_windows, glancing_windows, the median object-to-agent
    displacement ratio, real and generated (headon_ratio_real, headon_ratio_generated,
    glancing_ratio_real, glancing_ratio_generated), and headon_along_ratio / glancing_along_ratio.
    """
    cam, k, h = model.cfg.camera, model.cfg.context, model.cfg.chunk
    detect = frame_detector(probe, cam)
    if detect is None:
        raise ValueError(f"the contact check reads the object off generated {cam!r} frames, and {probe.env_id}'s "
                         f"probe has no detector for them (its detector reads {probe.camera!r}, or none)")
    ctx, act, start_xy, end_xy, agent_from, agent_to = [], [], [], [], [], []
    for ep in episodes:
        z = model.codec.encode(torch.from_numpy(stack_cameras(ep.obs, cam)).permute(0, 3, 1, 2))  # (T+1, C, s, s), once
        for t in range(0, ep.length - h + 1, h):
            ctx.append(z[torch.arange(t - k + 1, t + 1).clamp_min(0)])  # the first frame repeats before t = 0
            act.append(torch.from_numpy(ep.actions[t : t + h]))
            start_xy.append(ep.env_state[t, probe.object_xy])
            end_xy.append(ep.env_state[t + h, probe.object_xy])
            agent_from.append(ep.state[t, probe.agent_xy])
            agent_to.append(ep.state[t + h, probe.agent_xy])
    start, end = np.asarray(start_xy), np.asarray(end_xy)  # (W, 2)
    a0, a1 = np.asarray(agent_from), np.asarray(agent_to)  # (W, 2)
    real_move, push = np.linalg.norm(end - start, axis=1), np.linalg.norm(a1 - a0, axis=1)
    lateral = lateral_offset(start, a0, a1)
    gen = torch.Generator().manual_seed(seed)
    detected = []
    for i in range(0, len(ctx), batch_size):
        lat = model.generate(torch.stack(ctx[i : i + batch_size]), torch.stack(act[i : i + batch_size]), steps=steps,
                             generator=gen)  # (b, H, C, s, s)
        detected.append(detect(model.codec.decode(lat[:, -1]).permute(0, 2, 3, 1).numpy()))
    det = np.concatenate(detected)  # (W, 2), NaN where not found
    moving, still = real_move > probe.moving_threshold, real_move < 1e-3
    err = np.linalg.norm(det - end, axis=1)
    gen_move = np.linalg.norm(det - start, axis=1)
    # Signed progress along the real path, in units of the real distance: a sideways error does not
    # inflate it as it does the norm above (1 = as far as the real object; > 1 overshoots, < 1 lags).
    along = ((det - start) * (end - start)).sum(1) / np.maximum(real_move, 1e-9) ** 2

    def finite(values: np.ndarray, reduce: Callable[[np.ndarray], Any] = np.mean) -> float | None:
        values = values[np.isfinite(values)]
        return float(reduce(values)) if len(values) else None

    out: dict[str, float | int | None] = {
        "moving_windows": int(moving.sum()), "still_windows": int(still.sum()),
        "real_displacement": finite(real_move[moving]), "generated_displacement": finite(gen_move[moving]),
        "moving_end_error": finite(err[moving]), "still_end_error": finite(err[still]),
        "along_ratio": finite(along[moving], np.median)}
    pushed = moving & (push > probe.agent_moving_threshold)  # the agent moved: its line and the ratio are defined
    for name, subset in (("headon", pushed & (lateral < probe.head_on_offset)),
                         ("glancing", pushed & (lateral >= probe.glancing_offset))):
        out[f"{name}_windows"] = int(subset.sum())
        out[f"{name}_ratio_real"] = finite(real_move[subset] / push[subset], np.median)
        out[f"{name}_ratio_generated"] = finite(gen_move[subset] / push[subset], np.median)
        out[f"{name}_along_ratio"] = finite(along[subset], np.median)
    return out


def lateral_offset(obj: np.ndarray, agent_from: np.ndarray, agent_to: np.ndarray) -> np.ndarray:
    """(W, 2) object centres and agent positions before / after a chunk -> (W,) distance in metres of the
    object centre from the line the agent moves along: ~0 for a square push, large for a glancing one."""
    move = agent_to - agent_from
    along = move / np.maximum(np.linalg.norm(move, axis=1), 1e-9)[:, None]  # unit direction of the motion
    rel = obj - agent_from
    return np.abs(along[:, 0] * rel[:, 1] - along[:, 1] * rel[:, 0])


def check_task(model: LatentWorldModel, probe: TaskProbe) -> None:
    """A ValueError where the world model's action and environment_state sizes are not the probe's task's."""
    if (model.cfg.action_dim, model.cfg.env_state_dim) != (probe.action_dim, probe.env_state_dim):
        raise ValueError(f"the world model takes {model.cfg.action_dim}-d actions and predicts a "
                         f"{model.cfg.env_state_dim}-d environment_state; {probe.env_id} has {probe.action_dim}-d and "
                         f"{probe.env_state_dim}-d: was it trained on another task?")


def frame_detector(probe: TaskProbe, camera: str) -> Callable[[np.ndarray], np.ndarray] | None:
    """The probe's object detector on the world model's frames (..., S, S, 3 M) of cameras `camera`
    ('front+wrist'), reading the probe's camera among them; None if the model does not generate it."""
    detect = probe.object_xy_from_frames
    if detect is None or probe.camera not in camera_names(camera):
        return None
    return lambda frames: detect(split_cameras(frames, camera)[probe.camera])


@torch.no_grad()
def _real_frame_metrics(model: LatentWorldModel, episodes: Sequence[Episode]) -> tuple[float, float, float]:
    """(IDM error on real chunks, success-head accuracy and balanced accuracy on real frames)."""
    cam, h = model.cfg.camera, model.cfg.chunk
    idm, correct, pos_ok, neg_ok, n_pos, n_neg = [], 0, 0, 0, 0, 0
    for ep in episodes:
        z = model.codec.encode(torch.from_numpy(stack_cameras(ep.obs, cam)).permute(0, 3, 1, 2))  # (T+1, C, s, s)
        prob = torch.sigmoid(model.predict_heads(z)["success_logit"]).numpy()  # (T+1,)
        label = np.zeros(ep.length + 1, bool)
        label[-1] = ep.success  # episodes end on success; no earlier frame is a success
        pred = prob > 0.5
        correct += int((pred == label).sum())
        pos_ok, n_pos = pos_ok + int((pred & label).sum()), n_pos + int(label.sum())
        neg_ok, n_neg = neg_ok + int((~pred & ~label).sum()), n_neg + int((~label).sum())
        starts = np.arange(0, ep.length - h + 1, h)
        if len(starts):
            prev = z[starts]  # (m, C, s, s)
            nxt = torch.stack([z[s + 1 : s + 1 + h] for s in starts])  # (m, H, C, s, s)
            true = torch.from_numpy(np.stack([ep.actions[s : s + h] for s in starts]))
            idm.extend((model.inverse_dynamics(prev, nxt) - true).abs().mean(-1).flatten().tolist())
    total = n_pos + n_neg
    balanced = 0.5 * (pos_ok / max(n_pos, 1) + neg_ok / max(n_neg, 1))
    return float(np.mean(idm)), correct / total, balanced

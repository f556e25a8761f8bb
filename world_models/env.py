"""`WorldModelEnv`: a learned simulator as a batched Gymnasium VectorEnv.

    import wmsuite.envs                                  # registers the ids (world_models never imports envs)
    env = make_world_model_env(checkpoint_dir, env_id, num_envs=16)    # env_id: a registered task, e.g. wmsuite/...
    obs, info = env.reset(seed=[0, 1, ...])              # real first observations, same seeds as the real env
    obs, reward, terminated, truncated, info = env.step(chunks)   # chunks (num_envs, env.chunk, A)

- `make_world_model_env` (make.py) builds one from a checkpoint and a registered env id: the horizon is
  the id's max_episode_steps in chunks (rounded up), the reset context comes from a real env of that id.
- reset takes real context from a context source: a callable `seed -> observation` (one real
  observation in the env convention, or a list of them, oldest first). One frame is repeated to fill
  the K context frames, as in training (`WorldModelState.from_frames`). `GymResetContext` wraps any
  Gymnasium env's reset, so the same seeds give the same initial states as the real env;
  `EpisodeContext` serves recorded episodes (both in contexts.py). Where the source holds an
  instruction (`task`), reset's info["task"] carries it, as the real env's does, so a policy that
  reads language (a VLA) is told its task in imagination too.
- step consumes one action chunk per sub-env (single_action_space is (H, A), so the rollout engine
  hands it whole chunks), generates the H frames with the diffusion model (few-step EDM sampling,
  all sub-envs in one batch, through `rollout` in rollout.py) and returns the observation after the
  chunk, in the real env's format: pixels[camera] uint8 (S, S, 3), agent_pos and environment_state
  from the learned frame heads. info["chunk"] holds every generated frame of the chunk in the same
  format, (H, ...) per sub-env, so that the rollout engine records one observation per action (a
  policy trained on imagined episodes then sees the state each action was taken in).
- terminated: the success *judge* says the task succeeded on one of the chunk's frames (the
  observation is then that frame, as the real env stops there); truncated: `horizon` steps done.
  Judges: "head" (the learned success head), "state" (the task's own success rule, `success_fn`,
  applied to the environment_state head's reading of each generated frame: success follows from
  where the imagined object is, not from correlates such as where the agent is), "both" (the two
  agree), "tracked": the task's rule on object positions that each move only while the agent is
  within `ObjectTracking.reach` of that object (objects do not move untouched: an object drawn beside
  an agent far from the real one is not the object; a task that moves two cubes tracks both, and a
  cube pushed by the other cube stays where it was), and "latched" (tasks with a gripper command,
  `ObjectTracking.grasp_action`): "tracked" where a grasp, closed within reach, carries the object
  with the agent until the gripper opens (or, where the tracking names the fingers, until they close
  on nothing; world_models/tracking.py). Under "tracked" and "latched" the observation's
  environment_state holds the believed positions, so policies act on the world the judge sees.
  `static_state` names the environment_state entries the task keeps fixed through an episode (a goal's
  position): they are known from the real start, so the observation and the state
  judges hold them there instead of re-reading them from generated frames, where a drawn goal may
  drift (towards the object, as in the successes the model saw). Every judge the env can compute is
  reported per step in info as `judge/<name>` (1.0 when it fires on one of the chunk's frames),
  whichever one ends episodes, so they can be compared.
  reward: the reward head summed over the chunk's frames up to the observed one.
- info (arrays over sub-envs): is_success, and trust signals `trust/idm_error` (mean absolute error of
  the actions the inverse-dynamics head recovers from the generated frames vs the actions given) and
  `trust/success_prob` (the success head's highest probability over the chunk); with
  `round_trip=True`, also `trust/round_trip` on the step an episode ends (masked out on the others):
  the latent error between the real start and a backward pass from the episode's newest frames with
  its actions reversed (world_models/trust.py), through `round_trip_model` (a backward copy of the
  simulator) or else the simulator itself; whichever plays back must have been trained with backward
  windows (`p_backward` > 0). It costs as many chunks again as the episode ran, and draws its noise
  from a generator of its own, so the imagined episodes are the same with it or without.
  With `start_reading` (a slice of environment_state, e.g. the object's position), also
  `trust/start_error` on that step: the distance between what the heads read off the real start frame
  and the real start state there. A model that cannot read the real scene it starts from (a colour,
  a camera, a texture it never saw) is not to be trusted with what follows; it costs one heads pass.
  With `novelty` (a `PatchNovelty` bank of the training frames, world_models/novelty.py), also
  `trust/novelty` on that step: how unlike every training frame the real start frame looks.
- `idm_stop` (the inverse-dynamics verifier, SC3-Eval): a step whose IDM error exceeds it ends the
  sub-env's episode there, truncated and not a success (unless the judge fired in the same chunk),
  and reports `trust/idm_stop` 1.0 on that step (0.0 on the others): the frames no longer show the
  actions given, so nothing after them is evidence about the policy. The caller decides what such an
  episode counts as (`wmsuite eval` measures it both as a failure and as an abstention).
- A model with a spatial memory (memory_frames > 0) gets `memory_geometry`, the task's moving camera:
  each sub-env keeps its episode's memory (latent_memory.LatentMemory), fed the real start frame and every
  generated frame posed by the episode's agent position (below), and each chunk sees the frames it retrieves;
  a model with start_map also the start observation's frame of the task's map camera (latent_memory.map_slot).
- `agent_advance` ((n, D) agent_pos, (n, j, A) actions -> (n, d <= D): where the actions take the agent;
  the task probe's `moving_camera_advance`): the agent position is dead-reckoned from the real start by
  the commanded motion instead of read off the generated frames by the heads. For a camera that rides
  on the agent, whose frames show the agent at the same place whatever its position on the table, the
  heads can only guess it; the tracked judge's reach and the memory's poses need it. Such a frame shows
  an object's place relative to the camera, so the objects the judge tracks (`tracking`) are read as
  the heads' object less the heads' agent, plus the dead-reckoned agent. None: the heads' readings.
- Sampling noise comes from one generator seeded with `seed`, reseeded by a reset with an int seed
  or a full reset with a list of seeds, so the same seeds give the same imagined episodes.
  `noise_seed` (0: none) is mixed into every such seeding: the same starts imagined again with
  other noise, to see which outcomes the model is unsure of.
- Autoreset is disabled (Gymnasium's AutoresetMode.DISABLED): reset finished sub-envs with
  `reset(seed=..., options={"reset_mask": mask})`, as the rollout engine does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from wmsuite.world_models.codec import split_cameras, stack_cameras
from wmsuite.world_models.config import camera_names
from wmsuite.world_models.contexts import ContextSource, Observation
from wmsuite.world_models.latent_memory import LatentMemory, MemoryGeometry
from wmsuite.world_models.model import FORWARD, LatentWorldModel
from wmsuite.world_models.rollout import WorldModelState, rollout
from wmsuite.world_models.tracking import ObjectTracker, ObjectTracking, anchored, dead_reckoned
from wmsuite.world_models.trust import check_backward_model, round_trip_error, start_reading_error

if TYPE_CHECKING:  # the bank is only called; `python -m wmsuite.world_models.novelty` runs it as __main__
    from wmsuite.world_models.novelty import PatchNovelty

JUDGES = ("head", "state", "both", "tracked", "latched")
"""What ends an imagined episode as a success (see the module docstring)."""


class WorldModelEnv(gym.vector.VectorEnv):
    """See the module docstring."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.DISABLED, "render_modes": []}

    def __init__(self, model: LatentWorldModel, context_source: ContextSource, num_envs: int = 1,
                 horizon: int = 20, action_low: float = -1.0, action_high: float = 1.0,
                 success_threshold: float = 0.5, terminate_on_success: bool = True,
                 sampling_steps: int | None = None, device: str | None = None, seed: int = 0,
                 success_fn: Callable[[np.ndarray], np.ndarray] | None = None, judge: str = "head",
                 tracking: ObjectTracking | None = None, static_state: slice | None = None,
                 round_trip: bool = False, idm_stop: float | None = None,
                 start_reading: slice | None = None, round_trip_model: LatentWorldModel | None = None,
                 memory_geometry: MemoryGeometry | None = None, novelty: PatchNovelty | None = None,
                 noise_seed: int = 0, agent_advance: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
                 ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if horizon < 1:
            raise ValueError(f"horizon must be >= 1 world-model steps, got {horizon}")
        if not 0.0 < success_threshold < 1.0:
            raise ValueError(f"success_threshold must be in (0, 1), got {success_threshold}")
        if judge not in JUDGES:
            raise ValueError(f"judge must be one of {', '.join(JUDGES)}, got {judge!r}")
        if judge != "head" and success_fn is None:
            raise ValueError(f"judge {judge!r} needs success_fn, the task's success rule on environment_state "
                             "(e.g. wmsuite.envs.get_probe(env_id).success_from_env_state)")
        if judge in ("tracked", "latched") and tracking is None:
            raise ValueError(f"judge {judge!r} needs tracking=ObjectTracking(agent_xy, object_xy, reach) from the "
                             "task probe")
        if judge == "latched" and tracking.grasp_action is None:
            raise ValueError("judge 'latched' needs ObjectTracking.grasp_action (the task probe's grasp_action): "
                             "this task's agent has no gripper command to latch a grasp on")
        self.success_fn, self.judge, self.tracking = success_fn, judge, tracking
        self.agent_advance = agent_advance
        if static_state is not None and not range(model.cfg.env_state_dim)[static_state]:
            raise ValueError(f"static_state {static_state} picks no entry of the model's "
                             f"{model.cfg.env_state_dim}-d environment_state")
        if noise_seed < 0:
            raise ValueError(f"noise_seed must be >= 0 (0: the default noise stream), got {noise_seed}")
        if idm_stop is not None and not (math.isfinite(idm_stop) and idm_stop > 0):
            raise ValueError(f"idm_stop must be a positive IDM error (or None), got {idm_stop}")
        if start_reading is not None and not range(model.cfg.env_state_dim)[start_reading]:
            raise ValueError(f"start_reading {start_reading} picks no entry of the model's "
                             f"{model.cfg.env_state_dim}-d environment_state")
        if model.cfg.memory_frames and memory_geometry is None:
            raise ValueError("this world model reads a spatial memory (memory_frames > 0): pass memory_geometry, the "
                             "task's moving camera (wmsuite.cli.common.memory_geometry builds it from the probe)")
        if round_trip_model is not None and not round_trip:
            raise ValueError("round_trip_model plays episodes back for the round trip; add round_trip=True")
        if round_trip:
            check_backward_model(model, round_trip_model)
        device = device if device is not None else model.state_mean.device  # None: where the model is
        if round_trip_model is not None:
            round_trip_model = round_trip_model.to(device).eval()
        self.static_state, self.round_trip, self.idm_stop = static_state, round_trip, idm_stop
        self.start_reading, self.round_trip_model, self.novelty = start_reading, round_trip_model, novelty
        self.noise_seed = int(noise_seed)
        self.model = model.to(device).eval()
        self.source, self.device = context_source, device
        self.num_envs, self.horizon = num_envs, horizon
        self.success_threshold, self.terminate_on_success = success_threshold, terminate_on_success
        self.sampling_steps = sampling_steps
        cfg, codec = model.cfg, model.codec
        if not cfg.camera:
            raise ValueError("the world model names no camera (cfg.camera is empty); set the camera its frames "
                             "come from (training fills it in from the data)")
        self.camera, self.k = cfg.camera, cfg.context
        self.chunk = cfg.chunk  # actions per step: a real env fed the same chunks open-loop acts every `chunk`
        size, cams = codec.cfg.image_size, camera_names(cfg.camera)
        self.single_action_space = spaces.Box(action_low, action_high, (cfg.chunk, cfg.action_dim), np.float32)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.single_observation_space = spaces.Dict({
            "pixels": spaces.Dict({c: spaces.Box(0, 255, (size, size, 3), np.uint8) for c in cams}),
            "agent_pos": spaces.Box(-np.inf, np.inf, (cfg.state_dim,), np.float32),
            "environment_state": spaces.Box(-np.inf, np.inf, (cfg.env_state_dim,), np.float32),
        })
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        c, s = codec.latent_channels, codec.latent_size
        self.state = WorldModelState(torch.zeros(num_envs, self.k, c, s, s, device=device))  # context (n, K, C, s, s)
        self._frames = np.zeros((num_envs, size, size, 3 * len(cams)), np.uint8)  # current frames per sub-env, cameras stacked
        self._agent_pos = np.zeros((num_envs, cfg.state_dim), np.float32)
        self._env_state = np.zeros((num_envs, cfg.env_state_dim), np.float32)
        self._success = np.zeros(num_envs, bool)
        self._tasks = np.full(num_envs, "", dtype=object)  # each episode's instruction, from its context source
        self._trackers = {}  # judge -> the object positions it believes (world_models/tracking.py)
        if tracking is not None:
            self._trackers["tracked"] = ObjectTracker(tracking, num_envs)
            if tracking.grasp_action is not None:
                self._trackers["latched"] = ObjectTracker(tracking, num_envs, latch=True)
        self._start_state = np.zeros((num_envs, cfg.env_state_dim), np.float32)  # environment_state at reset
        self._t = np.zeros(num_envs, np.int64)
        self._start_error = np.zeros(num_envs, np.float32)  # heads' reading of the real start vs the real state
        self._novelty = np.zeros(num_envs, np.float32)  # the real start frame's novelty
        # round trip: each sub-env's real start latent and every action since its reset
        self._start_latent = torch.zeros(num_envs, c, s, s, device=device)  # (n, C, s, s)
        self._actions = torch.zeros(num_envs, horizon * cfg.chunk, cfg.action_dim, device=device)  # (n, T*H, A)
        self._gen = torch.Generator(device=device).manual_seed(seed)
        self._back_gen = torch.Generator(device=device).manual_seed(seed)  # the backward passes' own noise
        self._seed_rng = np.random.default_rng(seed)
        # the spatial memory of each sub-env's episode (memory.py), for a model that reads one
        self.memory = LatentMemory(model, memory_geometry, num_envs) if model.cfg.memory_frames else None

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Observation, dict[str, Any]]:
        mask = np.ones(self.num_envs, bool)
        if options and options.get("reset_mask") is not None:
            mask = np.asarray(options["reset_mask"], bool)
            if mask.shape != (self.num_envs,):
                raise ValueError(f"reset_mask must have shape ({self.num_envs},), got {mask.shape}")
        seeds = self._seeds(seed)
        if isinstance(seed, (int, np.integer)):
            self._gen.manual_seed(self._mixed(int(seed)))
            self._back_gen.manual_seed(self._gen.initial_seed())
        elif seed is not None and mask.all():
            # a full reset with a list of seeds (the rollout engine starting a batch): the sampling
            # noise follows from them, so the same seeds give the same imagined episodes
            spec = [-1 if s is None else int(s) for s in seed]
            self._gen.manual_seed(self._mixed(int(np.random.SeedSequence([s + 1 for s in spec]).generate_state(1)[0])))
            self._back_gen.manual_seed(self._gen.initial_seed())
        frames, states, env_states, tasks, maps, rows = [], [], [], [], [], np.flatnonzero(mask)
        map_camera = self.memory.geometry.map_camera if self.memory is not None and self.memory.maps is not None else None
        for i in rows:
            obs = self.source(int(seeds[i]))
            seq = [obs] if isinstance(obs, dict) else list(obs)
            if not seq or len(seq) > self.k:
                raise ValueError(f"the context source returned {len(seq)} observations; need 1..{self.k}")
            frames.append(np.stack([stack_cameras(o["pixels"], self.camera) for o in seq]))  # (K', S, S, 3M)
            tasks.append(getattr(self.source, "task", ""))
            states.append(np.asarray(seq[-1]["agent_pos"], np.float32))
            env_states.append(np.asarray(seq[-1].get("environment_state", np.zeros(0)), np.float32))
            if map_camera is not None:
                if map_camera not in seq[-1]["pixels"]:
                    raise ValueError(f"this world model reads the start frame of the map camera {map_camera!r} "
                                     f"(start_map), which the context source's observation lacks (cameras "
                                     f"{sorted(seq[-1]['pixels'])}): make the env render {map_camera!r}")
                maps.append(np.asarray(seq[-1]["pixels"][map_camera], np.uint8).transpose(2, 0, 1))  # (3, S, S)
        if len(rows):
            # each row's oldest frame repeated to fill K, then encoded: (m, K, C, s, s)
            self.state.assign(rows, WorldModelState.from_frames(self.model, frames, device=self.device, tasks=tasks))
            self._start_latent[rows] = self.state.context[rows, -1]
            if self.memory is not None:
                self.memory.reset(rows, self._start_latent[rows], np.stack(states),
                                  torch.from_numpy(np.stack(maps)) if maps else None)
            self._frames[rows] = np.stack([f[-1] for f in frames])
            self._agent_pos[rows] = np.stack(states)
            if self._env_state.shape[1]:
                self._env_state[rows] = np.stack(env_states)
                self._start_state[rows] = self._env_state[rows]
                for tracker in self._trackers.values():
                    tracker.reset(rows, self._env_state[rows], self._agent_pos[rows])
            self._success[rows] = False
            self._t[rows] = 0
            if self.start_reading is not None:
                self._start_error[rows] = start_reading_error(self.model, self._start_latent[rows],
                                                              self._start_state[rows], self.start_reading).cpu().numpy()
            if self.novelty is not None:
                self._novelty[rows] = self.novelty.score(self._frames[rows])
        info = {"is_success": self._success.copy(), "_is_success": np.ones(self.num_envs, bool)}
        if len(rows):
            self._tasks[rows] = tasks
        if any(self._tasks):  # a language task: each episode's instruction, as the real env gives it
            info["task"], info["_task"] = self._tasks.copy(), mask.copy()
        return self._obs(), info

    def step(self, actions: Any) -> tuple[Observation, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        act = torch.as_tensor(np.asarray(actions, np.float32), device=self.device)  # (n, H, A)
        if act.shape != (self.num_envs, *self.single_action_space.shape):
            raise ValueError(f"actions must have shape {(self.num_envs, *self.single_action_space.shape)}, "
                             f"got {tuple(act.shape)}")
        act = act.clamp(float(self.single_action_space.low.min()), float(self.single_action_space.high.max()))
        model, before, chunk_actions = self.model, self.state, act.cpu().numpy()  # chunk_actions (n, H, A)
        planned = None if self.agent_advance is None else dead_reckoned(
            self.agent_advance, self._agent_pos, chunk_actions)  # (n, H, D), or None: the heads' reading
        if self.memory is not None:
            self.memory.planned = planned  # the chunk's frames are posed there
        with torch.no_grad():
            lat, self.state = rollout(model, before, act, FORWARD, self.sampling_steps, self._gen,
                                      self.memory)  # (n, H, C, s, s)
            heads = self.memory.last_heads if self.memory is not None else model.predict_heads(lat)  # each (n, H, ...)
            idm = model.inverse_dynamics(before.newest, lat)  # (n, H, A)
            prob = torch.sigmoid(heads["success_logit"])  # (n, H)
            fired = {"head": (prob > self.success_threshold).cpu().numpy()}  # judge -> (n, H) bool
            env_state = heads["environment_state"].cpu().numpy()  # (n, H, E)
            read_agent = heads["agent_pos"].cpu().numpy()  # (n, H, D)
            if planned is not None and self.tracking is not None:
                env_state = anchored(self.tracking, env_state, read_agent, planned)
            agent_pos = read_agent if planned is None else planned  # (n, H, D): where the episode's agent is
            believed = {}  # judge -> its object positions (n, H, E)
            if self.static_state is not None:
                env_state[..., self.static_state] = self._start_state[:, None, self.static_state]
            if self.success_fn is not None:
                fired["state"] = np.asarray(self.success_fn(env_state), bool).reshape(prob.shape)
                fired["both"] = fired["head"] & fired["state"]
                for name, tracker in self._trackers.items():
                    believed[name] = tracker.update(agent_pos, env_state, chunk_actions)
                    fired[name] = np.asarray(self.success_fn(believed[name]), bool).reshape(prob.shape)
            hit = torch.as_tensor(fired[self.judge], device=self.device)  # (n, H)
            first = torch.where(hit.any(1), hit.float().argmax(1), torch.full_like(hit[:, 0], self.chunk - 1,
                                                                                     dtype=torch.long))  # (n,)
            rows = torch.arange(self.num_envs, device=self.device)
            frames = model.codec.decode(lat.flatten(0, 1)).unflatten(0, lat.shape[:2])  # (n, H, 3M, S, S) uint8
            frame = frames[rows, first]  # (n, 3M, S, S): the observed one
            reward = (heads["reward"] * (torch.arange(self.chunk, device=self.device)[None] <= first[:, None])).sum(1)
        self._frames = frame.permute(0, 2, 3, 1).cpu().numpy()
        agent_pos = agent_pos.astype(np.float32)
        seen = believed.get(self.judge, env_state).astype(np.float32)  # (n, H, E)
        picked = (np.arange(self.num_envs), first.cpu().numpy())
        self._agent_pos, self._env_state = agent_pos[picked], seen[picked]
        chunk = {"agent_pos": agent_pos, "environment_state": seen,  # every frame of the chunk (rollout/recorder.py: CHUNK_INFO)
                 "pixels": split_cameras(frames.permute(0, 1, 3, 4, 2).cpu().numpy(), self.camera)}
        self._success = hit.any(1).cpu().numpy()
        for i, t in enumerate(self._t):  # the chunk each sub-env just ran, for its round trip
            if t < self.horizon:
                self._actions[i, t * self.chunk : (t + 1) * self.chunk] = act[i]
        self._t += 1
        idm_error = (idm - act).abs().mean(dim=(1, 2)).cpu().numpy()  # (n,)
        terminated = self._success & self.terminate_on_success
        stopped = (idm_error > self.idm_stop) & ~terminated if self.idm_stop is not None else np.zeros_like(terminated)
        truncated = ((self._t >= self.horizon) | stopped) & ~terminated
        ones = np.ones(self.num_envs, bool)
        info = {
            "is_success": self._success.copy(), "_is_success": ones,
            "trust/idm_error": idm_error, "_trust/idm_error": ones,
            "trust/success_prob": prob.max(1).values.cpu().numpy(), "_trust/success_prob": ones,
            "chunk": chunk, "_chunk": ones,
        }
        for name, f in fired.items():
            info[f"judge/{name}"], info[f"_judge/{name}"] = f.any(1).astype(np.float32), ones
        if self.idm_stop is not None:
            info["trust/idm_stop"], info["_trust/idm_stop"] = stopped.astype(np.float32), ones
        if self.round_trip:
            info["trust/round_trip"], info["_trust/round_trip"] = self._round_trips(terminated | truncated)
        if self.start_reading is not None:
            info["trust/start_error"], info["_trust/start_error"] = self._start_error.copy(), terminated | truncated
        if self.novelty is not None:
            info["trust/novelty"], info["_trust/novelty"] = self._novelty.copy(), terminated | truncated
        return self._obs(), reward.cpu().numpy().astype(np.float32), terminated, truncated, info

    def close(self, **kwargs: Any) -> None:
        close = getattr(self.source, "close", None)
        if close is not None:
            close()

    # ------------------------------------------------------------------ helpers
    def _mixed(self, seed: int) -> int:
        """A generator seed with `noise_seed` mixed in (unchanged without one)."""
        if not self.noise_seed:
            return seed
        return int(np.random.SeedSequence([seed, self.noise_seed]).generate_state(1)[0])

    def _round_trips(self, done: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The round-trip error (world_models/trust.py: latent MSE between the real start and where a
        backward pass from the newest frames lands) of every sub-env whose episode ends now, from all
        the chunks it ran; rows of one depth go back as one batch. -> (values (n,), mask (n,))."""
        values = np.zeros(self.num_envs, np.float32)
        for t in np.unique(self._t[done]):
            rows = torch.as_tensor(np.flatnonzero(done & (self._t == t)), device=self.device)
            words = self.state.instruction[rows] if self.state.instruction is not None else None
            err = round_trip_error(self.model, self._start_latent[rows], self.state.context[rows],
                                   self._actions[rows, : int(t) * self.chunk], steps=self.sampling_steps,
                                   generator=self._back_gen, backward=self.round_trip_model, instruction=words)
            values[rows.cpu().numpy()] = err["latent"].cpu().numpy()
        return values, done.copy()

    def _obs(self) -> Observation:
        return {"pixels": {c: f.copy() for c, f in split_cameras(self._frames, self.camera).items()},
                "agent_pos": self._agent_pos.copy(),
                "environment_state": self._env_state.copy()}

    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int]:
        if seed is None:
            seed = [None] * self.num_envs
        elif isinstance(seed, (int, np.integer)):
            seed = [int(seed) + i for i in range(self.num_envs)]
        seed = list(seed)
        if len(seed) != self.num_envs:
            raise ValueError(f"reset got {len(seed)} seeds for {self.num_envs} sub-envs")
        return [int(s) if s is not None else int(self._seed_rng.integers(2**31)) for s in seed]


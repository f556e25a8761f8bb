"""Small HDF5 files with the exact key structure, dtypes and attributes of the public datasets.

Robomimic (v0.1 / v1.4.1 image.hdf5 and low_dim.hdf5, written by robomimic's dataset_states_to_obs.py):

    data/            attrs: total (int), env_args (JSON: env_name, env_version, type, env_kwargs)
      demo_<i>/      attrs: num_samples (int), model_file (MJCF xml string)
        actions (T, 7) f8, states (T, S) f8, rewards (T,) f8, dones (T,) i8
        obs/<key>, next_obs/<key>: robot0_eef_pos (T, 3), robot0_eef_quat (T, 4), robot0_gripper_qpos (T, 2),
            robot0_gripper_qvel, robot0_joint_pos, robot0_joint_pos_cos, robot0_joint_pos_sin, robot0_joint_vel (T, 7),
            robot0_eef_vel_lin, robot0_eef_vel_ang (T, 3), object (T, 10) f8;
            image files add agentview_image, robot0_eye_in_hand_image (T, 84, 84, 3) u1 (stored upright)
    mask/train, mask/valid: byte strings (dtype S) of demo names

LIBERO (libero_*/<task>_demo.hdf5, written by LIBERO's scripts/create_dataset.py):

    data/            attrs: env_name, problem_info (JSON: problem_name, domain_name, language_instruction),
                            macros_image_convention ("opengl"), bddl_file_name, bddl_file_content, env_args (JSON),
                            num_demos, total
      demo_<i>/      attrs: num_samples, model_file, init_state (S,) f8
        actions (T, 7) f8, states (T, S) f8, robot_states (T, 9) f8, rewards (T,) u1, dones (T,) u1
        obs/: agentview_rgb, eye_in_hand_rgb (T, 128, 128, 3) u1 (rows bottom-up), joint_states (T, 7),
              gripper_states (T, 2), ee_states (T, 6) = eef pos + axis-angle, ee_pos (T, 3), ee_ori (T, 3) f8
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

ROBOMIMIC_LOWDIM_KEYS = {
    "object": 10, "robot0_eef_pos": 3, "robot0_eef_quat": 4, "robot0_eef_vel_ang": 3, "robot0_eef_vel_lin": 3,
    "robot0_gripper_qpos": 2, "robot0_gripper_qvel": 2, "robot0_joint_pos": 7, "robot0_joint_pos_cos": 7,
    "robot0_joint_pos_sin": 7, "robot0_joint_vel": 7,
}
ROBOMIMIC_IMAGE_KEYS = ("agentview_image", "robot0_eye_in_hand_image")


def robomimic_env_args() -> dict:
    return {"env_name": "Lift", "env_version": "1.4.1", "type": 1, "env_kwargs": {
        "has_renderer": False, "has_offscreen_renderer": True, "ignore_done": True, "use_object_obs": True,
        "use_camera_obs": True, "control_freq": 20, "controller_configs": {"type": "OSC_POSE"}, "robots": ["Panda"],
        "camera_depths": False, "camera_heights": 84, "camera_widths": 84, "reward_shaping": False,
        "camera_names": ["agentview", "robot0_eye_in_hand"]}}


def write_robomimic(path: Path, lengths: list[int], image: bool = True, size: int = 12, seed: int = 0,
                    successes: list[bool] | None = None, masks: dict[str, list[int]] | None = None) -> list[dict]:
    """Write a Robomimic-layout file; returns, per demo, the arrays written (the test's oracle).

    A trajectory of T steps has T+1 underlying frames `traj[k]`; `obs` holds traj[:T], `next_obs` traj[1:],
    exactly as dataset_states_to_obs.py records them.
    """
    rng = np.random.default_rng(seed)
    successes = successes or [True] * len(lengths)
    demos = []
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        for i, t in enumerate(lengths):
            traj = {k: rng.normal(size=(t + 1, d)) for k, d in ROBOMIMIC_LOWDIM_KEYS.items()}
            if image:
                traj.update({k: rng.integers(0, 256, (t + 1, size, size, 3), dtype=np.uint8) for k in ROBOMIMIC_IMAGE_KEYS})
            rewards = np.zeros(t)
            if successes[i]:
                rewards[-1] = 1.0  # sparse robosuite reward: 1 on the success state
            dones = np.zeros(t, np.int64)
            dones[-1] = 1  # done_mode 2: end of trajectory
            g = data.create_group(f"demo_{i}")
            g.attrs["num_samples"] = t
            g.attrs["model_file"] = "<mujoco model='base'><worldbody/></mujoco>"
            arrays = {"actions": rng.uniform(-1, 1, (t, 7)), "states": rng.normal(size=(t, 32)),
                      "rewards": rewards, "dones": dones}
            for k, v in arrays.items():
                g.create_dataset(k, data=v)
            for k, v in traj.items():
                g.create_dataset(f"obs/{k}", data=v[:t], **({"compression": "gzip"} if v.dtype == np.uint8 else {}))
                g.create_dataset(f"next_obs/{k}", data=v[1:], **({"compression": "gzip"} if v.dtype == np.uint8 else {}))
            demos.append({"traj": traj, **arrays})
        data.attrs["total"] = int(sum(lengths))
        data.attrs["env_args"] = json.dumps(robomimic_env_args(), indent=4)
        for name, ids in (masks or {}).items():
            f[f"mask/{name}"] = np.array([f"demo_{i}" for i in ids], dtype="S")
    return demos


LIBERO_PROBLEM = {"problem_name": "libero_tabletop_manipulation", "domain_name": "robosuite",
                  "language_instruction": "pick up the black bowl between the plate and the ramekin and place it on the plate"}


def write_libero(path: Path, lengths: list[int], size: int = 16, seed: int = 0, state_dim: int = 92,
                 convention: str | None = "opengl", problem_info: dict | None = None) -> list[dict]:
    """Write a LIBERO-layout file; returns, per demo, the arrays written. obs[k] follows actions[k]."""
    rng = np.random.default_rng(seed)
    demos = []
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_name"] = "Libero_Tabletop_Manipulation"
        data.attrs["problem_info"] = json.dumps(problem_info or LIBERO_PROBLEM)
        if convention is not None:
            data.attrs["macros_image_convention"] = convention
        data.attrs["bddl_file_name"] = "libero/libero/bddl_files/libero_spatial/pick_up_the_black_bowl.bddl"
        data.attrs["bddl_file_content"] = "(define (problem LIBERO_Tabletop_Manipulation) ...)"
        data.attrs["env_args"] = json.dumps({"type": 1, "env_name": "Libero_Tabletop_Manipulation",
                                             "problem_name": "libero_tabletop_manipulation", "env_kwargs": {}})
        for i, t in enumerate(lengths):
            ee = rng.normal(size=(t, 6))
            arrays = {
                "actions": rng.uniform(-1, 1, (t, 7)), "states": rng.normal(size=(t, state_dim)),
                "robot_states": rng.normal(size=(t, 9)),
                "rewards": np.eye(1, t, t - 1, dtype=np.uint8)[0], "dones": np.eye(1, t, t - 1, dtype=np.uint8)[0],
            }
            obs = {
                "agentview_rgb": rng.integers(0, 256, (t, size, size, 3), dtype=np.uint8),
                "eye_in_hand_rgb": rng.integers(0, 256, (t, size, size, 3), dtype=np.uint8),
                "joint_states": rng.normal(size=(t, 7)), "gripper_states": rng.normal(size=(t, 2)),
                "ee_states": ee, "ee_pos": ee[:, :3], "ee_ori": ee[:, 3:],
            }
            g = data.create_group(f"demo_{i}")
            for k, v in arrays.items():
                g.create_dataset(k, data=v)
            for k, v in obs.items():
                g.create_dataset(f"obs/{k}", data=v)
            g.attrs["num_samples"] = t
            g.attrs["model_file"] = "<mujoco model='libero'><worldbody/></mujoco>"
            g.attrs["init_state"] = arrays["states"][0]
            demos.append({**arrays, "obs": obs})
        data.attrs["num_demos"] = len(lengths)
        data.attrs["total"] = int(sum(lengths))
    return demos

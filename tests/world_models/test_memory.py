"""The spatial memory against MuJoCo's own renderer and against cases worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from wmsuite.envs import make_env
from wmsuite.envs.experts import make_expert
from wmsuite.envs.push_cube_ego import EGO_FOVY, ego_pose
from wmsuite.world_models.memory import (
    MemoryBank,
    MemoryConfig,
    SpatialMemory,
    back_project,
    pixel_grid,
    plane_depth,
    project,
    revisits,
)

SIZE = 64


def _ego_frames(seed: int, steps: int, skill: float = 1.0):
    """(rgb (T, S, S, 3), depth (T, S, S), poses (T, 4, 4), intrinsics (3, 3), agent_pos (T, 2)) of the
    ego camera along an expert episode of PushCubeEgo."""
    env = make_env("wmsuite/PushCubeEgo-v0", image_size=SIZE, depth=True, cameras=("ego",),
                   terminate_on_success=False)
    expert = make_expert("wmsuite/PushCubeEgo-v0", skill=skill, seed=seed)
    obs, info = env.reset(seed=seed)
    rows = []
    for _ in range(steps):
        rows.append((obs["pixels"]["ego"], info["depth"]["ego"], info["camera_pose"]["ego"], obs["agent_pos"]))
        obs, _, _, _, info = env.step(expert.select_action({k: v[None] for k, v in obs.items() if k != "pixels"})[0])
    intrinsics, _ = env.unwrapped.camera_geometry("ego", SIZE)
    env.close()
    rgb, depth, poses, agent = (np.array(c) for c in zip(*rows))
    return rgb, depth, poses, intrinsics, agent


def test_back_projection_then_projection_returns_the_same_pixels_and_depths():
    _, depth, poses, intrinsics, _ = _ego_frames(seed=0, steps=1)
    points = back_project(depth[0], intrinsics, poses[0])
    uv, z, inside = project(points, intrinsics, poses[0], (SIZE, SIZE))
    assert inside.all()
    np.testing.assert_allclose(uv, pixel_grid((SIZE, SIZE)).reshape(-1, 2), atol=1e-9)
    np.testing.assert_allclose(z, depth[0].reshape(-1), rtol=1e-6)


def test_a_pixel_back_projected_from_one_view_shows_the_same_colour_in_another():
    """The geometry against the renderer: table points seen at step 0, projected into the camera of a
    later step, land where that step's image shows the same colour and the same depth."""
    rgb, depth, poses, intrinsics, _ = _ego_frames(seed=1, steps=6)
    points = back_project(depth[0], intrinsics, poses[0])  # (S*S, 3)
    static = points[:, 2] < 0.01  # the table and the landmarks, not the pusher under the camera
    uv, z, inside = project(points, intrinsics, poses[5], (SIZE, SIZE))
    assert np.linalg.norm(poses[5][:2, 3] - poses[0][:2, 3]) > 0.05  # the camera did move
    keep = static & inside
    assert keep.sum() > SIZE * SIZE // 4
    cols, rows = np.floor(uv[keep]).astype(int).T
    unoccluded = depth[5][rows, cols] > depth[5].max() - 1e-3  # the pusher under the camera hides some
    assert unoccluded.mean() > 0.9
    # exact up to float32 except at a landmark's rim, where a point of its 4 mm top lands on table
    close = np.abs(z[keep][unoccluded] - depth[5][rows, cols][unoccluded])
    assert np.quantile(close, 0.95) < 1e-4 and close.max() < 0.005
    keep[keep] = unoccluded
    cols, rows = cols[unoccluded], rows[unoccluded]
    colour_then = rgb[0].reshape(-1, 3)[keep].astype(int)
    colour_now = rgb[5][rows, cols].astype(int)
    # nearest-pixel sampling blurs only the edges of landmarks: almost every pixel agrees exactly
    assert (np.abs(colour_then - colour_now).max(axis=1) <= 3).mean() > 0.95


def test_ego_pose_from_agent_positions_and_plane_depth_match_the_simulator():
    _, depth, poses, intrinsics, agent = _ego_frames(seed=2, steps=5)
    np.testing.assert_allclose(ego_pose(agent), poses, atol=1e-5)  # float32 agent_pos
    focal = (SIZE / 2) / np.tan(np.deg2rad(EGO_FOVY) / 2)
    np.testing.assert_allclose(intrinsics, [[focal, 0, SIZE / 2], [0, focal, SIZE / 2], [0, 0, 1]])
    table = plane_depth(intrinsics, poses[0], (SIZE, SIZE))
    floor = depth[0] > depth[0].max() - 1e-3  # pixels that see the table, not the pusher
    np.testing.assert_allclose(table[floor], depth[0][floor], atol=1e-5)


def _strip_camera(x: float) -> np.ndarray:
    """A camera 0.372 m above the point (x, 0), looking straight down."""
    return ego_pose(np.array([x, 0.0]))


def _intrinsics() -> np.ndarray:
    focal = (SIZE / 2) / np.tan(np.deg2rad(EGO_FOVY) / 2)
    return np.array([[focal, 0, SIZE / 2], [0, focal, SIZE / 2], [0, 0, 1.0]])


def _offer(memory: SpatialMemory, t: int, x: float) -> bool:
    k, pose = _intrinsics(), _strip_camera(x)
    return memory.add(t, plane_depth(k, pose, (SIZE, SIZE)), k, pose, payload=f"frame {t}")


def test_retrieval_returns_the_frame_that_saw_a_place():
    memory = SpatialMemory(MemoryConfig(top_k=2))
    assert _offer(memory, 0, -0.4) and _offer(memory, 10, 0.0) and _offer(memory, 20, 0.4)  # disjoint views
    assert not _offer(memory, 21, 0.41)  # almost nothing new: not a keyframe, the cache unchanged
    k = _intrinsics()
    for x, frame in ((-0.38, 0), (0.02, 10), (0.39, 20)):
        found = memory.retrieve(k, _strip_camera(x), (SIZE, SIZE))
        assert found[0][:2] == (frame, f"frame {frame}")
    # between two keyframes: both, the one whose view overlaps more first
    found = memory.retrieve(k, _strip_camera(-0.15), (SIZE, SIZE))
    assert [f for f, _, _ in found] == [10, 0] and found[0][2] > found[1][2]
    assert [f for f, _, _ in memory.retrieve(k, _strip_camera(0.25), (SIZE, SIZE))] == [20, 10]
    assert [f for f, _, _ in memory.retrieve(k, _strip_camera(0.25), (SIZE, SIZE), exclude_after=15)] == [10]
    assert memory.retrieve(k, _strip_camera(3.0), (SIZE, SIZE)) == []  # nothing cached there


def test_the_cache_stops_growing_once_the_place_is_covered():
    """Back and forth over one strip: after the first pass nothing is new, so cache size, keyframes and
    hence the work of a retrieval are the same after 100 frames and after 1,000."""
    memory = SpatialMemory()
    sizes = {}
    for t in range(1000):
        _offer(memory, t, 0.4 * np.sin(t / 15))
        if t + 1 in (100, 1000):
            sizes[t + 1] = (len(memory), len(memory.keyframes))
    assert sizes[100] == sizes[1000] and sizes[100][1] <= 16


def test_culled_retrieval_counts_what_projecting_every_point_counts():
    """The coarse-cell culling is exact: per keyframe, the points in view equal a brute-force projection
    of the whole cache, for views along a real episode and for tilted and far-off cameras."""
    rgb, depth, poses, intrinsics, _ = _ego_frames(seed=3, steps=60, skill=0.5)
    memory = SpatialMemory()
    for t in range(60):
        memory.add(t, depth[t], intrinsics, poses[t])
    assert len(memory.keyframes) > 3
    rng = np.random.default_rng(0)
    queries = list(poses)
    for _ in range(40):  # tilted up to ~35 degrees, anywhere over the table, 0.2-0.8 m up
        axis = rng.normal(size=3)
        angle = rng.uniform(0, 0.6)
        k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]]) / np.linalg.norm(axis)
        turn = np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k
        pose = ego_pose(rng.uniform(-0.5, 0.5, 2))
        pose[:3, :3] = turn @ pose[:3, :3]
        pose[2, 3] = rng.uniform(0.2, 0.8)
        queries.append(pose)
    for pose in queries:
        _, _, inside = project(memory.points, intrinsics, pose, (SIZE, SIZE))
        frames, counts = np.unique(memory.source[inside], return_counts=True)
        assert memory.visible(intrinsics, pose, (SIZE, SIZE)) == dict(zip(frames.tolist(), counts.tolist()))


def test_each_sub_env_has_its_own_memory_and_reset_clears_only_its_rows():
    bank = MemoryBank(3)
    for row in range(3):
        _offer(bank[row], 0, 0.3 * row)
    bank.reset([1])
    assert len(bank[1]) == 0 and len(bank[0]) > 0 and len(bank[2]) > 0
    bank.reset(np.array([True, False, False]))
    assert len(bank[0]) == 0 and len(bank[2]) > 0
    _offer(bank[0], 0, 0.0)  # a new episode may use frame indices again
    bank.reset()
    assert all(len(m) == 0 and not m.keyframes for m in bank.memories)
    with pytest.raises(ValueError, match="already a keyframe"):
        _offer(bank[0], 0, 0.0) and _offer(bank[0], 0, 0.5)


def test_revisits_on_a_hand_made_path():
    """Out to one side, across to the other and back: the return is a revisit, the crossing is not."""
    k = _intrinsics()
    xs = np.r_[np.linspace(-0.4, 0.4, 30), np.linspace(0.4, -0.4, 30)]
    poses = np.array([_strip_camera(x) for x in xs])
    depths = np.array([plane_depth(k, p, (SIZE, SIZE)) for p in poses])
    revisit, first = revisits(depths, k, poses, gap=20)
    assert not revisit[:30].any() and first[:30].all()  # the way out sees only new ground or recent ground
    assert revisit[45:].all()  # coming back over ground seen more than 20 frames before


def test_expert_episodes_of_the_ego_task_revisit_places():
    """The task delivers what memory is for: competent experts look at the goal, leave for the cube
    and bring it back, so some frames revisit a place the camera left more than 20 steps earlier."""
    _, depth, poses, intrinsics, _ = _ego_frames(seed=1, steps=55)
    revisit, first = revisits(depth, intrinsics, poses, gap=20)
    assert revisit.sum() >= 5 and first.sum() >= 5
    assert not revisit[:21].any()


@pytest.mark.parametrize("bad, match", [({"voxel": 0}, "voxel"), ({"new_coverage": 1.5}, "new_coverage"),
                                        ({"top_k": 0}, "top_k")])
def test_config_names_a_bad_value(bad, match):
    with pytest.raises(ValueError, match=match):
        MemoryConfig(**bad)


def test_bench_memory_writes_its_figures(tmp_path):
    import json

    from wmsuite.cli import main

    assert main(["bench", "memory", "--frames", "150", "--queries", "10", "--repeats", "1", "--out",
                 str(tmp_path)]) == 0
    figures = json.loads((tmp_path / "metrics.json").read_text())
    assert figures["retrieve_cost_ratio"] == pytest.approx(figures["retrieve_ms_h150"] / figures["retrieve_ms_h100"])
    assert figures["cache_points_h150"] >= figures["cache_points_h100"] > 0 and figures["add_ms"] > 0
    with pytest.raises(SystemExit):  # the config's error, printed by the CLI before any work
        main(["bench", "memory", "--frames", "50"])

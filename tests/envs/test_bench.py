"""`bench_envs` runs a single env and a spawned AsyncVectorEnv and reports positive rates."""

from __future__ import annotations

from wmsuite.envs.bench import bench_envs


def test_bench_envs_reports_single_and_vector_rates():
    figures = bench_envs(["wmsuite/PushCube-v0"], steps=30, image_size=32, num_envs=2, warmup=5)
    assert set(figures) == {"PushCube-v0.single_steps_per_s", "PushCube-v0.single_cpu_steps_per_s",
                            "PushCube-v0.vector2_steps_per_s", "PushCube-v0.vector2_speedup"}
    assert all(v > 0 for v in figures.values())
    # the speedup is the ratio of the two rates it names, not a figure of its own
    assert figures["PushCube-v0.vector2_speedup"] == (figures["PushCube-v0.vector2_steps_per_s"]
                                                       / figures["PushCube-v0.single_steps_per_s"])
    # CPU time never exceeds wall time in one single-threaded loop, so the CPU rate is the higher one
    assert figures["PushCube-v0.single_cpu_steps_per_s"] >= 0.9 * figures["PushCube-v0.single_steps_per_s"]

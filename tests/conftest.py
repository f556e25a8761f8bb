import os

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("WANDB_MODE", "offline")
if "PYTEST_XDIST_WORKER" in os.environ:
    # `pytest -n N` runs N workers side by side: one thread each (and in what they launch), so that
    # the workers share the cores instead of oversubscribing them.
    os.environ["OMP_NUM_THREADS"] = "1"

# diffusers loads triton's shared library; doing that after a MuJoCo EGL context exists crashes the
# process, so load it first (the CLI commands that need both import the models before making envs).
import importlib.util  # noqa: E402

if importlib.util.find_spec("diffusers") is not None:  # the lerobot venv runs its tests without it
    import diffusers  # noqa: F401

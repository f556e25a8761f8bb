"""Task instructions in the world model (#29, LIBERO's several tasks in one model): the word hash, an
instruction the model must read to predict, train-wm on a directory of LIBERO-layout files without
object state, and the instruction reaching the learned simulator's rollouts."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.world_models.conftest import overfit, tiny_model
from wmsuite.types import Episode
from wmsuite.world_models.contexts import EpisodeContext
from wmsuite.world_models.data import LatentWindows, encode_episodes, episode_frames
from wmsuite.world_models.env import WorldModelEnv
from wmsuite.world_models.model import INSTRUCTION_WORDS, instruction_tokens


def test_instruction_tokens_hash_words_and_pad_with_zero():
    tok = instruction_tokens(["Put the BOWL on the plate", "put the bowl on the stove", ""], 64)
    assert tok.shape == (3, INSTRUCTION_WORDS) and tok.dtype == torch.int64
    assert (tok[0, :6] > 0).all() and (tok[0, 6:] == 0).all() and (tok[2] == 0).all()
    assert torch.equal(tok[0, :5], tok[1, :5])  # the same words, case aside, get the same ids
    assert tok[0, 1] == tok[0, 4]  # "the" twice
    assert tok.max() <= 64
    long = instruction_tokens([" ".join(["w"] * 100)], 8)
    assert (long > 0).sum() == INSTRUCTION_WORDS


def _slide(task: str, step: int, t: int = 8, size: int = 16) -> Episode:
    """A white square that slides `step` pixels a step from the middle whatever the (zero) actions:
    only the instruction tells which way."""
    frames, x = [], 6
    for _ in range(t + 1):
        img = np.zeros((size, size, 3), np.uint8)
        img[6:10, x : x + 4] = 255
        frames.append(img)
        x += step
    states = np.zeros((t + 1, 2), np.float32)
    return Episode(obs={"top": np.stack(frames)}, state=states, env_state=np.zeros((t + 1, 0), np.float32),
                   actions=np.zeros((t, 2), np.float32), rewards=np.zeros(t, np.float32), success=False,
                   terminated=False, truncated=True, task=task)


def test_a_model_with_instructions_learns_what_only_the_instruction_says():
    episodes = [_slide("slide right", 1), _slide("slide left", -1)]
    # every context one frame repeated (as a rollout starts): nothing in it says which way the square goes
    model = tiny_model(episodes, instruction_buckets=32, env_state_dim=0, context_noise_max=0.0, p_single_frame=1.0)
    data = LatentWindows(episodes, encode_episodes(model.codec, episode_frames(episodes, "top")), 2, 2, 32)
    batch = data.batch(range(len(data)))
    assert torch.equal(batch["instruction"][0], instruction_tokens(["slide right"], 32)[0])
    overfit(model, batch)
    gen = torch.Generator().manual_seed(0)
    target, context = batch["future"][:, :2], batch["context"][:, -1:].expand_as(batch["context"])
    right = model.generate(context, batch["actions"], generator=gen, instruction=batch["instruction"])
    swapped = model.generate(context, batch["actions"], generator=gen, instruction=_swap(batch["instruction"]))
    err_right, err_swapped = (right - target).pow(2).mean(), (swapped - target).pow(2).mean()
    assert err_right < 0.3 * err_swapped, (float(err_right), float(err_swapped))


def _swap(words: torch.Tensor) -> torch.Tensor:
    """Each row's instruction replaced by the other task's."""
    right, left = instruction_tokens(["slide right"], 32)[0], instruction_tokens(["slide left"], 32)[0]
    is_right = (words == right).all(1, keepdim=True)
    return torch.where(is_right, left, right)


def test_a_model_without_instructions_ignores_them_and_no_words_read_as_no_instruction(episodes):
    plain, read = tiny_model(episodes, seed=3), tiny_model(episodes, seed=3, instruction_buckets=16)
    assert plain.instruction is None and read.instruction is not None
    ctx, act = torch.randn(2, 2, plain.codec.latent_channels, 4, 4), torch.randn(2, 2, 2)

    def gen(model, words):
        return model.generate(ctx, act, generator=torch.Generator().manual_seed(0), instruction=words)

    words = instruction_tokens(["push it", "pull it"], 16)
    assert torch.equal(gen(plain, words), gen(plain, None))
    assert torch.equal(gen(read, instruction_tokens(["", ""], 16)), gen(read, None))
    assert not torch.allclose(gen(read, words), gen(read, None))


@pytest.mark.slow
def test_train_wm_on_a_libero_suite_directory_reads_each_task(tmp_path):
    from tests.real.public_layouts import LIBERO_PROBLEM, write_libero
    from wmsuite.cli import main
    from wmsuite.data import load_episodes
    from wmsuite.world_models import load_world_model

    suite = tmp_path / "libero_suite"
    suite.mkdir()
    tasks = ["put the bowl on the plate", "open the top drawer"]
    for i, task in enumerate(tasks):
        write_libero(suite / f"task{i}_demo.hdf5", [14, 12], size=32, seed=i,
                     problem_info={**LIBERO_PROBLEM, "language_instruction": task})
    out = tmp_path / "run"
    assert main(["train-wm", "--data", str(suite), "--out", str(out), "--codec.image-size", "32",
                 "--dynamics.steps", "6", "--heads-train.steps", "2", "--model.channels", "16", "16"]) == 0
    config = json.loads((out / "latest" / "config.json").read_text())["world_model"]
    assert config["instruction_buckets"] == 256 and config["env_state_dim"] == 0
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [v for row in logged for k, v in row.items() if "loss" in k and isinstance(v, float)]
    assert losses and np.isfinite(losses).all()  # no object state: skipped, not NaN

    model = load_world_model(out)
    episodes = [ep for f in sorted(suite.glob("*.hdf5")) for ep in load_episodes(f)]
    env = WorldModelEnv(model, EpisodeContext(episodes), num_envs=2, horizon=2)
    _, info = env.reset(seed=[0, 2])  # an episode of each task
    assert torch.equal(env.state.instruction, instruction_tokens(tasks, 256))
    assert list(info["task"]) == tasks and info["_task"].all()  # what a policy that reads language is told
    env.step(np.zeros((2, model.cfg.chunk, model.cfg.action_dim), np.float32))
    assert torch.equal(env.state.instruction, instruction_tokens(tasks, 256))  # carried through the rollout

    class Listener:  # a policy that records the instruction it is told
        n_action_steps, seen = model.cfg.chunk, []

        def reset(self):
            pass

        def predict_action_chunk(self, obs):
            self.seen.append(list(obs["task"]))
            return np.zeros((len(obs["task"]), model.cfg.chunk, model.cfg.action_dim), np.float32)

    from wmsuite.rollout import RolloutConfig, rollout

    listener = Listener()
    eps = list(rollout(listener, env, RolloutConfig(episodes=2, seed=0, progress=False)))
    by_seed = {int(ep.meta["seed"]): ep.task for ep in eps}
    assert by_seed == {s: episodes[s % len(episodes)].task for s in (0, 1)} and listener.seen[0] == list(by_seed.values())


def test_the_round_trip_plays_back_with_each_rollouts_instruction(episodes):
    from wmsuite.world_models.model import BACKWARD
    from wmsuite.world_models.trust import round_trip_error

    model = tiny_model(episodes, instruction_buckets=16, p_backward=0.5).eval()
    seen = []
    generate = model.generate

    def recording(context, actions, direction=1, steps=None, generator=None, instruction=None):
        seen.append((direction, instruction))
        return generate(context, actions, direction, steps, generator, instruction=instruction)

    model.generate = recording
    words = instruction_tokens(["push it", "pull it"], 16)
    k, c = model.cfg.context, model.codec.latent_channels
    round_trip_error(model, torch.randn(2, c, 4, 4), torch.randn(2, k, c, 4, 4), torch.zeros(2, 6, 2), samples=3,
                     instruction=words)
    assert seen and all(d == BACKWARD for d, _ in seen)
    assert all(torch.equal(w, words.repeat_interleave(3, 0)) for _, w in seen)  # each of the R samples, its own row's

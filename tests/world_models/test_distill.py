"""A fast learned simulator: the sampler as a function of its noise, a distilled few-step student, and
bfloat16 inference."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from tests.world_models.conftest import tiny_model
from wmsuite.world_models import FORWARD, WorldModelConfig, load_world_model
from wmsuite.world_models.config import DistillConfig
from wmsuite.world_models.data import LatentWindows, encode_episodes, episode_frames
from wmsuite.world_models.objectives import distillation_loss
from wmsuite.world_models.train import save_model


def _batch(model, episodes, rows=range(0, 24, 3)):
    lat = encode_episodes(model.codec, episode_frames(episodes, "top"))
    return LatentWindows(episodes, lat, model.cfg.context, model.cfg.chunk).batch(rows)


def test_generate_is_the_sampler_applied_to_the_noise_its_generator_draws(episodes):
    model = tiny_model(episodes, prediction="sample", sampling_steps=3)
    batch = _batch(model, episodes)
    b, (h, c, s) = len(batch["context"]), (model.cfg.chunk, model.codec.latent_channels, model.codec.latent_size)
    out = model.generate(batch["context"], batch["actions"], generator=torch.Generator().manual_seed(3))
    noise = torch.randn((b, h, c, s, s), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        again = model.sample(batch["context"], batch["actions"], noise, FORWARD)
    torch.testing.assert_close(out, again, rtol=0, atol=0)


def test_a_one_step_student_learns_its_three_step_teacher_on_noise_it_never_saw(episodes):
    """Distillation closes most of the gap between the student's one-step and the teacher's three-step
    samples from the same starting noise, measured on fresh noise; heads and IDM do not move."""
    teacher = tiny_model(episodes, prediction="sample", sampling_steps=3, p_single_frame=0.0, seed=1)
    student = copy.deepcopy(teacher)
    batch = _batch(teacher, episodes)
    b, (h, c, s) = len(batch["context"]), (teacher.cfg.chunk, teacher.codec.latent_channels, teacher.codec.latent_size)
    noise = torch.randn((b, h, c, s, s), generator=torch.Generator().manual_seed(99))  # not a training draw

    def gap() -> float:
        with torch.no_grad():
            want = teacher.sample(batch["context"], batch["actions"], noise, FORWARD)
            return float((student.sample(batch["context"], batch["actions"], noise, FORWARD, steps=1) - want).pow(2).mean())

    before, heads = gap(), copy.deepcopy(student.heads.state_dict())
    student.requires_grad_(False)
    student.denoiser.requires_grad_(True)
    student.cond.requires_grad_(True)
    opt = torch.optim.Adam([p for p in student.parameters() if p.requires_grad], lr=2e-3)
    torch.manual_seed(0)
    for _ in range(150):
        loss, logs = distillation_loss(student, teacher, batch, steps=1)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert {"loss", "distill/mse"} <= set(logs)
    assert gap() < 0.3 * before, (before, gap())
    assert all(torch.equal(v, student.heads.state_dict()[k]) for k, v in heads.items())


def test_bfloat16_inference_stays_close_to_float32_and_training_stays_float32(episodes):
    model = tiny_model(episodes, prediction="sample")
    fast = copy.deepcopy(model)
    fast.cfg = WorldModelConfig(**{**model.cfg.__dict__, "precision": "bfloat16"})
    batch = _batch(model, episodes)
    gen = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    ref, out = (m.generate(batch["context"], batch["actions"], generator=gen()) for m in (model, fast))
    assert out.dtype == torch.float32 and not torch.equal(out, ref)  # it did run in another format
    assert float((out - ref).abs().max()) < 0.1 * float(ref.abs().max())
    heads = fast.predict_heads(batch["future"][:, :2])
    assert all(v.dtype == torch.float32 for v in heads.values())
    loss, _ = fast.loss(batch)  # gradients flow: autocast is off, the loss is float32 and finite
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    with pytest.raises(ValueError, match="precision"):
        WorldModelConfig(precision="float16")
    with pytest.raises(ValueError, match="steps"):
        DistillConfig(steps=0)


def test_distill_stage_writes_a_one_step_student_and_refuses_a_missing_teacher(episodes, tmp_path, capsys):
    """`train-wm --stage distill` end to end on a tiny teacher: the student is a checkpoint with one
    sampling step that names its teacher; a resumed run goes on; a wrong teacher fails before any data."""
    from wmsuite.cli import main
    from wmsuite.data import write_episodes

    data = tmp_path / "squares.hdf5"
    write_episodes(data, episodes, {"env_name": "none"})
    teacher = tiny_model(episodes, prediction="sample", sampling_steps=3)
    save_model(teacher, tmp_path / "teacher", step=7)
    run = tmp_path / "student"
    args = ["train-wm", "--data", str(data), "--out", str(run), "--stage", "distill", "--distill.teacher",
            str(tmp_path / "teacher"), "--distill-train.batch-size", "4", "--distill-train.save-every", "2"]
    assert main([*args, "--distill-train.steps", "2"]) == 0
    config = json.loads((run / "latest" / "config.json").read_text())
    assert config["world_model"]["sampling_steps"] == 1 and config["distill_steps"] == 2 and config["step"] == 7
    assert config["distilled_from"] == str(tmp_path / "teacher") and config["teacher_steps"] == 3
    student = load_world_model(run)
    assert not torch.equal(student.denoiser.conv_in.weight, teacher.denoiser.conv_in.weight)
    torch.testing.assert_close(student.idm.net[0].weight, teacher.idm.net[0].weight)
    assert main([*args, "--distill-train.steps", "3", "--resume"]) == 0
    assert json.loads((run / "latest" / "config.json").read_text())["distill_steps"] == 3
    # its heads pass runs in the same directory and keeps what says where the student came from
    assert main(["train-wm", "--data", str(data), "--out", str(run), "--stage", "heads", "--heads-train.steps", "2",
                 "--heads-train.batch-size", "8", "--heads.generated-windows", "8"]) == 0
    config = json.loads((run / "latest" / "config.json").read_text())
    assert config["distill_steps"] == 3 and config["heads_steps"] == 2 and config["world_model"]["sampling_steps"] == 1
    # a second run goes on from that student, on its own contexts; its start is the student, not the teacher
    more = tmp_path / "more"
    assert main(["train-wm", "--data", str(data), "--out", str(more), "--stage", "distill", "--distill.teacher",
                 str(tmp_path / "teacher"), "--distill.student", str(run), "--distill.own-contexts", "1",
                 "--distill-train.batch-size", "4", "--distill-train.steps", "1"]) == 0
    went_on, earlier = load_world_model(more), load_world_model(run)
    assert not torch.equal(went_on.denoiser.conv_in.weight, earlier.denoiser.conv_in.weight)
    for a, b in zip(went_on.heads.parameters(), earlier.heads.parameters(), strict=True):
        torch.testing.assert_close(a, b)  # the earlier student's heads (its heads pass), not the teacher's
    capsys.readouterr()
    assert main(["train-wm", "--data", str(data), "--out", str(tmp_path / "other"), "--stage", "distill",
                 "--distill.teacher", str(tmp_path / "nowhere")]) == 2
    assert "--distill.teacher" in capsys.readouterr().err
    assert main(["train-wm", "--data", str(data), "--out", str(tmp_path / "other"), "--stage", "distill",
                 "--distill.teacher", str(tmp_path / "teacher"), "--distill.student", str(tmp_path / "nowhere")]) == 2
    assert "--distill.student" in capsys.readouterr().err


def test_own_contexts_are_the_students_rollout_from_the_real_history(episodes):
    """With own=1 every row whose history lies inside its episode is distilled from the context the
    student imagines from that history with its actions; the others keep their real context."""
    from wmsuite.world_models.rollout import WorldModelState, rollout

    teacher = tiny_model(episodes, prediction="sample", sampling_steps=3, p_single_frame=0.0, seed=1)
    student = copy.deepcopy(teacher)
    lat = encode_episodes(teacher.codec, episode_frames(episodes, "top"))
    batch = LatentWindows(episodes, lat, teacher.cfg.context, teacher.cfg.chunk).batch(range(0, 24, 3), history_chunks=2)
    valid = batch["history_valid"]
    assert valid.any() and not valid.all()  # both kinds of rows
    seen = {}
    sample = teacher.sample

    def spy(context, *args, **kwargs):
        seen["context"] = context.clone()
        return sample(context, *args, **kwargs)

    teacher.sample = spy
    torch.manual_seed(5)
    loss, logs = distillation_loss(student, teacher, batch, steps=1, own=1.0)
    assert torch.isfinite(loss) and logs["distill/own_share"] == pytest.approx(float(valid.float().mean()))
    torch.manual_seed(5)  # the same draws by hand: single-frame rows, own rows, then the rollout's noise
    b = len(valid)
    torch.rand(b), torch.rand(b)
    rows = valid.nonzero().squeeze(1)
    with torch.no_grad():
        _, state = rollout(student, WorldModelState(batch["history"][rows]), batch["history_actions"][rows], FORWARD, 1)
    torch.testing.assert_close(seen["context"][rows], state.context)
    torch.testing.assert_close(seen["context"][~valid], batch["context"][~valid])
    assert not torch.allclose(seen["context"][rows], batch["context"][rows])  # imagined, not the real frames
    with pytest.raises(ValueError, match="history"):
        distillation_loss(student, teacher, _batch(teacher, episodes), steps=1, own=0.5)
    with pytest.raises(ValueError, match="own_contexts"):
        DistillConfig(own_contexts=1.5)


def test_a_bfloat16_default_falls_back_to_float32_where_bfloat16_is_slow(episodes, tmp_path, monkeypatch):
    import wmsuite.world_models as wm

    model = tiny_model(episodes, prediction="sample")
    model.cfg = WorldModelConfig(**{**model.cfg.__dict__, "precision": "bfloat16"})
    save_model(model, tmp_path, step=1)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert not wm.bfloat16_is_fast("cpu")
    assert load_world_model(tmp_path / "latest").cfg.precision == "float32"  # the checkpoint's default, on a slow CPU
    assert load_world_model(tmp_path / "latest", precision="bfloat16").cfg.precision == "bfloat16"  # asked for
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert load_world_model(tmp_path / "latest").cfg.precision == "bfloat16"

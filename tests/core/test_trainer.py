"""The one trainer: the schedule's analytic values, learning a known optimum, bit-exact resume,
the weight average against its formula, the time budget and the refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from wmsuite.checkpoint import load_checkpoint
from wmsuite.logging import RunLogger
from wmsuite.train import Objective, Trainer, TrainerConfig, WeightAverage, lr_at

X = torch.linspace(-1, 1, 16)[:, None]
Y = 2.0 * X + 1.0  # the optimum of a linear model: weight 2, bias 1


def mse(module, batch):
    x, y = batch
    loss = ((module(x) - y) ** 2).mean()
    return loss, {"loss": float(loss.detach())}


def full_batches(start):  # the same full batch every step: nothing random, so runs are exactly repeatable
    while True:
        yield X, Y


def linear(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Linear(1, 1)


def cfg(**kw):
    return TrainerConfig(**{"steps": 6, "batch_size": 16, "lr": 0.05, "warmup": 2, "save_every": 2, "log_every": 1,
                            "weight_decay": 0.0, **kw})


def test_lr_schedule_warms_up_then_decays_and_restarts_where_asked():
    c = TrainerConfig(steps=1200, lr=1.0, warmup=50, min_lr_ratio=0.1)
    for begin in (0, 1000):
        c2 = TrainerConfig(steps=begin + 250, lr=1.0, warmup=50)
        assert lr_at(begin, c2, begin) == pytest.approx(1 / 50)  # warm-up
        assert lr_at(begin + 49, c2, begin) == pytest.approx(1.0)
        assert lr_at(begin + 150, c2, begin) == pytest.approx(0.55)  # half-way through the cosine: cos = 0
        assert lr_at(begin + 250, c2, begin) == pytest.approx(0.1)
    # without a restart, the resumed steps go on along the first schedule
    assert lr_at(1100, c) == pytest.approx(0.1 + 0.45 * (1 + np.cos(np.pi * 1050 / 1150)))


def test_learns_the_optimum_and_logs(tmp_path):
    log = RunLogger(tmp_path)
    model = linear()
    result = Trainer(tmp_path, logger=log, progress=False).fit(
        "fit", Objective(model, mse), cfg(steps=400, lr=0.1, warmup=10, save_every=400, log_every=100), full_batches)
    log.close()
    assert result.steps == 400 and result.logs["loss"] < 1e-4
    assert model.weight.item() == pytest.approx(2.0, abs=1e-2) and model.bias.item() == pytest.approx(1.0, abs=1e-2)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [100, 200, 300, 400]
    assert {"loss", "fit/lr", "fit/grad_norm", "fit/steps_per_s"} <= set(rows[0])


def random_batches(start):  # batches drawn from a generator seeded by the start step, as the components do
    g = torch.Generator().manual_seed(100 + start)
    while True:
        x = torch.rand(8, 1, generator=g) * 2 - 1
        yield x, 2.0 * x + 1.0


def noisy_mse(module, batch):  # a loss that also draws from torch's global RNG (dropout, diffusion noise)
    x, y = batch
    loss = ((module(x + 0.01 * torch.randn_like(x)) - y) ** 2).mean()
    return loss, {"loss": float(loss.detach())}


def test_resume_continues_exactly_where_the_run_stopped(tmp_path):
    """A run killed between saves and resumed ends bit-equal to an uninterrupted one, though its batch
    source and loss draw random numbers; the metrics rows of the redone steps are not duplicated."""
    log = RunLogger(tmp_path / "a")
    once = linear()
    Trainer(tmp_path / "a", progress=False, logger=log).fit("fit", Objective(once, noisy_mse), cfg(ema_decay=0.9),
                                                            random_batches)
    log.close()
    drawn = []

    def killed_during_step_five(start):
        for batch in random_batches(start):
            if len(drawn) == 4:
                raise KeyboardInterrupt  # the run dies during step 5; the train state of step 4 is on disk
            drawn.append(start)
            yield batch

    exported = []
    log = RunLogger(tmp_path / "b")
    with pytest.raises(KeyboardInterrupt):
        Trainer(tmp_path / "b", progress=False, logger=log).fit(
            "fit", Objective(linear(), noisy_mse), cfg(ema_decay=0.9), killed_during_step_five, export=exported.append)
    log.close()
    assert exported == [2, 4] and drawn == [0, 0, 2, 2]  # the source restarts from (seed, step) at every save
    again = linear(seed=5)  # other initial weights: resume must replace them
    log = RunLogger(tmp_path / "b")
    Trainer(tmp_path / "b", progress=False, logger=log).fit("fit", Objective(again, noisy_mse), cfg(ema_decay=0.9),
                                                            random_batches, resume=True)
    log.close()
    assert torch.equal(again.weight, once.weight) and torch.equal(again.bias, once.bias)
    tensors, config = load_checkpoint(tmp_path / "b" / "train_state" / "fit")
    ref, _ = load_checkpoint(tmp_path / "a" / "train_state" / "fit")
    assert config["step"] == 6 and set(tensors) == set(ref)
    for key in ref:  # weights, average and optimizer moments all equal the uninterrupted run's
        torch.testing.assert_close(tensors[key], ref[key], rtol=0, atol=0)
    rows = {d: [json.loads(line) for line in (tmp_path / d / "metrics.jsonl").read_text().splitlines()] for d in "ab"}
    assert [r["step"] for r in rows["b"]] == [1, 2, 3, 4, 5, 6]
    assert [r["loss"] for r in rows["b"]] == [r["loss"] for r in rows["a"]]


def test_a_kill_between_the_train_state_and_its_export_is_repaired_on_resume(tmp_path):
    """The train state is written before the export; a resume re-exports it, so the exported weights
    end equal to an uninterrupted run's even when the kill fell between the two."""
    def export_to(path, module):
        return lambda step: path.write_text(json.dumps([step, module.module.weight.item()]))

    once = Objective(linear(), noisy_mse)
    Trainer(tmp_path / "a", progress=False).fit("fit", once, cfg(), random_batches,
                                                export=export_to(tmp_path / "a.json", once))
    killed = Objective(linear(), noisy_mse)

    def dies_at_the_second_export(step):
        if step == 4:
            raise KeyboardInterrupt  # the train state of step 4 is on disk, its export is not
        (tmp_path / "b.json").write_text(json.dumps([step, killed.module.weight.item()]))

    with pytest.raises(KeyboardInterrupt):
        Trainer(tmp_path / "b", progress=False).fit("fit", killed, cfg(), random_batches,
                                                    export=dies_at_the_second_export)
    assert json.loads((tmp_path / "b.json").read_text())[0] == 2
    again = Objective(linear(seed=5), noisy_mse)
    Trainer(tmp_path / "b", progress=False).fit("fit", again, cfg(), random_batches, resume=True,
                                                export=export_to(tmp_path / "b.json", again))
    assert (tmp_path / "b.json").read_text() == (tmp_path / "a.json").read_text()


def test_a_non_finite_loss_stops_the_run_before_the_step_is_applied(tmp_path):
    from wmsuite.train import TrainingDivergedError

    model = linear()

    def poisoned(start):  # step 3's batch holds a NaN
        for i, batch in enumerate(full_batches(start), start + 1):
            yield (torch.full_like(X, float("nan")), Y) if i == 3 else batch

    with pytest.raises(TrainingDivergedError, match="step 3.*last saved state is step 2"):
        Trainer(tmp_path, progress=False).fit("fit", Objective(model, mse), cfg(), poisoned)
    assert torch.isfinite(model.weight).all() and torch.isfinite(model.bias).all()
    tensors, config = load_checkpoint(tmp_path / "train_state" / "fit")
    assert config["step"] == 2 and all(torch.isfinite(t).all() for t in tensors.values())


def test_weight_average_follows_its_formula_and_is_what_export_sees(tmp_path):
    model = linear()
    avg = WeightAverage(model, decay=0.5)
    start = model.weight.detach().clone()
    with torch.no_grad():
        model.weight.fill_(3.0)
    avg.update(model, step=1)  # d = min(0.5, 2 / 11)
    d = 2 / 11
    torch.testing.assert_close(avg.average["weight"], d * start + (1 - d) * 3.0)
    with avg.swapped(model):
        torch.testing.assert_close(model.weight.detach(), avg.average["weight"])
    assert model.weight.item() == 3.0  # the raw weights come back

    seen = []
    m = linear()
    Trainer(tmp_path, progress=False).fit("fit", Objective(m, mse), cfg(steps=2, ema_decay=0.5), full_batches,
                                          export=lambda step: seen.append(m.weight.item()))
    state, _ = load_checkpoint(tmp_path / "train_state" / "fit")
    assert seen[-1] == pytest.approx(state["ema.module.weight"].item())  # exported: the average
    assert m.weight.item() == pytest.approx(state["model.module.weight"].item())  # kept training: the raw weights
    assert seen[-1] != m.weight.item()


def test_restarted_schedule_warms_up_again_from_the_resumed_step(tmp_path):
    log = RunLogger(tmp_path)
    t = Trainer(tmp_path, logger=log, progress=False)
    t.fit("fit", Objective(linear(), mse), cfg(steps=4), full_batches)
    t.fit("fit", Objective(linear(), mse), cfg(steps=8, restart_schedule=True), full_batches, resume=True)
    log.close()
    lrs = {json.loads(r)["step"]: json.loads(r)["fit/lr"] for r in (tmp_path / "metrics.jsonl").read_text().splitlines()}
    assert lrs[5] == pytest.approx(0.05 / 2) and lrs[6] == pytest.approx(0.05)  # warm-up again from step 4


def test_time_budget_saves_and_stops(tmp_path):
    result = Trainer(tmp_path, progress=False).fit("fit", Objective(linear(), mse), cfg(steps=1000, max_minutes=1e-9),
                                                   full_batches)
    assert result.out_of_time and result.steps == 1
    assert load_checkpoint(tmp_path / "train_state" / "fit")[1]["step"] == 1


def test_refusals_name_what_to_do(tmp_path):
    t = Trainer(tmp_path, progress=False)
    with pytest.raises(FileNotFoundError, match="no train state"):
        t.fit("fit", Objective(linear(), mse), cfg(), full_batches, resume=True)
    t.fit("fit", Objective(linear(), mse), cfg(steps=2), full_batches)
    with pytest.raises(FileExistsError, match="--resume"):
        t.fit("fit", Objective(linear(), mse), cfg(steps=2), full_batches)
    with pytest.raises(ValueError, match="another architecture"):
        t.fit("fit", Objective(torch.nn.Linear(2, 1), mse), cfg(steps=4), full_batches, resume=True)
    frozen = linear().requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        t.fit("other", Objective(frozen, mse), cfg(), full_batches)
    with pytest.raises(ValueError, match="ema_decay must be in"):
        TrainerConfig(ema_decay=1.0)

"""`select` and `wmsuite select`: the choice is made on validation figures only, and leave-one-family-out
takes each family's test rows from the candidate chosen without that family."""

from __future__ import annotations

import json

import numpy as np
import pytest

from wmsuite.cli import main
from wmsuite.eval_harness.metrics import all_metrics
from wmsuite.eval_harness.selection import select


def _rows(split, errors, real=(0.1, 0.5, 0.9, 0.3, 0.7, 0.2)):
    """Policy rows over families a, a, b, b, c, c with predicted = real + error."""
    fams = ["a", "a", "b", "b", "c", "c"]
    return [{"name": f"{split}{i}", "family": fams[i], "split": split, "real_success": r,
             "predicted_success": r + e} for i, (r, e) in enumerate(zip(real, errors, strict=True))]


def _metrics(split, errors):
    return {"policies": _rows(split, errors)}


def test_choice_ignores_the_test_split_and_lofo_excludes_each_family():
    # good: small errors on validation but large ones on test; bad: the reverse. Chosen must be 'good'.
    good = (_metrics("validation", [0.01, -0.01, 0.02, 0.0, 0.3, 0.3]), _metrics("test", [0.4] * 6))
    bad = (_metrics("validation", [0.2, -0.2, 0.2, -0.2, 0.0, 0.0]), _metrics("test", [0.0] * 6))
    result = select({"good": good, "bad": bad}, "mean_abs_error")
    assert result["chosen"] == "good"
    assert result["test"]["mean_abs_error"] == pytest.approx(0.4)
    # Leaving family c out, 'good' is far better on a and b; leaving a (or b) out, 'good' still pays
    # c's 0.3 errors against 'bad''s 0.2 on the other family: mean 0.15 vs 0.1 -> 'bad'.
    assert result["lofo_choice"] == {"a": "bad", "b": "bad", "c": "good"}
    pooled = [r for fam, name in result["lofo_choice"].items()
              for r in {"good": good, "bad": bad}[name][1]["policies"] if r["family"] == fam]
    expected = all_metrics([r["predicted_success"] for r in pooled], [r["real_success"] for r in pooled])
    assert result["lofo_test"]["mean_abs_error"] == pytest.approx(expected["mean_abs_error"])
    assert result["lofo_test"]["families"]["c"]["mean_abs_error"] == pytest.approx(0.4)


def test_candidates_on_different_policies_are_refused():
    a = (_metrics("validation", [0.0] * 6), _metrics("test", [0.0] * 6))
    b = ({"policies": _rows("validation", [0.0] * 6)[:4]}, _metrics("test", [0.0] * 6))
    with pytest.raises(ValueError, match="different validation policies"):
        select({"a": a, "b": b})


def test_cli_reads_runs_writes_metrics_and_refuses_the_wrong_split(tmp_path, capsys):
    for name, errs in (("x", 0.05), ("y", 0.2)):
        for split in ("validation", "test"):
            d = tmp_path / f"{name}-{split}"
            d.mkdir()
            (d / "metrics.json").write_text(json.dumps(_metrics(split, list(np.full(6, errs)))))
    cands = [f"{n}={tmp_path}/{n}-validation,{tmp_path}/{n}-test" for n in ("x", "y")]
    assert main(["select", "--candidates", *cands, "--out", str(tmp_path / "sel")]) == 0
    result = json.loads((tmp_path / "sel" / "metrics.json").read_text())
    assert result["chosen"] == "x" and result["test"]["mean_abs_error"] == pytest.approx(0.05)
    assert "leave-one-family-out" in capsys.readouterr().out
    swapped = [f"x={tmp_path}/x-test,{tmp_path}/x-validation"]
    assert main(["select", "--candidates", *swapped, "--out", str(tmp_path / "bad")]) == 2
    assert "not only 'validation'" in capsys.readouterr().err


def test_a_test_run_is_needed_only_where_a_candidate_is_chosen():
    good = (_metrics("validation", [0.0] * 6), _metrics("test", [0.1] * 6))
    worse = (_metrics("validation", [0.3] * 6), None)  # never chosen: no test run needed
    result = select({"good": good, "worse": worse})
    assert result["chosen"] == "good" and set(result["lofo_choice"].values()) == {"good"}
    with pytest.raises(ValueError, match="has no test run"):
        select({"good": (good[0], None), "worse": worse})


def test_eval_split_picks_the_split_and_its_seed(tmp_path):
    """`wmsuite eval --split` keeps the manifest's policies of that split with family and split labels,
    starts from the seed the manifest names for it (an explicit --seed wins), and refuses what it cannot do."""
    from wmsuite.cli.eval import EvalConfig
    from wmsuite.cli.eval_setup import policy_entries, resolve_judge

    manifest = tmp_path / "zoo.json"
    manifest.write_text(json.dumps({
        "splits": {"validation": {"seed": 500}, "test": {"seed": 0}},
        "policies": [{"name": f"p{i}", "spec": f"expert@{i / 4}", "family": "expert" if i % 2 else "other",
                      "split": "validation" if i < 2 else "test"} for i in range(5)]}))
    entries, _, seed = policy_entries(EvalConfig(zoo=str(manifest), split="validation"))
    assert [e.name for e in entries] == ["p0", "p1"] and seed == 500
    assert [(e.family, e.split) for e in entries] == [("other", "validation"), ("expert", "validation")]
    entries, _, seed = policy_entries(EvalConfig(zoo=str(manifest), split="test", seed=7))
    assert [e.name for e in entries] == ["p2", "p3", "p4"] and seed == 7
    assert policy_entries(EvalConfig(zoo=str(manifest)))[2] == 0
    # --judge auto: the probe's auto_judge (tracked on the pushing tasks, the latched rule on PickPlace and
    # Lift, each its zoo's validation choice), the success head where there is no probe
    assert resolve_judge(EvalConfig()) == "tracked" and resolve_judge(EvalConfig(judge="state")) == "state"
    assert resolve_judge(EvalConfig(env="wmsuite/PickPlace-v0")) == "latched"
    assert resolve_judge(EvalConfig(env="wmsuite/robosuite-Lift-v0")) == "latched"
    from wmsuite.cli.eval_setup import make_env_factory  # judge settings fail before any model is touched

    with pytest.raises(ValueError, match="--judge latched needs a gripper command"):
        make_env_factory(EvalConfig(judge="latched"), model=None)  # PushCube's pusher has no gripper
    with pytest.raises(ValueError, match="does not apply to --policies"):
        policy_entries(EvalConfig(policies=("expert@1", "expert@0"), split="test"))
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"policies": [{"name": "a", "spec": "expert@1"}, {"name": "b", "spec": "expert@0"}]}))
    with pytest.raises(ValueError, match="defines no 'test' split"):
        policy_entries(EvalConfig(zoo=str(plain), split="test"))
    with pytest.raises(ValueError, match="--split must be"):
        EvalConfig(split="train")
    with pytest.raises(ValueError, match="--judge must be auto or one of"):
        EvalConfig(judge="oracle")

"""Choose a learned simulator on validation policies, report it on test policies, and do it leaving
each policy family out.

    result = select(candidates, criterion="mean_abs_error")
    # candidates: name -> (validation metrics, test metrics or None), each the metrics.json of a
    #             `wmsuite eval` run of one candidate (a world model, a judge, a recipe) on that split

A candidate is whatever one evaluation run fixed: a checkpoint, a success judge, sampling steps. The
protocol never looks at the test figures to choose:

- **chosen**: the candidate with the best `criterion` over every validation policy; its figures over
  every test policy, overall and per family.
- **leave-one-family-out**: for each family F, the candidate with the best criterion over the
  validation policies of the *other* families; F's test policies are then predicted by that
  candidate. The pooled test rows (each family from its own choice) give the figures: what a user
  bringing policies of a family nobody tuned on should expect.

A candidate's test run is needed only where it is chosen (overall or for some family); one given
without it is refused only then. Criteria are `all_metrics` keys: lower is better for mmrv and
mean_abs_error, higher for the correlations. Ties go to the candidate named first.
"""

from __future__ import annotations

import math
from typing import Any

from wmsuite.eval_harness.evaluate import family_metrics, row_metrics

LOWER_IS_BETTER = ("mean_abs_error", "mmrv")
HIGHER_IS_BETTER = ("pearson", "spearman", "kendall")

Metrics = dict[str, Any]


def score(rows: list[dict[str, Any]], criterion: str) -> float:
    """The criterion over `rows` (policy rows of a metrics.json), oriented so that lower is better;
    +inf where it is undefined (fewer than two policies, a constant vector)."""
    if criterion not in LOWER_IS_BETTER + HIGHER_IS_BETTER:
        raise ValueError(f"criterion must be one of {', '.join(LOWER_IS_BETTER + HIGHER_IS_BETTER)}, got {criterion!r}")
    value = row_metrics(rows).get(criterion, math.nan)
    if len(rows) < 2 or not math.isfinite(value):
        return math.inf
    return value if criterion in LOWER_IS_BETTER else -value


def _best(candidates: dict[str, tuple[Metrics, Metrics | None]], criterion: str, exclude: str | None) -> tuple[str, float]:
    scored = [(score([r for r in val["policies"] if r.get("family") != exclude], criterion), name)
              for name, (val, _) in candidates.items()]
    best = min(scored, key=lambda s: s[0])  # min keeps the first of equal scores
    return best[1], best[0]


def _figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = dict(row_metrics(rows))
    if any(r.get("family") for r in rows):
        out["families"] = family_metrics(rows)
    return out


def select(candidates: dict[str, tuple[Metrics, Metrics | None]], criterion: str = "mean_abs_error") -> dict[str, Any]:
    """See the module docstring. Each candidate's validation and test runs must cover the same
    policies as every other candidate's (checked), with families."""
    if not candidates:
        raise ValueError("select needs at least one candidate")
    names = {}
    for split in (0, 1):
        for name, runs in candidates.items():
            if runs[split] is None:
                continue
            policies = sorted(r["name"] for r in runs[split]["policies"])
            names.setdefault(split, (name, policies))
            if policies != names[split][1]:
                raise ValueError(f"candidates {names[split][0]!r} and {name!r} were evaluated on different "
                                 f"{('validation', 'test')[split]} policies; run every candidate on the same split")

    def test_of(name: str) -> list[dict[str, Any]]:
        if candidates[name][1] is None:
            raise ValueError(f"candidate {name!r} is chosen on validation but has no test run; evaluate it on the "
                             "test split too")
        return candidates[name][1]["policies"]

    chosen, chosen_score = _best(candidates, criterion, exclude=None)
    test_rows = test_of(chosen)
    families = sorted({r.get("family", "") for r in test_rows})
    lofo_rows, lofo_choice = [], {}
    for family in families:
        pick, _ = _best(candidates, criterion, exclude=family)
        lofo_choice[family] = pick
        lofo_rows += [r for r in test_of(pick) if r.get("family", "") == family]
    return {
        "criterion": criterion, "candidates": list(candidates),
        "validation": {name: {"score": score(val["policies"], criterion), **_figures(val["policies"])}
                       for name, (val, _) in candidates.items()},
        "chosen": chosen, "chosen_validation_score": chosen_score, "test": _figures(test_rows),
        "lofo_choice": lofo_choice, "lofo_test": _figures(lofo_rows),
        "lofo_policies": [{"name": r["name"], "family": r.get("family", ""), "real_success": r["real_success"],
                           "predicted_success": r["predicted_success"], "candidate": lofo_choice[r.get("family", "")]}
                          for r in lofo_rows],
    }

"""The horizon study (#28): world models trained with different objectives, side by side, at
multiples of a training rollout length. Reads the `eval-wm` metrics of each model (run with the same
data file, seed and horizons) and writes one table, one plot and one metrics file:

    wmsuite eval-wm --wm runs/objectives/noise --data data/pushcube_heldout.hdf5 \
        --horizons 4 8 16 32 64 --backward --out runs/objectives/noise-eval-wm      # once per model
    python experiments/scripts/horizon_study.py --length 4 --baseline noise \
        noise=runs/objectives/noise-eval-wm cycle=runs/objectives/cycle-eval-wm --out runs/horizons

`--length` is the training rollout length in actions that the multiples refer to (one chunk for
teacher forcing); each model's figures are read at length x 1, 2, 4, 8 (and any other multiple the
evaluation holds). Writes OUT/horizons.md (table), OUT/horizons.png (object error against horizon,
forward solid, backward dashed) and OUT/metrics.json: per model and direction the object error,
detection rate and PSNR by multiple, and each model's object error as a ratio to the baseline's.
Where both evaluations list their rollouts' errors (`object_error_windows`, eval-wm since this
study's second round), the table also gives the ratio over the rollouts in which both models'
object was found, with its paired bootstrap 95% interval, so a difference between objectives can
be told from the noise of a few dozen windows.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

FIGURES = ("object_error", "object_detect_rate", "psnr")


def read(run: Path) -> dict:
    """An eval-wm output directory -> its metrics (forward at the top level, `backward` inside)."""
    path = run / "metrics.json"
    if not path.is_file():
        raise SystemExit(f"{path} does not exist: run `wmsuite eval-wm ... --out {run}` first")
    return json.loads(path.read_text())


def by_multiple(metrics: dict, length: int) -> dict[str, dict[int, float]]:
    """figure -> {multiple: value} for the horizons that are whole multiples of `length`."""
    out: dict[str, dict[int, float]] = {}
    for fig in FIGURES:
        values = metrics.get(fig) or {}
        out[fig] = {int(h) // length: float(v) for h, v in values.items() if int(h) % length == 0}
    return out


def paired_ratio_ci(errors: list, base: list, samples: int = 2000, seed: int = 0
                    ) -> tuple[float, float, float] | None:
    """mean(errors) / mean(base) over the rollouts where both are found (None entries are misses) and
    its paired bootstrap 95% interval: (ratio, low, high); None when fewer than 5 pairs remain."""
    a, b = (np.array([np.nan if v is None else v for v in x], float) for x in (errors, base))
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    if len(a) < 5:
        return None
    idx = np.random.default_rng(seed).integers(len(a), size=(samples, len(a)))  # resampled rollouts
    ratios = a[idx].mean(1) / np.maximum(b[idx].mean(1), 1e-12)
    return float(a.mean() / max(b.mean(), 1e-12)), float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def check_comparable(models: dict[str, dict]) -> None:
    """Refuse figures from different evaluation files, episodes, seeds or horizons: they would not compare."""
    keys = {name: [m.get(k) for k in ("data", "episodes", "seed", "repeats")] + [sorted(m.get("object_error", {}))]
            for name, m in models.items()}
    if len(set(map(json.dumps, keys.values()))) > 1:
        raise SystemExit("the evaluations differ in data file, episodes, seed or horizons; rerun eval-wm alike: "
                         + "; ".join(f"{k}: {v}" for k, v in keys.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", help="NAME=EVAL_WM_OUT_DIR, one per model")
    ap.add_argument("--length", type=int, required=True, help="training rollout length in actions")
    ap.add_argument("--baseline", default="", help="the model the ratios divide by (default: the first)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.length < 1:
        raise SystemExit(f"--length is a number of actions >= 1, got {args.length}")
    pairs = [m.split("=", 1) for m in args.models]
    if any(len(p) != 2 for p in pairs):
        raise SystemExit("each model is NAME=EVAL_WM_OUT_DIR")
    models = {name: read(Path(d)) for name, d in pairs}
    check_comparable(models)
    baseline = args.baseline or pairs[0][0]
    if baseline not in models:
        raise SystemExit(f"--baseline {baseline} is not one of {', '.join(models)}")
    result: dict = {"length": args.length, "baseline": baseline, "models": {}}
    for name, m in models.items():
        result["models"][name] = {"forward": by_multiple(m, args.length)}
        if "backward" in m:
            result["models"][name]["backward"] = by_multiple(m["backward"], args.length)
    base = result["models"][baseline]["forward"]["object_error"]
    base_windows = models[baseline].get("object_error_windows") or {}
    for name, r in result["models"].items():
        err = r["forward"]["object_error"]
        r["ratio_to_baseline"] = {x: err[x] / base[x] for x in err if x in base and base[x] > 0}
        windows = models[name].get("object_error_windows") or {}
        cis = {int(h) // args.length: paired_ratio_ci(windows[h], base_windows[h]) for h in windows
               if h in base_windows and int(h) % args.length == 0}
        r["ratio_ci"] = {x: ci for x, ci in cis.items() if ci is not None}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(result, indent=2, sort_keys=True))
    table = _table(result)
    (out / "horizons.md").write_text(table)
    print(table)
    _plot(result, out / "horizons.png")
    print(f"-> {out / 'horizons.md'}, {out / 'horizons.png'}, {out / 'metrics.json'}")


def _table(result: dict) -> str:
    multiples = sorted({x for r in result["models"].values() for x in r["forward"]["object_error"]})
    head = "| model | direction | " + " | ".join(f"{x}x ({x * result['length']})" for x in multiples) + " |"
    lines = [f"Object error (m) / found / PSNR (dB) at multiples of {result['length']} actions; ratio: "
             f"forward object error over {result['baseline']}'s.", "", head,
             "|" + "---|" * (2 + len(multiples))]
    for name, r in result["models"].items():
        for direction in ("forward", "backward"):
            if direction not in r:
                continue
            f = r[direction]
            cells = [f"{f['object_error'].get(x, math.nan):.4f} / {f['object_detect_rate'].get(x, math.nan):.2f} / "
                     f"{f['psnr'].get(x, math.nan):.1f}" for x in multiples]
            lines.append(f"| {name} | {direction} | " + " | ".join(cells) + " |")
        lines.append(f"| {name} | ratio | " + " | ".join(_ratio_cell(r, x) for x in multiples) + " |")
    return "\n".join(lines) + "\n"


def _ratio_cell(r: dict, x: int) -> str:
    """The ratio of mean errors to the baseline's; where the rollouts' errors were listed, also the
    ratio over the rollouts both models found and its paired 95% interval."""
    cell = f"{r['ratio_to_baseline'].get(x, math.nan):.2f}"
    ci = r.get("ratio_ci", {}).get(x)
    return cell + (f"; paired {ci[0]:.2f} [{ci[1]:.2f}, {ci[2]:.2f}]" if ci else "")


def _plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for i, (name, r) in enumerate(result["models"].items()):
        for direction, style in (("forward", "-"), ("backward", "--")):
            if direction in r:
                err = r[direction]["object_error"]
                xs = sorted(err)
                ax.plot(xs, [err[x] for x in xs], style, marker="o", color=f"C{i}", label=f"{name} {direction}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"horizon (multiples of {result['length']} actions)")
    ax.set_ylabel("object error (m)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()

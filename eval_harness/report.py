"""The evaluation report: a Markdown table, a scatter plot, side-by-side videos, metrics.json."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from wmsuite.logging import write_metrics
from wmsuite.types import Episode
from wmsuite.video import tile_frames, write_mp4


def write_report(metrics: dict[str, Any], out: Path, videos: list[Path] | None = None) -> Path:
    """metrics.json, scatter.png and report.md in `out`; returns the report path."""
    write_metrics(out, metrics)
    scatter = plot_scatter(metrics, out / "scatter.png")
    lines = [
        f"# Learned-simulator evaluation: {metrics['env']}",
        "",
        f"{metrics['n_policies']} policies, {metrics['episodes_per_policy']} episodes each, seed {metrics['seed']}; "
        f"wall time {metrics.get('wall_time_s', math.nan):.0f} s.",
        "",
        "| metric | value | 95% bootstrap CI |",
        "|---|---|---|",
    ]
    for key in ("pearson", "mmrv", "spearman", "kendall", "mean_abs_error"):
        if key in metrics:
            lo, hi = metrics.get(f"{key}_ci", [math.nan, math.nan])
            lines.append(f"| {key} | {metrics[key]:.3f} | [{lo:.3f}, {hi:.3f}] |")
    if metrics.get("families"):
        lines += ["", "| family | policies | Pearson | MMRV | mean abs error |", "|---|---|---|---|---|"]
        for family, f in metrics["families"].items():
            lines.append(f"| {family} | {f['n_policies']} | {f.get('pearson', math.nan):.3f} | "
                         f"{f.get('mmrv', math.nan):.3f} | {f['mean_abs_error']:.3f} |")
    judges = judge_names(metrics)
    lines += ["", "Where the episodes ended: mean length in actions, real / imagined; for each judge of the learned "
              "simulator, the share of imagined episodes in which it fired (and its median step).", "",
              "| policy | family | real success (95% Wilson) | predicted success (95% Wilson) | per-episode agreement | "
              "mean IDM error | length real / imagined | " + " | ".join(f"judge {j}" for j in judges) + " |",
              "|---" * (7 + len(judges)) + "|"]
    for p in metrics["policies"]:
        fired = " | ".join(f"{p.get(f'judge_{j}_rate', math.nan):.2f} ({p.get(f'judge_{j}_step_median', math.nan):.0f})"
                           for j in judges)
        lines.append(f"| {p['name']} | {p.get('family', '')} | {p['real_success']:.2f} [{p['real_ci'][0]:.2f}, "
                     f"{p['real_ci'][1]:.2f}] | {p['predicted_success']:.2f} [{p['predicted_ci'][0]:.2f}, "
                     f"{p['predicted_ci'][1]:.2f}] | {p['episode_agreement']:.2f} | {p['idm_error']:.3f} | "
                     f"{p.get('real_length', math.nan):.0f} / {p.get('wm_length', math.nan):.0f} | {fired} |")
    lines += ["", f"![predicted vs real success]({scatter.name})", ""]
    if videos:
        lines += ["Real (left) vs imagined (right), same policy, same initial state:", ""]
        lines += [f"- [{v.name}]({v.name})" for v in videos]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def judge_names(metrics: dict[str, Any]) -> list[str]:
    """The learned simulator's judges that the policy rows hold figures for (`judge_<name>_rate`)."""
    return sorted({k.removesuffix("_rate").removeprefix("judge_") for p in metrics["policies"] for k in p
                   if k.startswith("judge_") and k.endswith("_rate")})


def plot_scatter(metrics: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = metrics["policies"]
    real = np.array([r["real_success"] for r in rows])
    pred = np.array([r["predicted_success"] for r in rows])
    rx = np.array([[r["real_success"] - r["real_ci"][0], r["real_ci"][1] - r["real_success"]] for r in rows]).T
    py = np.array([[r["predicted_success"] - r["predicted_ci"][0], r["predicted_ci"][1] - r["predicted_success"]]
                   for r in rows]).T
    fig, ax = plt.subplots(figsize=(5, 5), dpi=120)
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="y = x")
    ax.errorbar(real, pred, xerr=rx, yerr=py, fmt="o", capsize=3, label="policy (95% Wilson)")
    for r, x, y in zip(rows, real, pred):
        ax.annotate(r["name"], (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    title = metrics["env"]
    if "pearson" in metrics:
        title += f"\nPearson {metrics['pearson']:.3f}, MMRV {metrics['mmrv']:.3f}"
    ax.set(xlabel="real success rate", ylabel="predicted success rate (world model)", xlim=(-0.05, 1.05),
           ylim=(-0.05, 1.05), title=title)
    ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def side_by_side(real: Episode, imagined: Episode, camera: str, path: Path, fps: int = 10) -> Path:
    """One mp4 with the real episode left and the imagined one right, the shorter held on its last frame."""
    a, b = real.obs[camera], imagined.obs[camera]  # (T+1, H, W, 3) each
    n = max(len(a), len(b))
    pad = [np.concatenate([v, np.repeat(v[-1:], n - len(v), 0)]) for v in (a, b)]
    return write_mp4(path, tile_frames(pad), fps=fps)

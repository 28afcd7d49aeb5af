"""Plots and markdown tables of the paper experiments, shared by fig13 and fig14.

matplotlib runs with the Agg backend so that benchmarks work without a display (CI,
the project machine); one figure may have several panels, like the paper's a/b panels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use("Agg"): the backend must be chosen first


@dataclass(frozen=True)
class Panel:
    """One subplot: named series of y values over shared x values."""

    title: str
    xlabel: str
    ylabel: str
    x: Sequence[float]
    series: Mapping[str, Sequence[float]]
    log_x: bool = False


def save_figure(panels: Sequence[Panel], path: Path, title: str, columns: int = 2) -> Path:
    """Draw ``panels`` in a grid of ``columns`` into a PNG at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ncols = min(columns, len(panels))
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.6 * ncols, 4.0 * nrows), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax, panel in zip(axes.flat, panels, strict=False):
        for name, ys in panel.series.items():
            ax.plot(panel.x, ys, marker="o", label=name)
        if panel.log_x:
            ax.set_xscale("log")
        ax.set_xticks(list(panel.x))
        ax.set_xticklabels([f"{v:g}" for v in panel.x])
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel(panel.ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def markdown_table(rows: Sequence[Mapping[str, object]], columns: Sequence[str]) -> str:
    """A GitHub markdown table of ``rows`` (dicts) in ``columns`` order."""
    head = "| " + " | ".join(columns) + " |"
    rule = "|" + "|".join("---:" for _ in columns) + "|"
    body = ["| " + " | ".join(_cell(r[c]) for c in columns) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)

"""The one figure convention of the paper experiments: ours beside the paper's, with spread.

Every experiment plot in ``bench/`` is drawn by :func:`save_figure` from :class:`Panel`
objects, so that a reader who knows the papers finds the same things in every figure:

* our values as the **median with min-max bars** over interleaved repetitions
  (:class:`Series` keeps every sample; a single sample draws without a bar);
* the **paper's values** beside ours in the same units (:class:`PaperPoint`, black
  hollow markers, labelled with where they come from: ``text`` when the paper states the
  number, ``digitised`` when it was read off a plot), or, where the paper gives only a
  direction, its claim as a shaded x range over a ratio panel (:class:`Claim`);
* **distinct panel letters** (a), (b), ... assigned in order, never repeated;
* a **caption** with the machine, the data size and the date (:func:`caption`);
* a generated **markdown table** of the same numbers (:func:`panel_table`), which
  :func:`replace_block` writes under the plot in ``docs/experiments.md``.

matplotlib runs with the Agg backend so that benchmarks work without a display (CI,
the project machine).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use("Agg"): the backend must be chosen first
from matplotlib.ticker import NullFormatter

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def spread(samples: Sequence[float]) -> dict[str, float]:
    """Median, min and max of the samples of one point (what every bar shows)."""
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples)}


@dataclass(frozen=True)
class Series:
    """Our measurements of one curve: every repetition's sample per x value."""

    label: str
    samples: Sequence[Sequence[float]]

    @property
    def spreads(self) -> list[dict[str, float]]:
        return [spread(s) for s in self.samples]


@dataclass(frozen=True)
class PaperPoint:
    """One value of the paper, in the panel's units; ``source`` says how we know it."""

    x: float
    y: float
    label: str
    source: str = "text"  # "text": stated in the paper; "digitised": read off its plot


@dataclass(frozen=True)
class Claim:
    """A direction the paper states without numbers, over an x range of a ratio panel:
    ``above`` means the paper expects the ratio above the reference line."""

    x_from: float
    x_to: float
    above: bool
    text: str


@dataclass(frozen=True)
class Panel:
    """One subplot: our series over shared x values, with the paper's values or claims."""

    title: str
    xlabel: str
    ylabel: str
    x: Sequence[float]
    series: Sequence[Series]
    paper: Sequence[PaperPoint] = ()
    claims: Sequence[Claim] = ()
    reference: float | None = None  # a horizontal line (1.0 on ratio panels)
    log_x: bool = False
    log_y: bool = False
    note: str = ""  # the paper's statement where it is neither a number nor a range


@dataclass(frozen=True)
class Caption:
    """What a reader needs to weigh a figure: where, on how much data, when."""

    machine: str
    data: str
    date: str
    extra: str = ""

    @classmethod
    def of(cls, result: Mapping) -> Caption:
        """The caption of a results JSON written by a bench (see :func:`results`)."""
        when = result["started"]
        if result.get("finished"):
            when += f" - {result['finished']}"
        return cls(result["machine"], result["data"], when, result.get("note", ""))

    def text(self) -> str:
        parts = [f"Machine: {self.machine}", f"data: {self.data}", f"run: {self.date}"]
        return "; ".join(parts) + (f". {self.extra}" if self.extra else ".")

    def markdown(self) -> str:
        """The caption in the docs, without the run's date: the figure and its command
        stay true until the next run, the date stays in the results JSON and the image."""
        parts = [f"Machine: {self.machine}", f"data: {self.data}"]
        return "; ".join(parts) + (f". {self.extra}" if self.extra else ".")


def machine() -> str:
    """This machine, as a caption states it (cores, CPU model, load at the time)."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{os.cpu_count()} cores ({model}), load {load:.1f}, Spark local[2]"


def clock() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def results(args, module: str, name: str, docs: Path, measure: Callable[[], dict]) -> dict:  # type: ignore[no-untyped-def]
    """The results of a bench: read from ``args.json`` with ``--render``, else measured now
    (``measure`` returns the bench's own fields) and written there with the command, the
    machine, start and end, so that every plot can be redrawn and captioned later."""
    path = Path(args.json or (Path(args.out) / "results" / f"{name}.json"))
    if args.json is None and Path(args.out).resolve() == docs.resolve():
        path = docs.parent / "bench" / "results" / f"{name}.json"
    if args.render:
        return json.loads(path.read_text())
    started = clock()
    measured = measure()
    result = {
        "command": f"python -m bench.{module}" + "".join(" " + a for a in args.argv),
        "started": started,
        "finished": clock(),
        "machine": machine(),
        **measured,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    return result


def experiment_parser(doc: str, key: str, docs: Path, quick: str) -> argparse.ArgumentParser:
    """The flags every paper experiment shares: ``--quick`` and :func:`output_args`."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick)
    output_args(parser, key, docs)
    return parser


def run_experiment(  # type: ignore[no-untyped-def]
    argv: Sequence[str] | None,
    parse: Callable[[list[str]], argparse.Namespace],
    module: str,
    key: str,
    docs: Path,
    fields: Callable[[argparse.Namespace], dict],
    render: Callable[[dict, Path], object],
) -> dict:
    """The ``main`` of every paper experiment: measure now (or read the committed JSON
    with ``--render``), record it with its command (:func:`results`) and draw it; one
    body, so that every bench records, captions and redraws its figure the same way."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = parse(arguments)
    args.argv = arguments
    result = results(args, module, key, docs, lambda: fields(args))
    render(result, Path(args.out))
    return result


def lettered(panels: Sequence[Panel]) -> list[str]:
    """Panel titles with distinct letters (a), (b), ... in drawing order."""
    if len(panels) > len(LETTERS):
        raise ValueError(f"{len(panels)} panels: at most {len(LETTERS)} letters")
    return [f"({LETTERS[i]}) {p.title}" for i, p in enumerate(panels)]


def save_figure(
    panels: Sequence[Panel], path: Path, title: str, caption: Caption, columns: int = 2
) -> Path:
    """Draw ``panels`` in a grid of ``columns`` into a PNG at ``path``, captioned."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ncols = min(columns, len(panels))
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.8 * ncols, 4.2 * nrows + 0.7), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax, panel, heading in zip(axes.flat, panels, lettered(panels), strict=False):
        _draw(ax, panel, heading)
    fig.suptitle(title, fontsize=11)
    fig.text(0.01, 0.005, _wrap(caption.text(), 40 + 95 * ncols), fontsize=7, va="bottom")
    fig.tight_layout(rect=(0, 0.6 / (4.2 * nrows + 0.7), 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _draw(ax, panel: Panel, heading: str) -> None:  # type: ignore[no-untyped-def]
    xs = list(panel.x)
    for series in panel.series:
        s = series.spreads
        med = [p["median"] for p in s]
        low = [p["median"] - p["min"] for p in s]
        high = [p["max"] - p["median"] for p in s]
        ax.errorbar(xs, med, yerr=[low, high], marker="o", capsize=3, label=f"ours: {series.label}")
    for source in sorted({p.source for p in panel.paper}):
        points = [p for p in panel.paper if p.source == source]
        ax.plot(
            [p.x for p in points],
            [p.y for p in points],
            ls="none",
            marker="*" if source == "text" else "D",
            markersize=11,
            color="black",
            markerfacecolor="none",
            label=f"paper ({'stated in text' if source == 'text' else 'digitised'}): "
            + ", ".join(dict.fromkeys(p.label for p in points)),
        )
    if panel.reference is not None:
        ax.axhline(panel.reference, color="grey", lw=1)
    for claim in panel.claims:
        ax.axvspan(
            claim.x_from, claim.x_to, color="tab:green" if claim.above else "tab:blue", alpha=0.12
        )
        ax.annotate(
            f"paper: {claim.text}",
            xy=((claim.x_from + claim.x_to) / 2, 0.97),
            xycoords=("data", "axes fraction"),
            ha="center",
            va="top",
            fontsize=7,
        )
    if panel.log_x:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # only our x values are labelled
    if panel.log_y:
        _log_y(ax, panel)
    ax.set_xticks(xs)
    ax.set_xticklabels([_x(v) for v in xs])
    title = _wrap(heading, 80)  # the paper's statement goes under it, never under the legend
    if panel.note:
        title += "\n" + _wrap(f"paper (text): {panel.note}", 80)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel + " (median, min-max)", fontsize=8)
    if not panel.log_y:
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best")


def _log_y(ax, panel: Panel) -> None:  # type: ignore[no-untyped-def]
    """Log y; symmetric log (linear around 0) when a sample is not positive, so that a
    noisy negative difference is drawn rather than dropped."""
    values = [v for s in panel.series for sample in s.samples for v in sample]
    values += [p.y for p in panel.paper]
    if min(values) > 0:
        ax.set_yscale("log")
    else:
        ax.set_yscale("symlog", linthresh=min(v for v in values if v > 0))


def _x(value: float) -> str:
    """An x value as written in the tables and under the ticks: 1000000, not 1e+06."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _wrap(text: str, width: int) -> str:
    words, lines, line = text.split(), [], ""
    for w in words:
        if line and len(line) + len(w) + 1 > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}".strip()
    return "\n".join([*lines, line])


def panel_table(panels: Sequence[Panel]) -> str:
    """One markdown table per panel: x, ours as median [min-max] (n), the paper's value."""
    blocks = []
    for heading, panel in zip(lettered(panels), panels, strict=True):
        cols = [panel.xlabel, *(f"ours: {s.label}" for s in panel.series)]
        paper_at = {p.x: p for p in panel.paper}
        if panel.paper or panel.claims:
            cols.append("paper")
        rows = []
        for i, x in enumerate(panel.x):
            row = [_x(x), *(_spread_cell(s.samples[i]) for s in panel.series)]
            if panel.paper or panel.claims:
                row.append(_paper_cell(x, paper_at, panel.claims))
            rows.append(row)
        blocks.append(f"**{heading}** ({panel.ylabel})\n\n" + _table(cols, rows))
        if panel.note:
            blocks[-1] += f"\n\nPaper (text): {panel.note}"
    return "\n\n".join(blocks)


def _spread_cell(samples: Sequence[float]) -> str:
    s = spread(samples)
    if len(samples) == 1:
        return f"{_num(s['median'])} (n=1)"
    return f"{_num(s['median'])} [{_num(s['min'])}-{_num(s['max'])}] (n={len(samples)})"


def _paper_cell(x: float, points: Mapping[float, PaperPoint], claims: Sequence[Claim]) -> str:
    if x in points:
        p = points[x]
        return f"{_num(p.y)} ({p.source})"
    texts = [c.text for c in claims if c.x_from <= x <= c.x_to]
    return "; ".join(texts) + " (text)" if texts else "-"


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "| " + " | ".join(columns) + " |"
    rule = "|" + "|".join("---:" for _ in columns) + "|"
    return "\n".join([head, rule, *("| " + " | ".join(r) + " |" for r in rows)])


def markdown_table(rows: Sequence[Mapping[str, object]], columns: Sequence[str]) -> str:
    """A GitHub markdown table of ``rows`` (dicts) in ``columns`` order."""
    return _table(columns, [[_cell(r[c]) for c in columns] for r in rows])


def _num(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


def _cell(value: object) -> str:
    if isinstance(value, float):
        return _num(value)
    if isinstance(value, list) and value and all(isinstance(v, float | int) for v in value):
        return _spread_cell([float(v) for v in value])
    return str(value)


def replace_block(path: Path, key: str, text: str) -> None:
    """Put ``text`` between the markers of ``key`` in ``path`` (appended if absent).

    Hand-written analysis around the markers stays; only the generated plot, caption and
    tables are replaced, so rerunning a figure never loses an explanation.
    """
    start = f"<!-- generated by bench.figures: {key} -->"
    end = f"<!-- end of generated: {key} -->"
    body = f"{start}\n{text.rstrip()}\n{end}"
    current = path.read_text() if path.exists() else ""
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(current):
        path.write_text(pattern.sub(lambda _m: body, current, count=1))
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(current.rstrip("\n") + "\n\n" + body + "\n")


def publish(
    panels: Sequence[Panel], out: Path, key: str, title: str, caption: Caption, columns: int = 2
) -> Path:
    """Draw ``out/img/<key>.png`` and put its caption and tables under it in
    ``out/experiments.md``: what every experiment's render does."""
    path = save_figure(panels, out / "img" / f"{key}.png", title, caption, columns)
    section = generated_section(f"img/{key}.png", caption, panels)
    replace_block(out / "experiments.md", key, section)
    return path


def output_args(parser, name: str, docs: Path) -> None:  # type: ignore[no-untyped-def]
    """``--out``, ``--json`` and ``--render``, as every experiment takes them."""
    parser.add_argument("--out", default=str(docs), help="docs directory to write")
    parser.add_argument(
        "--json",
        help=f"results file (default bench/results/{name}.json, or OUT/results/ with --out)",
    )
    parser.add_argument("--render", action="store_true", help="only redraw from --json")


def generated_section(image: str, caption: Caption, panels: Sequence[Panel]) -> str:
    """The generated block under a figure's heading: the plot, its caption, its tables."""
    return "\n".join(
        [
            f"![{Path(image).stem}]({image})",
            "",
            f"*{caption.markdown()}*",
            "",
            panel_table(panels),
            "",
        ]
    )

"""`npusim sweep report DIR`: PNG plots of a sweep's results (Pareto front, per-kernel breakdown, sensitivity of each
objective to each axis, rooflines) and one self-contained HTML page embedding them."""

import base64
import html
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy  # noqa: E402
import pandas  # noqa: E402

from .pareto import pareto_mask  # noqa: E402
from .results import load_meta, read_kernels, read_summary  # noqa: E402
from .sensitivity import axis_groups, sensitivity_indices  # noqa: E402

TOP_KERNELS = 8
# Small multiples per image: readable at a page's width, few enough images for hundreds of points.
ROOFLINES_PER_IMAGE = 12


def _label(objective):
    arrow = "lower is better" if objective["goal"] == "minimize" else "higher is better"
    return f"{objective['name']} ({arrow})"


def plot_pareto(summary, objectives, path):
    """Each pair of the first three objectives: front, dominated and constraint-violating points."""
    objectives = objectives[:3]
    pairs = [(0, 1)] if len(objectives) == 2 else [(0, 1), (0, 2), (1, 2)]
    ok = summary["status"].eq("ok")
    violating = ok & summary.get("feasible", pandas.Series(True, index=summary.index)).eq(False)
    front = pandas.Series(pareto_mask(summary, objectives), index=summary.index)
    figure, axes = plt.subplots(1, len(pairs), figsize=(6 * len(pairs), 4.8), squeeze=False)
    for axis, (i, j) in zip(axes[0], pairs, strict=True):
        x, y = objectives[i]["name"], objectives[j]["name"]
        others = ok & ~front & ~violating
        axis.scatter(summary.loc[others, x], summary.loc[others, y], c="0.6", label="dominated")
        axis.scatter(
            summary.loc[violating, x], summary.loc[violating, y], c="tab:red", marker="x", label="violates a constraint"
        )
        on_front = summary[front].sort_values(x)
        axis.scatter(on_front[x], on_front[y], c="tab:blue", s=50, label="Pareto front", zorder=3)
        if len(pairs) == 1:
            axis.step(on_front[x], on_front[y], where="post", c="tab:blue", alpha=0.5)
        for _, row in on_front.iterrows():
            axis.annotate(
                str(int(row["point"])), (row[x], row[y]), textcoords="offset points", xytext=(4, 4), fontsize=8
            )
        axis.set_xlabel(_label(objectives[i]))
        axis.set_ylabel(_label(objectives[j]))
        axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    failed = int((~summary["status"].isin(["ok", "rejected"])).sum())
    figure.suptitle(f"Pareto front ({int(front.sum())} of {int(ok.sum())} points; {failed} failed not shown)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_kernels(kernels, path):
    """Per workload, each point's device time stacked by kernel (the largest kernels, the rest as 'other')."""
    workloads = sorted(kernels["workload"].unique())
    figure, axes = plt.subplots(len(workloads), 1, figsize=(10, 4 * len(workloads)), squeeze=False)
    for axis, workload in zip(axes[:, 0], workloads, strict=True):
        rows = kernels[kernels["workload"] == workload]
        table = rows.pivot_table(index="point", columns="kernel", values="seconds", aggfunc="sum", fill_value=0.0)
        largest = table.sum().sort_values(ascending=False).index
        shown = table[largest[:TOP_KERNELS]].copy()
        if len(largest) > TOP_KERNELS:
            shown["other"] = table[largest[TOP_KERNELS:]].sum(axis=1)
        (shown * 1e6).plot.bar(stacked=True, ax=axis, width=0.8)
        axis.set_title(f"{workload}: device time per kernel")
        axis.set_xlabel("point")
        axis.set_ylabel("us")
        axis.legend(fontsize=7, bbox_to_anchor=(1.01, 1), loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_sensitivity(summary, objectives, axes, path):
    """A panel per objective and axis: the points, and the objective's mean (line) and range (band) in each group of
    the axis (a value, or a quantile bin of a sampled axis), titled with the axis's first-order index S."""
    ok = summary[summary["status"].eq("ok")]
    indices = sensitivity_indices(summary, objectives, axes)
    figure, grid = plt.subplots(
        len(objectives), len(axes), figsize=(3.2 * len(axes), 2.6 * len(objectives)), squeeze=False
    )
    for row, objective in enumerate(objectives):
        points = ok.dropna(subset=[objective["name"]])
        for column, axis_name in enumerate(axes):
            axis = grid[row][column]
            groups = axis_groups(points[axis_name])
            grouped = points.groupby(groups, observed=True)
            spread = grouped[objective["name"]].agg(["mean", "min", "max"])
            if pandas.api.types.is_numeric_dtype(points[axis_name]):
                # A bin is drawn at the mean axis value of its points.
                spread.index = grouped[axis_name].mean()
            axis.scatter(points[axis_name], points[objective["name"]], s=6, c="0.6")
            axis.plot(spread.index, spread["mean"], marker="o")
            axis.fill_between(spread.index, spread["min"], spread["max"], alpha=0.2)
            axis.set_title(f"S = {indices.loc[objective['name'], axis_name]:.0%}", fontsize=9)
            if row == len(objectives) - 1:
                axis.set_xlabel(axis_name, fontsize=8)
            if column == 0:
                axis.set_ylabel(objective["name"], fontsize=8)
            axis.tick_params(labelsize=7)
    figure.suptitle("each objective over each axis: mean (line), range (band), S = first-order index", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return indices


def plot_rooflines(kernels, meta, path, points):
    """A roofline per point (peak from its array size, clock and cores; its DRAM bandwidth) with its kernels."""
    configs = {p["index"]: p["config"] for p in meta["points"]}
    columns = min(4, len(points))
    rows = (len(points) + columns - 1) // columns
    figure, grid = plt.subplots(rows, columns, figsize=(3.6 * columns, 3.2 * rows), squeeze=False)
    for axis, point in zip(grid.flat, points, strict=False):
        c = configs[point]
        peak = 2 * c["core.systolic_rows"] * c["core.systolic_cols"] * c["chip.clock_ghz"] * c["chip.cores"]
        bandwidth = c["dram.bandwidth_gbps"]
        rows_ = kernels[(kernels["point"] == point) & (kernels["flops"] > 0) & (kernels["seconds"] > 0)]
        intensity = rows_["flops"] / rows_["dram_bytes"].clip(lower=1)
        achieved = rows_["flops"] / rows_["seconds"] / 1e9
        x = numpy.logspace(-2, 4, 100)
        axis.loglog(x, numpy.minimum(peak, bandwidth * x), c="k", lw=1)
        axis.scatter(intensity, achieved, s=12, alpha=0.7)
        axis.set_title(" ".join([f"point {point}:", *(f"{c[name]}" for name in meta["axes"])]), fontsize=8)
        axis.tick_params(labelsize=7)
    for axis in list(grid.flat)[len(points) :]:
        axis.axis("off")
    figure.suptitle(f"each point's kernels on its roofline (point: {', '.join(meta['axes'])})", fontsize=9)
    figure.supxlabel("FLOP per DRAM byte")
    figure.supylabel("GFLOP/s")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_rooflines(kernels, meta, points, directory):
    """Every point's roofline, ROOFLINES_PER_IMAGE to an image (DIRECTORY/rooflines-001.png, ...): hundreds of
    points make a few dozen readable images, not one unreadable one. Returns {image path: its points}."""
    directory.mkdir(exist_ok=True)
    for stale in directory.glob("rooflines-*.png"):  # from an earlier report of more points
        stale.unlink()
    images = {}
    for number, start in enumerate(range(0, len(points), ROOFLINES_PER_IMAGE), 1):
        path = directory / f"rooflines-{number:03d}.png"
        images[path] = points[start : start + ROOFLINES_PER_IMAGE]
        plot_rooflines(kernels, meta, path, images[path])
    return images


def _rooflines_section(images):
    """The first image shown, the others folded away, each captioned with its points."""
    parts = []
    for number, (path, points) in enumerate(images.items()):
        caption = f"rooflines of points {', '.join(map(str, points))}"
        figure = f"<figure>{_embedded(path)}<figcaption>{caption}</figcaption></figure>"
        parts.append(figure if number == 0 else f"<details><summary>{caption}</summary>{figure}</details>")
    return "".join(parts)


def _embedded(path):
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return f'<img alt="{html.escape(Path(path).stem)}" src="data:image/png;base64,{data}">'


def write_report(directory):
    """Writes the PNGs and report.html into DIRECTORY/report; returns the HTML path."""
    directory = Path(directory)
    meta, summary, kernels = load_meta(directory), read_summary(directory), read_kernels(directory)
    out = directory / "report"
    out.mkdir(exist_ok=True)
    objectives, axes = meta["objectives"], meta["axes"]
    sections = []
    if len(objectives) >= 2 and summary["status"].eq("ok").any():
        plot_pareto(summary, objectives, out / "pareto.png")
        front = summary[pareto_mask(summary, objectives)]
        sections.append(("Pareto front", _embedded(out / "pareto.png") + front.to_html(index=False, na_rep="")))
    if len(kernels):
        plot_kernels(kernels, out / "kernels.png")
        sections.append(("Per-kernel breakdown", _embedded(out / "kernels.png")))
        # The front's points first, so the first image, the one shown unfolded, holds the designs worth having.
        shown = list(summary[pareto_mask(summary, objectives)]["point"]) if len(objectives) >= 2 else []
        shown += [p for p in summary[summary["status"].eq("ok")]["point"] if p not in shown]
        images = write_rooflines(kernels, meta, [int(p) for p in shown], out / "rooflines")
        sections.append(("Rooflines", _rooflines_section(images)))
    if axes and summary["status"].eq("ok").any():
        indices = plot_sensitivity(summary, objectives, axes, out / "sensitivity.png")
        table = indices.to_html(float_format=lambda v: f"{v:.1%}", na_rep="")
        note = (
            "<p>First-order index of each axis: the share of the objective's variance that the axis explains by "
            "itself, Var(E[objective | axis]) / Var(objective); zipped axes share one. The last column is what no "
            "single axis explains: interactions between axes, and noise.</p>"
        )
        sections.append(("Sensitivity", _embedded(out / "sensitivity.png") + note + table))
    sections.append(("All points", summary.drop(columns=["run_keys"], errors="ignore").to_html(index=False, na_rep="")))
    counts = summary["status"].value_counts().to_dict()
    heading = (
        f"<h1>npusim sweep {html.escape(meta['name'])}</h1><p>base {html.escape(meta['base'])}, {meta['mode']} mode, "
        f"{meta['combine']}, seed {meta['seed']}; axes: {html.escape(', '.join(axes))}; workloads: "
        f"{html.escape(', '.join(w['name'] for w in meta['workloads']))}; objectives: "
        f"{html.escape(', '.join(_label(o) for o in objectives))}; constraints: "
        f"{html.escape('; '.join(meta['constraints']) or 'none')}; points: {counts}; npusim {meta['npusim']}</p>"
    )
    body = heading + "".join(f"<h2>{title}</h2>{content}" for title, content in sections)
    style = "body{font-family:sans-serif;margin:2em}img{max-width:100%}table{border-collapse:collapse;font-size:12px}"
    style += "td,th{border:1px solid #ccc;padding:2px 6px}"
    page = out / "report.html"
    page.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>npusim sweep {html.escape(meta['name'])}"
        f"</title><style>{style}</style></head><body>{body}</body></html>"
    )
    return page

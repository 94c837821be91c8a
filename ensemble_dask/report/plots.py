"""Figures of the run report, drawn with matplotlib's Agg renderer from plain arrays.

Every function here takes NumPy arrays and small Python values only (no run store, no Dask): the
report stage (:mod:`ensemble_dask.report_stage`) reads and samples the store, these functions
draw. Figures are built with :class:`matplotlib.figure.Figure` directly, never through
``pyplot``, so no global figure state is kept and drawing is safe from any thread.

The ``draw_*`` functions draw on a given ``Axes``; :func:`method_figure`,
:func:`base_partitions_figure` and :func:`federated_figure` compose them into the report's
figures; :func:`figure_bytes` renders a figure to PNG or SVG bytes.
"""

from __future__ import annotations

import io

import numpy as np
from matplotlib.figure import Figure

__all__ = [
    "figure_bytes",
    "vat_order",
    "draw_coassociation",
    "draw_pair_fractions",
    "draw_memberships",
    "draw_uncertainty",
    "draw_overlap_graph",
    "draw_centroids",
    "draw_trace",
    "draw_score_distribution",
    "draw_k_distribution",
    "method_figure",
    "base_partitions_figure",
    "federated_figure",
]

_SMALL = 8  # font size of notes and tick labels
_CMAP = "tab10"


def _colors(k):
    from matplotlib import colormaps

    cmap = colormaps["tab20" if k > 10 else _CMAP]
    return [cmap(i % cmap.N) for i in range(k)]


def figure_bytes(fig, fmt="png", *, dpi=90):
    """Render ``fig`` to bytes (``fmt`` ``"png"`` or ``"svg"``)."""
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi, metadata={"Software": None} if fmt == "png" else None)
    return buf.getvalue()


def _note(ax, text):
    """A short note in the panel's upper-right corner (the sample a panel was drawn from)."""
    if text:
        t = ax.text(
            0.99,
            0.99,
            text,
            transform=ax.transAxes,
            fontsize=_SMALL - 1,
            color="0.25",
            va="top",
            ha="right",
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "alpha": 0.8, "edgecolor": "none"},
            zorder=10,
        )
        t.set_in_layout(False)


def _empty(ax, title, why):
    ax.set_title(title, fontsize=10)
    ax.text(0.5, 0.5, why, ha="center", va="center", fontsize=_SMALL, color="0.4", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def vat_order(labels, strength=None):
    """Order of points for a VAT-style picture: by cluster label, then by decreasing ``strength``.

    Examples
    --------
    >>> vat_order(np.array([1, 0, 1, 0]), np.array([0.5, 0.9, 0.8, 0.7])).tolist()
    [1, 3, 2, 0]
    """
    labels = np.asarray(labels)
    strength = np.zeros(labels.shape) if strength is None else np.asarray(strength, dtype=np.float64)
    return np.lexsort((-strength, labels))


def _block_edges(sorted_labels):
    return np.flatnonzero(np.diff(sorted_labels)) + 1


def draw_coassociation(ax, co, both, labels, strength=None, *, note="", source=""):
    """Co-association fractions ``c_ij / N_ij`` of a sample, ordered by consensus cluster.

    Parameters
    ----------
    co, both : ndarray of shape (m, m)
        Counts among the m sampled points; pairs with ``both == 0`` (never co-present, or not
        stored) are drawn in a separate colour.
    labels : ndarray of shape (m,)
        Consensus labels of the sampled points (the order, and the block lines).
    strength : ndarray of shape (m,), default=None
        Membership of each point in its own cluster (order within a block).
    """
    m = len(labels)
    order = vat_order(labels, strength)
    co = np.asarray(co, dtype=np.float64)[np.ix_(order, order)]
    both = np.asarray(both, dtype=np.float64)[np.ix_(order, order)]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.ma.masked_where(both <= 0, co / both)
    from matplotlib import colormaps

    cmap = colormaps["gray"].with_extremes(bad=(0.55, 0.1, 0.1))
    im = ax.imshow(frac, cmap=cmap, vmin=0.0, vmax=1.0, interpolation="nearest", aspect="equal")
    for e in _block_edges(np.asarray(labels)[order]):
        ax.axhline(e - 0.5, color="#1f77b4", lw=0.8)
        ax.axvline(e - 0.5, color="#1f77b4", lw=0.8)
    ax.set_title(f"co-association c/N of {m} sampled points", fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])
    cb = ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.02)
    cb.ax.tick_params(labelsize=_SMALL)
    unseen = float(frac.mask.mean()) if np.ndim(frac.mask) else 0.0
    text = "black 0 .. white 1, blue lines: clusters"
    if unseen > 0:
        text += f"\nred: no count ({max(unseen, 0.001):.1%} of pairs)"
    ax.set_xlabel(f"{text}\n{source}", fontsize=_SMALL - 1)
    _note(ax, note)


def draw_pair_fractions(ax, within, between, *, note=""):
    """Histograms of stored ``c_ij / N_ij`` for pairs inside one consensus cluster and across two."""
    within = np.asarray(within, dtype=np.float64)
    between = np.asarray(between, dtype=np.float64)
    if within.size + between.size == 0:
        _empty(ax, "stored pairs", "no stored pair with a count")
        return
    bins = np.linspace(0.0, 1.0, 21)
    ax.hist(
        within, bins=bins, alpha=0.7, color="#2ca02c", label=f"same cluster ({within.size})", density=True
    )
    ax.hist(between, bins=bins, alpha=0.6, color="#d62728", label=f"different ({between.size})", density=True)
    ax.set_xlabel("c_ij / N_ij", fontsize=_SMALL)
    ax.set_ylabel("density", fontsize=_SMALL)
    ax.tick_params(labelsize=_SMALL)
    ax.legend(
        fontsize=_SMALL - 1, frameon=True, framealpha=0.85, loc="upper center", bbox_to_anchor=(0.5, 0.92)
    )
    ax.set_title("stored pairs: same vs different cluster", fontsize=10)
    _note(ax, note)


def draw_memberships(ax, Y, labels=None, *, note=""):
    """Soft memberships of a sample as stacked bars, one bar per point, grouped by cluster."""
    Y = np.asarray(Y, dtype=np.float64)
    m, k = Y.shape
    labels = Y.argmax(axis=1) if labels is None else np.asarray(labels)
    order = vat_order(labels, Y[np.arange(m), labels] if m else None)
    Y = Y[order]
    # one polygon per cluster (bars of width 1 as steps): k artists, not m * k rectangles
    x = np.repeat(np.arange(m + 1) - 0.5, 2)[1:-1]
    ax.stackplot(
        x,
        np.repeat(Y.T, 2, axis=1),
        colors=_colors(k),
        labels=[f"cluster {h}" for h in range(k)],
        linewidth=0,
    )
    for e in _block_edges(labels[order]):
        ax.axvline(e - 0.5, color="black", lw=0.6)
    ax.set_xlim(-0.5, m - 0.5)
    ax.set_ylim(0, 1)
    ax.set_xticks([])
    ax.set_ylabel("membership", fontsize=_SMALL)
    ax.tick_params(labelsize=_SMALL)
    ax.set_title(f"memberships of {m} sampled points (stacked)", fontsize=10)
    if k <= 12:
        ax.legend(fontsize=_SMALL - 1, ncol=min(k, 6), loc="lower left", frameon=True, framealpha=0.8)
    _note(ax, note)


def draw_uncertainty(ax, uncertainty, *, note=""):
    """Histogram of per-point uncertainty (normalised entropy of the memberships, 0 = sure)."""
    u = np.asarray(uncertainty, dtype=np.float64)
    u = u[np.isfinite(u)]
    if u.size == 0:
        _empty(ax, "uncertainty", "no values")
        return
    ax.hist(u, bins=np.linspace(0.0, 1.0, 26), color="#9467bd")
    ax.set_yscale("log")
    ax.set_xlabel("normalised entropy of the memberships", fontsize=_SMALL)
    ax.set_ylabel("points (log)", fontsize=_SMALL)
    ax.tick_params(labelsize=_SMALL)
    ax.set_title(f"uncertainty: median {np.median(u):.3f}, {np.mean(u > 0.5):.1%} above 0.5", fontsize=10)
    _note(ax, note)


def draw_overlap_graph(ax, overlap, mass, *, min_edge=0.01, max_out=3, note=""):
    """The cluster-overlap graph of Lourenço et al. 2015 Sect. 7.4.

    Nodes (clusters with mass) sit on a circle, their area proportional to the cluster's share of
    the membership mass; the arrow i -> j is drawn when ``m_ij >= min_edge`` and it is one of
    the ``max_out`` largest of row i (so that many clusters do not make a hairball), with a width
    proportional to ``m_ij`` and its value written beside it.
    """
    overlap = np.asarray(overlap, dtype=np.float64)
    mass = np.asarray(mass, dtype=np.float64)
    ax.set_title("cluster overlap m_ij (graph)", fontsize=10)
    ax.set_aspect("equal")
    ax.axis("off")
    alive = np.flatnonzero(mass > 0)
    if alive.size == 0:
        _empty(ax, "cluster overlap", "no cluster has mass")
        return
    share = mass / mass.sum()
    k = len(mass)
    colors = _colors(k)
    angle = np.pi / 2 - 2 * np.pi * np.arange(alive.size) / alive.size
    pos = {h: (np.cos(a), np.sin(a)) for h, a in zip(alive, angle, strict=True)}
    top = max(float(overlap[np.ix_(alive, alive)][~np.eye(alive.size, dtype=bool)].max(initial=0.0)), 1e-12)
    edges = []
    for i in alive:
        row = [(overlap[i, j], j) for j in alive if j != i and overlap[i, j] >= min_edge]
        edges += [(i, j) for _, j in sorted(row, reverse=True)[:max_out]]
    for i, j in edges:
        (x0, y0), (x1, y1) = pos[i], pos[j]
        ax.annotate(
            "",
            xy=(x1, y1),
            xytext=(x0, y0),
            arrowprops={
                "arrowstyle": "-|>",
                "color": colors[i],
                "lw": 0.5 + 5.0 * overlap[i, j] / top,
                "alpha": 0.75,
                "shrinkA": 14,
                "shrinkB": 14,
                "connectionstyle": "arc3,rad=0.15",
            },
        )
        if len(edges) > 16:
            continue
        mx, my = x0 + 0.35 * (x1 - x0), y0 + 0.35 * (y1 - y0)
        ax.text(
            mx, my, f"{overlap[i, j]:.2f}", fontsize=_SMALL - 1, color=colors[i], ha="center", va="center"
        )
    for h in alive:
        x, y = pos[h]
        ax.scatter([x], [y], s=200 + 1800 * share[h], color=colors[h], edgecolor="black", zorder=3)
        ax.text(1.28 * x, 1.28 * y, f"{h}\n{share[h]:.1%}", fontsize=_SMALL, ha="center", va="center")
    ax.set_xlim(-1.6, 1.6)
    ax.set_ylim(-1.6, 1.6)
    ax.text(
        0.5,
        -0.02,
        f"arrow i->j: m_ij, share of cluster i's mass shared with j (>= {min_edge}, top {max_out} per i)\n"
        "node: share of all membership mass",
        transform=ax.transAxes,
        fontsize=_SMALL - 1,
        ha="center",
        va="top",
        color="0.3",
    )
    _note(ax, note)


def draw_centroids(ax, centroids, feature_names=None, *, max_features=30, note=""):
    """Soft centroids (Lourenço et al. 2015 Sect. 7.4) as a heat map: clusters x features.

    With more than ``max_features`` features, the ones whose centroid values spread most across
    clusters are shown (and the note says so).
    """
    C = np.asarray(centroids, dtype=np.float64)
    k, d = C.shape
    names = list(feature_names) if feature_names is not None else [f"x{j}" for j in range(d)]
    keep = np.arange(d)
    extra = ""
    if d > max_features:
        spread = np.nan_to_num(np.nanmax(C, axis=0) - np.nanmin(C, axis=0), nan=-1.0)
        keep = np.sort(np.argsort(-spread, kind="stable")[:max_features])
        extra = f"; the {max_features} of {d} features that differ most"
    C = C[:, keep]
    finite = C[np.isfinite(C)]
    lim = float(np.max(np.abs(finite))) if finite.size else 1.0
    lim = min(max(lim, 1e-9), 3.0)
    im = ax.imshow(
        np.ma.masked_invalid(C), cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", interpolation="nearest"
    )
    ax.set_yticks(range(k))
    ax.set_yticklabels([f"cluster {h}" for h in range(k)], fontsize=_SMALL)
    ax.set_xticks(range(len(keep)))
    ax.set_xticklabels([str(names[j])[:18] for j in keep], rotation=90, fontsize=_SMALL - 1)
    cb = ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.02)
    cb.ax.tick_params(labelsize=_SMALL)
    ax.set_title("soft centroids (standardised features)", fontsize=10)
    ax.set_xlabel(f"colour clipped at +-{lim:.2g}{extra}; {note}", fontsize=_SMALL - 1)


def _trace_xy(trace):
    t = np.asarray(trace, dtype=np.float64)
    if t.ndim == 2 and t.shape[1] == 2:
        return t[:, 0], t[:, 1]
    t = t.ravel()
    return np.arange(t.size, dtype=np.float64), t


def draw_trace(ax, trace, *, ylabel="objective", converged=None, n_iter=None):
    """Objective (PCC) or lower bound (BCE) over iterations.

    ``trace`` is a sequence of values (one per iteration) or of ``(iteration, value)`` pairs.
    """
    if trace is None or len(trace) == 0:
        _empty(ax, "trace", "no trace recorded")
        return
    x, y = _trace_xy(trace)
    ax.plot(x, y, marker="o" if len(x) < 30 else None, ms=3, color="#1f77b4")
    ax.set_xlabel("iteration", fontsize=_SMALL)
    ax.set_ylabel(ylabel, fontsize=_SMALL)
    ax.tick_params(labelsize=_SMALL)
    span = np.nanmax(np.abs(y)) if np.isfinite(y).any() else 1.0
    if (
        ylabel == "objective"
        and np.all(y > 0)
        and span > 0
        and np.nanmax(y) / max(np.nanmin(y), 1e-300) > 100
    ):
        ax.set_yscale("log")
    state = "" if converged is None else ("converged" if converged else "stopped at the iteration cap")
    iters = "" if n_iter is None else f"{n_iter} iterations, "
    ax.set_title(f"{ylabel} trace ({iters}{state})".replace(", )", ")"), fontsize=10)


def draw_score_distribution(ax, values, marks, *, name, note=""):
    """Histogram of the base partitions' ``name`` scores, each consensus method a labelled line."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        _empty(ax, name, "no score (no reference labels?)")
        return
    every = np.concatenate([v, [m for m in marks.values() if np.isfinite(m)]])
    lo, hi = float(every.min()), float(every.max())
    pad = max(0.02, 0.05 * (hi - lo))
    ax.hist(v, bins=np.linspace(lo - pad, hi + pad, 21), color="0.7", label="base partitions")
    colors = _colors(max(len(marks), 1))
    for i, ((method, value), color) in enumerate(zip(sorted(marks.items()), colors, strict=False)):
        if not np.isfinite(value):
            continue
        beats = float(np.mean(v < value))
        ax.axvline(
            value,
            color=color,
            lw=2,
            ls=("-", "--", ":", "-.")[i % 4],
            label=f"{method}: {value:.3f}, beats {beats:.0%}",
        )
    ax.legend(fontsize=_SMALL - 1, loc="upper left", frameon=True, framealpha=0.85)
    ax.set_xlabel(name, fontsize=_SMALL)
    ax.set_ylabel("base partitions", fontsize=_SMALL)
    ax.tick_params(labelsize=_SMALL)
    ax.set_title(f"{name}: base partitions and consensus", fontsize=10)
    _note(ax, note)


def draw_k_distribution(ax, k_asked, k_found, marks):
    """Bars of the base partitions' k (asked and found), each method's effective K as a line."""
    k_asked = np.asarray(k_asked, dtype=np.int64)
    k_found = np.asarray(k_found, dtype=np.int64)
    allk = np.concatenate([k_asked, k_found, np.asarray(list(marks.values()), dtype=np.int64)])
    if allk.size == 0:
        _empty(ax, "k", "no partitions")
        return
    ks = np.arange(max(int(allk.min()), 1), int(allk.max()) + 1)
    w = 0.4
    ax.bar(ks - w / 2, [np.sum(k_asked == k) for k in ks], width=w, color="0.65", label="k asked")
    if k_found.size:
        ax.bar(ks + w / 2, [np.sum(k_found == k) for k in ks], width=w, color="0.35", label="k found")
    colors = _colors(max(len(marks), 1))
    for i, ((method, k), color) in enumerate(zip(sorted(marks.items()), colors, strict=False)):
        ax.axvline(k + 0.08 * (i - (len(marks) - 1) / 2), color=color, lw=2, label=f"{method}: K={k}")
    ax.set_xticks(ks)
    ax.set_xlabel("number of clusters", fontsize=_SMALL)
    ax.set_ylabel("base partitions", fontsize=_SMALL)
    ax.tick_params(labelsize=_SMALL)
    ax.legend(fontsize=_SMALL - 1, frameon=True, framealpha=0.85, loc="upper left")
    ax.set_title("k of the base partitions, effective K of each method", fontsize=10)


def draw_k_scores(ax, k_scores, chosen, criterion):
    """Each criterion of choosing K against K (each scaled to [0, 1] over the range: they share an axis), the
    K chosen marked; the criterion that chose it drawn thicker."""
    ks = sorted(int(k) for k in k_scores)
    names = [c for c in k_scores[str(ks[0])] if isinstance(k_scores[str(ks[0])][c], int | float)]
    for c in names:
        if c == "cut":
            continue
        v = np.array([float(k_scores[str(k)][c]) for k in ks])
        span = v.max() - v.min()
        scaled = (v - v.min()) / span if span > 0 else np.zeros_like(v)
        ax.plot(ks, scaled, marker="o", ms=3, lw=2.4 if c == criterion else 1.0, label=c)
    ax.axvline(chosen, color="black", ls="--", lw=1)
    ax.set_xlabel("K", fontsize=_SMALL)
    ax.set_ylabel("criterion, scaled to [0, 1]", fontsize=_SMALL)
    ax.tick_params(labelsize=_SMALL)
    ax.legend(fontsize=_SMALL - 1, frameon=True, framealpha=0.8)
    ax.set_title(f"K chosen: {chosen} (by {criterion}, dashed)", fontsize=10)


def draw_consensus_cdf(ax, k_cdf, chosen):
    """The consensus CDF at each K (ConsensusClusterPlus's figure, from sampled pairs), K chosen thicker."""
    ks = sorted(int(k) for k in k_cdf)
    grid = np.linspace(0.0, 1.0, len(k_cdf[str(ks[0])]))
    colors = _colors(len(ks))
    for k, color in zip(ks, colors, strict=True):
        ax.step(
            grid, k_cdf[str(k)], where="post", color=color, lw=2.4 if k == chosen else 0.8, label=f"K={k}"
        )
    ax.set_xlabel("consensus of a sampled pair over resampled ensembles", fontsize=_SMALL)
    ax.set_ylabel("CDF", fontsize=_SMALL)
    ax.tick_params(labelsize=_SMALL)
    if len(ks) <= 12:
        ax.legend(fontsize=_SMALL - 1, ncol=2, frameon=True, framealpha=0.8)
    ax.set_title("consensus CDF per K", fontsize=10)


def method_figure(
    name,
    *,
    co=None,
    both=None,
    co_source="",
    vat_labels=None,
    vat_strength=None,
    within=None,
    between=None,
    Y=None,
    uncertainty=None,
    overlap=None,
    mass=None,
    centroids=None,
    feature_names=None,
    trace=None,
    trace_label="objective",
    converged=None,
    n_iter=None,
    notes=None,
    k_scores=None,
    k_cdf=None,
    k_chosen=None,
    k_criterion=None,
):
    """The figure of one consensus method: eight panels, two rows of four.

    Top: co-association of a sample (VAT-style), stored-pair fractions, memberships (two slots).
    Bottom: uncertainty histogram, overlap graph, soft centroids, objective trace. A panel whose
    inputs are None says so instead of drawing. ``notes`` maps a panel (``"vat"``, ``"pairs"``,
    ``"members"``, ``"uncertainty"``, ``"overlap"``, ``"centroids"``) to its sample note. A result that chose
    K (``k_scores``): the criteria against K in the trace's place, and the consensus CDFs in the stored
    pairs' place when there are none.
    """
    notes = notes or {}
    # fixed margins rather than a layout engine: constrained layout measures every text several
    # times and doubled the drawing time of this figure
    fig = Figure(figsize=(19, 9.6))
    grid = fig.add_gridspec(2, 4, left=0.04, right=0.985, top=0.92, bottom=0.15, wspace=0.3, hspace=0.45)
    ax = fig.add_subplot(grid[0, 0])
    if co is not None and vat_labels is not None:
        draw_coassociation(
            ax, co, both, vat_labels, vat_strength, note=notes.get("vat", ""), source=co_source
        )
    else:
        _empty(ax, "co-association", "no co-association counts in the store")
    ax = fig.add_subplot(grid[0, 1])
    if within is not None:
        draw_pair_fractions(ax, within, between, note=notes.get("pairs", ""))
    elif k_cdf:
        draw_consensus_cdf(ax, k_cdf, k_chosen)
    else:
        _empty(ax, "stored pairs", "no pairs store")
    ax = fig.add_subplot(grid[0, 2:])
    if Y is not None:
        draw_memberships(ax, Y, note=notes.get("members", ""))
    else:
        _empty(ax, "memberships", "no memberships stored")
    ax = fig.add_subplot(grid[1, 0])
    if uncertainty is not None:
        draw_uncertainty(ax, uncertainty, note=notes.get("uncertainty", ""))
    else:
        _empty(ax, "uncertainty", "not stored")
    ax = fig.add_subplot(grid[1, 1])
    if overlap is not None:
        draw_overlap_graph(ax, overlap, mass, note=notes.get("overlap", ""))
    else:
        _empty(ax, "cluster overlap", "no memberships stored")
    ax = fig.add_subplot(grid[1, 2])
    if centroids is not None:
        draw_centroids(ax, centroids, feature_names, note=notes.get("centroids", ""))
    else:
        _empty(ax, "soft centroids", "no features X in the store")
    if k_scores:
        draw_k_scores(fig.add_subplot(grid[1, 3]), k_scores, k_chosen, k_criterion)
    else:
        draw_trace(fig.add_subplot(grid[1, 3]), trace, ylabel=trace_label, converged=converged, n_iter=n_iter)
    fig.suptitle(name, fontsize=13, fontweight="bold")
    return fig


def base_partitions_figure(scores, k_asked, k_found, method_scores, method_k, *, note=""):
    """Distribution of the base partitions' accuracy and k, each method's place in it.

    Parameters
    ----------
    scores : dict of str to array
        Per base partition, each criterion (``"H"``, ``"ARI"``, ``"NMI"`` ...).
    k_asked, k_found : array of int
        Per base partition, the k asked for and the number of clusters found.
    method_scores : dict of str to dict of str to float
        ``{method: {criterion: value}}``.
    method_k : dict of str to int
        Effective K of each method.
    """
    names = [c for c in scores if c != "R_n"]  # R_n equals ARI (Li & Liu 2018 eq. 8)
    panels = len(names) + 1
    cols = min(3, panels)
    rows = -(-panels // cols)
    fig = Figure(figsize=(5.6 * cols, 4.0 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, crit in zip(axes, names, strict=False):
        marks = {m: float(s.get(crit, np.nan)) for m, s in method_scores.items() if s.get(crit) is not None}
        draw_score_distribution(ax, scores[crit], marks, name=crit, note=note)
    draw_k_distribution(axes[len(names)], k_asked, k_found, method_k)
    for ax in axes[panels:]:
        ax.set_visible(False)
    return fig


def federated_figure(
    site_names, site_rows, trace, *, mode="", n_iter=None, converged=None, ylabel="lower bound"
):
    """Rows per site (counts only, never the sites' data) and the federated lower-bound (or objective)
    trace."""
    fig = Figure(figsize=(12, 4), layout="constrained")
    ax0, ax1 = fig.subplots(1, 2)
    rows = [np.nan if r is None else float(r) for r in site_rows]
    if site_names and np.isfinite(rows).any():
        ax0.barh(list(site_names), np.nan_to_num(rows), color=_colors(len(site_names)))
        for i, r in enumerate(rows):
            ax0.text(
                0 if not np.isfinite(r) else r,
                i,
                f" {int(r):,}" if np.isfinite(r) else " not recorded",
                va="center",
                fontsize=_SMALL,
            )
        ax0.set_xlabel("rows held by the site", fontsize=_SMALL)
        ax0.tick_params(labelsize=_SMALL)
        ax0.set_title(f"rows per site ({mode})", fontsize=10)
    else:
        _empty(ax0, f"sites ({mode})", "rows per site not recorded")
    draw_trace(ax1, trace, ylabel=ylabel, converged=converged, n_iter=n_iter)
    return fig

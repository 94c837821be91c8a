"""The ``report`` stage: ``report/index.html`` with figures, from what the run store holds.

The page shows the data set and run facts, the accuracy table of every consensus method and of
the base partitions, and per method the co-association of a sample (VAT-style), memberships,
uncertainty, the cluster-overlap graph, soft centroids and the objective trace; for federated
runs, the sites' row counts and the protocol's mode. Figures are written beside the page
(``report/fig-*.png``), so the page is self-contained in ``report/``.

A method's figure is kept from one report to the next while nothing it is drawn from changed:
``report/figures.json`` holds, per figure file, the key it was drawn under (:func:`._figure_keys.figure_key`:
the result's stage record, the records of the stages before consensus, the sample, the format and the
figure code) and the SHA-256 of its bytes. Each consensus command rewrites the page, so without
this the figures of every earlier result were drawn again each time.

Nothing here reads a full n x n matrix or draws all n points: figures use a sample drawn with
the run's seed (from a few random blocks of rows when n is large, so that only those blocks of
the zarr arrays are read), and each figure says so. The accuracy table is exact: it reads each
method's labels and ``y_true`` (n int32 each) and counts a contingency table.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time

import numpy as np

from .._validation import InputError
from ..coassoc.counting import dense_coassociation
from ..metrics import cluster_overlap, contingency_counts, soft_centroids, table_scores
from ..report.html import accuracy_html, facts_html, federated_html, figure_html, method_caption, page, slug
from ._figure_keys import (
    FIGURE_KEYS,
    REPORT_INPUTS,
    code_identity,
    data_identity,
    figure_key,
    figures_enabled,
    kept_figure,
    keys_document,
    known_figures,
    read_json,
)
from .consensus import current_results

__all__ = ["report_page", "sample_points", "RowSample"]

logger = logging.getLogger(__name__)

#: spawn key of the report's branch of the run seed (the stages use 1-5, see _validation)
_REPORT_SEED_KEY = 15
SAMPLE_SIZE = 20_000  # points behind histograms, overlap, centroids, base-partition scores
IMAGE_SIZE = 300  # points of the co-association picture
BAR_SIZE = 200  # points of the membership bars
BLOCK_ROWS = 1 << 16  # rows per sampling block on large data
MAX_BLOCKS = 8  # blocks the sample is drawn from on large data (uniform over all n up to 524,288)
CRITERIA = ("H", "ARI", "NMI", "MP", "R_n")  # the keys of metrics.table_scores


# --------------------------------------------------------------------------- sampling


class RowSample:
    """A seeded sample of row indices, read in sorted order, with nested uniform sub-samples.

    Attributes
    ----------
    rows : ndarray of int64
        The sampled rows, sorted (the order to read them from zarr).
    description : str
        What was sampled, for the figures' notes.
    """

    def __init__(self, rows, order, description, n, seed):
        self.rows = rows
        self._order = order
        self.description = description
        self.n = n
        self.seed = seed

    def __len__(self):
        return len(self.rows)

    def note(self, m=None):
        """Short note for a figure drawn from ``m`` of the sampled points (default: all of them)."""
        m = len(self.rows) if m is None else min(m, len(self.rows))
        if m == self.n:
            return f"all {self.n:,} points"
        return f"sample: {m:,} of {self.n:,} points, seed {self.seed}"

    def subset(self, m):
        """Sorted positions (into :attr:`rows`) of a uniform sub-sample of ``m`` of the rows."""
        return np.sort(self._order[: min(m, len(self.rows))])


def sample_points(n, size, seed, *, block_rows=BLOCK_ROWS, max_blocks=MAX_BLOCKS):
    """Sample ``size`` of ``n`` rows with ``seed``.

    When ``n`` fits in ``max_blocks`` blocks of ``block_rows`` rows, the sample is uniform over
    all rows; otherwise ``max_blocks`` blocks are drawn first and the sample is uniform within
    them, so that readers touch only those blocks' chunks.

    Examples
    --------
    >>> s = sample_points(10, 4, seed=0)
    >>> len(s), bool(np.all(np.diff(s.rows) > 0))
    (4, True)
    >>> sample_points(10**7, 100, seed=0).description
    '100 of 10,000,000 points, uniform within 8 random blocks of 65,536 rows (seed 0)'
    """
    n = int(n)
    rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(_REPORT_SEED_KEY,)))
    n_blocks = -(-n // block_rows)
    if n_blocks <= max_blocks:
        pool = n
        where = "uniform"
        pick = rng.choice(n, size=min(size, n), replace=False)
    else:
        blocks = np.sort(rng.choice(n_blocks, size=max_blocks, replace=False))
        pool_rows = np.concatenate([np.arange(b * block_rows, min(n, (b + 1) * block_rows)) for b in blocks])
        pool = len(pool_rows)
        pick = pool_rows[rng.choice(pool, size=min(size, pool), replace=False)]
        where = f"uniform within {max_blocks} random blocks of {block_rows:,} rows"
    rows = np.sort(pick).astype(np.int64)
    order = np.searchsorted(rows, pick)  # positions in the sorted rows, in random order
    m = len(rows)
    desc = f"all {n:,} points" if m == n else f"{m:,} of {n:,} points, {where}"
    return RowSample(rows, order, f"{desc} (seed {seed})", n, seed)


def _read_rows(arr, rows):
    """Rows ``rows`` (sorted) of a zarr array: only the chunks holding them are read."""
    sel = (rows,) + (slice(None),) * (arr.ndim - 1)
    return np.asarray(arr.get_orthogonal_selection(sel))


# --------------------------------------------------------------------------- reading the store


def _run_seed(store):
    for stage in ("ingest", "generate"):
        seed = ((store.record(stage) or {}).get("params") or {}).get("seed")
        if seed is not None:
            return int(seed)
    return 0


def _sample_pairs(store, rows):
    """Stored pairs of the sampled ``rows``: ``(position of the row in rows, column, co, both)``."""
    pg = store["pairs"]
    ptr = np.asarray(pg["indptr"].get_coordinate_selection(np.concatenate([rows, rows + 1])), dtype=np.int64)
    start, stop = ptr[: len(rows)], ptr[len(rows) :]
    lens = stop - start
    total = int(lens.sum())
    if total == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty
    pos = np.repeat(np.arange(len(rows)), lens)
    offsets = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens) + np.repeat(start, lens)
    get = lambda name: np.asarray(pg[name].get_coordinate_selection(offsets), dtype=np.int64)  # noqa: E731
    return pos, get("indices"), get("co"), get("both")


def _coassociation_of(store, rows, pairs, lab_rows):
    """``(co, both, source)`` among the sampled ``rows``: from the pairs store when it holds most of
    these pairs (e.g. the ``full`` strategy), else counted from ``lab_rows``, these rows of ``labels``."""
    m = len(rows)
    co = np.zeros((m, m), dtype=np.int64)
    both = np.zeros((m, m), dtype=np.int64)
    if pairs is not None:
        pos, cols, c, b = pairs
        at = np.searchsorted(rows, cols)
        inside = (at < m) & (rows[np.minimum(at, m - 1)] == cols)
        co[pos[inside], at[inside]] = c[inside]
        both[pos[inside], at[inside]] = b[inside]
        coverage = float((both > 0).sum()) / max(m * (m - 1), 1)
        if coverage >= 0.5 or "labels" not in store:
            np.fill_diagonal(co, 1)
            np.fill_diagonal(both, 1)
            return co, both, f"from the pairs store ({coverage:.0%} of these pairs stored)"
    if lab_rows is None:
        return None, None, ""
    co, both = dense_coassociation(lab_rows)
    src = "counted from these points' rows of labels"
    if pairs is not None:
        src += "\n(the pairs store holds few of these pairs)"
    return co, both, src


def _trace_of(attrs):
    return attrs.get("objective_trace") or attrs.get("lower_bound_trace") or []


def _method_table(store, name):
    """What the accuracy table needs of method ``name``: its attributes and, with ``y_true``, exact scores."""
    g = store[f"consensus/{name}"]
    out = {"attrs": dict(g.attrs)}
    if "labels" in g and "y_true" in store:
        t0 = time.perf_counter()
        out["scores"] = table_scores(contingency_counts(g["labels"][:], store["y_true"][:]))
        logger.debug("report %s: exact scores in %.2f s", name, time.perf_counter() - t0)
    return out


def _figure_inputs(store, sample, image_pos, lab_sample):
    """What every method's figure reads beside the method's own arrays: the sampled features, the
    stored pairs of the picture's rows and their co-association (read once, when a figure is drawn)."""
    image_rows = sample.rows[image_pos]
    X_sample = _read_rows(store["X"], sample.rows).astype(np.float64) if "X" in store else None
    names = None
    if "X" in store:
        attrs = dict(store["X"].attrs)
        names = attrs.get("feature_names") or (attrs.get("summary") or {}).get("feature_names")
        if names is None or len(names) != store["X"].shape[1]:
            names = None
    pairs_ok = "pairs" in store and store["pairs"].attrs.get("complete", False)
    pairs = _sample_pairs(store, image_rows) if pairs_ok else None
    co, both, co_src = _coassociation_of(
        store, image_rows, pairs, None if lab_sample is None else lab_sample[image_pos]
    )
    return {
        "X_sample": X_sample,
        "feature_names": names,
        "pairs": pairs,
        "co": co,
        "both": both,
        "co_src": co_src,
    }


def _method_figure_data(store, name, attrs, sample, image_pos, X_sample, feature_names, pairs):
    """The arguments of :func:`~ensemble_dask.report.plots.method_figure` of method ``name`` (all but the
    co-association)."""
    g = store[f"consensus/{name}"]
    labels_arr = g["labels"] if "labels" in g else None
    fig = {}
    fig["notes"] = {k: sample.note() for k in ("uncertainty", "overlap", "centroids")}
    fig["notes"]["vat"] = sample.note(len(image_pos))
    if "Y" in g:
        Y = _read_rows(g["Y"], sample.rows).astype(np.float64)
        Y = np.clip(Y, 0.0, None)
        Y /= np.maximum(Y.sum(axis=1, keepdims=True), 1e-300)
        bars = sample.subset(BAR_SIZE)
        fig["Y"] = Y[bars]
        fig["notes"]["members"] = sample.note(len(bars))
        fig["overlap"] = cluster_overlap(Y)
        fig["mass"] = Y.sum(axis=0)
        if X_sample is not None:
            fig["centroids"] = soft_centroids(Y, X_sample)
            fig["feature_names"] = feature_names
        fig["vat_strength"] = Y[image_pos].max(axis=1)
    if "uncertainty" in g:
        fig["uncertainty"] = _read_rows(g["uncertainty"], sample.rows)
    if labels_arr is not None:
        lab_s = _read_rows(labels_arr, sample.rows)
        fig["vat_labels"] = lab_s[image_pos]
        if pairs is not None:
            pos, cols, c, b = pairs
            ok = b > 0
            partner = np.asarray(labels_arr.get_coordinate_selection(cols[ok]))
            same = lab_s[image_pos][pos[ok]] == partner
            frac = c[ok] / b[ok]
            fig["within"], fig["between"] = frac[same], frac[~same]
            fig["notes"]["pairs"] = f"pairs of {sample.note(len(image_pos))}"
    fig["trace"] = _trace_of(attrs)
    fig["trace_label"] = _trace_label(attrs.get("method"))
    fig["converged"] = attrs.get("converged")
    fig["n_iter"] = attrs.get("n_iter")
    metrics = attrs.get("metrics") or {}
    if metrics.get("k_scores"):  # K chosen: the criteria against K, and the consensus CDFs
        fig.update(k_scores=metrics["k_scores"], k_cdf=metrics.get("k_cdf"), k_chosen=metrics["n_clusters"])
        fig["k_criterion"] = metrics.get("k_criterion")
    return fig


def _base_partitions(store, lab, y_sample):
    """Per base partition: scores on the sample (``lab``: the sampled rows of labels), k asked and found."""
    if "labels" not in store:
        return None
    labels = store["labels"]
    meta = list(labels.attrs.get("partitions", []))
    k_asked = [int(m.get("k", 0)) for m in meta if m.get("k") is not None]
    k_found = [int(m["n_clusters_found"]) for m in meta if m.get("n_clusters_found") is not None]
    scores = {c: [] for c in CRITERIA}
    if y_sample is not None:
        for u in range(lab.shape[1]):
            s = table_scores(contingency_counts(lab[:, u], y_sample))
            for c in CRITERIA:
                scores[c].append(s[c])
    return {"scores": {c: np.asarray(v) for c, v in scores.items()}, "k_asked": k_asked, "k_found": k_found}


# --------------------------------------------------------------------------- the page


def _forget_report_key(store):
    with contextlib.suppress(OSError):
        store.remove(REPORT_INPUTS)


def _clear_old_figures(store):
    fs, root = store.file_system("report")
    try:
        old = fs.glob(f"{root.rstrip('/')}/fig-*")
    except (FileNotFoundError, OSError):
        return
    for path in old:
        fs.rm(path)


def _has_file(store, path):
    fs, target = store.file_system(path)
    return fs.exists(target)


def report_page(store, report=None, *, sample_size=SAMPLE_SIZE, fmt="png", figures=None):
    """Write ``report/index.html`` and its figures into ``store``; return the page's path or URL.

    Parameters
    ----------
    store : RunStore
    report : dict, default=None
        The ``report/metrics.json`` document (``dataset``, ``base_partitions``, ``methods``) when
        the caller just built it; else the store's current consensus results are reported.
    sample_size : int, default=20000
        Points sampled (with the run's seed) for the histograms, overlap, centroids and the base
        partitions' scores; the co-association picture and the membership bars use nested
        sub-samples of 300 and 200 of them.
    fmt : {"png", "svg"}, default="png"
        Image format of the figures.
    figures : bool or None, default=None
        Draw the figures (None: the dask config ``ensemble-dask.report.figures``, true unless set; see
        :func:`~ensemble_dask.stages._figure_keys.figures_enabled`). Without them the page holds the facts
        and the tables, and no figure file is kept.

    Returns
    -------
    str
        Path (local stores) or URL of ``report/index.html``.
    """
    if fmt not in ("png", "svg"):
        raise InputError(f"The 'fmt' parameter of report_page must be 'png' or 'svg'; got {fmt!r}")
    if isinstance(sample_size, bool) or not isinstance(sample_size, (int, np.integer)) or sample_size < 1:
        raise InputError(
            f"The 'sample_size' parameter of report_page must be an int >= 1; got {sample_size!r}"
        )
    draw = figures_enabled(figures)
    if draw:  # matplotlib (half a second of CPU to import): only for a page drawn with its figures
        from ..report import plots
    records = store.records()
    if not records and "federated" not in store:
        raise InputError(f"run store {store.url!r} holds no stage results yet: nothing to report")
    t0 = time.perf_counter()
    report = report or {}
    methods = report.get("methods")
    if methods is None:
        methods = current_results(store)
    n = store.n
    seed = _run_seed(store)
    figures = {}
    sections = []
    sample = None
    if n:
        sample = sample_points(n, sample_size, seed)
        image_pos = sample.subset(IMAGE_SIZE)
        y_sample = _read_rows(store["y_true"], sample.rows) if "y_true" in store else None
        # the sampled rows of labels, read once (with one-column chunks, reading is the costly part)
        lab_sample = _read_rows(store["labels"], sample.rows) if "labels" in store else None
        base = _base_partitions(store, lab_sample, y_sample)
    else:
        base = None
    table_rows = []
    shown = [name for name in methods if sample is not None and f"consensus/{name}" in store]
    keys = {}
    if shown and draw:
        known = known_figures(store)
        context = {
            "code": code_identity(),
            "sample": [int(n), int(sample_size), seed, IMAGE_SIZE, BAR_SIZE, BLOCK_ROWS, MAX_BLOCKS],
            "fmt": fmt,
            "data": data_identity(store),
        }
    shared = None  # the figures' common inputs: read when the first figure is drawn
    reused = 0
    for name in shown:
        table = _method_table(store, name)
        metrics = {**(methods.get(name) or {}), **table.get("scores", {})}
        fname = f"fig-method-{slug(name)}.{fmt}" if draw else None
        table_rows.append((name, metrics, table["attrs"], fname))
        if not draw:
            continue
        key = figure_key(name, records, context)
        # read before _clear_old_figures removes the file
        figures[fname] = kept_figure(store, fname, key, known)
        reused += figures[fname] is not None
        if figures[fname] is None:
            if shared is None:
                shared = _figure_inputs(store, sample, image_pos, lab_sample)
            data = _method_figure_data(
                store, name, table["attrs"], sample, image_pos,
                shared["X_sample"], shared["feature_names"], shared["pairs"],
            )  # fmt: skip
            fig = plots.method_figure(
                name, co=shared["co"], both=shared["both"], co_source=shared["co_src"], **data
            )
            figures[fname] = plots.figure_bytes(fig, fmt)
        if key is not None:
            keys[fname] = {"key": key, "sha256": hashlib.sha256(figures[fname]).hexdigest()}
    if shown and draw:
        logger.info("report: %d of %d method figures reused from the last report", reused, len(shown))
    base_figure = base is not None and bool(
        len(base["k_asked"]) + sum(len(v) for v in base["scores"].values())
    )
    if draw and base_figure:
        crit = {c: v for c, v in base["scores"].items() if len(v)}
        fig = plots.base_partitions_figure(
            crit,
            base["k_asked"],
            base["k_found"],
            {name: m for name, m, _, _ in table_rows},
            {name: int(m["effective_k"]) for name, m, _, _ in table_rows if m.get("effective_k") is not None},
            note=sample.note(),
        )
        figures[f"fig-base-partitions.{fmt}"] = plots.figure_bytes(fig, fmt)
    fed = _federated(store)
    if draw and fed is not None:
        fig = plots.federated_figure(
            fed["names"],
            fed["rows"],
            fed["trace"],
            mode=fed["mode"],
            n_iter=fed["n_iter"],
            converged=fed["converged"],
            ylabel=fed.get("trace_label", "lower bound"),
        )
        figures[f"fig-federated.{fmt}"] = plots.figure_bytes(fig, fmt)
    sections.append(facts_html(_facts(store, report, sample, seed), records))
    sampled = base is not None and sample is not None and len(sample) < n
    sections.append(accuracy_html(table_rows, base, sample.description if sampled else None))
    if base_figure:
        sections.append(
            figure_html(
                "Base partitions and consensus",
                f"fig-base-partitions.{fmt}" if draw else None,
                "Distribution of the base partitions' accuracy and of their k; each consensus method is a "
                "line, with the share of base partitions it beats.",
                anchor="base",
            )
        )
    for name, _, attrs, fname in table_rows:
        caption = method_caption(name, attrs, panels=fname is not None)
        sections.append(figure_html(f"Method {name}", fname, caption, anchor=slug(name)))
    if fed is not None:
        sections.append(federated_html(fed, f"fig-federated.{fmt}" if draw else None))
    performance = "dask-performance.html" if _has_file(store, "report/dask-performance.html") else None
    page_html = page(store.url, sections, time.perf_counter() - t0, performance)
    _forget_report_key(store)  # a page not written by write_report is not the one it keyed
    _clear_old_figures(store)
    for fname, data in figures.items():
        store.write_bytes(f"report/{fname}", data)
    # after the figures: an entry names bytes that were written (and kept_figure checks them)
    store.write_bytes(FIGURE_KEYS, keys_document(keys))
    url = store.write_bytes("report/index.html", page_html.encode("utf-8"))
    logger.info("report: %s (%d figures) in %.2f s", url, len(figures), time.perf_counter() - t0)
    return url


def _federated(store):
    """Counts and settings of a federated result (never a site's data), or None.

    Reads the ``federated`` group's attributes and the coordinator's ``report/federated.json`` or
    ``report/metrics.json`` (older and newer spellings of the same facts both accepted).
    """
    if "federated" not in store:
        return None
    a = {}
    for doc in ("report/federated.json", "report/metrics.json"):
        a.update(read_json(store, doc) or {})
    a.update(dict(store["federated"].attrs))
    sites = a.get("sites") or []
    names = [s.get("name", "?") if isinstance(s, dict) else str(s) for s in sites]
    rows_rec = a.get("rows_per_site") or a.get("site_rows") or {}
    if isinstance(rows_rec, list):
        rows_rec = dict(zip(names, rows_rec, strict=False))
    n_iter = a.get("n_iter", a.get("iterations"))
    iters_rec = a.get("iterations_per_site") or {}
    if isinstance(iters_rec, list):
        iters_rec = dict(zip(names, iters_rec, strict=False))
    scores = {c: a[c] for c in ("H", "ARI", "NMI") if isinstance(a.get(c), (int, float))}
    return {
        "names": names,
        "rows": [rows_rec.get(s) for s in names],
        "iterations": [iters_rec.get(s, n_iter) for s in names],
        "mode": a.get("mode", "not recorded"),
        "tls": a.get("tls"),
        "n_iter": n_iter,
        "converged": a.get("converged"),
        "lower_bound": a.get("lower_bound"),
        "n_clusters": a.get("n_clusters"),
        "trace": a.get("lower_bound_trace") or a.get("bound_trace") or [],
        "messages": a.get("messages") or {},
        **_federated_kcc(a),
        "scores": scores,
        "seconds": a.get("seconds"),
    }


def _federated_kcc(a):
    """The entries of :func:`_federated` that differ for a federated KCC run (objective, Lloyd iterations)."""
    if a.get("method") != "kcc":
        return {"method": a.get("method", "bce")}
    return {
        "method": "kcc",
        "objective": a.get("objective"),
        "trace": a.get("objective_trace") or [],
        "trace_label": "objective",
    }


def _facts(store, report, sample, seed):
    """``[(label, text)]`` facts of the data set and the run."""
    ds = (report or {}).get("dataset") or {}
    x_summary = dict(store["X"].attrs).get("summary", {}) if "X" in store else {}
    n = ds.get("n", store.n)
    d = ds.get("d", x_summary.get("d", store["X"].shape[1] if "X" in store else None))
    ingest_rec = store.record("ingest") or {}
    source = ds.get("source") or (ingest_rec.get("meta") or ingest_rec.get("params") or {}).get("url")
    rows = [
        ("run store", store.url),
        ("data", source or "not recorded"),
    ]
    rows += [(label, v) for label, v in (("points n", n), ("features d", d)) if v is not None]
    counts = ds.get("class_counts") or x_summary.get("class_counts")
    if counts:
        rows.append(("reference classes", ", ".join(f"{k} ({v:,})" for k, v in counts.items())))
    if "labels" in store:
        lab = store["labels"]
        meta = lab.attrs.get("partitions", [])
        algos = sorted({m.get("algorithm", "?") for m in meta})
        ks = [m["k"] for m in meta if m.get("k") is not None]
        kdesc = f", k {min(ks)}..{max(ks)}" if ks else ""
        rates = [m.get("rate", 1.0) for m in meta]
        miss = f", {1 - float(np.mean(rates)):.0%} of entries missing" if rates else ""
        rows.append(("base clusterings", f"{lab.shape[1]:,} ({', '.join(algos)}{kdesc}{miss})"))
    if "pairs" in store:
        pa = dict(store["pairs"].attrs)
        params = ", ".join(f"{k}={v}" for k, v in (pa.get("params") or {}).items())
        rows.append(
            (
                "pairs stored",
                (
                    f"{pa.get('n_pairs', 0):,} pairs ({pa.get('nnz', 0):,} CSR entries), "
                    f"strategy {pa.get('strategy')}" + (f" ({params})" if params else "")
                ),
            )
        )
    cluster = read_json(store, "report/cluster.json")
    if cluster:
        mem = cluster.get("memory_bytes") or 0
        rows.append(
            (
                "Dask cluster",
                (
                    f"{cluster.get('kind')} at {cluster.get('scheduler')}: {cluster.get('workers')} workers, "
                    f"{cluster.get('threads')} threads" + (f", {mem / 2**30:.1f} GiB" if mem else "")
                ),
            )
        )
    else:
        rows.append(("Dask cluster", "not recorded"))
    if sample is not None:
        rows.append(("figures drawn from", f"{sample.description}; run seed {seed}"))
    return rows


def _trace_label(method):
    """What the trace of ``method`` is (its registry entry's ``trace``): an objective or a lower bound."""
    from ..consensus import registry

    return registry.get(method).trace if method in registry.names() else "objective"

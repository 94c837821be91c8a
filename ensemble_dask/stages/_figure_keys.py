"""Method figures kept from one report to the next while nothing they are drawn from changed; whether
figures are drawn at all (:func:`figures_enabled`).

Each consensus command rewrites the report page; without this, the figure of every earlier result was
drawn again each time. ``report/figures.json`` holds, per figure file, the key it was drawn under
(:func:`figure_key`) and the SHA-256 of its bytes; a figure is reused only when both still match.
"""

from __future__ import annotations

import hashlib
import json
import sys

from .._config import flag

#: ``{"version", "figures": {figure file: {"key", "sha256"}}}`` of the method figures in ``report/``
FIGURE_KEYS = "report/figures.json"
#: ``{"key"}``: the content key (``stages.report.report_key``) of the state the report was written from
REPORT_INPUTS = "report/inputs.json"
#: bump when a method figure changes for the same store (the figure code's source is part of the key too)
FIGURE_VERSION = 1
#: the modules a method figure's pixels come from: an edit to any of them redraws every figure
FIGURE_MODULES = (
    "ensemble_dask.report.plots",
    "ensemble_dask.stages.report_page",
    "ensemble_dask.metrics",
    "ensemble_dask.coassoc.counting",
)


def figures_enabled(value=None):
    """Whether report pages draw their figures: ``value``, or when None the dask config
    ``ensemble-dask.report.figures`` (default true). ``DASK_ENSEMBLE_DASK__REPORT__FIGURES=False`` in the
    environment, or ``report: {figures: false}`` under ``ensemble-dask`` in a dask config file, turns them
    off: the page keeps its facts and tables, and drawing (about a second a figure) is left out, e.g. for runs
    in continuous integration. Accepted: true or false (also as the strings "true"/"false" in any case, and
    1/0); anything else raises :class:`InputError` naming the setting."""
    return flag("report.figures", value)


def record_identity(rec):
    """What identifies a stage's result in its record: its content hash, output, completeness, when it
    finished."""
    return [rec.get("hash"), rec.get("output"), rec.get("complete"), rec.get("finished")]


def code_identity():
    """The figure code's identity: :data:`FIGURE_VERSION`, the package's and matplotlib's versions and a
    hash of the source of :data:`FIGURE_MODULES` (so an edit there redraws every figure even when nobody
    bumped the version)."""
    import matplotlib

    from .. import __version__

    digest = hashlib.sha256()
    for name in FIGURE_MODULES:
        try:
            with open(sys.modules[name].__file__, "rb") as fh:
                digest.update(fh.read())
        except (KeyError, OSError, TypeError):  # not imported, or no source: the versions decide
            digest.update(b"?")
    return [FIGURE_VERSION, __version__, matplotlib.__version__, digest.hexdigest()[:16]]


def data_identity(store):
    """Shapes of the arrays the figures read and the pairs store's attributes: a safety net for a
    store changed without a stage record (the stages' records say what changed otherwise)."""
    out = {a: list(store[a].shape) if a in store else None for a in ("X", "labels", "y_true")}
    out["pairs"] = dict(store["pairs"].attrs) if "pairs" in store else None
    return out


def figure_key(name, records, context):
    """The key of method ``name``'s figure, or None (no complete record: drawn every time).

    It hashes everything the figure is drawn from: the result's stage record (its parameters, inputs
    and when it was written, so a result fitted again is drawn again), the identity of every stage's
    result before consensus (ingest or imported labels, generate, coassoc: the sampled features, labels
    and pairs), and ``context`` (the figure code, the sample, the image format, the arrays' shapes).
    """
    rec = records.get(f"consensus/{name}")
    if not isinstance(rec, dict) or not rec.get("complete"):
        return None
    upstream = {
        k: record_identity(v)
        for k, v in records.items()
        if isinstance(v, dict) and not k.startswith(("consensus/", "report"))
    }
    doc = {"name": name, "result": rec, "upstream": upstream, **context}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:32]


def read_bytes(store, path):
    """The bytes of ``path`` in ``store``, or None when it cannot be read."""
    try:
        return store.read_bytes(path)
    except OSError:
        return None


def read_json(store, path):
    """The JSON document at ``path`` in ``store``, or None when it cannot be read or parsed."""
    raw = read_bytes(store, path)
    try:
        return None if raw is None else json.loads(raw)
    except ValueError:
        return None


def known_figures(store):
    """``{figure file: {"key", "sha256"}}`` of :data:`FIGURE_KEYS`; ``{}`` when missing, unreadable or
    written by another :data:`FIGURE_VERSION`."""
    raw = read_bytes(store, FIGURE_KEYS)
    try:
        doc = json.loads(raw) if raw is not None else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or doc.get("version") != FIGURE_VERSION:
        return {}
    figs = doc.get("figures")
    if not isinstance(figs, dict):
        return {}
    return {f: e for f, e in figs.items() if isinstance(e, dict) and isinstance(e.get("key"), str)}


def kept_figure(store, fname, key, known):
    """The bytes of ``report/fname`` when it was drawn under ``key`` and is intact, else None."""
    entry = known.get(fname)
    if key is None or entry is None or entry["key"] != key:
        return None
    data = read_bytes(store, f"report/{fname}")
    if data is None or hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        return None  # removed, half written, or written since by another report
    return data


def keys_document(keys):
    """The bytes of :data:`FIGURE_KEYS` for ``keys`` (``{figure file: {"key", "sha256"}}``)."""
    return json.dumps({"version": FIGURE_VERSION, "figures": keys}, indent=1, sort_keys=True).encode()

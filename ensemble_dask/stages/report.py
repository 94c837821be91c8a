"""The ``report`` stage: ``report/metrics.json`` from what the run store holds.

Like the other stages it is keyed on content: ``report/inputs.json`` holds the key of the stage
records the report was built from, and a report whose key still matches is not rebuilt (a re-run
of a finished workflow then reads two small JSON documents). The base partitions' scores, the
costly part of a report on many clusterings, are kept under the identity of the labels and of
``y_true``, so a report rebuilt because a consensus result changed does not re-score them.
"""

from __future__ import annotations

import logging

import numpy as np

from .._validation import InputError
from ..io.store import StageContentError, stage_hash
from ._figure_keys import REPORT_INPUTS, figures_enabled, read_json, record_identity
from .consensus import current_results
from .generate import base_partition_scores

__all__ = ["write_report", "check_report_settings", "dataset_facts", "REPORT_INPUTS", "BASE_SCORES"]

logger = logging.getLogger(__name__)

#: the key of the records the report in ``report/`` was built from
#: the base partitions' scores with the identities of the labels and y_true they were computed on
BASE_SCORES = "_cache/base-partitions.json"
_REPORT_VERSION = 1  # bump when the report's content changes for the same records


def _exists(store, path):
    fs, target = store.file_system(path)
    return fs.exists(target)


def check_report_settings(store):
    """Raise :class:`InputError` before any stage when its report could not be written: the store's report
    folder (see ``RunStore.check_report_folder``) or a figures setting that is neither true nor false
    (:func:`~ensemble_dask.stages._figure_keys.figures_enabled`)."""
    store.check_report_folder()
    figures_enabled()


def report_key(store):
    """The content key of a report of ``store``: every stage record (its identity and when it finished), and
    whether figures are off (:func:`figures_enabled`)."""
    records = {name: record_identity(rec) for name, rec in store.records().items()}
    params = {"report": _REPORT_VERSION}
    if not figures_enabled():  # a page drawn without figures is not the page with them (nor the reverse)
        params["figures"] = False
    return stage_hash(params, records)


def cached_base_scores(store):
    """:func:`~ensemble_dask.stages.generate.base_partition_scores`, kept in the store under the
    identities of ``labels`` and ``y_true`` (the generate and ingest stages' outputs)."""
    if "y_true" not in store or "labels" not in store:
        return None
    try:
        key = stage_hash({"base_scores": 1}, [store.stage_hash("generate"), store.stage_hash("ingest")])
    except StageContentError:  # labels or data that are not what their record says: never scored as if
        raise
    except InputError:  # a stage without a record: nothing to key on, score afresh
        return base_partition_scores(store)
    cached = read_json(store, BASE_SCORES)
    if cached and cached.get("key") == key:
        logger.info("report: base partition scores from the store")
        return cached["scores"]
    scores = base_partition_scores(store)
    if store.mode != "r":
        store.write_json(BASE_SCORES, {"key": key, "scores": scores})
    return scores


def dataset_facts(store):
    """The report's ``dataset``: where the data came from, n, d, the classes and their counts, the number of
    base clusterings and the share of rows they leave out."""
    summary = store["X"].attrs.get("summary", {}) if "X" in store else {}
    ingest_rec = store.record("ingest") or {}
    dataset = {
        "source": (ingest_rec.get("meta") or ingest_rec.get("params") or {}).get("url"),
        "n": summary.get("n", store.n),
        "d": summary.get("d"),
        "classes": summary.get("classes"),
        "class_counts": summary.get("class_counts"),
    }
    if "labels" in store:
        labels = store["labels"]
        dataset["n_clusterings"] = int(labels.shape[1])
        rates = [m.get("rate", 1.0) for m in labels.attrs.get("partitions", [])]
        dataset["missing_fraction"] = round(1.0 - float(np.mean(rates)), 6) if rates else None
    return dataset


def write_report(store, *, force=False):
    """Write ``report/metrics.json`` (data-set facts, base-partition accuracy, consensus methods)
    and ``report/index.html`` with its figures (:func:`~ensemble_dask.stages.report_page.report_page`).

    The ``methods`` entries are those of the consensus results in the store, so the report always
    describes what the store holds. Returns metrics.json's document plus ``"html"``, the page's
    path or URL. Nothing is rebuilt when the stage records are those the report was built from
    (see :func:`report_key`), unless ``force``.
    """
    store.check_report_folder()
    if "X" not in store and "labels" not in store and "federated" in store:
        # a federated coordinator's store: the model and the summary its run wrote; redraw the page
        from .report_page import report_page

        return {**(read_json(store, "report/metrics.json") or {}), "html": report_page(store)}
    if "X" not in store and "labels" not in store:
        raise InputError(
            f"run store {store.url!r} holds no data set (no 'X' and no 'labels'); "
            "run ingest or import-labels first"
        )
    if not store.records():  # a zarr group of arrays that no stage wrote
        raise InputError(
            f"{store.url!r} holds no stage records: it is not a run store (ingest, import-labels or run "
            "make one)"
        )
    key = report_key(store)
    if not force and (read_json(store, REPORT_INPUTS) or {}).get("key") == key:
        report = read_json(store, "report/metrics.json")
        if report is not None and _exists(store, "report/index.html"):
            logger.info("report: up to date, skipped")
            return {**report, "html": store._file_url("report/index.html")}
    report = {
        "dataset": dataset_facts(store),
        "base_partitions": cached_base_scores(store),
        "methods": current_results(store),
    }
    store.write_json("report/metrics.json", report)
    from .report_page import report_page  # matplotlib: imported only when a report is written

    html = report_page(store, report)
    if store.mode != "r":
        store.write_json(REPORT_INPUTS, {"key": key})  # last: a half-written report is rebuilt
    return {**report, "html": html}

"""The ``report`` stage: ``report/metrics.json`` from what the run store holds."""

from __future__ import annotations

import numpy as np

from .._validation import InputError
from .consensus import current_results
from .generate import base_partition_scores

__all__ = ["write_report"]


def write_report(store):
    """Write ``report/metrics.json`` (data-set facts, base-partition accuracy, consensus methods)
    and ``report/index.html`` with its figures (:func:`~ensemble_dask.stages.report_page.report_page`).

    The ``methods`` entries are those of the consensus results in the store, so the report always
    describes what the store holds. Returns metrics.json's document plus ``"html"``, the page's
    path or URL.
    """
    if "X" not in store and "labels" not in store and "federated" in store:
        # a federated coordinator's store: the model and the summary its run wrote; redraw the page
        from .report_page import _read_json, report_page

        return {**(_read_json(store, "report/metrics.json") or {}), "html": report_page(store)}
    if "X" not in store and "labels" not in store:
        raise InputError(
            f"run store {store.url!r} holds no data set (no 'X' and no 'labels'); "
            "run ingest or import-labels first"
        )
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
    report = {
        "dataset": dataset,
        "base_partitions": base_partition_scores(store),
        "methods": current_results(store),
    }
    store.write_json("report/metrics.json", report)
    from .report_page import report_page  # matplotlib: imported only when a report is written

    return {**report, "html": report_page(store, report)}

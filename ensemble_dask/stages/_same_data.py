"""Whether the data ``ingest`` is given is the data set a run store holds, and what to say when it is not
(a store holding another data set stops, unless it is overwritten)."""

from __future__ import annotations

import os

from .._validation import InputError

__all__ = [
    "REPLACE",
    "OtherDataError",
    "check_results_kept",
    "check_same_n",
    "check_same_source",
    "results_at_risk",
]

#: what to do with a store that holds another data set
REPLACE = (
    "use another store, or overwrite it (ingest --overwrite, or 'overwrite: true' under 'data' in a "
    "workflow), which deletes every stage's results in it"
)


class OtherDataError(InputError):
    """The run store holds another data set than the one given, and may not replace it (its message says how
    to replace it with the CLI or a workflow; :class:`~ensemble_dask.ConsensusClustering` says its own)."""


def _same_location(a, b):
    if "://" in a or "://" in b or a.startswith("synthetic:") or b.startswith("synthetic:"):
        return a == b
    return os.path.realpath(a) == os.path.realpath(b)


def check_same_source(store, url, source):
    """Stop when ``store`` holds a data set ingested from another source than ``url`` (whose fingerprint is
    ``source``); the same source with other options or new content is re-read."""
    rec = store.record("ingest")
    if not rec or not rec.get("complete"):
        return
    old = rec.get("params") or {}
    # the stage's identity leaves the URL out (content-addressed); the record's meta keeps it
    old_url = (rec.get("meta") or {}).get("url", old.get("url"))
    old_source = old.get("source") or {}
    if old_url is None or _same_location(str(old_url), url):
        return
    # the same file under another name (a relative path seen from elsewhere, a copy): same identity
    marks = {k: v for k, v in source.items() if k not in ("url", "files")}
    old_marks = {k: v for k, v in old_source.items() if k not in ("url", "files")}
    if (marks and marks == old_marks) or (source.get("files") and source["files"] == old_source.get("files")):
        return
    raise OtherDataError(
        f"run store {store.url!r} holds the data set read from {old_url!r}, not from {url!r}; {REPLACE}"
    )


def check_same_n(store, n, url):
    """Stop when ``store`` holds a data set of other than ``n`` points (read from ``url``)."""
    try:
        store.check_n(n, f"input {url!r}", REPLACE)
    except InputError as exc:
        raise OtherDataError(str(exc)) from None


def results_at_risk(store, params):
    """``(options changed, results)`` when ``store`` holds results computed from its data and ``params``
    (ingest's identity: its options and the source's fingerprint) read its source otherwise; else None."""
    rec = store.record("ingest")
    if not rec or not rec.get("complete"):
        return None
    old = rec.get("params") or {}
    changed = sorted(k for k in set(old) | set(params) if k != "source" and old.get(k) != params.get(k))
    if not changed and old.get("source") == params.get("source"):
        return None
    results = sorted(name for name in store.records() if name != "ingest")
    return (changed, results) if results else None


def check_results_kept(store, url, risk, output):
    """Stop when reading ``url`` gives other data (``output``: its identity) than ``store`` holds, and the
    store holds results computed from its data (``risk``: :func:`results_at_risk`'s answer): an ingest
    replaces the data, and every result computed from the old goes with it (a user review: re-ingesting the
    same file with one option changed deleted them all, with exit 0 and no word). Other options that give
    the same data keep them."""
    if output == (store.record("ingest") or {}).get("output"):
        return
    changed, results = risk
    what = f"with other options ({', '.join(changed)})" if changed else "from changed content"
    raise OtherDataError(
        f"run store {store.url!r} holds results computed from the data read from {url!r} "
        f"({', '.join(results)}); reading it again {what} gives other data, which would replace them: "
        f"{REPLACE}"
    )

"""The Dask graph of the co-association store: sample, count and write ``pairs/``, or update it.

The Dask layer only decides which in-memory function (:mod:`.sampling`, :mod:`.counting`, :mod:`._tasks`)
runs on which rows. Tasks open the run store themselves (URL + storage_options) and read the label rows they
need; only pairs and counts travel between tasks, in task results or, for large builds (``spill``), through
temporary arrays under ``pairs/_tmp/`` so that no worker holds more than the pieces of its current task.
The build runs in four rounds: draw and deduplicate pairs by row partition; count each piece (rows of
partition r x rows of partition q) into row-sorted forward and mirrored pieces; write ``indptr``; and
assemble, each task owning a run of whole nnz chunks.

Examples
--------
>>> import numpy as np
>>> from ensemble_dask.coassoc import coassociation
>>> labels = np.array([[0, 1], [0, -1], [1, 1], [1, 0]])
>>> pc = coassociation(labels, strategy="full", seed=0)
>>> pc.to_dense()[0].tolist()
[[0, 1, 1, 0], [1, 0, 0, 0], [1, 0, 0, 1], [0, 0, 1, 0]]
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from urllib.parse import urlsplit

import numpy as np

from .._validation import InputError, check_choice, check_int
from ..runtime.clients import scheduler_for_compute
from ._tasks import (
    _assemble_range,
    _check_label_block,
    _cluster_histogram,
    _cocluster_requests,
    _compact_partition,
    _count_join,
    _count_rows,
    _gen_partition,
    _pick,
    _resolve_requests,
    _sizes,
    _Transit,
    _update_range,
    _upper_partition,
    _write_indptr,
)
from .csr import (
    DEFAULT_NNZ_CHUNK,
    PAIRS_GROUP,
    TMP_GROUP,
    _create_pairs_arrays,
    _finish,
    _labels_array,
    _Locator,
    _locator,
    _new_pairs_group,
    _open_group,
    _pairs_group,
    _summary,
)
from .sampling import DEFAULT_BLOCK_SIZE, _make_sampler

__all__ = ["build_coassociation", "update_coassociation"]

logger = logging.getLogger(__name__)

_AUTO_JOIN_BYTES = 512 << 20  # labels larger than this are counted by row-block join
_AUTO_SPILL_BYTES = (
    128 << 20
)  # pairs in transit larger than this are spilled (a local directory or pairs/_tmp)
_TRANSIT_BYTES_PER_PAIR = 16
_ASSEMBLE_BYTES = 64 << 20  # at most about this many output bytes per assembling task
_CHECK_BYTES = 64 << 20  # label bytes per validation task of update_coassociation


def _partition_bounds(n, block_size, row_block):
    """Partition boundaries: runs of whole seed blocks of about ``row_block`` rows."""
    if row_block is None:
        row_block = max(block_size, min(1 << 19, -(-n // 8)))
    row_block = check_int(row_block, "row_block", min_value=1)
    per = max(1, -(-row_block // block_size))
    step = per * block_size
    bounds = np.arange(0, n, step, dtype=np.int64)
    return np.append(bounds, n), per


def build_coassociation(
    group_or_url,
    *,
    strategy,
    seed=None,
    client_or_scheduler=None,
    storage_options=None,
    block_size=DEFAULT_BLOCK_SIZE,
    row_block=None,
    count_mode="auto",
    nnz_chunk=DEFAULT_NNZ_CHUNK,
    spill="auto",
    **params,
):
    """Sample pairs, count them over ``labels`` and write ``pairs/``, as a Dask graph.

    Parameters
    ----------
    group_or_url : zarr.Group or str
        The run store (holding ``labels``). Tasks reopen it themselves: with a distributed
        cluster of processes pass a URL (local path, ``file://``, ``s3://``...) and
        ``storage_options``, or a group whose store pickles (not a process-local memory store).
    strategy : {"full", "uniform", "per-point", "cocluster"}
        See :func:`sample_pairs`; ``**params`` are its parameters.
    seed : int or None, default=None
        Root of all randomness; ``None`` draws one, recorded in the attributes.
    client_or_scheduler : distributed.Client, str or None, default=None
        Where to run: a Client, a scheduler address (``tcp://...``), a dask scheduler name
        (``"threads"``, ``"sync"``), or ``None`` for Dask's default.
    storage_options : dict, default=None
        fsspec options for a URL.
    block_size : int, default=4096
        Rows per seed block (part of the strategy: it changes the pairs).
    row_block : int, default=None
        Rows per Dask partition, rounded up to whole seed blocks (does not change the result).
        ``None`` picks about n / 8, at most 524288.
    count_mode : {"auto", "rows", "join"}, default="auto"
        ``rows``: a partition's counting task reads the span of label rows its pairs touch
        (labels fit a worker). ``join``: pairs are bucketed by (row partition of i, row
        partition of j) and each task reads just those two row blocks. ``auto`` joins when
        ``labels`` is larger than 512 MiB.
    nnz_chunk : int, default=1048576
        Chunk length of ``indices``, ``co``, ``both``.
    spill : {"auto", True, False}, default="auto"
        Whether pairs travel between tasks through temporary arrays under ``pairs/_tmp/`` of
        the run store (deleted at the end) instead of worker memory. Workers then hold at most
        the pieces of the tasks they run. ``auto`` spills when the strategy is expected to draw
        more than 128 MiB of pairs (about 8.4 million). Does not change
        the result.

    Returns
    -------
    dict
        The attributes written to ``pairs/`` (strategy, params, seed, n, nnz, n_pairs,
        n_clusterings, complete...).

    Examples
    --------
    >>> import zarr
    >>> from ensemble_dask.coassoc import read_pairs
    >>> g = zarr.open_group(store="memory://doc-build", mode="w")
    >>> _ = g.create_array("labels", data=np.array([[0, 1], [0, 1], [1, -1]], dtype="int32"))
    >>> summary = build_coassociation(g, strategy="full", seed=0, client_or_scheduler="sync")
    >>> summary["n_pairs"], read_pairs(g).co.tolist()
    (3, [2, 0, 2, 0, 0, 0])
    """
    import dask

    group = _open_group(group_or_url, storage_options)
    labels = _labels_array(group, group_or_url if isinstance(group_or_url, str) else str(group.store))
    n, n_clust = (int(s) for s in labels.shape)
    sampler = _make_sampler(strategy, n, seed, block_size, params)
    count_mode = check_choice(count_mode, "count_mode", ("auto", "rows", "join"))
    nnz_chunk = check_int(nnz_chunk, "nnz_chunk", min_value=1)
    spill = _check_spill(spill)
    if count_mode == "auto":
        count_mode = "join" if n * n_clust * 4 > _AUTO_JOIN_BYTES else "rows"
    if spill == "auto":
        spill = _expected_pairs(sampler) * _TRANSIT_BYTES_PER_PAIR > _AUTO_SPILL_BYTES
    bounds, per = _partition_bounds(n, sampler.block_size, row_block)
    n_parts = len(bounds) - 1
    locator = _locator(group_or_url, storage_options)
    scheduler, owned = scheduler_for_compute(client_or_scheduler)
    local_tmp = _local_transit_dir(locator, scheduler) if spill else None
    transit = _Transit((locator if local_tmp is None else _Locator(local_tmp, "", None)) if spill else None)
    attrs = {
        **sampler.attrs(),
        "count_mode": count_mode,
        "row_block": int(bounds[1] - bounds[0]),
        "spill": bool(spill),
    }
    pg = None
    if spill:
        pg = _new_pairs_group(group, attrs)
        tg = pg if local_tmp is None else transit.locator.open("a").require_group(PAIRS_GROUP)
        for kind in ("gen", "req", "up", "cnt", "lab"):
            tg.require_group(f"{TMP_GROUP}/{kind}")
    running = []
    try:
        clock = time.perf_counter()
        # Phase 1: draw and deduplicate the pairs; only their numbers reach the client.
        if sampler.needs_labels:
            gen = _cocluster_graph(sampler, bounds, per, locator, transit, scheduler)
        else:
            gen = [
                dask.delayed(_gen_partition, pure=True)(
                    sampler, range(p * per, min((p + 1) * per, sampler.n_blocks)), bounds, locator, transit, p
                )
                for p in range(n_parts)
            ]
        upper = []
        for r in range(n_parts):
            srcs = [gen[r]] if sampler.row_local else gen
            buckets = [dask.delayed(_pick, pure=True)(g, r) for g in srcs]
            upper.append(dask.delayed(_upper_partition, pure=True)(n, bounds, transit, r, *buckets))
        # Joins on spilled pieces read compact copies of the label blocks, validated and written
        # once per partition (the joins then read 1/4 of the bytes when the ids fit int8).
        compact = []
        if spill and count_mode == "join":
            compact = [
                dask.delayed(_compact_partition, pure=True)(locator, transit, bounds, r)
                for r in range(n_parts)
            ]
        persisted = dask.persist(*upper, *compact, scheduler=scheduler)
        upper, compact = list(persisted[:n_parts]), list(persisted[n_parts:])
        running.extend(upper + compact)
        sizes = np.array(dask.compute(*[dask.delayed(_sizes)(u) for u in upper], scheduler=scheduler))
        clock = _log_round("drew and deduplicated %d pairs in %d partitions", clock, sizes.sum(), n_parts)
        _drop_tmp(transit, "gen")
        _drop_tmp(transit, "req")
        # Entry counts of every row partition: its own pairs (i, j) and the mirrored (j, i).
        nnz_part = sizes.sum(axis=1) + sizes.sum(axis=0)
        offsets = np.concatenate([[0], np.cumsum(nnz_part)])
        nnz = int(offsets[-1])
        if pg is None:
            pg = _new_pairs_group(group, attrs)
        _create_pairs_arrays(pg, n, nnz, row_chunk=int(bounds[1] - bounds[0]), nnz_chunk=nnz_chunk)
        nnz_chunk = pg["indices"].chunks[0]
        # Phase 2: count every piece (rows of r x rows of q) into a forward and a mirror piece.
        counted = {}
        for r in range(n_parts):
            if count_mode == "rows":
                task = dask.delayed(_count_rows, pure=True)(locator, transit, n, bounds, r, upper[r][r:])
                for q in range(r, n_parts):
                    counted[r, q] = dask.delayed(_pick, pure=True)(task, q - r)
            else:
                for q in range(r, n_parts):
                    if sizes[r, q] or q == r:  # (r, r) always runs: it validates block r
                        piece = dask.delayed(_pick, pure=True)(upper[r], q)
                        after = [compact[r], compact[q]] if compact else []
                        counted[r, q] = dask.delayed(_count_join, pure=True)(
                            locator, transit, n, bounds, r, q, piece, *after
                        )
        counted = dict(zip(counted, dask.persist(*counted.values(), scheduler=scheduler), strict=True))
        running.extend(counted.values())
        del upper, compact
        # Phase 3: indptr of each partition, and the rows at every nnz chunk start.
        row_pieces = []
        for r in range(n_parts):
            mirrors = [
                dask.delayed(_pick, pure=True)(counted[q, r], 1) for q in range(r + 1) if (q, r) in counted
            ]
            forwards = [
                dask.delayed(_pick, pure=True)(counted[r, q], 0)
                for q in range(r, n_parts)
                if (r, q) in counted
            ]
            row_pieces.append(mirrors + forwards)
        marks = dask.compute(
            *[
                dask.delayed(_write_indptr, pure=True)(
                    locator, transit, n, bounds, r, int(offsets[r]), nnz_chunk, *row_pieces[r]
                )
                for r in range(n_parts)
            ],
            scheduler=scheduler,
        )
        clock = _log_round("counted %d pieces and wrote indptr", clock, len(counted))
        _drop_tmp(transit, "up")
        _drop_tmp(transit, "lab")
        # Phase 4: each task gathers the rows of a run of whole nnz chunks and writes them.
        starts = np.concatenate([m[0] for m in marks])
        right = dict(zip(starts.tolist(), np.concatenate([m[1] for m in marks]).tolist(), strict=True))
        left = dict(zip(starts.tolist(), np.concatenate([m[2] for m in marks]).tolist(), strict=True))
        n_chunks = len(starts)
        most = max(1, _ASSEMBLE_BYTES // (_TRANSIT_BYTES_PER_PAIR * nnz_chunk))
        step = max(1, min(most, -(-n_chunks // (4 * n_parts))))
        writes = []
        for k in range(0, n_chunks, step):
            e0 = k * nnz_chunk
            e1 = min((k + step) * nnz_chunk, nnz)
            ra, rb = right[e0], left[e1] if e1 < nnz else n
            parts = range(
                int(np.searchsorted(bounds, ra, side="right")) - 1,
                int(np.searchsorted(bounds, rb - 1, side="right")),
            )
            writes.append(
                dask.delayed(_assemble_range, pure=True)(
                    locator, transit, bounds, e0, e1, ra, rb, {r: row_pieces[r] for r in parts}
                )
            )
        dask.compute(*writes, scheduler=scheduler)
        _log_round("assembled %d entries in %d tasks", clock, nnz, len(writes))
        running.clear()
    finally:
        if running and hasattr(scheduler, "cancel"):
            # released, not cancelled: no task of a failed stage keeps waiting to write. A cancel reaches the
            # tasks that depend on these too, and one that no client wants any more (of the compute that just
            # failed) trips distributed's scheduler (``stimulus_cancel``: ``assert ts.who_wants``): on a full
            # disk, 28 lines of its tracebacks came before the error's one line
            from distributed import futures_of

            for future in futures_of(running):
                future.release()
        if owned:
            scheduler.close()
        if spill:
            _drop_tmp(transit, None)
        if local_tmp is not None:
            shutil.rmtree(local_tmp, ignore_errors=True)
    summary = {**attrs, **_summary(n, nnz, n_clust), "updates": []}
    _finish(pg, summary)
    logger.info("coassoc: %d pairs of %d points over %d clusterings", nnz // 2, n, n_clust)
    return dict(pg.attrs)


def _log_round(message, clock, *args):
    now = time.perf_counter()
    logger.info("coassoc: " + message + " (%.1f s)", *args, now - clock)
    return now


def _local_transit_dir(locator, scheduler):
    """A new local directory for the spilled pieces, or None to spill them into the run store.

    When the run store is remote (object storage) and every worker runs on this machine (the
    embedded cluster, or Dask's threads), the pieces go through a temporary zarr group on local disk:
    each piece is written once and read once or twice, and a round trip to the object store per
    piece would cost more than the build. Workers on other machines share only the run store.
    """
    url = locator.store
    if not isinstance(url, str) or "://" not in url or url.startswith("file://"):
        return None
    if not isinstance(scheduler, str) and scheduler is not None:
        try:
            workers = scheduler.scheduler_info()["workers"]
        except Exception:  # not a distributed Client: keep to the run store
            return None
        hosts = {urlsplit(address).hostname for address in workers}
        if not hosts or not hosts <= {"127.0.0.1", "localhost", "::1"}:
            return None
    return tempfile.mkdtemp(prefix="ensemble-dask-transit-")


def _check_spill(spill):
    if spill == "auto" or (isinstance(spill, (bool, np.bool_))):
        return spill if spill == "auto" else bool(spill)
    raise InputError(f"The 'spill' parameter must be 'auto', True or False; got {spill!r}")


def _expected_pairs(sampler):
    """About how many pairs the strategy draws (before deduplication)."""
    n = sampler.n
    if sampler.strategy == "full":
        return n * (n - 1) // 2
    if sampler.strategy == "uniform":
        return int(sampler.params["p"] * n * (n - 1) / 2)
    return n * sampler.params["l"]


def _cocluster_graph(sampler, bounds, per, locator, transit, scheduler):
    """The delayed pieces of ``cocluster`` pairs by partition of the smaller point (see ``_tasks``), no task
    reading more than one partition's label rows: the clusters' members per partition are counted first."""
    import dask

    n_parts = len(bounds) - 1
    hists = dask.compute(
        *[dask.delayed(_cluster_histogram, pure=True)(locator, bounds, r) for r in range(n_parts)],
        scheduler=scheduler,
    )
    n_ids = max(max(h.shape[1] for h in hists), 1)
    before = np.zeros((hists[0].shape[0], n_ids, n_parts + 1), dtype=np.int64)
    for r, h in enumerate(hists):
        before[:, : h.shape[1], r + 1] = h
    np.cumsum(before, axis=2, out=before)
    # the tables every drawing task reads enter the graph once each, not once per task
    sizes = dask.delayed(np.ascontiguousarray(before[:, :, n_parts]), pure=True)
    owners = dask.delayed(np.ascontiguousarray(before[:, :, :n_parts]), pure=True)
    draws = [
        dask.delayed(_cocluster_requests, pure=True, nout=2)(
            sampler,
            range(r * per, min((r + 1) * per, sampler.n_blocks)),
            bounds,
            locator,
            transit,
            r,
            np.ascontiguousarray(before[:, :, r]),
            sizes,
            owners,
        )
        for r in range(n_parts)
    ]
    resolved = [
        dask.delayed(_resolve_requests, pure=True)(
            locator,
            transit,
            sampler.n,
            bounds,
            q,
            np.ascontiguousarray(before[:, :, q]),
            *[dask.delayed(_pick, pure=True)(d[1], q) for d in draws],
        )
        for q in range(n_parts)
    ]
    return [d[0] for d in draws] + resolved


def _drop_tmp(transit, kind):
    """Delete the spilled pieces of ``kind`` (all of ``pairs/_tmp`` for None); nothing if not spilling."""
    if transit.locator is None:
        return
    pg = transit.locator.open("r+")[PAIRS_GROUP]
    path = TMP_GROUP if kind is None else f"{TMP_GROUP}/{kind}"
    if path in pg:
        del pg[path]
        if kind is not None:
            pg.require_group(path)


def update_coassociation(group_or_url, *, client_or_scheduler=None, storage_options=None, chunks_per_task=4):
    """Add the counts of new ``labels`` columns to the stored pairs.

    Columns ``0 .. n_clusterings - 1`` are already counted; columns from there to
    ``labels.shape[1]`` are counted for every stored entry and added to ``co`` and
    ``both``; the old columns are not read. Every row of the new columns is validated first
    (bad labels raise :class:`InputError` and leave the stored pairs as they were). While the
    counts are added the group is marked incomplete
    (``complete=False``, ``updating=[old, new]``); a run killed halfway leaves it so, and
    the store must then be rebuilt.

    Parameters
    ----------
    group_or_url : zarr.Group or str
    client_or_scheduler : distributed.Client, str or None, default=None
    storage_options : dict, default=None
    chunks_per_task : int, default=4
        nnz chunks per task (tasks own whole chunks, so no two write the same one).

    Returns
    -------
    dict
        The attributes of ``pairs/`` after the update.

    Examples
    --------
    >>> from ensemble_dask.coassoc import coassociation, read_pairs, update_coassociation, write_pairs
    >>> import zarr
    >>> g = zarr.open_group(store="memory://doc-update", mode="w")
    >>> lab = g.create_array("labels", shape=(3, 2), chunks=(3, 1), dtype="int32")
    >>> lab[:, 0] = [0, 0, 1]
    >>> _ = write_pairs(g, coassociation(lab[:, :1], strategy="full", seed=0))
    >>> lab[:, 1] = [1, 1, 1]
    >>> update_coassociation(g, client_or_scheduler="sync")["n_clusterings"]
    2
    >>> read_pairs(g).co.tolist()
    [2, 1, 2, 1, 1, 1]
    """
    import dask

    chunks_per_task = check_int(chunks_per_task, "chunks_per_task", min_value=1)
    group = _open_group(group_or_url, storage_options)
    where = group_or_url if isinstance(group_or_url, str) else str(group.store)
    pg = _pairs_group(group, storage_options)
    labels = _labels_array(group, where)
    n = int(pg.attrs["n"])
    old = int(pg.attrs["n_clusterings"])
    new = int(labels.shape[1])
    if labels.shape[0] != n:
        raise InputError(f"'labels' has {labels.shape[0]} rows but the stored pairs are over n={n} points")
    if new < old:
        raise InputError(f"'labels' has {new} columns but {old} are already counted")
    if new == old:
        return dict(pg.attrs)
    locator = _locator(group_or_url, storage_options)
    scheduler, owned = scheduler_for_compute(client_or_scheduler)
    try:
        # Every row of the new columns is validated first (also rows no stored pair touches):
        # bad labels leave the stored pairs complete and untouched.
        label_rows = int(labels.chunks[0])
        per = max(1, _CHECK_BYTES // (4 * (new - old)))
        per = -(-per // label_rows) * label_rows
        checks = [
            dask.delayed(_check_label_block, pure=True)(locator, r0, min(r0 + per, n), old, new)
            for r0 in range(0, n, per)
        ]
        dask.compute(*checks, scheduler=scheduler)
        pg.attrs.update({"complete": False, "updating": [old, new]})
        # only the row range of each task is computed here; the tasks read their indptr themselves
        # (shipping indptr slices in the graph sends all of it through the scheduler)
        indptr = np.asarray(pg["indptr"][:], dtype=np.int64)
        nnz = int(indptr[-1])
        step = pg["indices"].chunks[0] * chunks_per_task
        starts = np.arange(0, nnz, step, dtype=np.int64)
        ends = np.minimum(starts + step, nnz)
        ras = np.searchsorted(indptr, starts, side="right") - 1
        rbs = np.searchsorted(indptr, ends, side="left")
        del indptr
        tasks = [
            dask.delayed(_update_range, pure=True)(locator, int(e0), int(e1), int(ra), int(rb), old, new)
            for e0, e1, ra, rb in zip(starts, ends, ras, rbs, strict=True)
        ]
        dask.compute(*tasks, scheduler=scheduler)
    finally:
        if owned:
            scheduler.close()
    updates = list(pg.attrs.get("updates", [])) + [[old, new]]
    pg.attrs.update({"n_clusterings": new, "updates": updates, "updating": None})
    pg.attrs.update({"complete": True})
    return dict(pg.attrs)

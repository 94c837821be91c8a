"""How the pairs of the co-association build travel between tasks: task results, the home-made spill, or
Dask's own P2P shuffle; prints seconds and peak worker memory side by side (and asserts equal outputs).

Three variants, interleaved (variant 1, 2, 3, then again, ``--repeat`` times) on the same labels and the same
embedded ``LocalCluster(n_workers=2, threads_per_worker=1, processes=True)``:

1. ``results``: ``build_coassociation(url, strategy="per-point", l=30, seed=0, spill=False)``: pieces of pairs
   travel in task results (worker memory, or Dask's own spilling to disk);
2. ``spill``: the same with ``spill=True``: pieces travel through temporary zarr arrays under
   ``pairs/_tmp/`` of the run store (``_Transit`` / ``_Spilled`` of ``ensemble_dask/coassoc/_tasks.py``);
3. ``p2p``: a ``dask.dataframe`` pipeline with no home-made transit. One partition per row partition of
   the build (runs of whole seed blocks, ``_partition_bounds``) holds the pair keys its seed blocks draw,
   exactly as the stage draws them (``_make_sampler(...).block_keys(b)``, deduplicated per partition), and
   the row partition of each pair's smaller point; ``DataFrame.shuffle(on="tag", npartitions=P,
   shuffle_method="p2p")`` sends every pair to that partition, which deduplicates and counts its pairs
   (``count_pairs_kernel`` on the label rows read from the store, as ``count_mode="rows"`` does); the
   counted pairs are persisted, a second P2P shuffle sends them (as mirrored entries (j, i)) to the
   partition of j, and each partition sorts its forward and mirrored entries into CSR rows, writes its
   slice of ``indptr`` and returns its entries, which ``dask.array`` rechunks to the store's nnz chunks and
   stores into ``p2p/pairs/{indices,co,both}`` of the run store.
   Dask's ``shuffle`` partitions by a hash of ``on``; the ``tag`` of row partition r is a number that
   Dask's own ``partitioning_index`` sends to output partition r (found once, before the run), so that
   output partition r holds row partition r exactly (checked in every task).

Every run's ``indptr, indices, co, both`` (values and dtypes) are hashed and must equal those of the first
run (``results`` by default; the script fails otherwise). Every run gets a fresh cluster, so new worker
processes (the brief was ``client.restart()`` between runs, but here it hung now and then, its workers not
coming back), warmed up (imports, the numba kernels loaded from their cache on a tiny build) with their peak
resident set (VmHWM) then reset, so that each peak is the run's own; it is read from /proc/self/status in
each worker. The client's peak (it holds the scheduler) is printed too.

Labels: ``--n-clusterings`` (20) k-means-like labelings, seeded by ``np.random.default_rng(seed)``: points
in 2-d from 8 Gaussian blobs, labeling u has k_u in 2..10 random centres and gives each point its nearest
centre (a Voronoi cut, as one k-means assignment); no -1. Written to a local zarr store in a temporary
directory with the generate stage's chunks (``label_chunks``: 131,072 rows x 2 columns).

Usage, from the repository root:
``PYTHONPATH=. python benchmarks/bench_transit.py [--n 500000] [--repeat 3] [--variants results,spill,p2p]
[--workdir /tmp]``
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ensemble_dask.coassoc import _kernels as _k  # noqa: E402
from ensemble_dask.coassoc.build import _partition_bounds, build_coassociation  # noqa: E402
from ensemble_dask.coassoc.csr import (  # noqa: E402
    DEFAULT_NNZ_CHUNK,
    PAIRS_GROUP,
    _compact_rows,
    _create_pairs_arrays,
    _labels_array,
    _Locator,
    _new_pairs_group,
    _summary,
)
from ensemble_dask.coassoc.sampling import DEFAULT_BLOCK_SIZE, _make_sampler, _unique  # noqa: E402
from ensemble_dask.stages.generate import label_chunks  # noqa: E402

STRATEGY = "per-point"
L = 30
SEED = 0
P2P_GROUP = "p2p"


# --------------------------------------------------------------------------- labels


def write_labels(url, n, n_clust, seed=0, blobs=8):
    """The k-means-like labels of the module docstring, written by row chunks; returns the chunk shape."""
    import zarr

    rng = np.random.default_rng(seed)
    means = rng.normal(scale=4.0, size=(blobs, 2))
    centres = [rng.normal(scale=4.0, size=(int(k), 2)) for k in rng.integers(2, 11, size=n_clust)]
    chunks = label_chunks(n, n_clust)
    g = zarr.open_group(store=url, mode="w")
    arr = g.create_array("labels", shape=(n, n_clust), chunks=chunks, dtype="int32", fill_value=-1)
    for r0 in range(0, n, chunks[0]):
        r1 = min(r0 + chunks[0], n)
        prng = np.random.default_rng([seed, r0])
        x = means[prng.integers(0, blobs, size=r1 - r0)] + prng.normal(size=(r1 - r0, 2))
        block = np.empty((r1 - r0, n_clust), dtype=np.int32)
        for u, c in enumerate(centres):
            block[:, u] = ((x[:, None, :] - c[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
        arr[r0:r1] = block
    return chunks


# --------------------------------------------------------------------------- variant 3: P2P shuffles


def shuffle_tags(n_parts):
    """For each output partition r, a small number whose hash (as ``DataFrame.shuffle`` computes it: the
    column cast to float64, then ``partitioning_index``) sends its rows to partition r."""
    import pandas as pd
    from dask.dataframe.dask_expr._shuffle import partitioning_index

    cand = np.arange(64 * n_parts + 1024, dtype=np.int64)
    dest = np.asarray(partitioning_index(pd.DataFrame({"tag": cand.astype(np.float64)}), n_parts))
    tags = np.full(n_parts, -1, dtype=np.int64)
    for r in range(n_parts):
        hit = np.flatnonzero(dest == r)
        if hit.size == 0:
            raise RuntimeError(f"no tag found for partition {r} of {n_parts}")
        tags[r] = cand[hit[0]]
    if tags.max() > np.iinfo(np.int16).max:
        raise RuntimeError("tags do not fit int16")
    return tags.astype(np.int16)


def _keys_meta():
    import pandas as pd

    return pd.DataFrame({"key": np.zeros(0, np.int64), "tag": np.zeros(0, np.int16)})


def _counted_meta():
    import pandas as pd

    z = np.zeros(0, np.int32)
    return pd.DataFrame({"i": z, "j": z, "co": z, "both": z, "tag": np.zeros(0, np.int16)})


def _entries_meta():
    import pandas as pd

    z = np.zeros(0, np.int32)
    return pd.DataFrame({"indices": z, "co": z, "both": z})


def _draw(g, sampler, per, bounds, tags):
    """Partition g's pair keys, drawn by its seed blocks exactly as the stage draws them, deduplicated, with
    the tag of the row partition of their smaller point."""
    import pandas as pd

    blocks = range(g * per, min((g + 1) * per, sampler.n_blocks))
    keys = _unique(np.concatenate([sampler.block_keys(b) for b in blocks]))
    part = np.searchsorted(bounds, keys // sampler.n, side="right") - 1
    return pd.DataFrame({"key": keys, "tag": tags[part]})


def _check_partition(df, tags, r):
    if len(df) and not (df["tag"].to_numpy() == tags[r]).all():
        raise RuntimeError(f"P2P output partition {r} holds rows of another row partition")


def _count(df, n, bounds, tags, locator, partition_info=None):
    """Deduplicate and count the pairs of row partition r (rows i in r), sorted by (i, j)."""
    import pandas as pd

    r = partition_info["number"]
    _check_partition(df, tags, r)
    keys = _unique(df["key"].to_numpy())
    del df
    r0, r1 = int(bounds[r]), int(bounds[r + 1])
    i = keys // n
    j = keys % n
    del keys
    hi = max(int(j.max()) + 1 if j.size else 0, r1)
    lab = _compact_rows(_labels_array(locator.open("r"), str(locator)), r0, hi)
    co = np.empty(i.size, dtype=np.int32)
    both = np.empty(i.size, dtype=np.int32)
    _k.count_pairs_kernel(lab, lab, i - r0, j - r0, co, both)
    del lab
    part_j = np.searchsorted(bounds, j, side="right") - 1
    return pd.DataFrame(
        {"i": i.astype(np.int32), "j": j.astype(np.int32), "co": co, "both": both, "tag": tags[part_j]}
    )


def _entry_counts(df, bounds):
    """(forward entries of the partition, mirrored entries it sends to each partition)."""
    part_j = np.searchsorted(bounds, df["j"].to_numpy(), side="right") - 1
    return len(df), np.bincount(part_j, minlength=len(bounds) - 1)


def _assemble(fwd, mir, n, bounds, tags, offsets, locator, partition_info=None):
    """The CSR rows of partition q: mirrored entries (j, i) of the pairs with j in q and forward entries
    (i, j) with i in q, sorted by (row, column); writes its ``indptr`` slice, returns its entries."""
    import pandas as pd

    q = partition_info["number"]
    _check_partition(mir, tags, q)
    q0, q1 = int(bounds[q]), int(bounds[q + 1])
    rows = np.concatenate([mir["j"].to_numpy(), fwd["i"].to_numpy()])
    cols = np.concatenate([mir["i"].to_numpy(), fwd["j"].to_numpy()])
    co = np.concatenate([mir["co"].to_numpy(), fwd["co"].to_numpy()])
    both = np.concatenate([mir["both"].to_numpy(), fwd["both"].to_numpy()])
    del fwd, mir
    order = np.argsort(rows.astype(np.int64) * n + cols)
    counts = np.bincount(rows - q0, minlength=q1 - q0)
    del rows
    indptr = np.empty(q1 - q0 + 1, dtype=np.int64)
    indptr[0] = offsets[q]
    np.cumsum(counts, out=indptr[1:])
    indptr[1:] += offsets[q]
    if indptr[-1] != offsets[q + 1]:
        raise RuntimeError(f"partition {q}: {indptr[-1] - offsets[q]} entries, expected {offsets[q + 1]}")
    pg = locator.open("r+")[f"{P2P_GROUP}/{PAIRS_GROUP}"]
    stop = q1 + 1 if q1 == n else q1
    pg["indptr"][q0:stop] = indptr[: stop - q0]
    return pd.DataFrame({"indices": cols[order], "co": co[order], "both": both[order]})


def build_p2p(url, client, nnz_chunk=DEFAULT_NNZ_CHUNK, phases=None):
    """Variant 3: the same ``pairs/`` as ``build_coassociation``, written to ``p2p/pairs/``, moved by Dask's
    P2P shuffle (see the module docstring). Returns the number of pairs; ``phases`` (a dict) receives the
    seconds of its three rounds."""
    import dask
    import dask.array as da
    import dask.dataframe as dd
    import distributed
    import zarr

    clock = time.perf_counter()
    phases = {} if phases is None else phases
    group = zarr.open_group(store=url, mode="a")
    n, n_clust = (int(s) for s in group["labels"].shape)
    if n >= 2**31:
        raise ValueError("the P2P variant keeps point indices in int32")
    sampler = _make_sampler(STRATEGY, n, SEED, DEFAULT_BLOCK_SIZE, {"l": L})
    bounds, per = _partition_bounds(n, sampler.block_size, None)
    n_parts = len(bounds) - 1
    tags = shuffle_tags(n_parts)
    locator = _Locator(url, "", None)
    keys = dd.from_map(
        _draw, range(n_parts), args=(sampler, per, bounds, tags), meta=_keys_meta(), label="draw-pairs"
    )
    owned = keys.shuffle(on="tag", npartitions=n_parts, shuffle_method="p2p", ignore_index=True)
    counted = owned.map_partitions(
        _count, n, bounds, tags, locator, meta=_counted_meta(), enforce_metadata=False
    )
    counted = client.persist(counted)
    distributed.wait(counted)
    phases["draw+shuffle+count"] = -clock + (clock := time.perf_counter())
    counts = dask.compute(*[dask.delayed(_entry_counts)(d, bounds) for d in counted.to_delayed()])
    nnz_part = np.array([c[0] for c in counts]) + np.sum([c[1] for c in counts], axis=0)
    offsets = np.concatenate([[0], np.cumsum(nnz_part)])
    nnz = int(offsets[-1])
    pg = _new_pairs_group(group.require_group(P2P_GROUP), {"variant": "p2p"})
    _create_pairs_arrays(pg, n, nnz, row_chunk=int(bounds[1] - bounds[0]), nnz_chunk=nnz_chunk)
    phases["sizes"] = -clock + (clock := time.perf_counter())
    mirrored = counted.shuffle(on="tag", npartitions=n_parts, shuffle_method="p2p", ignore_index=True)
    entries = dd.map_partitions(
        _assemble,
        counted,
        mirrored,
        n,
        bounds,
        tags,
        offsets,
        locator,
        meta=_entries_meta(),
        enforce_metadata=False,
        align_dataframes=False,
    )
    arr = entries.to_dask_array(lengths=[int(x) for x in nnz_part])
    chunk = pg["indices"].chunks[0]
    sources = [arr[:, c].rechunk((chunk,), method="tasks") for c in range(3)]
    da.store(sources, [pg["indices"], pg["co"], pg["both"]], lock=False, compute=True)
    del counted
    phases["shuffle+assemble+store"] = time.perf_counter() - clock
    pg.attrs.update({**_summary(n, nnz, n_clust), "complete": True})
    return nnz // 2


# --------------------------------------------------------------------------- runs


def _warm_up():
    """In a fresh worker: imports and every numba kernel of the three variants loaded (a tiny build)."""
    import dask.dataframe  # noqa: F401
    import distributed.shuffle  # noqa: F401
    import zarr

    g = zarr.open_group(store="memory://warm-up", mode="w")
    lab = np.array([[0, 1], [0, 1], [1, 0], [1, 1], [0, 0]] * 40, dtype=np.int32)
    g.create_array("labels", data=lab, chunks=(64, 1))
    for spill in (False, True):
        build_coassociation(
            g,
            strategy=STRATEGY,
            l=3,
            seed=0,
            client_or_scheduler="sync",
            spill=spill,
            row_block=64,
            block_size=32,
        )
    return os.getpid()


def _reset_peak():
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    return _status_mib("VmRSS")


def _status_mib(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak():
    return _status_mib("VmHWM")


def digest(url, path):
    """SHA-256 of each CSR array of ``path`` (its dtype, shape and values), read a few chunks at a time."""
    import zarr

    pg = zarr.open_group(store=url, mode="r")[path]
    out = {}
    for name in ("indptr", "indices", "co", "both"):
        a = pg[name]
        h = hashlib.sha256(f"{a.dtype}{a.shape}".encode())
        step = max(1, (1 << 24) // a.chunks[0]) * a.chunks[0]
        for s in range(0, a.shape[0], step):
            h.update(np.ascontiguousarray(a[s : s + step]).tobytes())
        out[name] = h.hexdigest()
    return out


def run_variant(name, url, client, phases):
    if name == "p2p":
        n_pairs = build_p2p(url, client, phases=phases)
        return n_pairs, f"{P2P_GROUP}/{PAIRS_GROUP}"
    summary = build_coassociation(
        url, strategy=STRATEGY, l=L, seed=SEED, client_or_scheduler=client, spill=name == "spill"
    )
    return summary["n_pairs"], PAIRS_GROUP


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500_000)
    ap.add_argument("--n-clusterings", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--variants", default="results,spill,p2p", help="comma-separated, run in this order")
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    args = ap.parse_args(argv)
    variants = args.variants.split(",")
    unknown = set(variants) - {"results", "spill", "p2p"}
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}")

    import dask
    import distributed
    from distributed import Client, LocalCluster

    workdir = Path(tempfile.mkdtemp(prefix="bench_transit_", dir=args.workdir))
    url = str(workdir / "run.zarr")
    print(f"python {sys.version.split()[0]}, dask {dask.__version__}, distributed {distributed.__version__}")
    try:
        t = time.perf_counter()
        chunks = write_labels(url, args.n, args.n_clusterings)
        print(
            f"labels: n={args.n:,} x {args.n_clusterings} (chunks {chunks}), written in "
            f"{time.perf_counter() - t:.1f} s; {STRATEGY} l={L}, seed={SEED}"
        )
        times = {v: [] for v in variants}
        peaks = {v: [] for v in variants}
        reference = None
        n_pairs = None
        for rep in range(args.repeat):
            for v in variants:
                # a fresh cluster per run (client.restart() hung here, now and then, on a third restart)
                with (
                    LocalCluster(
                        n_workers=2,
                        threads_per_worker=1,
                        processes=True,
                        dashboard_address=":0",
                        memory_limit="10GiB",
                    ) as cluster,
                    Client(cluster) as client,
                ):
                    client.run(_warm_up)
                    base = client.run(_reset_peak)
                    _reset_peak()
                    load = os.getloadavg()[0]
                    t = time.perf_counter()
                    phases = {}
                    pairs, path = run_variant(v, url, client, phases)
                    wall = time.perf_counter() - t
                    worker_peaks = [p for _, p in sorted(client.run(_peak).items())]
                times[v].append(wall)
                peaks[v].append((worker_peaks, _peak()))
                d = digest(url, path)
                if reference is None:
                    reference, n_pairs = d, pairs
                same = d == reference and pairs == n_pairs
                print(
                    f"  run {rep + 1} {v:7s}: {wall:7.1f} s, worker peaks "
                    f"{' / '.join(f'{p:,.0f}' for p in worker_peaks)} MiB (after warm-up "
                    f"{' / '.join(f'{b:,.0f}' for _, b in sorted(base.items()))}), "
                    f"client {peaks[v][-1][1]:,.0f} "
                    f"MiB, load {load:.2f}, output {'identical' if same else 'DIFFERENT'}"
                    + "".join(f"\n      {k}: {x:.1f} s" for k, x in phases.items()),
                    flush=True,
                )
                if not same:
                    raise AssertionError(f"{v}: stored pairs differ from the first run's: {d} vs {reference}")
        print(
            f"\nn={args.n:,}: {n_pairs:,} pairs ({2 * n_pairs:,} stored entries), median of {args.repeat} "
            f"runs; all outputs identical (indptr, indices, co, both)"
        )
        ref = statistics.median(times["spill"]) if "spill" in times else None
        print(
            f"{'variant':8s} {'wall s':>8s} {'vs spill':>9s} "
            f"{'worker peak MiB (max over runs)':>32s} {'client':>7s}"
        )
        for v in variants:
            med = statistics.median(times[v])
            w = np.max([p[0] for p in peaks[v]], axis=0)
            ratio = f"{med / ref:9.2f}" if ref else f"{'-':>9s}"
            print(
                f"{v:8s} {med:8.1f} {ratio} {' / '.join(f'{x:,.0f}' for x in w):>32s} "
                f"{max(p[1] for p in peaks[v]):7,.0f}"
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

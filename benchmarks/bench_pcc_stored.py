"""PCC and PPC on pairs read whole against pairs read from the store a block of rows at a time; prints.

The ensemble of ``benchmarks/peers.py`` (20 k-means labelings of ``make_blobs(n, centers=K)``), its pairs as
the consensus stage draws them by default (``cocluster``, l = 10; ``--per-point L``: about L uniform partners
per point instead) written to a local zarr store, then per method, each in a fresh process: the stage's
in-memory path (``read_pair_fractions``, then ``fit``) and the out-of-core one (``fit(StoredPairs(store))``),
from the same label start (KCC's partition). Prints the seconds of reading and fitting, the sweeps (out of
core) or passes, the objective, whether the fit converged, the ARI between the two partitions and the peak RSS
(VmHWM) of each process above what it held after the imports and the start.

``--s3`` also puts the store into a local moto S3 server (127.0.0.1) and fits by blocks from ``s3://`` twice:
reading every block from the server on every sweep (``local_copy=False``), and with the default local copy
(each block fetched once, later sweeps read from local disk).

Usage: python benchmarks/bench_pcc_stored.py [--n 500000] [--K 8] [--per-point L] [--methods pcc-l2 ppc]
       [--entries-per-block E] [--s3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _rss(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def worker(args):
    """One fit in this process; prints a JSON line."""
    import warnings

    from ensemble_dask.coassoc import StoredPairs
    from ensemble_dask.coassoc.csr import read_pair_fractions
    from ensemble_dask.consensus import PCC, PPC
    from ensemble_dask.consensus._common.base import pair_data_from_fractions

    def make():
        if args.method == "ppc":
            return PPC(args.K, init=start, random_state=0)
        return PCC(args.K, divergence=args.method[4:], init=start, random_state=0)

    # warm-up on a small store of the same kind (imports, compiled kernels loaded) before the peak is reset
    import zarr

    from ensemble_dask.coassoc import coassociation, write_pairs

    small = np.repeat(np.arange(2 * args.K).reshape(-1, 2) % args.K, 20, axis=0)
    start = np.arange(small.shape[0]) % args.K
    group = zarr.open_group(store="memory://warm-up", mode="w")
    write_pairs(group, coassociation(small, strategy="full", seed=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        make().fit(
            StoredPairs(group) if args.stored else pair_data_from_fractions(*read_pair_fractions(group))
        )
    opts = json.loads(args.storage_options) if args.storage_options else None
    copy = {"auto": "auto", "off": False}[args.local_copy]

    def stored():
        return StoredPairs(
            args.store, entries_per_block=args.entries_per_block, storage_options=opts, local_copy=copy
        )

    if args.stored:  # and the store's reader, on this store (its event loop, its codecs)
        warm = stored()
        warm.read(*warm.bounds[0])
        warm.close()
    else:
        read_pair_fractions(args.store)
    start = np.load(args.start)
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here on
    base = _rss("VmRSS")
    t0 = time.perf_counter()
    pairs = stored() if args.stored else None
    if pairs is None:
        pairs = pair_data_from_fractions(*read_pair_fractions(args.store))
    t_read = time.perf_counter() - t0
    est = make()
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(pairs)
    t_fit = time.perf_counter() - t0
    np.save(args.out, est.labels_)
    print(
        json.dumps(
            {
                "read": t_read,
                "fit": t_fit,
                "iter": int(est.n_iter_),
                "f": float(est.objective_),
                "converged": bool(est.converged_),
                "peak_mb": (_rss("VmHWM") - base) / 2**20,
            }
        )
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500_000)
    ap.add_argument("--K", type=int, default=8)
    ap.add_argument(
        "--per-point", type=int, default=None, help="per-point pairs with this l (default: cocluster 10)"
    )
    ap.add_argument("--methods", nargs="+", default=["pcc-l2", "pcc-kl", "ppc"])
    ap.add_argument("--entries-per-block", type=int, default=1 << 22)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ensemble_dask_peers")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--stored", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    ap.add_argument("--start", help=argparse.SUPPRESS)
    ap.add_argument("--method", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--storage-options", help=argparse.SUPPRESS)
    ap.add_argument("--local-copy", default="auto", help=argparse.SUPPRESS)
    ap.add_argument("--s3", action="store_true", help="also fit by blocks from a local moto S3 server")
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)

    import zarr
    from peers import ensemble
    from sklearn.metrics import adjusted_rand_score

    from ensemble_dask.coassoc import coassociation, write_pairs
    from ensemble_dask.consensus import KCC

    args.cache.mkdir(parents=True, exist_ok=True)
    lab_path, y = ensemble(args.n, args.K, args.K, 1.0, 0, args.cache)
    labels = np.load(lab_path)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.per_point:
            pairs = coassociation(labels, strategy="per-point", l=args.per_point, seed=0)
        else:
            pairs = coassociation(labels, strategy="cocluster", l=10, seed=0)
        store = str(tmp / "run.zarr")
        write_pairs(zarr.open_group(store, mode="w"), pairs)
        print(
            f"n = {args.n:,}, K = {args.K}: {pairs.nnz:,} stored entries "
            f"({20 * pairs.nnz / 2**20:.0f} MiB at 20 B)"
        )
        del pairs
        start = tmp / "start.npy"
        np.save(start, KCC(args.K, random_state=0).fit(labels).labels_)
        print(
            f"{'method':8s} {'pairs':10s} {'read s':>7s} {'fit s':>7s} {'iter':>5s} {'f':>14s} "
            f"{'conv':>5s} {'peak MiB':>9s}"
        )
        variants = [("whole", store, None, "auto"), ("by blocks", store, None, "auto")]
        moto = None
        if args.s3:
            import s3fs
            from scale import start_moto

            moto, opts = start_moto()
            fs = s3fs.S3FileSystem(**opts)
            fs.call_s3("create_bucket", Bucket="bench")
            fs.put(store, "bench/run.zarr", recursive=True)
            remote = "s3://bench/run.zarr"
            variants += [("s3 re-read", remote, opts, "off"), ("s3 copy", remote, opts, "auto")]
        try:
            for method in args.methods:
                preds = []
                for label, where, opts, copy in variants:
                    out = tmp / f"{method}-{len(preds)}.npy"
                    cmd = [sys.executable, __file__, "--worker", "--store", where, "--start", str(start)]
                    cmd += ["--method", method, "--K", str(args.K), "--out", str(out)]
                    cmd += ["--entries-per-block", str(args.entries_per_block), "--local-copy", copy]
                    cmd += [] if label == "whole" else ["--stored"]
                    cmd += ["--storage-options", json.dumps(opts)] if opts else []
                    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
                    r = json.loads(proc.stdout.strip().splitlines()[-1])
                    preds.append(np.load(out))
                    print(
                        f"{method:8s} {label:10s} {r['read']:7.2f} {r['fit']:7.2f} "
                        f"{r['iter']:5d} {r['f']:14.6g} {r['converged']!s:>5s} {r['peak_mb']:9.0f}"
                    )
                print(
                    f"{'':8s} ARI to the whole fit: "
                    + ", ".join(f"{adjusted_rand_score(preds[0], p):.4f}" for p in preds[1:])
                    + f"; against the blobs {adjusted_rand_score(y, preds[0]):.4f}"
                )
        finally:
            if moto is not None:
                moto.terminate()


if __name__ == "__main__":
    main()

"""Labelling new rows at scale: ``ensemble-dask predict`` on 1,000,000 new rows from s3://, per method.

It writes two seeded KDD-schema tables (``synthetic:kdd99``): the rows a workflow fits (``--fit-rows``,
default 200,000) and the new rows (``--rows``, default 1,000,000, another seed), as compressed CSV, puts them
into a local moto S3 server on 127.0.0.1, runs the workflow (30 base clusterings of half the rows, the
methods' consensus at K = ``--k``) with its run store on S3, then for each method times

    ensemble-dask predict s3://.../new.csv.gz --store s3://.../run.zarr --method M --out s3://.../M.parquet

(an embedded LocalCluster of ``--n-workers``, default one per core) and prints its wall seconds, rows per
second and the peak RSS (VmHWM) of every process of the command (client, scheduler, workers; moto apart).
The first ``predict`` also computes the base clusterings' centres and keeps them in the store: it is run once
before the timed ones, for each method's figure to be its own.

    python benchmarks/predict_scale.py
    python benchmarks/predict_scale.py --rows 2000000 --methods kcc bce

Figures to read, not assertions: the machine is shared, so the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from scale import print_peaks, run_watched, start_moto, write_table  # noqa: E402

BUCKET = "predict-bench"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="new rows to label")
    ap.add_argument("--fit-rows", type=int, default=200_000, help="rows the workflow fits")
    ap.add_argument("--methods", nargs="+", default=["kcc", "bce", "pcc-kl", "hbgf"])
    ap.add_argument("--k", type=int, default=4, help="consensus clusters")
    ap.add_argument("--n-workers", type=int, default=None, help="workers of the embedded cluster")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import s3fs

    exe = shutil.which("ensemble-dask") or str(Path(sys.executable).parent / "ensemble-dask")
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    moto, opts = start_moto()
    try:
        fs = s3fs.S3FileSystem(**opts)
        fs.call_s3("create_bucket", Bucket=BUCKET)
        with tempfile.TemporaryDirectory() as tmp:
            for name, n, seed in (("fit", args.fit_rows, args.seed), ("new", args.rows, args.seed + 1)):
                (Path(tmp) / name).mkdir()
                t0 = time.perf_counter()
                csv, pq = write_table(n, Path(tmp) / name, seed)
                fs.put_file(str(csv), f"{BUCKET}/{name}.csv.gz")
                print(f"{name}: {n:,} rows written and uploaded in {time.perf_counter() - t0:.1f} s")
        store = f"s3://{BUCKET}/run.zarr"
        workflow = {
            "seed": args.seed,
            "store": store,
            "storage_options": opts,
            "data": {"url": f"s3://{BUCKET}/fit.csv.gz", "schema": "kdd99", "storage_options": opts},
            "generate": {"n_clusterings": 30, "rate": 0.5},
            "consensus": {m: {"n_clusters": args.k} for m in args.methods},
        }
        t0 = time.perf_counter()
        with tempfile.NamedTemporaryFile("w", suffix=".json") as fh:
            json.dump(workflow, fh)  # JSON is YAML
            fh.flush()
            subprocess.run(
                [exe, "run", fh.name, "--no-progress"], env=env, check=True, stdout=subprocess.DEVNULL
            )
        print(f"workflow on the fitted rows: {time.perf_counter() - t0:.1f} s")
        so = json.dumps(opts)
        common = ["--store", store, "--storage-options", so, "--data-storage-options", so]
        common += ["--out-storage-options", so, "--no-progress", "--overwrite"]
        common += [] if args.n_workers is None else ["--n-workers", str(args.n_workers)]
        new = f"s3://{BUCKET}/new.csv.gz"
        t0 = time.perf_counter()
        first = [exe, "predict", new, "--method", args.methods[0], "--out", f"s3://{BUCKET}/first.parquet"]
        subprocess.run(first + common, env=env, check=True, stdout=subprocess.DEVNULL)
        print(
            f"first predict (the base clusterings' centres computed, kept): {time.perf_counter() - t0:.1f} s"
        )
        for method in args.methods:
            load = os.getloadavg()[0]
            cmd = [
                exe,
                "predict",
                new,
                "--method",
                method,
                "--out",
                f"s3://{BUCKET}/{method}.parquet",
                *common,
            ]
            seconds, code, watcher = run_watched(cmd, env=env)
            rows, _ = watcher.summary()
            peak = max(b for _, (role, b) in rows if role != "moto") / 2**30
            print(
                f"\n{method}: {args.rows:,} rows in {seconds:.1f} s ({args.rows / seconds:,.0f} rows/s), "
                f"exit {code}, largest process {peak:.2f} GiB (load average before: {load:.1f})"
            )
            print_peaks(watcher)
    finally:
        moto.terminate()


if __name__ == "__main__":
    main()

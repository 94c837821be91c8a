"""Scale benchmark: the whole workflow on N rows of the KDD Cup 99 schema, from s3://, on the embedded cluster.

For each N it writes a seeded KDD-schema table (``synthetic:kdd99``, streamed in blocks) to disk as
compressed CSV and as Parquet, puts both into a local moto S3 server on 127.0.0.1, runs
``ensemble-dask run`` on the CSV from s3:// with the run store on S3 too, and prints per stage:
seconds, rows per second, the bytes the stage wrote, and at the end the peak RSS (VmHWM) of every
process of the run (client, scheduler, workers; moto apart) and the size of the pairs store.

    python benchmarks/scale.py --rows 500000 --rows 1000000
    python benchmarks/scale.py --rows 5000000 --methods bce kcc

(at 5,000,000 rows BCE and KCC fit on the workers' row blocks of labels, and PCC and PPC start from KCC fitted
there and read the pairs from the store a block of rows at a time)

``--watch`` runs any command instead and prints the peak RSS of its processes, e.g.

    python benchmarks/scale.py --watch --store runs/kdd99-full.zarr -- \\
        ensemble-dask run workflows/kdd99-full.yaml --data ../shared/data/kddcup99/kddcup.data_10_percent.gz

These are figures to read, not assertions: the machine is shared, so the load average is printed.
"""  # noqa: E501

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
BUCKET = "scale-bench"
STAGES = ("ingest", "generate", "coassoc")


# -- peak memory of a process tree ------------------------------------------------------------------
def _vm_hwm(pid, field="VmHWM"):
    """Peak resident set size (VmHWM, bytes) of ``pid`` (or another ``field``: VmRSS), or None when it is
    gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _role(proc):
    try:
        cmd = " ".join(proc.cmdline())
    except psutil.Error:
        return "?"
    if "resource_tracker" in cmd:
        return "tracker"
    if "spawn_main" in cmd or "multiprocessing" in cmd:
        return "worker"
    if "dask scheduler" in cmd or "dask-scheduler" in cmd:
        return "scheduler"
    if "moto_server" in cmd:
        return "moto"
    return "client"


class TreeWatcher(threading.Thread):
    """Polls the processes under ``root`` (its children, recursively) and keeps each one's VmHWM.

    The embedded LocalCluster's scheduler runs in the client process; its workers are child
    processes (multiprocessing spawn) of their nannies, which run in the client too.
    """

    def __init__(self, root_pid, interval=0.25):
        super().__init__(daemon=True)
        self.root = psutil.Process(root_pid)
        self.interval = interval
        self.peaks = {}  # pid -> (role, bytes)
        self.together = 0  # the largest sum of the processes' current RSS seen at one poll
        # pid -> CPU seconds (user + system) at the last poll: a figure the load does not inflate
        self.cpu = {}
        self.samples = []  # (wall clock, pid, VmRSS bytes) of every poll: which stage a peak belongs to
        self._done = threading.Event()

    def _poll(self):
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return
        now = 0
        for proc in procs:
            hwm = _vm_hwm(proc.pid)
            if hwm is None:
                continue
            role = self.peaks.get(proc.pid, (None, 0))[0] or _role(proc)
            self.peaks[proc.pid] = (role, max(hwm, self.peaks.get(proc.pid, (None, 0))[1]))
            if role != "moto":
                rss = _vm_hwm(proc.pid, "VmRSS") or 0
                now += rss
                self.samples.append((time.time(), proc.pid, rss))
            try:
                times = proc.cpu_times()
                self.cpu[proc.pid] = times.user + times.system
            except psutil.Error:
                pass
        self.together = max(self.together, now)

    def run(self):
        while not self._done.is_set():
            self._poll()
            time.sleep(self.interval)

    def stop(self):
        self._poll()
        self._done.set()
        self.join()

    def summary(self):
        rows = sorted(self.peaks.items(), key=lambda kv: (kv[1][0], kv[0]))
        total = sum(b for _, (role, b) in rows if role != "moto")
        return rows, total


def run_watched(cmd, env=None):
    """Run ``cmd``; return (seconds, return code, watcher)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env)
    watcher = TreeWatcher(proc.pid)
    watcher.start()
    code = proc.wait()
    watcher.stop()
    return time.perf_counter() - t0, code, watcher


def print_peaks(watcher):
    rows, total = watcher.summary()
    print("peak RSS (VmHWM) per process:")
    for pid, (role, b) in rows:
        print(f"  {role:9s} pid {pid:7d}  {b / 2**20:8.0f} MiB  {watcher.cpu.get(pid, 0.0):8.1f} CPU s")
    cpu = sum(c for pid, c in watcher.cpu.items() if watcher.peaks.get(pid, ("",))[0] != "moto")
    print(f"  CPU seconds of the run's processes: {cpu:.1f} (on a quiet 2-core machine wall >= CPU / 2)")
    print(f"  all processes of the run together: {total / 2**30:.2f} GiB (sum of peaks)")
    print(
        f"  largest total RSS at one moment (polled every {watcher.interval} s): "
        f"{watcher.together / 2**30:.2f} GiB"
    )


def print_stage_peaks(watcher, store_url, storage_options=None):
    """The largest RSS each process was seen at (polled) while each stage ran, from the records' start and end
    (a consensus method's record starts when its fit has ended: its window opens its fit's seconds
    earlier)."""
    import datetime as dt

    sys.path.insert(0, str(HERE.parent))
    from ensemble_dask.io.store import RunStore

    store = RunStore(store_url, storage_options, mode="r")
    records = store.records()
    pids = sorted(watcher.peaks, key=lambda pid: (watcher.peaks[pid][0], pid))
    pids = [pid for pid in pids if watcher.peaks[pid][0] not in ("moto", "tracker")]
    print("largest RSS seen during each stage (MiB, polled every", watcher.interval, "s):")
    print(f"  {'stage':22s}" + "".join(f"{watcher.peaks[pid][0] + ' ' + str(pid):>16s}" for pid in pids))
    for name, rec in records.items():
        if not rec.get("started") or not rec.get("finished"):
            continue
        t0 = dt.datetime.fromisoformat(rec["started"]).timestamp()
        if name.startswith("consensus/") and name in store:
            t0 -= float(dict(store[name].attrs).get("metrics", {}).get("seconds") or 0.0)
        t1 = dt.datetime.fromisoformat(rec["finished"]).timestamp() + 1.0  # finished is to the second
        top = {pid: 0 for pid in pids}
        for t, pid, rss in watcher.samples:
            if t0 <= t <= t1 and pid in top:
                top[pid] = max(top[pid], rss)
        print(f"  {name:22s}" + "".join(f"{top[pid] / 2**20:16.0f}" for pid in pids))


# -- the store's records and sizes ----------------------------------------------------------------------
def _fs_and_root(url, storage_options):
    import fsspec

    return fsspec.core.url_to_fs(url, **(storage_options or {}))


def du(url, storage_options=None):
    fs, root = _fs_and_root(url, storage_options)
    try:
        return sum(int(i.get("size") or 0) for i in fs.find(root, detail=True).values())
    except FileNotFoundError:
        return 0


def print_stages(store_url, n_rows, storage_options=None):
    sys.path.insert(0, str(HERE.parent))
    from ensemble_dask.io.store import RunStore

    store = RunStore(store_url, storage_options, mode="r")
    records = store.records()
    written = {
        "ingest": ("X", "y_true"),
        "generate": ("labels",),
        "coassoc": ("pairs",),
    }
    print(f"{'stage':22s} {'seconds':>8s} {'rows/s':>10s} {'written MiB':>12s}")
    order = {name: i for i, name in enumerate(STAGES)}
    for name, rec in sorted(records.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])):
        secs = rec.get("seconds") or 0.0
        if name.startswith("consensus/") and name in store:  # the fit's time is in its metrics
            secs += float(dict(store[name].attrs).get("metrics", {}).get("seconds") or 0.0)
        paths = written.get(name, (name,))
        size = sum(du(f"{store.url}/{p}", storage_options) for p in paths)
        rate = n_rows / secs if secs else float("nan")
        print(f"{name:22s} {secs:8.1f} {rate:10.0f} {size / 2**20:12.1f}")
    if "pairs" in store:
        attrs = dict(store["pairs"].attrs)
        size = du(f"{store.url}/pairs", storage_options)
        print(f"pairs store: {attrs.get('n_pairs')} pairs, nnz {attrs.get('nnz')}, {size / 2**20:.1f} MiB")
    metrics = store.url + "/report/metrics.json"
    fs, path = _fs_and_root(metrics, storage_options)
    if fs.exists(path):
        report = json.loads(fs.cat(path))
        for name, m in (report.get("methods") or {}).items():
            print(
                f"  {name}: H {m.get('H')}, effective K {m.get('effective_k')}, {m.get('seconds')} s, "
                f"converged {m.get('converged')}"
            )
        base = report.get("base_partitions") or {}
        if base:
            print(f"  base partitions: mean H {base['H']['mean']:.3f}")


# -- the synthetic table, on disk and in S3 ----------------------------------------------------------------
def write_table(n_rows, out_dir, seed):
    """Stream ``n_rows`` seeded KDD-schema rows to ``kdd.csv.gz`` and ``kdd.parquet`` in ``out_dir``."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    sys.path.insert(0, str(HERE.parent))
    from ensemble_dask.io.datasets import iter_synthetic_chunks

    csv_path, pq_path = out_dir / "kdd.csv.gz", out_dir / "kdd.parquet"
    writer = None
    options = pacsv.WriteOptions(include_header=False, quoting_style="none")
    with pa.CompressedOutputStream(str(csv_path), "gzip") as fh:
        for _, frame in iter_synthetic_chunks("kdd99", n=n_rows, seed=seed, chunk_rows=200_000):
            table = pa.Table.from_pandas(frame, preserve_index=False)
            pacsv.write_csv(table, fh, write_options=options)
            if writer is None:
                writer = pq.ParquetWriter(pq_path, table.schema)
            writer.write_table(table)
    writer.close()
    return csv_path, pq_path


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto():
    exe = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
    port = _free_port()
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.2)
    opts = {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}", "region_name": "us-east-1"},
    }
    return proc, opts


def bench_rows(n_rows, args, opts, workdir):
    import s3fs

    print(f"\n=== {n_rows:,} rows (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores) ===")
    t0 = time.perf_counter()
    csv_path, pq_path = write_table(n_rows, workdir, args.seed)
    print(
        f"table written in {time.perf_counter() - t0:.1f} s: "
        f"csv.gz {csv_path.stat().st_size / 2**20:.1f} MiB, "
        f"parquet {pq_path.stat().st_size / 2**20:.1f} MiB"
    )
    fs = s3fs.S3FileSystem(**opts)
    t0 = time.perf_counter()
    prefix = f"{BUCKET}/n{n_rows}"
    fs.put_file(str(csv_path), f"{prefix}/kdd.csv.gz")
    fs.put_file(str(pq_path), f"{prefix}/kdd.parquet")
    print(f"uploaded to s3://{prefix}/ in {time.perf_counter() - t0:.1f} s")
    store = f"s3://{prefix}/run.zarr"
    workflow = {
        "name": f"scale-{n_rows}",
        "seed": args.seed,
        "store": store,
        "storage_options": opts,
        "data": {"url": f"s3://{prefix}/kdd.csv.gz", "schema": "kdd99", "storage_options": opts},
        "generate": {
            "n_clusterings": args.n_clusterings,
            "ensemble": "type1",
            "k_min": 2,
            "k_max": 10,
            "rate": 0.5,
        },
        "coassoc": {"strategy": "per-point", "l": args.l},
        "consensus": {m: {"n_clusters": args.k} for m in args.methods},
    }
    spec = workdir / "workflow.json"  # JSON is YAML
    spec.write_text(json.dumps(workflow))
    exe = shutil.which("ensemble-dask") or str(Path(sys.executable).parent / "ensemble-dask")
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    seconds, code, watcher = run_watched([exe, "run", str(spec), "--no-progress"], env=env)
    print(f"workflow: {seconds:.1f} s wall, exit code {code}; load average now {os.getloadavg()[0]:.1f}")
    print_stages(store, n_rows, opts)
    print_peaks(watcher)
    print_stage_peaks(watcher, store, opts)
    print(f"bytes in the run store: {du(store, opts) / 2**20:.1f} MiB")
    for path in (csv_path, pq_path):
        path.unlink()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, action="append", help="table sizes (repeatable; default 500000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-clusterings", type=int, default=100)
    ap.add_argument("--l", type=int, default=30, help="per-point partners")
    ap.add_argument("--k", type=int, default=3, help="clusters of the consensus methods")
    ap.add_argument("--methods", nargs="*", default=["pcc-l2"], help="consensus methods (default pcc-l2)")
    ap.add_argument("--watch", action="store_true", help="run the command after -- and print its peak RSS")
    ap.add_argument("--store", help="with --watch: a run store whose stage records to print")
    ap.add_argument("--n", type=int, help="with --watch: rows, for rows per second")
    ap.add_argument("command", nargs="*")
    args = ap.parse_args(argv)
    if args.watch:
        print(f"load average {os.getloadavg()} on {os.cpu_count()} cores")
        seconds, code, watcher = run_watched(args.command)
        print(f"{seconds:.1f} s wall, exit code {code}; load average now {os.getloadavg()}")
        if args.store:
            print_stages(args.store, args.n or 0)
        print_peaks(watcher)
        if args.store:
            print_stage_peaks(watcher, args.store)
        return code
    moto, opts = start_moto()
    try:
        import s3fs

        s3fs.S3FileSystem(**opts).call_s3("create_bucket", Bucket=BUCKET)
        with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
            for n_rows in args.rows or [500_000]:
                bench_rows(n_rows, args, opts, Path(tmp))
        print(f"moto server peak RSS {(_vm_hwm(moto.pid) or 0) / 2**20:.0f} MiB (holds the bucket in memory)")
    finally:
        moto.terminate()
        moto.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())

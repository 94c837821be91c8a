"""How much of a fit's time is the machine mapping memory new to the process; prints.

Two measurements, each in fresh processes:

* the cost of a first touch: seconds per MB to fill an array of ``--mb`` MB new to the process, after
  ``--settle`` seconds idle (a VM's balloon takes back memory freed a moment ago), with NumPy's default advice
  of transparent huge pages for large arrays and without it (``NUMPY_MADVISE_HUGEPAGE=0``), and once more for
  memory the process has just freed;
* each method of ``benchmarks/peers.py`` (``--methods``), timed as peers.py times it (a fresh process,
  warmed up on 500 rows, one fit), once as it is and once after the process has filled and freed 512 MB
  just before the fit (so that the fit takes memory already mapped), the two in turn for ``--rounds``
  rounds: the difference of the medians is what mapping the fit's memory costs.

On the 2-core VMs of this project a first touch costs 1.5-1.9 ms per MB with huge pages, 0.3 ms without, and
0.03-0.15 ms for memory just freed; an allocator or a BLAS that frees and takes memory again within a fit pays
little, a fit that holds hundreds of MB pays a good part of a second. Bare-metal machines pay far less.

Usage: python benchmarks/first_touch.py [--mb 512] [--settle 3] [--methods cchbgf pcc-kl] [--rounds 3]
       [--n 500000] [--K 8] [--labels sub50] [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _touch(mb, settle, again):
    """Seconds per MB to fill ``mb`` MB new to this process (``again``: just freed by it)."""
    if again:
        a = np.empty(mb << 17)
        a.fill(1.0)
        del a
    else:
        time.sleep(settle)
    t0 = time.perf_counter()
    a = np.empty(mb << 17)
    a.fill(1.0)
    return (time.perf_counter() - t0) / mb


def _fit(method, labels_file, K, settle, mapped):
    """Seconds of one fit of ``method`` as peers.py times it; ``mapped``: 512 MB filled and freed first."""
    import peers

    labels = np.load(labels_file)
    run = peers.METHODS[method][1]
    run(np.ascontiguousarray(labels[:: max(1, labels.shape[0] // 500)]), K)
    time.sleep(settle)
    if mapped:
        a = np.empty(512 << 17)
        a.fill(1.0)
        del a
    t0 = time.perf_counter()
    run(labels, K)
    return time.perf_counter() - t0


def _child(args, *extra, env=None):
    cmd = [sys.executable, __file__, "--child", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ, **(env or {})})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--settle", type=float, default=3.0, help="seconds idle before each timed touch or fit")
    ap.add_argument("--methods", nargs="*", default=["cchbgf", "pcc-kl", "pcc-l2", "ppc", "bce"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=500_000)
    ap.add_argument("--K", type=int, default=8)
    ap.add_argument("--labels", choices=["complete", "sub50"], default="sub50")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ensemble_dask_peers")
    ap.add_argument("--child", nargs="*", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:  # one measurement in this fresh process
        kind, *rest = args.child
        if kind == "touch":
            print(json.dumps(_touch(int(rest[0]), float(rest[1]), rest[2] == "1")))
        else:
            print(json.dumps(_fit(rest[0], rest[1], int(rest[2]), float(rest[3]), rest[4] == "1")))
        return
    print(f"# load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for label, env, again in (
        ("huge pages (NumPy's default)", None, "0"),
        ("no huge pages", {"NUMPY_MADVISE_HUGEPAGE": "0"}, "0"),
        ("memory just freed", None, "1"),
    ):
        ms = [1e3 * _child(args, "touch", str(args.mb), str(args.settle), again, env=env) for _ in range(3)]
        print(f"first touch of {args.mb} MB, {label}: {np.median(ms):.2f} ms per MB (median of 3)")
    if not args.methods:
        return
    import peers

    args.cache.mkdir(parents=True, exist_ok=True)
    sub = 1.0 if args.labels == "complete" else 0.5
    lab_path, _ = peers.ensemble(args.n, args.K, args.K, sub, 0, args.cache)
    print(f"\n## n = {args.n:,}, K = {args.K}, {args.labels} labels: one fit, {args.rounds} rounds")
    for m in args.methods:
        t = {"0": [], "1": []}
        for _ in range(args.rounds):
            for mapped in ("0", "1"):
                t[mapped].append(_child(args, "fit", m, str(lab_path), str(args.K), str(args.settle), mapped))
        new, old = np.median(t["0"]), np.median(t["1"])
        print(f"{m:14s} memory new {new:.2f} s, memory mapped {old:.2f} s: mapping {new - old:.2f} s")


if __name__ == "__main__":
    main()

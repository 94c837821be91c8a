"""What a site's exact sums cost: BCE's E-step over one block with float sums and with exact ones; prints.

A federated site sums each row's E-step terms rounded to ``2**-32`` as integers
(:func:`~ensemble_dask.federated.protocol.secure.encode_exact`), so that a round's total depends on the pooled
rows alone. This times :func:`~ensemble_dask.rowblocks.bce.estep_task` on one block of synthetic labels both
ways, in turn (float, exact, float, ...), and prints the median time of each and the ratio pair by pair.

    python benchmarks/bench_exact_sums.py [--n 200000] [--clusterings 20] [--k 10] [--rounds 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None):
    from ensemble_dask.federated.protocol.messages import params_from_message as _params_from
    from ensemble_dask.federated.protocol.secure import ROW_TERM_LIMIT
    from ensemble_dask.rowblocks.bce import estep_task, fresh_gamma_like, prepare_block

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000, help="rows of the block")
    ap.add_argument("--clusterings", type=int, default=20)
    ap.add_argument("--k", type=int, default=10, help="consensus clusters")
    ap.add_argument("--rounds", type=int, default=5, help="pairs of E-steps timed")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    n, N, k = args.n, args.clusterings, args.k
    truth = rng.integers(0, k, n)
    labels = np.where(rng.random((n, N)) < 0.7, truth[:, None], rng.integers(0, 2 * k, (n, N)))
    labels[rng.random((n, N)) < 0.3] = -1  # missing labels
    cats = [np.unique(c[c >= 0]) for c in labels.T]
    beta = rng.uniform(0.1, 1, (k, sum(c.size for c in cats)))
    params = _params_from({"alpha": rng.uniform(0.5, 2, k), "beta": beta}, k)
    block = prepare_block(labels, cats)

    def estep(exact):
        t = time.perf_counter()
        estep_task(block, fresh_gamma_like(block, k), params, 1e-4, 100, ROW_TERM_LIMIT, exact)
        return time.perf_counter() - t

    estep(False), estep(True)  # compiled
    times = np.array([(estep(False), estep(True)) for _ in range(args.rounds)])
    print(f"{block['gidx'].shape[0]:,} distinct rows of {n:,}, {N} clusterings, k = {k}; {args.rounds} pairs")
    med = np.median(times, axis=0)
    print(f"float sums: median {med[0]:.3f} s; exact sums: median {med[1]:.3f} s")
    ratio = times[:, 1] / times[:, 0]
    lo, hi = ratio.min(), ratio.max()
    print(f"exact / float, pair by pair: median {np.median(ratio):.3f} (min {lo:.3f}, max {hi:.3f})")


if __name__ == "__main__":
    main()

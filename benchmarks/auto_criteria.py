"""How well a criterion that reads only the labels picks among consensus results (``auto``).

On the real sets of ``peers.py --real`` (two ensembles of each kind per set: complete and sub50, 30 k-means
labelings with k in [K, 2K]), six candidates are fitted (KCC and BCE from their spectral and k-means++ starts,
HBGF, MM) and two label-free criteria pick one: ANMI with the base clusterings (``auto``'s, Strehl and Ghosh)
and the least squares of the co-association (the PPC objective of a hard partition, over every pair). Prints,
per ensemble, the best candidate's ARI, their mean and each criterion's choice, then the means over all.

``--eac-al`` adds EAC average link on the consensus stage's default pairs (cocluster) as a seventh candidate,
the method of highest ARI on digits, and prints how often each criterion picks it.

    python benchmarks/auto_criteria.py [--data-dir ../shared/data/uci] [--seeds 2] [--eac-al]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from peers import _pairs, real_ensemble, real_sets  # noqa: E402


def coassociation_l2(partition, labels):
    """Mean over pairs (weighted by the clusterings labelling both) of (c_ij / N_ij - [same cluster])^2."""
    co = np.zeros((labels.shape[0],) * 2)
    both = np.zeros_like(co)
    for col in labels.T:
        seen = col >= 0
        both += seen[:, None] & seen[None, :]
        co += (col[:, None] == col[None, :]) & seen[:, None] & seen[None, :]
    frac = np.divide(co, both, out=np.zeros_like(co), where=both > 0)
    same = partition[:, None] == partition[None, :]
    return float((both * (frac - same) ** 2).sum() / both.sum())


def main(argv=None):
    from sklearn.metrics import adjusted_rand_score

    from ensemble_dask.consensus import BCE, HBGF, KCC, MM
    from ensemble_dask.consensus.selection import anmi

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=HERE.parent.parent / "shared" / "data" / "uci")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--eac-al", action="store_true", help="EAC average link as a seventh candidate")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    candidates = {
        "kcc": lambda K: KCC(K, random_state=0),
        "kcc++": lambda K: KCC(K, init="k-means++", random_state=0),
        "hbgf": lambda K: HBGF(K, random_state=0),
        "bce": lambda K: BCE(K, random_state=0),
        "bce++": lambda K: BCE(K, init="k-means++", random_state=0),
        "mm": lambda K: MM(K, random_state=0),
    }
    picked = {"anmi": 0, "l2": 0}
    rows = []
    for i, (name, X, y) in enumerate(real_sets(args.data_dir)):
        y = np.unique(y, return_inverse=True)[1]
        K = int(y.max()) + 1
        for kind, share in (("complete", 1.0), ("sub50", 0.5)):
            for seed in range(args.seeds):
                labels = real_ensemble(X, K, share, np.random.default_rng([seed, i, 0 if share == 1 else 1]))
                fits = {c: make(K).fit(labels).labels_ for c, make in candidates.items()}
                if args.eac_al:
                    from ensemble_dask.consensus import EACAverageLink

                    fits["eac-al"] = EACAverageLink(K).fit(_pairs(labels, K)).labels_
                ari = {c: adjusted_rand_score(y, v) for c, v in fits.items()}
                by_anmi = max(fits, key=lambda c: anmi(fits[c], labels))
                by_l2 = min(fits, key=lambda c: coassociation_l2(fits[c], labels))
                row = (max(ari.values()), np.mean(list(ari.values())), ari[by_anmi], ari[by_l2])
                rows.append(row)
                picked["anmi"] += by_anmi == "eac-al"
                picked["l2"] += by_l2 == "eac-al"
                print(
                    f"{name} {kind} {seed}: best {row[0]:.3f}, mean {row[1]:.3f}, ANMI picks {by_anmi} "
                    f"{row[2]:.3f}, co-association L2 picks {by_l2} {row[3]:.3f}",
                    flush=True,
                )
    best, mean, a, l2 = np.mean(rows, axis=0)
    print(
        f"\n{len(rows)} ensembles, mean ARI: the best candidate {best:.4f}, at random {mean:.4f}, "
        f"ANMI's choice {a:.4f}, the co-association L2's choice {l2:.4f}"
    )
    if args.eac_al:
        print(f"EAC-AL picked by ANMI on {picked['anmi']}, by the co-association L2 on {picked['l2']}")


if __name__ == "__main__":
    main()

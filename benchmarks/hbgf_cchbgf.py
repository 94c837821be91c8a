"""Our HBGF against ccHBGF on the real sets, one of ccHBGF's choices at a time; prints ARI.

Both build the bipartite graph of points and base clusters and cluster the points' rows of its top ``K``
singular vectors, normalised, with k-means. They differ in five choices; each variant below is our HBGF's
computation (rewritten here, on every row) with one of them switched to ccHBGF's, and ``all`` with the five
together, which must give ccHBGF's labels (``all = cchbgf`` in the summary checks that the decomposition
is complete):

* ``minus1``: a ``-1`` is one more cluster of its labeling (ours: the point has no edge to that labeling);
* ``no-dx``: the points' side is not normalised by their degree (ours: ``D_x^{-1/2} B D_c^{-1/2}``; with
  complete labels, or ``-1`` as a cluster, every point has the same degree and this changes nothing);
* ``svds``: ``scipy.sparse.linalg.svds(tol=0.1)`` (ours: the exact ``eigh`` of the ``G x G`` Gram matrix);
* ``orth``: one k-means from k-means++ centres made orthonormal (Gram-Schmidt) (ours: the best of 10
  k-means++ starts by inertia);
* ``nodes``: the k-means is fitted on the points' and the clusters' normalised rows together (the clusters'
  rows of the right singular vectors) and the points get their nearest centre (ours: the points only).

The ensembles are ``peers.py --real``'s (30 k-means, ``k`` in ``[K, 2 K]``, complete or on random halves)
drawn with ``--seeds`` seeds (seed 0 is ``peers.py``'s). ``--fit-seeds R`` refits ours and ccHBGF with
``random_state`` 0 .. R-1 and reports their mean ARI per ensemble too: how much of a difference is the
final k-means' seed.

Six more variants of ours ask whether its discretisation could read the ensemble better (the digits
question of the benchmarks page, "Real data"): ``dims+2`` and ``dims2K`` embed the points in the top
``K + 2`` and ``2 K`` singular vectors instead of ``K`` (normalised rows, the same k-means); ``gap`` in the
top ``d`` for the ``d`` in ``K .. K + 3`` after which the spectrum drops most (a subspace whose last
eigenvalue is close to the next one is ill-determined); ``anmi-pick`` keeps, of the fit seeds' partitions,
the one that agrees best with the ensemble (ANMI; the best k-means inertia is what ours keeps); ``cluster_qr``
and ``cluster_qr-raw`` replace the k-means by Damle, Minden and Ying's discretisation (no seed), on the
normalised rows and on the rows as they are. The summary also counts the ensembles where each variant is
below the base partitions' mean ARI.

Usage: python benchmarks/hbgf_cchbgf.py [--seeds 5] [--fit-seeds 10] [--labels complete sub50]
       [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402 - the real sets and their ensembles

SWITCHES = ("minus1", "no-dx", "svds", "orth", "nodes")
VARIANTS = {"ours": (), **{s: (s,) for s in SWITCHES}, "all": SWITCHES}
#: ours with more singular vectors than clusters: name -> the embedding's dimension from K and the top
#: eigenvalues of the Gram matrix (descending; 2 K + 4 of them)
DIMS = {
    "dims+2": lambda K, vals: K + 2,
    "dims2K": lambda K, vals: 2 * K,
    "gap": lambda K, vals: K + int(np.argmax(vals[K - 1 : K + 3] - vals[K : K + 4])),
}

#: ours discretised without k-means (:func:`cluster_qr`)
ASSIGN = ("cluster_qr", "cluster_qr-raw")


def incidence(labels, minus1):
    """Points x base clusters 0/1 (CSR); with ``minus1`` a labeling's ``-1`` is one more of its clusters."""
    blocks = []
    for col in labels.T:
        keep = np.ones(col.size, dtype=bool) if minus1 else col >= 0
        codes = np.unique(col[keep], return_inverse=True)[1]
        rows = np.flatnonzero(keep)
        shape = (col.size, int(codes.max()) + 1 if codes.size else 0)
        blocks.append(sp.csr_array((np.ones(rows.size), (rows, codes)), shape=shape))
    return sp.hstack(blocks, format="csr")


def orthonormal_rows(C):
    """Gram-Schmidt on the rows of ``C`` (a zero row stays zero)."""
    Q = np.array(C, dtype=np.float64)
    for i in range(Q.shape[0]):
        Q[i] -= Q[:i].T @ (Q[:i] @ Q[i]) if i else 0.0
        norm = np.linalg.norm(Q[i])
        if norm > 0:
            Q[i] /= norm
    return Q


def cluster_qr(U):
    """Damle, Minden and Ying's discretisation of an embedding ``U`` (n x K): no k-means, no seed. The K rows
    that QR with column pivoting picks from ``U.T`` set an orthogonal basis; each point takes the axis its
    rotated row is largest on (scikit-learn's ``SpectralClustering(assign_labels="cluster_qr")``)."""
    from scipy.linalg import qr, svd

    K = U.shape[1]
    piv = qr(U.T, pivoting=True)[2]
    ut, _, vt = svd(U[piv[:K], :].T)
    return np.abs(U @ (ut @ vt)).argmax(axis=1)


def hbgf(labels, K, switches, seed=0, dims=None, assign="kmeans"):
    """Our HBGF's labels with the given ccHBGF choices switched on (see the module docstring), embedded in
    the top ``dims(K, eigenvalues)`` (None: ``K``) singular vectors, discretised by k-means or (``assign``)
    ``"cluster_qr"`` on the normalised rows or ``"cluster_qr-raw"`` on the rows as they are."""
    from scipy.linalg import eigh
    from scipy.sparse.linalg import svds
    from sklearn.cluster import KMeans, kmeans_plusplus

    B = incidence(labels, "minus1" in switches)
    dx = np.asarray(B.sum(axis=1)).ravel()
    dc = np.asarray(B.sum(axis=0)).ravel()
    rows = np.ones(dx.size) if "no-dx" in switches else 1 / np.sqrt(np.maximum(dx, 1))
    A = (sp.diags_array(rows) @ B @ sp.diags_array(1 / np.sqrt(dc))).tocsr()
    if "svds" in switches:
        U, _, Vt = svds(A, K, tol=0.1, random_state=seed)
        V = Vt.T
    else:
        M = (A.T @ A).toarray()
        top = K if dims is None else min(2 * K + 4, M.shape[0])
        vals, V = eigh(M, subset_by_index=[M.shape[0] - top, M.shape[0] - 1])  # ascending
        if dims is not None:
            d = dims(K, vals[::-1])
            vals, V = vals[top - d :], V[:, top - d :]
        U = (A @ V) / np.sqrt(np.maximum(vals, 1e-300))
    if assign == "cluster_qr-raw":
        return cluster_qr(U)
    U = U / np.maximum(np.linalg.norm(U, axis=1, keepdims=True), 1e-300)
    V = V / np.maximum(np.linalg.norm(V, axis=1, keepdims=True), 1e-300)
    if assign == "cluster_qr":
        return cluster_qr(U)
    X = np.vstack([U, V]) if "nodes" in switches else U
    if "orth" in switches:
        centres = orthonormal_rows(kmeans_plusplus(U, K, random_state=seed)[0])
        km = KMeans(K, init=centres, n_init=1, random_state=seed).fit(X)
    else:
        km = KMeans(K, n_init=10, random_state=seed).fit(X)
    return km.predict(U)


def main(argv=None):
    from ccHBGF import ccHBGF
    from sklearn.metrics import adjusted_rand_score
    from threadpoolctl import threadpool_limits

    from ensemble_dask.consensus import HBGF
    from ensemble_dask.consensus._common.agreement import anmi

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5, help="ensembles per set and kind")
    ap.add_argument("--fit-seeds", type=int, default=10, help="random_state of the fits averaged over")
    ap.add_argument("--labels", nargs="+", default=["complete", "sub50"], choices=["complete", "sub50"])
    ap.add_argument("--data-dir", type=Path, default=peers.ROOT.parent / "shared" / "data" / "uci")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    names = ["cchbgf", *VARIANTS, *DIMS, "anmi-pick", *ASSIGN]
    print(f"{'ensemble':32s} " + " ".join(f"{v:>7s}" for v in names) + "   ours/cc over fit seeds")
    got = {v: [] for v in names}
    means, bases = [], []
    with threadpool_limits(1):
        for i, (name, X, y) in enumerate(peers.real_sets(args.data_dir)):
            y = np.unique(y, return_inverse=True)[1]
            K = int(y.max()) + 1
            for seed in range(args.seeds):
                for kind in args.labels:
                    rng = np.random.default_rng([seed, i, 0 if kind == "complete" else 1])
                    labels = peers.real_ensemble(X, K, 1.0 if kind == "complete" else 0.5, rng)
                    bases.append(peers.base_scores(labels, y)[0])
                    got["cchbgf"].append(adjusted_rand_score(y, ccHBGF(labels, n_clusters=K, random_state=0)))
                    for v, switches in VARIANTS.items():
                        got[v].append(adjusted_rand_score(y, hbgf(labels, K, switches)))
                    for v, dims in DIMS.items():
                        got[v].append(adjusted_rand_score(y, hbgf(labels, K, (), dims=dims)))
                    ours = [HBGF(K, random_state=s).fit(labels).labels_ for s in range(args.fit_seeds)]
                    picked = max(ours, key=lambda p: anmi(p, labels))  # the first of equal ANMI
                    got["anmi-pick"].append(adjusted_rand_score(y, picked))
                    for v in ASSIGN:
                        got[v].append(adjusted_rand_score(y, hbgf(labels, K, (), assign=v)))
                    cc = [ccHBGF(labels, n_clusters=K, random_state=s) for s in range(args.fit_seeds)]
                    means.append(
                        (
                            np.mean([adjusted_rand_score(y, p) for p in ours]),
                            np.mean([adjusted_rand_score(y, p) for p in cc]),
                        )
                    )
                    print(
                        f"{f'{name} {kind} s{seed} (base {bases[-1]:.3f})':32s} "
                        + " ".join(f"{got[v][-1]:7.3f}" for v in names)
                        + f"   {means[-1][0]:.3f}/{means[-1][1]:.3f}",
                        flush=True,
                    )
    R = {v: np.array(a) for v, a in got.items()}
    n = R["cchbgf"].size
    print(f"\n# {n} ensembles; each variant against ccHBGF and against ours (ARI, margin 0.005)\n")
    base = np.array(bases)
    print("| variant | mean ARI | < ccHBGF | > ccHBGF | < ours | > ours | worst against ccHBGF | < base |")
    print("|---|---|---|---|---|---|---|---|")
    for v in names:
        d, e = R[v] - R["cchbgf"], R[v] - R["ours"]
        print(
            f"| {v} | {R[v].mean():.4f} | {np.sum(d < -0.005)} | {np.sum(d > 0.005)} | {np.sum(e < -0.005)} "
            f"| {np.sum(e > 0.005)} | {d.min():+.3f} | {np.sum(R[v] < base)} |"
        )
    m = np.array(means)
    print(
        f"\nall = cchbgf on {int(np.sum(np.isclose(R['all'], R['cchbgf'])))} of {n}; "
        f"over fit seeds 0..{args.fit_seeds - 1}: ours mean {m[:, 0].mean():.4f}, "
        f"ccHBGF {m[:, 1].mean():.4f}, "
        f"ours below ccHBGF - 0.005 on {int(np.sum(m[:, 0] < m[:, 1] - 0.005))}, "
        f"above + 0.005 on {int(np.sum(m[:, 0] > m[:, 1] + 0.005))}"
    )


if __name__ == "__main__":
    main()

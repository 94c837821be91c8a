"""KCC (Li & Liu 2018 Sect. 3.1) against scikit-learn's KMeans and a NumPy transcription; its Dask layer."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning

from ensemble_dask import InputError
from ensemble_dask.consensus._common.encoding import encode
from ensemble_dask.consensus.bce import UnseenLabelsWarning
from ensemble_dask.consensus.kcc import GKCC, KCC
from ensemble_dask.rowblocks.kcc import fit_kcc_dask


def _ensemble(n=240, seed=0, ks=(3, 4, 5, 6, 4, 3)):
    X, y = make_blobs(n, centers=4, random_state=seed)
    labels = np.column_stack([KMeans(k, n_init=1, random_state=s).fit_predict(X) for s, k in enumerate(ks)])
    return labels, y


def _onehot(labels):
    gidx, enc = encode(labels)
    B = np.zeros((labels.shape[0], enc.n_categories))
    for i in range(labels.shape[1]):
        ok = gidx[:, i] >= 0
        B[np.flatnonzero(ok), gidx[ok, i]] = 1.0
    return B, gidx >= 0


@pytest.mark.parametrize("tol", [0.0, 1e-4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equals_sklearn_kmeans_on_dense_onehot(seed, tol):
    labels, _ = _ensemble(seed=seed)
    B, _ = _onehot(labels)
    init = B[np.random.default_rng(seed).choice(B.shape[0], 4, replace=False)]
    km = KMeans(4, init=init, n_init=1, tol=tol).fit(B)
    kc = KCC(4, init=init, tol=tol).fit(labels)
    np.testing.assert_array_equal(kc.labels_, km.labels_)
    np.testing.assert_allclose(kc.inertia_, km.inertia_, rtol=1e-12)
    np.testing.assert_allclose(np.hstack(kc.cluster_centers_), km.cluster_centers_, atol=1e-12)
    assert kc.objective_ == pytest.approx(km.inertia_ / B.shape[0] ** 2)
    assert kc.converged_


def _numpy_incomplete_kmeans(B, mask, offsets, C, max_iter=100):
    """Lloyd on B where point x's distance and the centroid blocks use only the clusterings x is in."""
    n, N = mask.shape
    cols = np.repeat(np.arange(N), np.diff(offsets))
    M = mask[:, cols].astype(float)  # n x G: 1 where the column's clustering is present
    prior = (B * M).sum(0) / M.sum(0)  # block of a cluster with no member present in that clustering
    labels = None
    for _ in range(max_iter):
        D = np.stack([(M * (B - C[k]) ** 2).sum(1) for k in range(C.shape[0])], axis=1)
        new = D.argmin(1)
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        num = np.stack([(B * M)[labels == k].sum(0) for k in range(C.shape[0])])
        den = np.stack([M[labels == k].sum(0) for k in range(C.shape[0])])
        C = np.where(den > 0, num / np.maximum(den, 1), prior)
    return labels, D[np.arange(n), labels].sum()


def _utility(labels, consensus):
    """sum_i p_i U_c(consensus, H_i), eq. 2 on the n_i points present in clustering i, p_i = n_i / n."""
    n = labels.shape[0]
    total = 0.0
    for i in range(labels.shape[1]):
        ok = labels[:, i] >= 0
        ni = ok.sum()
        _, a = np.unique(consensus[ok], return_inverse=True)
        _, b = np.unique(labels[ok, i], return_inverse=True)
        P = np.zeros((a.max() + 1, b.max() + 1))
        np.add.at(P, (a, b), 1.0 / ni)
        pk = P.sum(1)
        total += ni / n * ((pk * ((P / pk[:, None]) ** 2).sum(1)).sum() - (P.sum(0) ** 2).sum())
    return total


@pytest.mark.parametrize("seed", [0, 1])
def test_missing_labels_equal_numpy_transcription(seed):
    labels, y = _ensemble(seed=seed)
    rng = np.random.default_rng(seed)
    labels[rng.random(labels.shape) < 0.3] = -1
    B, mask = _onehot(labels)
    gidx, enc = encode(labels)
    # one complete row of each blob as the starts: one-hot centroids in every block
    starts = [np.flatnonzero(mask.all(1) & (y == c))[0] for c in range(4)]
    C0 = B[starts]
    ref_labels, ref_sse = _numpy_incomplete_kmeans(B, mask, enc.offsets, C0)
    kc = KCC(4, init=C0, tol=0).fit(labels)
    np.testing.assert_array_equal(kc.labels_, ref_labels)
    assert kc.inertia_ == pytest.approx(ref_sse, rel=1e-10)
    # the squared error is a constant minus n times the normalised utility KCC maximises
    n = labels.shape[0]
    const = 0.0
    for i in range(labels.shape[1]):
        col = labels[:, i][labels[:, i] >= 0]
        p = np.bincount(col) / col.size
        const += col.size * (1 - (p**2).sum())
    assert kc.inertia_ == pytest.approx(const - n * _utility(labels, kc.labels_), rel=1e-10)


def test_outputs_and_seeds():
    labels, y = _ensemble(n=300)
    a = KCC(4, n_init=3, random_state=7).fit(labels)
    b = KCC(4, n_init=3, random_state=7).fit(labels)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.memberships_.shape == (300, 4)
    np.testing.assert_allclose(a.memberships_.sum(1), 1.0)
    np.testing.assert_array_equal(a.memberships_.argmax(1), a.labels_)
    assert ((a.uncertainty_ >= 0) & (a.uncertainty_ <= 1)).all()
    assert [c.shape for c in a.cluster_centers_] == [(4, k) for k in (3, 4, 5, 6, 4, 3)]
    r = KCC(4, init="random", n_init=10, random_state=0).fit(labels)
    # more restarts never give a worse objective than one of them
    assert r.objective_ <= KCC(4, init="random", n_init=1, random_state=0).fit(labels).objective_ + 1e-15


def test_hand_checked_case():
    labels = np.array([[0, 1, 0], [0, 1, 0], [0, 1, 1], [1, 0, 1], [1, 0, 1], [1, 0, 0]])
    kc = KCC(2, random_state=0).fit(labels)
    assert set(map(tuple, [kc.labels_[:3], kc.labels_[3:]])) == {(0, 0, 0), (1, 1, 1)}
    # each cluster: two blocks pure, the third 2/3 - 1/3: squared error 2 * 3 * (2 * (1/3)^2 + ... )
    # per cluster, block 3 contributes 3 * (1 - (4/9 + 1/9)) = 4/3; clusters: 8/3 in all
    assert kc.inertia_ == pytest.approx(8 / 3)
    assert kc.objective_ == pytest.approx(8 / 3 / 36)


def test_rows_all_missing_get_uniform_memberships():
    labels, _ = _ensemble(n=120)
    labels[5] = -1
    kc = KCC(4, random_state=0).fit(labels)
    np.testing.assert_allclose(kc.memberships_[5], 0.25)
    assert kc.uncertainty_[5] == pytest.approx(1.0)


def test_convergence_warning():
    labels, _ = _ensemble(n=300)
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        kc = KCC(4, init="random", max_iter=1, tol=0, random_state=3).fit(labels)
    assert not kc.converged_ and kc.n_iter_ == 1


@pytest.mark.parametrize(
    ("labels", "params", "match"),
    [
        (
            np.array([[0, 1], [1, 0], [0, 1]]),
            {"n_clusters": 1},
            "'n_clusters' parameter of KCC must be an integer >= 2; got 1",
        ),
        (np.array([[0, 1], [1, 0], [0, 1]]), {"n_clusters": 4}, "n_samples=3; got 4"),
        (np.full((4, 2), -1), {"n_clusters": 2}, "all missing"),
        (np.array([[0, 1], [0, 0], [0, 1]]), {"n_clusters": 2}, "column 0 has a single label 0"),
        (np.array([[0, -1], [1, -1], [0, -1]]), {"n_clusters": 2}, "column 1 has no label"),
        (np.array([[0, 1], [1, 0], [0, 1]]), {"n_clusters": 2, "init": "kmeans"}, "'init' parameter"),
        (np.array([[0, 1], [1, 0], [0, 1]]), {"n_clusters": 2, "init": np.zeros((2, 3))}, r"got \(2, 3\)"),
        (np.array([[0, 1], [1, 0], [0, 1]]), {"n_clusters": 2, "tol": -1}, "'tol'"),
    ],
)
def test_bad_input(labels, params, match):
    with pytest.raises(InputError, match=match):
        KCC(**params).fit(labels)


@pytest.mark.slow
@pytest.mark.parametrize("init", ["k-means++", "random", "clusters"])
def test_row_distributed_equals_in_memory(client, tmp_path, init):
    labels, _ = _ensemble(n=400, seed=3)
    labels[np.random.default_rng(0).random(labels.shape) < 0.1] = -1
    ref = KCC(4, init=init, random_state=11).fit(labels)
    for rows in (400, 200, 100):  # 1, 2 and 4 row blocks
        d = fit_kcc_dask(labels, 4, client=client, block_rows=rows, init=init, random_state=11)
        np.testing.assert_array_equal(d.labels_, ref.labels_)
        np.testing.assert_allclose(d.memberships_, ref.memberships_, atol=1e-12)
        assert d.objective_ == pytest.approx(ref.objective_, rel=1e-12)
        assert d.n_iter_ == ref.n_iter_
    path = str(tmp_path / "labels.npy")
    np.save(path, labels)
    d = fit_kcc_dask(path, 4, client=client, block_rows=150, init=init, random_state=11)
    np.testing.assert_array_equal(d.labels_, ref.labels_)


def test_row_distributed_bad_input(client):
    with pytest.raises(InputError, match="column 0 has a single label 3"):
        fit_kcc_dask(np.array([[3, 0], [3, 1], [3, 0], [3, 1]]), 2, client=client, block_rows=2)


# --------------------------------------------------------------------------- GKCC


def _uci_ensemble(uci_dir, name, n_labelings=20):
    from sklearn.preprocessing import StandardScaler

    from ensemble_dask.io.datasets import load_uci

    X, y = load_uci(name, uci_dir)
    X = StandardScaler().fit_transform(X)
    K = np.unique(y).size
    ks = np.random.default_rng(0).integers(2, 2 * K + 1, n_labelings)
    labels = np.column_stack(
        [KMeans(int(k), n_init=1, random_state=s).fit_predict(X) for s, k in enumerate(ks)]
    )
    return labels, y, K


@pytest.mark.parametrize("name", ["iris", "wine", "glass"])
def test_gkcc_deterministic_and_not_worse_than_kcc(uci_dir, name):
    labels, _, K = _uci_ensemble(uci_dir, name)
    g = GKCC(K, random_state=0, compare=None).fit(labels)  # Algorithm 1 alone, the paper's protocol
    np.testing.assert_array_equal(GKCC(K, random_state=0, compare=None).fit(labels).labels_, g.labels_)
    assert g.partitions_.shape == (labels.shape[0], 59 * (K - 1))
    assert g.step_objectives_.shape == (K - 1, 59)
    # Li & Liu 2018's protocol: KCC and KCC++ on the same (GKCC-generated) basic partitions, 20 starts
    P = g.partitions_
    kcc = np.mean([KCC(K, init="random", random_state=s).fit(P).objective_ for s in range(20)])
    kpp = np.mean([KCC(K, random_state=s).fit(P).objective_ for s in range(20)])
    assert g.objective_ <= min(kcc, kpp) * (1 + 1e-12)
    # the final objective is KCC's on those partitions from GKCC's own centres
    assert KCC(K, init=np.hstack(g.cluster_centers_), tol=0).fit(P).objective_ <= g.objective_ * (1 + 1e-12)


def test_gkcc_mapper_and_missing_labels():
    labels, y = _ensemble(n=200, seed=4)
    labels[np.random.default_rng(1).random(labels.shape) < 0.2] = -1
    calls = []

    def mapper(func, args):
        calls.append(len(args))
        return [func(*a) for a in reversed(args)][::-1]

    a = GKCC(4, n_candidates=10, random_state=5).fit(labels, mapper=mapper)
    b = GKCC(4, n_candidates=10, random_state=5).fit(labels)
    assert calls == [10, 10, 10]
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_allclose(a.memberships_.sum(1), 1.0)
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(y, a.labels_) > 0.9


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"n_clusters": 1}, "'n_clusters'.*got 1"),
        ({"n_clusters": 9}, "n_samples=6; got 9"),
        ({"n_candidates": 0}, "'n_candidates'"),
    ],
)
def test_gkcc_bad_input(params, match):
    labels = np.array([[0, 1], [0, 1], [1, 0], [1, 0], [2, 0], [2, 0]])
    with pytest.raises(InputError, match=match):
        GKCC(**params).fit(labels)


def test_gkcc_candidates_as_dask_tasks(client):
    from ensemble_dask.rowblocks.kcc import fit_gkcc_dask

    labels, _ = _ensemble(n=150, seed=2)
    ref = GKCC(3, n_candidates=8, random_state=1).fit(labels)
    d = fit_gkcc_dask(labels, 3, client=client, n_candidates=8, random_state=1)
    np.testing.assert_array_equal(d.labels_, ref.labels_)
    np.testing.assert_array_equal(d.partitions_, ref.partitions_)
    # on a sample of the rows (the greedy steps' candidates as tasks, Lloyd's steps here): the same fit
    labels[::3] = np.random.default_rng(4).integers(0, 3, labels[::3].shape)  # more distinct rows than 30
    ref = GKCC(3, n_candidates=8, max_rows=30, random_state=1).fit(labels)
    d = fit_gkcc_dask(labels, 3, client=client, n_candidates=8, max_rows=30, random_state=1)
    assert ref.sample_indices_.size == 30
    np.testing.assert_array_equal(d.sample_indices_, ref.sample_indices_)
    np.testing.assert_array_equal(d.labels_, ref.labels_)
    np.testing.assert_array_equal(d.partitions_, ref.partitions_)


def test_equal_blocks_get_their_own_keys(client):
    """Equal blocks scattered twice must not share a key: releasing one would lose the other."""
    from ensemble_dask.rowblocks.bce import load_label_blocks

    labels = np.zeros((8, 2), dtype=np.int64)
    _, data = load_label_blocks(client, labels, 4, None, "kcc")
    _, again = load_label_blocks(client, labels, 4, None, "kcc")
    assert len({f.key for f in data + again}) == 4
    del data
    np.testing.assert_array_equal(np.concatenate(client.gather(again)), labels)


def test_default_starts_find_the_lowest_objective_on_hard_data(uci_dir):
    """wdbc, K = 2: one k-means++ start often stops in a poor local optimum; five rarely do."""
    from ensemble_dask.io.datasets import load_uci
    from ensemble_dask.partitions.clusterers import plan_ensemble, run_clustering, subsample_of

    X, _ = load_uci("wdbc", uci_dir)
    specs = plan_ensemble(len(X), 100, k_min=2, k_max=10, seed=0)
    labels = np.full((len(X), len(specs)), -1)
    for u, spec in enumerate(specs):
        idx = subsample_of(spec, len(X))
        labels[idx, u] = run_clustering(X[idx], spec)
    best = KCC(2, init="k-means++", n_init=20, random_state=0).fit(labels).objective_
    hits = [
        KCC(2, init="k-means++", random_state=s).fit(labels).objective_ <= best * (1 + 1e-9)
        for s in range(16)
    ]
    assert sum(hits) >= 12, hits  # 3 of 16 with one start, 8 with three


@pytest.mark.parametrize("missing", [0.0, 0.5])
def test_many_rows_take_the_distinct_rows_and_sampled_starts(monkeypatch, missing):
    """Above START_SAMPLE rows with random starts: few distinct rows are fitted weighted (complete labels),
    and the n_init starts are compared on a sample (many distinct rows): the optimum found row by row,
    deterministic for a seed; the sample is used."""
    from sklearn.metrics import adjusted_rand_score

    from ensemble_dask.consensus.kcc import _kcc as kcc_module

    labels, y = _ensemble(n=3000, seed=4)
    labels[np.random.default_rng(1).random(labels.shape) < missing] = -1
    row_by_row = KCC(4, init="k-means++", random_state=0).fit(labels)
    monkeypatch.setattr(kcc_module, "START_SAMPLE", 100)  # the sample: max(100, 50 K) = 200 rows
    seen = []
    real = kcc_module.kcc_starts
    monkeypatch.setattr(
        kcc_module, "kcc_starts", lambda est, b, *a, **k: seen.append(sum(b.n_rows)) or real(est, b, *a, **k)
    )
    fast = KCC(4, init="k-means++", random_state=0).fit(labels)
    # the same optimum (rows at equal distance from two centroids may take either)
    assert fast.objective_ == pytest.approx(row_by_row.objective_, rel=1e-9)
    assert adjusted_rand_score(y, fast.labels_) >= adjusted_rand_score(y, row_by_row.labels_) - 0.02
    assert fast.memberships_.shape == (3000, 4) and fast.uncertainty_.shape == (3000,)
    distinct = np.unique(labels, axis=0).shape[0]
    if missing:  # starts on the 200-row sample (the random ones, then HBGF's), then one run on all rows
        assert distinct > 200 and seen == [200, 200, distinct]
    else:  # few distinct rows: no sample needed
        assert distinct < 200 and seen == [distinct]
    np.testing.assert_array_equal(KCC(4, init="k-means++", random_state=0).fit(labels).labels_, fast.labels_)


def test_sampled_starts_offer_the_spectral_partition(monkeypatch, client):
    """Above the start sample, HBGF's partition of the sample is one more start: at K = 30, where the
    k-means++ starts share a local optimum, the fit takes it (lower objective, higher ARI); with it left
    out the fit is what it was."""
    from sklearn.metrics import adjusted_rand_score

    import ensemble_dask.consensus.kcc._kcc as kcc_mod

    X, y = make_blobs(4000, centers=30, n_features=10, cluster_std=2.0, random_state=1)
    rng = np.random.default_rng(1)
    L = np.column_stack(
        [
            KMeans(int(rng.integers(20, 41)), n_init=1, init="random", random_state=j).fit_predict(X)
            for j in range(15)
        ]
    )
    L[np.random.default_rng(1).random(L.shape) < 0.5] = -1  # each clustering sees half the points
    monkeypatch.setattr(kcc_mod, "START_SAMPLE", 1500)
    with_spectral = KCC(30, init="k-means++", n_init=2, random_state=0).fit(L)
    # the row-distributed fit compares the same starts on the same sample, HBGF's included
    d = fit_kcc_dask(L, 30, client=client, block_rows=1000, init="k-means++", n_init=2, random_state=0)
    np.testing.assert_array_equal(d.labels_, with_spectral.labels_)
    assert d.objective_ == pytest.approx(with_spectral.objective_, rel=1e-12)
    monkeypatch.setattr(kcc_mod, "_spectral_centroids", lambda *args: None)
    without = KCC(30, init="k-means++", n_init=2, random_state=0).fit(L)
    assert with_spectral.objective_ < without.objective_
    assert adjusted_rand_score(y, with_spectral.labels_) > adjusted_rand_score(y, without.labels_) + 0.02


def test_transform_and_predict_label_new_rows_as_the_fit_labels_its_own():
    """Issue 27: a fitted KCC labels new rows from their base labels (the nearest centroid over the labels
    each row has): on the rows of the fit it gives the fit's memberships and labels."""
    rng = np.random.default_rng(4)
    truth = rng.integers(0, 3, 300)
    labels = np.column_stack([(truth + (rng.random(300) < 0.1)) % 3 for _ in range(8)]).astype(np.int32)
    labels[rng.random(labels.shape) < 0.3] = -1
    model = KCC(3, random_state=0).fit(labels)
    np.testing.assert_allclose(model.transform(labels), model.memberships_)
    np.testing.assert_array_equal(model.predict(labels), model.labels_)
    new = np.column_stack([truth[:5]] * 8).astype(np.int32)  # every base clustering says the truth
    new[0, :4] = 99  # labels the fit never saw are missing: the row's other four decide
    majority = [np.bincount(model.labels_[truth == t]).argmax() for t in range(3)]
    # said, as BCE and MM say it (a review: KCC treated them as missing with no word)
    with pytest.warns(UnseenLabelsWarning, match="4 base labels were not seen in the fit") as caught:
        np.testing.assert_array_equal(model.predict(new), np.take(majority, truth[:5]))
        assert model.transform(new).shape == (5, 3)
    assert {w.filename for w in caught} == {__file__}  # pointed at the caller
    with pytest.raises(InputError, match="8 clusterings of the fit; got 3"):
        model.predict(labels[:, :3])
    with pytest.raises(InputError, match="not fitted"):
        KCC(3).predict(labels)


def test_gkcc_keeps_kcc_where_the_greedy_steps_split_a_dominant_cluster():
    """Issue 28: with 80 % of the points in one of 8 blobs, Algorithm 1's greedy steps split that cluster (a
    partition of lower KCC objective than the true one, ARI about 0.05); KCC's spectral start finds the blobs.
    GKCC keeps the partition of higher ANMI with the base clusterings, so it is as good as KCC there."""
    from sklearn.datasets import make_blobs
    from sklearn.metrics import adjusted_rand_score

    rng = np.random.default_rng(0)
    X, y = make_blobs([800] + [28] * 7, n_features=10, cluster_std=1.0, center_box=(-20, 20), random_state=0)
    labels = np.column_stack(
        [KMeans(int(rng.integers(8, 17)), n_init=1, random_state=s).fit_predict(X) for s in range(20)]
    )
    g = GKCC(8, n_candidates=10, random_state=0).fit(labels)
    assert g.start_ == "kcc" and g.anmi_["kcc"] > g.anmi_["greedy"] + 0.1
    kcc = KCC(8, random_state=0).fit(labels)
    assert adjusted_rand_score(y, g.labels_) == adjusted_rand_score(y, kcc.labels_) > 0.99
    greedy = GKCC(8, n_candidates=10, random_state=0, compare=None).fit(labels)
    assert greedy.start_ == "greedy" and adjusted_rand_score(y, greedy.labels_) < 0.5


def test_fit_transform_and_from_partition_compile_one_kernel_per_layout(monkeypatch):
    """KCC's ``transform`` and ``from_partition`` widened the fit's int32 indices to int64, so numba compiled
    the memberships kernel (and its row distance) a second time for a fit and its transform."""
    import numba

    from ensemble_dask.consensus.kcc import _kernels as kern

    seen = []
    real = kern.memberships

    def spy(gidx, *args):
        seen.append(str(numba.typeof(gidx)))
        return real(gidx, *args)

    monkeypatch.setattr(kern, "memberships", spy)
    X, _ = make_blobs(300, centers=3, random_state=0)
    labels = np.column_stack([KMeans(k, n_init=1, random_state=k).fit_predict(X) for k in range(2, 7)])
    kcc = KCC(3, random_state=0).fit(labels)
    Y = kcc.transform(labels)
    np.testing.assert_allclose(Y, kcc.memberships_)
    KCC.from_partition(labels, kcc.labels_).transform(labels)
    assert len(seen) >= 3 and len(set(seen)) == 1, seen

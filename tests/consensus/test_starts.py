"""Where PCC, PPC, BCE and MM start: HBGF's spectral partition, on clusters of very unequal sizes."""

import dataclasses

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score
from threadpoolctl import threadpool_limits

from ensemble_dask.coassoc import coassociation
from ensemble_dask.consensus import BCE, KCC, MM, PCC, PPC, registry
from ensemble_dask.consensus._common.encoding import compress_rows
from ensemble_dask.consensus.baselines import HBGF
from ensemble_dask.consensus.bce._em import encode_labels, label_categories
from ensemble_dask.consensus.bce._seeding import seed_partition
from ensemble_dask.consensus.starts import label_starts


@pytest.fixture(scope="module")
def unequal():
    """4 blobs of 600/200/80/40 points, 30 k-means labelings with k in [2, 10]: most of them split the large
    blob, so the objectives (pair counts, KCC's, the likelihoods) prefer a partition that splits it and
    merges two small ones (ARI about 0.53), where HBGF's partition finds the blobs."""
    X, y = make_blobs([600, 200, 80, 40], n_features=6, cluster_std=2.0, random_state=1)
    rng = np.random.default_rng(0)
    with threadpool_limits(1):
        labels = [
            KMeans(int(rng.integers(2, 11)), n_init=1, random_state=s).fit_predict(X) for s in range(30)
        ]
    return y, np.stack(labels, axis=1).astype(np.int32)


def test_the_pair_methods_start_from_hbgf(unequal):
    """``label_starts`` is HBGF's partition; from it PCC and PPC keep the blobs, where the start of the lower
    PCC objective (KCC's partition, the rule before) ends in the split."""
    y, labels = unequal
    starts = label_starts(labels, 4, random_state=0)
    assert len(starts) == 1
    rows, mult, inv = compress_rows(labels)
    np.testing.assert_array_equal(
        starts[0], HBGF(4, random_state=0).fit(rows, sample_weight=mult).labels_[inv]
    )
    pairs = coassociation(labels, strategy="cocluster", l=10, seed=0)
    for est in (
        PCC(4, init=starts, random_state=0),
        PCC(4, divergence="l2", init=starts, random_state=0),
        PPC(4, init=starts, random_state=0),
    ):
        assert adjusted_rand_score(y, est.fit(pairs).labels_) > 0.95
    kcc = KCC(4, init="k-means++", n_init=3, random_state=0).fit(labels).labels_
    lower = PCC(4, init=[kcc, *starts], random_state=0).fit(pairs)
    assert adjusted_rand_score(y, lower.labels_) < 0.7


@pytest.mark.parametrize("Est", [BCE, MM])
def test_bce_and_mm_start_from_hbgf_by_default(Est, unequal):
    y, labels = unequal
    assert Est(4).init == "spectral"
    assert adjusted_rand_score(y, Est(4, random_state=0).fit(labels).labels_) > 0.95
    assert adjusted_rand_score(y, Est(4, init="k-means++", random_state=0).fit(labels).labels_) < 0.7


def test_spectral_first_takes_hbgf_whatever_its_objective(unequal):
    """``seed_partition(spectral_first=True)`` is HBGF's partition with its Lloyd steps, even where k-means++
    seedings reach a lower KCC objective; with HBGF unable to partition (one row per cluster asked) the
    seedings still give a start."""
    y, labels = unequal
    cats = label_categories(labels)
    gidx, _ = encode_labels(labels, cats)
    rows, w, inv = compress_rows(gidx)
    offsets = np.concatenate([[0], np.cumsum([c.size for c in cats])])
    _, first = seed_partition(rows, w, offsets, 4, np.random.default_rng(0), spectral_first=True)
    _, best = seed_partition(rows, w, offsets, 4, np.random.default_rng(0))
    assert adjusted_rand_score(y, first[inv]) > 0.95 > 0.7 > adjusted_rand_score(y, best[inv])
    _, tiny = seed_partition(rows[:4], w[:4], offsets, 4, np.random.default_rng(0), spectral_first=True)
    assert sorted(tiny.tolist()) == [0, 1, 2, 3]


def test_kcc_spectral_start(unequal):
    """KCC's default start, init="spectral": Lloyd's steps from HBGF's centroids keep the blobs; its own
    k-means++ starts find the lower objective that splits the large one. On many rows HBGF partitions a sample
    (one start only)."""
    y, labels = unequal
    spectral = KCC(4, random_state=0).fit(labels)
    assert spectral.init == "spectral"
    kpp = KCC(4, init="k-means++", random_state=0).fit(labels)
    assert adjusted_rand_score(y, spectral.labels_) > 0.95 > 0.7 > adjusted_rand_score(y, kpp.labels_)
    assert kpp.inertia_ < spectral.inertia_
    many = np.repeat(labels, 25, axis=0)  # 23,000 rows: HBGF on a sample of 20,000
    assert (
        adjusted_rand_score(np.repeat(y, 25), KCC(4, init="spectral", random_state=0).fit(many).labels_)
        > 0.95
    )


def test_the_starts_on_the_cluster_are_spectral(unequal, tmp_path, process_client, monkeypatch):
    """Labels above DASK_LABELS_BYTES (lowered to 0): BCE's seeded start and the pair methods' start are KCC
    on the workers' row blocks from HBGF's partition of a sample of rows, and keep the blobs too."""
    from ensemble_dask.io.store import RunStore
    from ensemble_dask.stages import consensus as stage
    from ensemble_dask.stages.coassoc import coassoc_stage
    from ensemble_dask.stages.generate import import_labels

    y, labels = unequal
    monkeypatch.setattr(stage, "DASK_LABELS_BYTES", 0)
    store = RunStore(str(tmp_path / "run.zarr"))
    import_labels(store, "labels-table", labels=labels)
    coassoc_stage(store, process_client)
    for method in ("bce", "pcc-l2"):
        assert stage.uses_cluster(store, method, {"n_clusters": 4})
        stage.consensus_stage(store, method, seed=0, client=process_client, n_clusters=4)
        assert adjusted_rand_score(y, store[f"consensus/{method}/labels"][:]) > 0.95


def test_a_result_of_the_former_default_start_is_recomputed(unequal, tmp_path, monkeypatch):
    """A store finished before the starts became HBGF's (its record has no ``starts`` tag) is not up to date
    for the methods whose default start changed; with the tag it is; an explicit ``init`` needs no tag."""
    from ensemble_dask.io.store import RunStore
    from ensemble_dask.stages import consensus as stage
    from ensemble_dask.stages.generate import import_labels

    y, labels = unequal
    store = RunStore(str(tmp_path / "run.zarr"))
    import_labels(store, "labels-table", labels=labels)
    with monkeypatch.context() as m:
        # the record as it was written before: kcc's default start was not HBGF's partition
        m.setitem(registry._REGISTRY, "kcc", dataclasses.replace(registry.get("kcc"), hbgf_start=False))
        m.setattr(stage, "_fit", lambda *a: KCC(4, init="k-means++", random_state=0).fit(labels))
        stage.consensus_stage(store, "kcc", seed=0, n_clusters=4)
    assert adjusted_rand_score(y, store["consensus/kcc/labels"][:]) < 0.7  # the former default's result
    fits, real_fit = [], stage._fit
    monkeypatch.setattr(stage, "_fit", lambda *a: fits.append(a) or real_fit(*a))
    stage.consensus_stage(store, "kcc", seed=0, n_clusters=4)
    assert len(fits) == 1  # the older record is stale: fitted again
    assert adjusted_rand_score(y, store["consensus/kcc/labels"][:]) > 0.95
    stage.consensus_stage(store, "kcc", seed=0, n_clusters=4)
    assert len(fits) == 1  # now up to date: not fitted again
    stage.consensus_stage(store, "kcc", seed=0, n_clusters=4, init="k-means++")
    assert adjusted_rand_score(y, store["consensus/kcc/labels"][:]) < 0.7


def test_kcc_spectral_start_on_a_sample_of_many_distinct_rows(unequal, monkeypatch, client):
    """Above ``max(START_SAMPLE, 50 K)`` distinct rows HBGF partitions a uniform sample of that many; the
    row-distributed fit draws the same sample and ends in the same partition."""
    from ensemble_dask.consensus.kcc import _kcc as kcc_module

    y, labels = unequal
    missing = labels.copy()
    missing[np.random.default_rng(2).random(labels.shape) < 0.3] = -1  # (nearly) every row distinct
    monkeypatch.setattr(kcc_module, "START_SAMPLE", 100)  # the sample: max(100, 50 x 4) = 200 rows
    seen = []
    real = kcc_module._spectral_centroids
    monkeypatch.setattr(
        kcc_module,
        "_spectral_centroids",
        lambda rows, w, *a: seen.append(float(w.sum())) or real(rows, w, *a),
    )
    fit = KCC(4, random_state=0).fit(missing)
    assert seen == [200.0]
    assert adjusted_rand_score(y, fit.labels_) > 0.95
    from ensemble_dask.rowblocks.kcc import fit_kcc_dask

    on_blocks = fit_kcc_dask(missing, 4, client=client, block_rows=300, random_state=0)
    assert seen == [200.0, 200.0]
    np.testing.assert_array_equal(on_blocks.labels_, fit.labels_)


def test_two_label_columns_finds_the_columns_of_two_labels():
    """The one-pass range of each column's labels (:func:`column_label_range`) tells the columns apart: all
    missing, one label, one label and -1, two labels; for any integer dtype and memory order."""
    from ensemble_dask.consensus.starts import two_label_columns

    rng = np.random.default_rng(0)
    labels = rng.integers(-1, 4, size=(300, 9)).astype(np.int32)
    labels[:, 1] = -1
    labels[:, 2] = 3
    labels[:, 3] = np.where(rng.random(300) < 0.5, -1, 2)
    labels[:5, 4] = 7
    for arr in (labels, labels.astype(np.int64), np.asfortranarray(labels)):
        assert two_label_columns(arr).tolist() == [0, 4, 5, 6, 7, 8]


def test_hbgf_on_rows_known_distinct_is_the_same_fit(unequal):
    """``label_starts`` hands HBGF its distinct rows with ``distinct=True`` (no second compression): the same
    labels and embedding as ``fit`` on those rows, which compresses them to themselves."""
    _, labels = unequal
    rng = np.random.default_rng(1)
    labels = np.where(rng.random(labels.shape) < 0.3, -1, labels).astype(np.int32)  # distinct rows
    rows, mult, _ = compress_rows(labels)
    a = HBGF(4, random_state=0).fit(rows, sample_weight=mult)
    b = HBGF(4, random_state=0)._fit(rows, mult, distinct=True)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.embedding_, b.embedding_)

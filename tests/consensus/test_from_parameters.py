"""Fitted models rebuilt from what a run store keeps (``from_parameters``, ``KCC.from_partition``): they
label rows exactly as the fitted estimator does, and refuse parameters of the wrong shape."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble_dask._validation import InputError
from ensemble_dask.consensus import BCE, GBCE, HBGF, KCC, MM


@pytest.fixture(scope="module")
def ensemble():
    """Base labels of 600 points in 3 groups, half of each clustering missing, and the features."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 200)
    X = rng.normal(size=(600, 2)) + 4.0 * y[:, None]
    labels = np.stack(
        [
            np.where(rng.random(600) < 0.5, -1, (y + (rng.random(600) < 0.1)) % 3 + 3 * (j % 2))
            for j in range(8)
        ],
        axis=1,
    )
    return labels, X


def test_bce_gbce_and_mm_rebuilt_transform_as_fitted(ensemble):
    labels, X = ensemble
    bce = BCE(3, random_state=0).fit(labels)
    again = BCE.from_parameters(bce.alpha_, bce.beta_, bce.categories_)
    np.testing.assert_array_equal(again.transform(labels), bce.transform(labels))
    gbce = GBCE(3, random_state=0).fit(labels, X)
    again = GBCE.from_parameters(
        gbce.alpha_, gbce.beta_, gbce.categories_, means=gbce.means_, variances=gbce.variances_
    )
    np.testing.assert_array_equal(again.transform(labels, X), gbce.transform(labels, X))
    mm = MM(3, random_state=0).fit(labels)
    again = MM.from_parameters(mm.weights_, mm.beta_, mm.categories_)
    np.testing.assert_array_equal(again.transform(labels), mm.transform(labels))
    np.testing.assert_array_equal(again.predict(labels), mm.labels_)


def test_from_parameters_refuses_what_does_not_fit(ensemble):
    labels, X = ensemble
    bce = BCE(3, random_state=0).fit(labels)
    gbce = GBCE(3, random_state=0).fit(labels, X)
    with pytest.raises(InputError, match="BCE.from_parameters: means and variances are not taken"):
        BCE.from_parameters(
            bce.alpha_, bce.beta_, bce.categories_, means=gbce.means_, variances=gbce.variances_
        )
    with pytest.raises(InputError, match="GBCE.from_parameters: means and variances are required"):
        GBCE.from_parameters(gbce.alpha_, gbce.beta_, gbce.categories_)
    with pytest.raises(InputError, match=r"means and variances must be \(3, D\)"):
        GBCE.from_parameters(
            gbce.alpha_, gbce.beta_, gbce.categories_, means=gbce.means_, variances=gbce.variances_[:2]
        )
    with pytest.raises(InputError, match=r"MM.from_parameters: beta must hold one \(3, k_j\) matrix"):
        MM.from_parameters(np.ones(3) / 3, bce.beta_[:-1], bce.categories_)


def test_kcc_from_partition_is_the_fitted_kcc(ensemble):
    """KCC's centroids are those of its own partition: rebuilt from the labels alone, the same centroids; and
    a partition of another method (HBGF's) labels its rows by the nearest of its clusters' centroids."""
    labels, _ = ensemble
    kcc = KCC(3, random_state=0).fit(labels)
    again = KCC.from_partition(labels, kcc.labels_)
    for a, b in zip(again.cluster_centers_, kcc.cluster_centers_, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)
    np.testing.assert_array_equal(again.predict(labels), kcc.labels_)
    hbgf = HBGF(3, random_state=0).fit(labels)
    assert np.mean(KCC.from_partition(labels, hbgf.labels_).predict(labels) == hbgf.labels_) >= 0.95
    with pytest.raises(InputError, match="partition must hold a label >= 0 for each of the 600 rows"):
        KCC.from_partition(labels, kcc.labels_[:-1])

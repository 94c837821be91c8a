"""``auto`` in a workflow (issue 28): every candidate fitted as the stage fits it alone, the one of highest
ANMI kept with every score recorded, and its model kept for predict."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble_dask.io.store import RunStore
from ensemble_dask.pipeline import run_workflow

pytestmark = pytest.mark.slow  # whole workflows on a (threads) cluster


def _spec(store, **consensus):
    return {
        "seed": 4,
        "store": store,
        "data": {"url": "synthetic:blobs?n=900&d=5&centers=4&seed=2"},
        "generate": {"n_clusterings": 10, "rate": 0.5},
        "consensus": consensus,
    }


def test_auto_keeps_the_best_candidate_as_fitted_alone():
    from ensemble_dask.consensus.selection import CANDIDATES
    from ensemble_dask.stages.predict import predict_rows

    url = "memory://auto-stage"
    report = run_workflow(_spec(url, auto={"n_clusters": 4}))
    metrics = report["methods"]["auto"]
    assert sorted(metrics["anmi"]) == sorted(CANDIDATES)
    chosen = metrics["chosen"]
    assert metrics["anmi"][chosen] == max(metrics["anmi"].values())
    # the chosen method as a workflow entry of its own (the same seed): the same labels
    run_workflow(_spec(url, auto={"n_clusters": 4}, **{chosen: {"n_clusters": 4}}))
    store = RunStore(url, mode="r+")
    np.testing.assert_array_equal(store["consensus/auto/labels"][:], store[f"consensus/{chosen}/labels"][:])
    assert store["consensus/auto"].attrs["chosen"] == chosen
    # new rows: the chosen candidate's model labels them, as it labels them for its own result
    X = np.asarray(store["X"][:])
    import fsspec

    with fsspec.open("memory://auto-new/X.npy", "wb") as fh:
        np.save(fh, X[:200] * np.asarray(store["X"].attrs["scale"]) + np.asarray(store["X"].attrs["center"]))
    auto = predict_rows(store, "auto", "memory://auto-new/X.npy")
    alone = predict_rows(store, chosen, "memory://auto-new/X.npy")
    np.testing.assert_array_equal(auto[0], alone[0])


def test_auto_with_label_candidates_needs_no_pairs():
    url = "memory://auto-labels"
    spec = _spec(url, auto={"n_clusters": 4, "candidates": ["kcc", "hbgf"]})
    report = run_workflow(spec)
    assert sorted(report["methods"]["auto"]["anmi"]) == ["hbgf", "kcc"]
    store = RunStore(url, mode="r+")
    rec = store.record("consensus/auto")
    assert rec["inputs"] == [store.stage_hash("generate")]  # new pairs do not make it stale


def test_auto_takes_one_name_and_candidates_without_a_seed():
    """From a user review: ``candidates: bce`` (one name) failed naming its letters, and an EAC candidate
    failed with "unknown parameter(s) ['random_state']" (auto gave its seed to every candidate) after the
    stages before it had run."""
    one = {"method": "auto", "n_clusters": 4, "candidates": "kcc"}
    eac = {"method": "auto", "n_clusters": 4, "candidates": ["eac-al", "kcc"]}
    report = run_workflow(_spec("memory://auto-eac", a1=one, a2=eac))
    assert sorted(report["methods"]["a1"]["anmi"]) == ["kcc"]
    assert sorted(report["methods"]["a2"]["anmi"]) == ["eac-al", "kcc"]

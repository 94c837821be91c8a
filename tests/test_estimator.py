"""ConsensusClustering: the whole pipeline as one scikit-learn estimator (issue 27)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.utils.estimator_checks import parametrize_with_checks

from ensemble_dask import ConsensusClustering
from ensemble_dask._validation import InputError

pytestmark = pytest.mark.slow  # each fit starts a (threads) cluster


@pytest.fixture(autouse=True)
def no_active_client(monkeypatch):
    """No ``distributed.Client`` is taken as active in a test here unless the test asks: another test file's
    session cluster in the same test process is the process's default client, and a fit runs on the active
    client (:func:`test_a_fit_under_an_active_client_runs_its_tasks_there` puts the real look-up back)."""
    monkeypatch.setattr("ensemble_dask.estimator.active_client", lambda: None)


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(400, centers=3, cluster_std=1.0, random_state=1)
    return X


def test_an_array_a_dask_array_and_a_frame_give_the_workflow_s_labels(blobs, tmp_path):
    import dask.array as da
    import pandas as pd
    import yaml

    from ensemble_dask.cli import main
    from ensemble_dask.io.store import RunStore

    params = dict(n_clusters=3, method="kcc", n_clusterings=8, random_state=7)
    model = ConsensusClustering(**params).fit(blobs)
    assert model.labels_.shape == (400,) and model.memberships_.shape == (400, 3)
    np.testing.assert_allclose(model.memberships_.sum(axis=1), 1.0)
    assert model.n_features_in_ == 2 and 0.0 <= model.uncertainty_.min() <= model.uncertainty_.max() <= 1.0
    for other in (da.from_array(blobs, chunks=150), pd.DataFrame(blobs, columns=["a", "b"])):
        np.testing.assert_array_equal(ConsensusClustering(**params).fit_predict(other), model.labels_)
    # the command line's workflow on the same data, seed and parameters, with a store on disk
    np.save(tmp_path / "X.npy", blobs)
    wf = ConsensusClustering(**params, store=str(tmp_path / "run.zarr")).workflow(str(tmp_path / "X.npy"), 7)
    (tmp_path / "wf.yaml").write_text(yaml.safe_dump(wf))
    assert main(["run", str(tmp_path / "wf.yaml"), "--no-progress"]) == 0
    np.testing.assert_array_equal(RunStore(wf["store"], mode="r")["consensus/kcc/labels"][:], model.labels_)


def test_dask_collections_under_a_user_s_client_of_worker_processes(blobs, process_client):
    """A Dask array or data frame is written to this process's memory on its own threads: under the user's
    default Client of worker processes, the workers wrote it into theirs, and the fit (and predict) read an
    empty zarr here as zeros."""
    import warnings

    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd
    from distributed import default_client

    with process_client.as_current():  # the Client a user made last is their default
        assert default_client() is process_client
        params = dict(n_clusters=3, method="kcc", n_clusterings=6, random_state=3)
        model = ConsensusClustering(**params).fit(blobs)
        as_dask = ConsensusClustering(**params).fit(da.from_array(blobs, chunks=150))
        np.testing.assert_array_equal(as_dask.labels_, model.labels_)
        frame = dd.from_pandas(pd.DataFrame(blobs), npartitions=3)  # uneven partitions: rechunked, no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            np.testing.assert_array_equal(model.predict(frame), model.predict(blobs))


def test_a_refit_with_another_method_reuses_the_base_clusterings(blobs, monkeypatch):
    import ensemble_dask.stages.generate as generate

    planned = []
    real = generate.plan_ensemble
    monkeypatch.setattr(generate, "plan_ensemble", lambda *a, **k: planned.append(a) or real(*a, **k))
    model = ConsensusClustering(3, method="pcc-kl", n_clusterings=8, random_state=0).fit(blobs)
    first = model.labels_
    model.set_params(method="bce").fit(blobs)
    assert len(planned) == 1  # generated once
    assert clone(model).get_params() == model.get_params() and not hasattr(clone(model), "store_")
    model.set_params(method="pcc-kl").fit(blobs)
    np.testing.assert_array_equal(model.labels_, first)  # the same seed, the same result


def test_bad_input_is_a_clear_error(blobs):
    with pytest.raises(InputError, match="X must be a 2-d numeric array"):
        ConsensusClustering(3).fit(blobs[:, 0])
    with pytest.raises(InputError, match="'method' parameter must be one of .*got 'kmeans'"):
        ConsensusClustering(3, method="kmeans").fit(blobs)
    with pytest.raises(InputError, match="'n_clusters' parameter of KCC"):
        ConsensusClustering(0, method="kcc", n_clusterings=4).fit(blobs)


def test_predict_labels_new_rows(blobs):
    model = ConsensusClustering(3, method="kcc", n_clusterings=8, random_state=0).fit(blobs)
    # the fitted rows, as new ones: labelled by every base clustering (the fit saw half of them each)
    assert np.mean(model.predict(blobs) == model.labels_) >= 0.98
    assert model.transform(blobs[:7]).shape == (7, 3)
    assert model.set_params(method="pcc-kl").fit(blobs).predict(blobs[:5]).shape == (5,)
    hbgf = model.set_params(method="hbgf").fit(blobs)  # by the nearest centroid of its partition
    assert np.mean(hbgf.predict(blobs) == hbgf.labels_) >= 0.98
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError, match="not fitted yet"):
        ConsensusClustering(3).predict(blobs)


def test_the_graph_method_finds_the_moons_on_an_ensemble_of_small_clusters():
    """``method="graph"`` takes the ensemble it is made for by default (k in [K, sqrt(n)], every row
    labelled), finds two moons that k-means cuts in halves, and labels new rows by its base clusters'
    votes."""
    from sklearn.datasets import make_moons
    from sklearn.metrics import adjusted_rand_score

    from ensemble_dask.io.store import RunStore

    X, y = make_moons(500, noise=0.06, random_state=0)
    model = ConsensusClustering(2, method="graph", random_state=0).fit(X)
    assert adjusted_rand_score(y, model.labels_) > 0.95
    assert model.metrics_["candidate"] in model.metrics_["cuts"]
    gen = RunStore(model.store_, mode="r").record("generate")["params"]
    assert (gen["k_min"], gen["k_max"], gen["extend"]) == (2, "sqrt", True)
    assert (RunStore(model.store_, mode="r")["labels"][:] >= 0).all()
    assert np.mean(model.predict(X) == model.labels_) >= 0.97
    from ensemble_dask.pipeline import _fine_ensemble  # the others keep their ensemble (k near K)

    assert _fine_ensemble({"graph": {}}) and _fine_ensemble({"g2": {"method": "graph"}})
    assert not _fine_ensemble({"pcc-kl": {}}) and not _fine_ensemble({"graph": {}, "bce": {}})


def test_copies_and_other_stores_keep_apart(blobs, tmp_path):
    """A copy of a fitted estimator fits into a store of its own; a failed fit leaves nothing fitted;
    predict refuses another number of columns, as scikit-learn does."""
    import copy

    import dask.dataframe as dd
    import pandas as pd

    model = ConsensusClustering(3, method="kcc", n_clusterings=6, random_state=0).fit(blobs)
    before = model.predict(blobs[:50])
    twin = copy.deepcopy(model).set_params(n_clusters=4).fit(blobs[::-1])
    assert twin.store_ != model.store_ and twin.memberships_.shape[1] == 4
    np.testing.assert_array_equal(model.predict(blobs[:50]), before)  # the original's store is untouched
    assert model.predict(blobs[:5]).dtype == model.labels_.dtype
    with pytest.raises(InputError, match="X has 3 features, but ConsensusClustering is expecting 2"):
        model.predict(np.hstack([blobs[:5], blobs[:5, :1]]))
    frame = pd.DataFrame(blobs, columns=["u", "v"])  # fitted on an array, labels a frame, and a Dask one
    with pytest.warns(UserWarning, match="X has feature names, but ConsensusClustering was fitted without"):
        np.testing.assert_array_equal(model.predict(frame), model.predict(blobs))
        dask_frame = dd.from_pandas(frame, npartitions=3)
        np.testing.assert_array_equal(model.predict(dask_frame), model.predict(blobs))
    fresh = ConsensusClustering(3, method="nope")
    with pytest.raises(InputError, match="'method' parameter"):
        fresh.fit(blobs)
    assert not hasattr(fresh, "store_")
    model.set_params(store=str(tmp_path / "given.zarr")).fit(blobs)
    assert model.store_ == str(tmp_path / "given.zarr")
    model.set_params(store=None).fit(blobs)
    assert model.store_.startswith("memory://")  # not the given store again


def test_a_given_store_that_holds_another_data_set_is_not_wiped(blobs):
    """A user's review: ``ConsensusClustering(store=PATH).fit(X)`` replaced whatever run the store held (its
    consensus results included) with no word. A store the user names is replaced only by the estimator
    whose last fit wrote it."""
    import uuid

    from ensemble_dask.io.store import RunStore

    store = f"memory://given-{uuid.uuid4().hex}.zarr"  # named by the user (in memory: threads, no cluster)
    params = dict(n_clusters=3, method="kcc", n_clusterings=4, random_state=0)
    first = ConsensusClustering(**params, store=store).fit(blobs)
    labels = RunStore(store, mode="r")["consensus/kcc/labels"][:]
    other = blobs[:300] + 1.0
    with pytest.raises(InputError, match="holds"):
        ConsensusClustering(**params, store=store).fit(other)
    np.testing.assert_array_equal(RunStore(store, mode="r")["consensus/kcc/labels"][:], labels)
    from ensemble_dask.pipeline import write_report

    write_report(RunStore(store))  # a report of the old data, beside the zarr nodes
    from ensemble_dask.stages.consensus import UnlabelledRowsWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # zarr warned, listing the store, that 'report' is no zarr node
        warnings.simplefilter("ignore", UnlabelledRowsWarning)  # (4 clusterings of half the rows)
        first.fit(other)  # the store its own last fit wrote: replaced, its report too
    assert RunStore(store, mode="r")["X"].shape[0] == 300 and first.labels_.shape == (300,)
    import fsspec

    assert not fsspec.filesystem("memory").exists(f"{store.removeprefix('memory://')}/report")


def test_a_fit_does_not_replace_a_store_another_estimator_wrote_since(blobs):
    """Review: estimator A fitted X into a named store, B added a kcc result on the same data, and A's fit of
    other data then replaced the store because A's last fit had written it: B's result was deleted."""
    import uuid

    from ensemble_dask.io.store import RunStore

    store = f"memory://shared-{uuid.uuid4().hex}.zarr"
    params = dict(n_clusters=3, n_clusterings=4, random_state=0, store=store)
    a = ConsensusClustering(method="bce", **params).fit(blobs)
    ConsensusClustering(method="kcc", **params).fit(blobs)
    kcc = RunStore(store, mode="r")["consensus/kcc/labels"][:]
    with pytest.raises(InputError, match="holds") as info:
        a.fit(blobs[:300] + 1.0)
    # the estimator's own words: not the data's folder in memory, nor the CLI's option
    assert f"store {store!r} holds another data set than X" in str(info.value)
    assert "input-" not in str(info.value) and "--overwrite" not in str(info.value)
    np.testing.assert_array_equal(RunStore(store, mode="r")["consensus/kcc/labels"][:], kcc)
    a.fit(blobs)  # its own data again: the store's results stay, and a's is current
    assert {"consensus/bce", "consensus/kcc"} <= set(RunStore(store, mode="r").records())


def test_a_fit_that_stopped_or_a_store_removed_does_not_lock_the_estimator_out(blobs, monkeypatch, tmp_path):
    """Review of the rule above: an estimator's own fit that stopped partway changed the records, and its next
    fit (of other data) was refused its own store; a named store removed between fits made the next fit fail
    (it read the records of a store that is no more)."""
    import shutil

    import ensemble_dask.stages.consensus as consensus

    store = str(tmp_path / "s.zarr")
    a = ConsensusClustering(n_clusters=3, method="kcc", n_clusterings=4, random_state=0, store=store).fit(
        blobs
    )

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(consensus, "consensus_stage", stop)
        with pytest.raises(KeyboardInterrupt):
            a.fit(blobs + 1.0)  # ingest and generate ran, the consensus did not
    assert a.fit(blobs[:300] + 2.0).labels_.shape == (300,)
    shutil.rmtree(store)
    assert a.fit(blobs).labels_.shape == (blobs.shape[0],)


def test_a_file_of_other_rows_at_the_same_url_is_refused_in_the_estimators_words(blobs, tmp_path):
    """The same file rewritten with other rows (ingest counts them): refused with the estimator's message, not
    ingest's remedy (the CLI's --overwrite, a workflow's option), and the store keeps its data."""
    import uuid

    from ensemble_dask.io.store import RunStore

    path = tmp_path / "X.npy"
    np.save(path, blobs)
    store = f"memory://url-{uuid.uuid4().hex}.zarr"
    params = dict(n_clusters=3, method="kcc", n_clusterings=4, random_state=0, store=store)
    ConsensusClustering(**params).fit(str(path))
    np.save(path, blobs[:300])
    with pytest.raises(InputError, match=f"store {store!r} holds another data set than X") as info:
        ConsensusClustering(**params).fit(str(path))
    assert "--overwrite" not in str(info.value)
    assert RunStore(store, mode="r")["X"].shape[0] == blobs.shape[0]


def test_new_rows_of_another_width_are_refused_where_columns_are_places(blobs, tmp_path):
    """From a user review: a store ingested from a .npy (columns x0, x1, ...) or a CSV without header (0, 1,
    ...) matched new rows' columns by those names, which are places: a leading id column shifted every
    feature, and predict labelled the rows wrongly, exit 0 (22 % agreement on digits)."""
    np.save(tmp_path / "X.npy", blobs)
    pd.DataFrame(blobs).to_csv(tmp_path / "X.csv", index=False, header=False)
    wide = np.column_stack([np.arange(len(blobs)), blobs])
    np.save(tmp_path / "wide.npy", wide)
    pd.DataFrame(wide).to_csv(tmp_path / "wide.csv", index=False, header=False)
    for ext in ("npy", "csv"):
        model = ConsensusClustering(n_clusters=3, method="kcc", n_clusterings=4, random_state=0)
        model.fit(str(tmp_path / f"X.{ext}"))
        np.testing.assert_array_equal(model.predict(str(tmp_path / f"X.{ext}")), model.predict(blobs))
        with pytest.raises(InputError, match=rf"wide.{ext}: 3 columns, but the store's data set was read by"):
            model.predict(str(tmp_path / f"wide.{ext}"))


def test_new_rows_of_a_data_frame_are_taken_by_the_fitted_column_names(blobs):
    """From a user review: predict took a data frame's columns by place, so the fitted columns in another
    order gave other labels with no word (2.6 % agreement on wine), and feature_names_in_ was never set. They
    are now taken by name, as the CLI takes a table's; other names are an error, no names a warning
    (scikit-learn's rules); one new row is labelled (it was refused: at least 2 samples)."""
    X = pd.DataFrame(blobs, columns=["width", "height"])
    model = ConsensusClustering(n_clusters=3, method="kcc", n_clusterings=4, random_state=0).fit(X)
    assert model.feature_names_in_.tolist() == ["width", "height"]
    labels = model.predict(X)
    np.testing.assert_array_equal(model.predict(X[["height", "width"]]), labels)
    np.testing.assert_array_equal(model.predict(X.iloc[:1]), labels[:1])
    with pytest.raises(InputError, match=r"feature names should match .* unseen at fit time \['depth'\]"):
        model.predict(X.rename(columns={"height": "depth"}))
    with pytest.warns(UserWarning, match="X does not have valid feature names") as record:
        np.testing.assert_array_equal(model.predict(blobs), labels)
    assert record[0].filename == __file__  # (points at the user's call)
    model.fit(blobs)
    assert not hasattr(model, "feature_names_in_")


def test_a_table_s_label_column_is_left_out_and_scores_the_result(blobs, tmp_path):
    """From a user review: fit(url) of a table with a label column clustered the labels as a feature (ARI
    1.0 on iris, from the labels), and the estimator had no way to name them, though its docstring promised
    scores for such a table."""
    y = np.repeat([0, 1, 2], [150, 150, 100])
    path = tmp_path / "X.csv"
    pd.DataFrame({"width": blobs[:, 0], "height": blobs[:, 1], "class": y}).to_csv(path, index=False)
    model = ConsensusClustering(
        n_clusters=3, method="kcc", n_clusterings=4, random_state=0, label_column="class"
    )
    model.fit(str(path))
    assert model.n_features_in_ == 2
    assert "ARI" in model.metrics_
    with pytest.raises(
        InputError, match="'label_column' parameter names a column of a table given by its URL"
    ):
        model.fit(blobs)


def test_the_method_s_own_parameters(blobs):
    """From a user review: the estimator could not pass a method's parameters (the methods guide's advice,
    init: k-means++ for BCE and KCC on digits, was out of reach from Python)."""
    params = dict(n_clusters=3, method="kcc", n_clusterings=4, random_state=0)
    model = ConsensusClustering(**params, method_params={"init": "k-means++"}).fit(blobs)
    assert model.metrics_ and model.workflow("x.npy", 0)["consensus"]["kcc"] == {
        "init": "k-means++",
        "n_clusters": 3,
    }
    with pytest.raises(InputError, match="consensus method 'kcc'.*bogus"):
        ConsensusClustering(**params, method_params={"bogus": 1}).fit(blobs)
    with pytest.raises(InputError, match=r"sets \['n_clusters'\], which are the estimator's own"):
        ConsensusClustering(**params, method_params={"n_clusters": 5}).fit(blobs)


def test_a_categorical_column_is_named(blobs):
    """From a user review: a data frame with a categorical column failed naming a .npy file in memory
    ("is the file truncated or corrupt?")."""
    X = pd.DataFrame({"width": blobs[:, 0], "kind": pd.Categorical(np.where(blobs[:, 1] > 0, "a", "b"))})
    with pytest.raises(InputError, match=r"columns \['kind'\] are not numbers \(categorical\)"):
        ConsensusClustering(n_clusters=3, n_clusterings=4, random_state=0).fit(X)


def test_a_fit_s_warnings_reach_its_caller(blobs):
    """From a user review: the stage's warnings were only logged, so a scikit-learn user's filters and
    ``catch_warnings`` saw nothing. They are warned again in their own category, at the caller's fit."""
    from ensemble_dask.stages.consensus import UnlabelledRowsWarning

    model = ConsensusClustering(n_clusters=3, method="kcc", n_clusterings=3, random_state=0)
    with pytest.warns(UnlabelledRowsWarning, match="rows are in no base clustering") as record:
        model.fit(blobs)  # (3 clusterings of half the rows: an eighth of the rows in none)
    assert any(w.filename == __file__ for w in record)
    with pytest.warns(UnlabelledRowsWarning) as record:
        model.fit_predict(blobs)  # (scikit-learn's, around fit: the warning still points here)
    assert any(w.filename == __file__ for w in record)
    assert any("in no base clustering" in note for note in model.metrics_["warnings"])


def test_predict_uses_the_method_fitted_not_one_set_since(blobs):
    """From the same review: after set_params(method=...) with no new fit, predict labelled with the new
    method's result (when the store held one: labels_ were another's) or failed naming the store in memory."""
    model = ConsensusClustering(n_clusters=3, method="kcc", n_clusterings=4, random_state=0).fit(blobs)
    labels = model.predict(blobs[:50])
    model.set_params(method="bce")
    np.testing.assert_array_equal(model.predict(blobs[:50]), labels)


def test_an_array_of_new_rows_for_a_table_read_by_name(blobs, tmp_path):
    """From the same review: a model fitted on a CSV with a header (or without: columns 0, 1) failed on an
    array of new rows, naming the array's folder in memory and its columns x0, x1. The array's columns are the
    store's, by place."""
    for header in (True, False):
        path = tmp_path / f"X-{header}.csv"
        pd.DataFrame(blobs, columns=["width", "height"]).to_csv(path, index=False, header=header)
        model = ConsensusClustering(n_clusters=3, method="kcc", n_clusterings=4, random_state=0)
        model.fit(str(path))
        np.testing.assert_array_equal(model.predict(blobs[:40]), model.predict(str(path))[:40])
        if header:
            # a review of that change: a data frame was then taken by place, its columns reordered gave other
            # labels (35 % agreement); a table read by name takes a frame's columns by name, as the CLI does
            frame = pd.DataFrame(blobs[:40], columns=["width", "height"])
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # (no word about feature names: the fit had them)
                reordered = model.predict(frame[["height", "width"]])
            np.testing.assert_array_equal(reordered, model.predict(blobs[:40]))
            with pytest.raises(InputError, match="no column"):
                model.predict(frame.rename(columns={"width": "depth"}))
            # a Dask DataFrame by its names too (it was written by place, its columns then x0, x1: refused)
            import dask.dataframe as dd

            lazy = dd.from_pandas(frame[["height", "width"]], npartitions=3)
            np.testing.assert_array_equal(model.predict(lazy), reordered)


def test_the_workflow_of_a_store_named_there_replaces_no_data(blobs, tmp_path):
    """From a user review: ``model.workflow(url, seed, store=PATH)`` of an estimator with no store of its own
    wrote 'overwrite: true' under data: run on an existing store, that workflow replaced its data set."""
    model = ConsensusClustering(n_clusters=3, method="kcc", n_clusterings=4, random_state=0)
    spec = model.workflow(str(tmp_path / "X.npy"), 7, store=str(tmp_path / "run.zarr"))
    assert spec["data"]["overwrite"] is False
    assert model.workflow(str(tmp_path / "X.npy"), 7)["data"]["overwrite"] is True  # its own store in memory


def test_a_store_of_imported_labels_is_refused_in_the_estimators_words(blobs, tmp_path):
    """A review of e7db10c: a fit into a store of labels brought with import-labels was refused naming the
    CLI's --replace-imported and a workflow's key, which the estimator has not."""
    from ensemble_dask.io.store import RunStore
    from ensemble_dask.stages.generate import import_labels

    store = str(tmp_path / "imported.zarr")
    lab = np.random.default_rng(0).integers(0, 3, size=(len(blobs), 4))
    np.save(tmp_path / "lab.npy", lab)
    import_labels(RunStore(store, mode="a"), str(tmp_path / "lab.npy"))
    model = ConsensusClustering(n_clusters=3, method="kcc", n_clusterings=4, random_state=0, store=store)
    with pytest.raises(InputError, match=f"store {store!r} holds base clusterings brought with") as info:
        model.fit(blobs)
    assert "--replace-imported" not in str(info.value)
    np.testing.assert_array_equal(RunStore(store, mode="r")["labels"][:], lab)


def test_a_store_in_memory_goes_with_its_estimator(blobs):
    """Removed at the next fit after the estimator is collected (a finaliser runs in any thread: removing
    the store there raced with a stage listing the memory file system)."""
    import gc

    import fsspec

    model = ConsensusClustering(3, method="kcc", n_clusterings=4, random_state=0).fit(blobs)
    url = model.store_
    fs = fsspec.filesystem("memory")
    assert fs.exists(url)
    del model
    gc.collect()
    assert fs.exists(url)  # not from the finaliser's thread
    ConsensusClustering(3, method="kcc", n_clusterings=4, random_state=0).fit(blobs)
    assert not fs.exists(url)


@parametrize_with_checks([ConsensusClustering(3, n_clusterings=8, random_state=0)])
def test_scikit_learn_s_estimator_checks(estimator, check):
    """scikit-learn's own checks (``check_estimator``), every one of them: the API, input validation and its
    messages, fitted attributes, predict before fit, sample order and subset invariance of predict (on one
    cluster, as four checks set n_clusters=1), and more."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny data sets warn (empty rows, convergence), as they should
        check(estimator)


def test_one_cluster_as_kmeans_gives_it(tmp_path):
    """n_clusters=1 (issue 60, item 10), as KMeans: every row in cluster 0, memberships 1, uncertainty 0;
    predict and transform of new rows likewise, their data checked as for any K; no base clustering made.
    It was refused (every consensus method needs K >= 2), and scikit-learn's four checks that set it were
    declared not applicable."""
    from ensemble_dask.io.store import RunStore

    X, y = make_blobs(60, centers=3, n_features=2, random_state=0)
    model = ConsensusClustering(1, random_state=0).fit(X)
    assert model.labels_.tolist() == [0] * 60
    assert model.memberships_.shape == (60, 1) and (model.memberships_ == 1).all()
    assert (model.uncertainty_ == 0).all() and model.metrics_["effective_k"] == 1
    assert model.predict(X[:7]).tolist() == [0] * 7
    assert model.transform(X[:7]).tolist() == [[1.0]] * 7
    assert "labels" not in RunStore(model.store_, mode="r")  # nothing fitted: no ensemble
    with pytest.raises(InputError, match="X has 3 features, but ConsensusClustering is expecting 2"):
        model.predict(np.zeros((2, 3)))
    with pytest.raises(InputError, match="Input contains NaN"):
        model.predict(np.array([[0.0, np.nan]]))
    # a table with reference labels: scored against them, as any K
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": y}).to_csv(tmp_path / "t.csv", index=False)
    scored = ConsensusClustering(1, label_column="c", random_state=0).fit(str(tmp_path / "t.csv"))
    assert scored.metrics_["ARI"] == 0.0 and scored.predict(str(tmp_path / "t.csv")).tolist() == [0] * 60
    pd.DataFrame({"a": [0.0]}).to_csv(tmp_path / "new.csv", index=False)
    with pytest.raises(InputError, match="no column 'b'"):
        scored.predict(str(tmp_path / "new.csv"))
    with pytest.raises(InputError, match="n_clusters"):
        ConsensusClustering(0, random_state=0).fit(X)


def test_a_fit_on_the_same_file_read_otherwise_keeps_results_it_did_not_make(tmp_path):
    """A user review (2026-12-06): a fit on the file a run had ingested, with another ``standardize``,
    replaced the run's data and deleted its results, where a fit "never deletes results it did not make"."""
    import pandas as pd

    from ensemble_dask.io.store import RunStore
    from ensemble_dask.stages.generate import import_labels
    from ensemble_dask.stages.ingest import ingest

    rng = np.random.default_rng(0)
    pd.DataFrame(rng.normal(size=(60, 3)), columns=["a", "b", "c"]).to_csv(tmp_path / "t.csv", index=False)
    store = RunStore(tmp_path / "r.zarr")
    ingest(store, str(tmp_path / "t.csv"))
    import_labels(store, "mine", labels=rng.integers(0, 3, (60, 4)).astype(np.int32))
    model = ConsensusClustering(3, store=store.url, standardize=False, n_clusterings=4, random_state=0)
    with pytest.raises(InputError, match="results this estimator's last fit did not leave there"):
        model.fit(str(tmp_path / "t.csv"))
    assert store.record("generate")["complete"] and store.record("ingest")["params"]["standardize"] is True


def test_a_table_by_url_takes_the_data_sections_options_and_a_nan_is_placed(tmp_path):
    """A user review (2026-12-06): a table by URL with a text column, or missing values, was told to set
    'categorical' or 'impute', which the estimator did not take; an array's NaN was "Input contains NaN."
    with no place. ``data_params`` takes a workflow's data options; the NaN's row and column are named."""
    import pandas as pd

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(80, 2)), columns=["a", "b"])
    frame["colour"] = rng.choice(["red", "blue"], 80)
    frame.loc[3, "a"] = np.nan
    frame.to_csv(tmp_path / "t.csv", index=False)
    url = str(tmp_path / "t.csv")
    with pytest.raises(InputError, match="line 5: value nan in column 'a'.*set impute: mean .*data_params"):
        ConsensusClustering(2, n_clusterings=4, random_state=0).fit(url)
    with pytest.raises(InputError, match="'colour' .*ConsensusClustering's data_params"):
        ConsensusClustering(2, n_clusterings=4, random_state=0, data_params={"impute": "mean"}).fit(url)
    options = {"categorical": ["colour"], "impute": "mean"}
    model = ConsensusClustering(2, method="kcc", n_clusterings=4, random_state=0, data_params=options)
    model.fit(url)
    assert model.labels_.shape == (80,) and model.n_features_in_ == 3
    with pytest.raises(InputError, match=r"takes keys among \['categorical', .*; got \['standardize'\]"):
        ConsensusClustering(2, data_params={"standardize": False}).fit(url)
    with pytest.raises(InputError, match=r"got \['impute_', 'overwrite'\] \(X, standardize and label_column"):
        ConsensusClustering(2, data_params={"impute_": "mean", "overwrite": True}).fit(url)
    with pytest.raises(InputError, match="'data_params' parameter reads a table given by its URL"):
        ConsensusClustering(2, data_params={"impute": "mean"}).fit(frame[["a", "b"]].to_numpy())
    with pytest.raises(InputError, match=r"contains NaN. \(first at row 3, column 'a'\)"):
        ConsensusClustering(2).fit(frame[["a", "b"]])


_WARNING_FIT = """
import warnings, sys
import numpy as np
from sklearn.datasets import make_blobs
from ensemble_dask import ConsensusClustering
if sys.argv[1] == "ignore":
    warnings.simplefilter("ignore")
X, _ = make_blobs(300, centers=3, random_state=0)
ConsensusClustering(n_clusters=3, method="kcc", n_clusterings=3, random_state=0).fit(X)
"""


@pytest.mark.parametrize("filters", ["default", "ignore"])
def test_a_fit_s_warning_is_printed_once_and_a_filter_silences_it(filters):
    """From the user review (issue 60): each warning of a fit was printed twice, once as a log line that
    ``warnings.simplefilter("ignore")`` could not silence (Python's last resort handler, the library's
    loggers having none) and once as a warning whose text repeated its class ("UnlabelledRowsWarning:
    UnlabelledRowsWarning: ...")."""
    import subprocess
    import sys

    err = subprocess.run(
        [sys.executable, "-c", _WARNING_FIT, filters], capture_output=True, text=True, check=True
    ).stderr
    if filters == "ignore":
        assert err == ""
    else:
        assert err.count("rows are in no base clustering") == 1, err
        assert "UnlabelledRowsWarning: UnlabelledRowsWarning" not in err
        assert "UnlabelledRowsWarning: " in err


def test_ten_fits_on_clean_blobs_write_nothing_to_stderr():
    import subprocess
    import sys

    code = (
        "from sklearn.datasets import make_blobs\nfrom ensemble_dask import ConsensusClustering\n"
        "X, _ = make_blobs(500, centers=3, random_state=0)\n"
        "for i in range(10):\n    ConsensusClustering(3, random_state=i).fit(X)\n"
    )
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stderr == ""
    )


def _tasks_seen(client):
    return client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))


@pytest.mark.parametrize("processes", [False, True])
def test_a_fit_under_an_active_client_runs_its_tasks_there(blobs, processes, monkeypatch):
    """From the user review (issue 60): an active ``distributed.Client`` was ignored with ``client=None``
    (dask-ml and xgboost.dask use it), and ``client=`` without ``store=`` was refused. Its tasks now run on
    the active client's cluster; the estimator's own store is in memory for a cluster of this process, in a
    temporary folder (removed with the estimator) for one of worker processes."""
    import gc
    import os

    from distributed import Client, LocalCluster

    from ensemble_dask.io.own_stores import remove_abandoned
    from ensemble_dask.runtime.clients import active_client

    monkeypatch.setattr("ensemble_dask.estimator.active_client", active_client)

    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=processes, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        assert _tasks_seen(client) == []
        model = ConsensusClustering(n_clusters=3, method="kcc", n_clusterings=12, random_state=0).fit(blobs)
        assert _tasks_seen(client), "no task ran on the active client's cluster"
        alone = ConsensusClustering(n_clusters=3, method="kcc", n_clusterings=12, random_state=0)
    np.testing.assert_array_equal(alone.fit(blobs).labels_, model.labels_)  # the same labels without it
    own = model.store_
    assert own.startswith("memory://") != processes
    del model
    gc.collect()
    remove_abandoned()
    if processes:
        assert not os.path.exists(own)


def test_a_cluster_on_another_machine_needs_a_store():
    from ensemble_dask.io.own_stores import own_store_root

    with pytest.raises(InputError, match="is not on this machine.*give store="):
        own_store_root("tcp://10.0.0.7:8786")
    assert own_store_root("inproc://10.0.0.7/1/2") == "memory://ensemble_dask/"


_PICKLED_PREDICT = """
import sys, joblib
import numpy as np
from sklearn.datasets import make_blobs
X, _ = make_blobs(400, centers=3, random_state=1)
model = joblib.load(sys.argv[1])
np.testing.assert_array_equal(model.predict(X[:60]), np.load(sys.argv[2]))
print(model.store_)
"""


def test_a_model_pickled_in_one_process_predicts_the_same_labels_in_a_new_one(tmp_path):
    """From the user review (issue 60): joblib.dump(model), then load and predict in a new process failed
    with "run store 'memory://ensemble_dask/...zarr' does not exist". A model fitted with its store in memory
    now carries the store in its pickle."""
    import subprocess
    import sys

    import joblib

    X, _ = make_blobs(400, centers=3, random_state=1)
    fitted = ConsensusClustering(n_clusters=3, method="kcc", random_state=0).fit(X)
    model, labels = tmp_path / "model.joblib", tmp_path / "labels.npy"
    joblib.dump(fitted, model)
    np.save(labels, fitted.predict(X[:60]))
    out = subprocess.run(
        [sys.executable, "-c", _PICKLED_PREDICT, model, labels], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("memory://ensemble_dask/")

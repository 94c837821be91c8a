import re

import numpy as np
import pandas as pd
import pytest

from ensemble_dask import InputError
from ensemble_dask.io.store import RunStore
from ensemble_dask.metrics import h_criterion
from ensemble_dask.partitions.clusterers import ALGORITHMS, plan_ensemble, run_clustering, subsample_of
from ensemble_dask.stages.generate import base_partition_scores, generate, import_labels
from ensemble_dask.stages.ingest import ingest


@pytest.fixture
def kdd_store(kdd_sample, tmp_path):
    store = RunStore(tmp_path / "run.zarr")
    ingest(store, str(kdd_sample), schema="kdd99", classes=["smurf", "neptune", "normal"], subset=2000)
    return store


def test_plan_is_seeded_and_prefix_stable():
    a = plan_ensemble(1000, 20, rate=0.5, seed=7)
    b = plan_ensemble(1000, 30, rate=0.5, seed=7)
    assert a == b[:20]
    assert plan_ensemble(1000, 30, rate=0.5, seed=7, start=20) == b[20:]
    assert a != plan_ensemble(1000, 20, rate=0.5, seed=8)
    assert {p["algorithm"] for p in a} == {"kmeans"}
    assert all(2 <= p["k"] <= 10 for p in a)


def test_type2_mixes_algorithms_where_the_subsample_allows():
    small = plan_ensemble(500, 60, ensemble="type2", k_min=2, k_max=6, seed=0)
    assert {p["algorithm"] for p in small} == set(ALGORITHMS)
    big = plan_ensemble(100_000, 20, ensemble="type2", rate=0.5, seed=0)
    assert {p["algorithm"] for p in big} == {"kmeans"}


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_each_algorithm_finds_separated_blobs(algorithm):
    rng = np.random.default_rng(0)
    centers = np.array([[0, 0], [10, 0], [0, 10]])
    y = np.repeat(np.arange(3), 40)
    x = centers[y] + rng.normal(scale=0.5, size=(120, 2))
    labels = run_clustering(x, {"algorithm": algorithm, "k": 3, "seed": 1})
    assert labels.dtype == np.int32 and labels.max() == 2
    assert h_criterion(labels, y) == 1.0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(rate=0.0), r"'rate' parameter must be in \(0, 1\]; got 0.0"),
        (dict(rate=1.5), r"'rate' parameter must be in \(0, 1\]; got 1.5"),
        (dict(k_min=5, k_max=3), "k_min=5 must be <= k_max=3"),
        (dict(k_min=1), r"'k_min' parameter must be >= 2; got 1"),
        (dict(k_max=80, rate=0.1), "k_max=80 is larger than a subsample of 50 points"),
        (
            dict(ensemble="type2", algorithms=["kmeans", "dbscan"]),
            r"'algorithms' parameter takes names among \['average'.* got 'dbscan'",
        ),
        (dict(ensemble="type3"), "'ensemble' parameter must be one of"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(InputError, match=match):
        plan_ensemble(500, 10, **kwargs)


def test_generate_writes_labels(kdd_store, client):
    info = generate(kdd_store, client, n_clusterings=12, rate=0.5, k_min=2, k_max=6, seed=3)
    assert info == {"n_clusterings": 12, "k_min": 2, "k_max": 6, "computed": 12, "skipped": False} | {
        "outdated": []
    }
    labels = kdd_store["labels"]
    assert labels.shape == (2000, 12) and labels.chunks == (2000, 1)
    lab = labels[:]
    assert (lab == -1).sum() == 12 * 1000
    meta = labels.attrs["partitions"]
    for u, m in enumerate(meta):
        assert m["index"] == u and m["algorithm"] == "kmeans"
        idx = subsample_of(m, 2000)
        assert (lab[idx, u] >= 0).all() and lab[:, u].max() + 1 == m["n_clusters_found"] <= m["k"]
    scores = base_partition_scores(kdd_store)
    assert 0.5 < scores["H"]["mean"] <= 1.0
    assert generate(kdd_store, client, n_clusterings=12, rate=0.5, k_min=2, k_max=6, seed=3)["skipped"]


def _x_cache_size():
    from ensemble_dask.stages import generate as g

    return len(g._X_CACHE)


def test_labels_do_not_depend_on_workers_or_scheduler(kdd_sample, tmp_path, client, process_client):
    from distributed import Client, LocalCluster

    results = []
    for name, c in [("threads", client), ("processes", process_client)]:
        store = RunStore(tmp_path / f"{name}.zarr")
        ingest(store, str(kdd_sample), schema="kdd99", subset=1500)
        generate(store, c, n_clusterings=8, ensemble="type2", rate=0.6, k_min=2, k_max=5, seed=11)
        results.append(store["labels"][:])
        # the workers keep no copy of X once the stage is done (the co-association comes next)
        assert set(c.run(_x_cache_size).values()) == {0}
    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cl, Client(cl) as one:
        store = RunStore(tmp_path / "one.zarr")
        ingest(store, str(kdd_sample), schema="kdd99", subset=1500)
        generate(store, one, n_clusterings=8, ensemble="type2", rate=0.6, k_min=2, k_max=5, seed=11)
        results.append(store["labels"][:])
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])


def test_extending_the_ensemble_computes_only_new_columns(kdd_store, client, tmp_path, kdd_sample):
    generate(kdd_store, client, n_clusterings=5, rate=0.5, seed=2)
    first = kdd_store["labels"][:]
    info = generate(kdd_store, client, n_clusterings=9, rate=0.5, seed=2)
    assert info["computed"] == 4
    full = RunStore(tmp_path / "full.zarr")
    ingest(full, str(kdd_sample), schema="kdd99", classes=["smurf", "neptune", "normal"], subset=2000)
    generate(full, client, n_clusterings=9, rate=0.5, seed=2)
    np.testing.assert_array_equal(kdd_store["labels"][:], full["labels"][:])
    np.testing.assert_array_equal(kdd_store["labels"][:, :5], first)
    assert len(kdd_store["labels"].attrs["partitions"]) == 9


def test_an_interrupted_growth_keeps_the_columns_it_grew_from(
    kdd_store, client, tmp_path, kdd_sample, monkeypatch
):
    """A growth that failed part way unmarked the record, and the next run computed every column again. It
    keeps the completed ensemble's columns (stamped, and each matching its hash): the same labels as at once;
    a column changed since is not trusted, and every column is computed."""
    from ensemble_dask.stages import generate as gen

    generate(kdd_store, client, n_clusterings=5, rate=0.5, seed=2)
    full = RunStore(tmp_path / "full.zarr")
    ingest(full, str(kdd_sample), schema="kdd99", classes=["smurf", "neptune", "normal"], subset=2000)
    generate(full, client, n_clusterings=9, rate=0.5, seed=2)
    task = gen._cluster_task

    def failing(url, options, ingest_hash, specs):
        if specs[-1]["index"] == 8:
            raise RuntimeError("worker lost")
        return task(url, options, ingest_hash, specs)

    monkeypatch.setattr(gen, "_cluster_task", failing)  # (a cluster of threads: the workers see it)
    with pytest.raises(RuntimeError, match="worker lost"):
        generate(kdd_store, client, n_clusterings=9, rate=0.5, seed=2)
    monkeypatch.setattr(gen, "_cluster_task", task)
    assert kdd_store.record("generate") is None
    info = generate(kdd_store, client, n_clusterings=9, rate=0.5, seed=2)
    assert info["computed"] == 4
    np.testing.assert_array_equal(kdd_store["labels"][:], full["labels"][:])
    assert kdd_store.stage_hash("generate") == full.stage_hash("generate")
    # interrupted again, with one kept column changed meanwhile: nothing is kept
    generate(kdd_store, client, n_clusterings=5, rate=0.5, seed=2)
    monkeypatch.setattr(gen, "_cluster_task", failing)
    with pytest.raises(RuntimeError, match="worker lost"):
        generate(kdd_store, client, n_clusterings=9, rate=0.5, seed=2)
    monkeypatch.setattr(gen, "_cluster_task", task)
    labels = kdd_store["labels"]
    labels[0, 2] = labels[0, 2] + 1
    assert generate(kdd_store, client, n_clusterings=9, rate=0.5, seed=2)["computed"] == 9
    np.testing.assert_array_equal(kdd_store["labels"][:], full["labels"][:])


def test_failed_generate_is_not_marked_complete(kdd_store, client):
    with pytest.raises(InputError, match="k_max=1500 is larger than a subsample of 1000"):
        generate(kdd_store, client, n_clusterings=3, rate=0.5, k_max=1500)
    assert kdd_store.record("generate") is None


def test_generate_needs_ingest(tmp_path, client):
    with pytest.raises(InputError, match="stage 'ingest' has not completed"):
        generate(RunStore(tmp_path / "empty.zarr"), client, n_clusterings=3)


def test_import_labels(kdd_store, tmp_path):
    rng = np.random.default_rng(0)
    lab = rng.integers(-1, 4, size=(2000, 6))
    np.save(tmp_path / "lab.npy", lab)
    import_labels(kdd_store, str(tmp_path / "lab.npy"))
    np.testing.assert_array_equal(kdd_store["labels"][:], lab)
    np.save(tmp_path / "short.npy", lab[:10])
    with pytest.raises(InputError, match="n=10 points but run store .* n=2000") as err:
        import_labels(kdd_store, str(tmp_path / "short.npy"))
    assert str(err.value).endswith("; use another store")  # (it offered overwrite=True, which it has not)
    # review: pandas' to_csv index, imported as a partition that puts every point apart
    pd_index = np.column_stack([np.arange(2000), lab[:, 0]])
    np.save(tmp_path / "index.npy", pd_index)
    with pytest.raises(InputError, match="column 0 puts each of its 2000 points in a cluster of its own"):
        import_labels(kdd_store, str(tmp_path / "index.npy"))
    bad = lab.copy()
    bad[3, 2] = -5
    np.save(tmp_path / "bad.npy", bad)
    with pytest.raises(InputError, match="got -5 at row 3, column 2"):
        import_labels(kdd_store, str(tmp_path / "bad.npy"))
    np.testing.assert_array_equal(kdd_store["labels"][:], lab)


def test_imported_labels_are_not_generated_over_unless_asked(kdd_store, kdd_sample, tmp_path, client, capsys):
    """From a user review: `generate` (or a workflow with a generate: section) replaced partitions brought
    with import-labels with no word, where the guide says they are never generated over."""
    from ensemble_dask import pipeline
    from ensemble_dask.cli import main

    lab = np.random.default_rng(0).integers(0, 4, size=(2000, 6))
    np.save(tmp_path / "lab.npy", lab)
    import_labels(kdd_store, str(tmp_path / "lab.npy"))
    with pytest.raises(InputError, match="holds 6 base clusterings brought with import-labels"):
        generate(kdd_store, client, n_clusterings=3, seed=1)
    assert main(["generate", "--store", kdd_store.url, "-N", "3"]) == 2
    assert "--replace-imported" in capsys.readouterr().err
    classes = ["smurf", "neptune", "normal"]
    data = {"url": str(kdd_sample), "schema": "kdd99", "classes": classes, "subset": 2000}
    spec = {"store": kdd_store.url, "data": data, "generate": {"n_clusterings": 3}}  # (ingest: up to date)
    with pytest.raises(InputError, match="brought with import-labels"):
        pipeline.run_workflow(spec, report=False)
    np.testing.assert_array_equal(kdd_store["labels"][:], lab)  # all three left them
    with pytest.raises(InputError, match="'replace_imported' must be true or false; got 'yes'"):
        pipeline.run_workflow({**spec, "generate": {"n_clusterings": 3, "replace_imported": "yes"}})
    generate(kdd_store, client, n_clusterings=3, seed=1, replace_imported=True)
    assert kdd_store["labels"].shape == (2000, 3)


def test_workers_never_cluster_a_stale_x(kdd_sample, tmp_path, client):
    """Workers keep the last X they read; a re-ingested X (new ingest hash) is read afresh."""
    store = RunStore(tmp_path / "run.zarr")
    ingest(store, str(kdd_sample), schema="kdd99", subset=900, seed=0)
    generate(store, client, n_clusterings=3, seed=1)
    ingest(store, str(kdd_sample), schema="kdd99", subset=900, seed=1, overwrite=True)  # same n, other rows
    generate(store, client, n_clusterings=3, seed=1)
    fresh = RunStore(tmp_path / "fresh.zarr")
    ingest(fresh, str(kdd_sample), schema="kdd99", subset=900, seed=1)
    generate(fresh, client, n_clusterings=3, seed=1)
    np.testing.assert_array_equal(store["labels"][:], fresh["labels"][:])


def test_algorithms_are_checked_for_every_ensemble_type():
    with pytest.raises(InputError, match="got 'bogus'"):
        plan_ensemble(100, 2, algorithms=["bogus"])
    with pytest.raises(InputError, match="'algorithms' parameter applies to ensemble='type2'"):
        plan_ensemble(100, 2, algorithms=["ward"])


def test_default_k_range_follows_the_k_asked():
    from ensemble_dask.stages.generate import default_k_range, generate_params

    assert default_k_range() == (2, 10) == default_k_range(3) == default_k_range(5)
    assert default_k_range(8) == (4, 16) and default_k_range(31) == (15, 62)
    p = generate_params(n_clusters=31)
    assert (p["k_min"], p["k_max"]) == (15, 62) and "n_clusters" not in p
    # an explicit range wins, and the parameters (the stage's identity) are those of the old defaults
    assert generate_params(n_clusters=31, k_min=2, k_max=10) == generate_params()
    with pytest.raises(InputError, match="n_clusters"):
        default_k_range(1)


def test_a_labels_csv_with_a_header_and_nan_in_an_array(tmp_path):
    """import-labels read a CSV as headerless: names ``p0,p1,...`` failed with "got dtype object", numbers
    ``0,1,...`` became a point; and NaN in a .npy became -1 (absent) silently. A header is guessed (or
    said), text names its line, and NaN is absent only as an empty CSV field."""
    from ensemble_dask.stages.generate import import_labels, read_labels_table

    lab = np.random.default_rng(0).integers(0, 3, (12, 4))
    lab[5, 2] = -1
    np.save(tmp_path / "lab.npy", lab)
    expected = read_labels_table(str(tmp_path / "lab.npy"))
    names = tmp_path / "names.csv"
    pd.DataFrame(lab, columns=[f"p{j}" for j in range(4)]).to_csv(names, index=False)
    np.testing.assert_array_equal(read_labels_table(str(names)), expected)
    with pytest.raises(
        InputError, match=r"names.csv, line 1: 'p0' in column 0 is no cluster id \(if the first"
    ):
        read_labels_table(str(names), header=False)
    numbers = tmp_path / "numbers.csv"
    pd.DataFrame(lab).to_csv(numbers, index=False)  # "0,1,2,3" above integers: a header, or a point?
    with pytest.raises(InputError, match=r"numbers.csv: the first line \('0,1,2,3'\) numbers the columns"):
        read_labels_table(str(numbers))
    np.testing.assert_array_equal(read_labels_table(str(numbers), header=True), expected)
    assert read_labels_table(str(numbers), header=False).shape == (13, 4)
    (tmp_path / "gap.csv").write_text("0,1\n1,\n0,0\n1,1\n")  # an empty field: absent
    np.testing.assert_array_equal(
        read_labels_table(str(tmp_path / "gap.csv")), [[0, 1], [1, -1], [0, 0], [1, 1]]
    )
    (tmp_path / "semi.txt").write_text("0;1\n1;0\n0;0\n")  # the library's import takes sep= as well
    store = RunStore(tmp_path / "semi.zarr")
    import_labels(store, str(tmp_path / "semi.txt"), sep=";")
    np.testing.assert_array_equal(store["labels"][:], [[0, 1], [1, 0], [0, 0]])
    (tmp_path / "text.csv").write_text("0,1\n1,x\n0,0\n")
    with pytest.raises(InputError, match=r"text.csv, line 2: 'x' in column 1 is no cluster id$"):
        read_labels_table(str(tmp_path / "text.csv"))
    holes = lab.astype(float)
    holes[7, 3] = np.nan
    np.save(tmp_path / "holes.npy", holes)
    with pytest.raises(InputError, match=r"labels in '.*holes.npy' .* got nan at row 7, column 3"):
        read_labels_table(str(tmp_path / "holes.npy"))


def test_a_k_range_the_user_did_not_give_is_named_by_the_k_that_set_it(tmp_path, client):
    """A user review (2026-12-06): ``generate --n-clusters 50`` on 10 rows said "k_max=100 is larger than a
    subsample of 10 points", of a k_max the user never gave."""
    store = RunStore(tmp_path / "s.zarr")
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(8, 2)))
    ingest(store, str(tmp_path / "x.npy"))
    rows = r"a subsample of 8 points \(n=8, rate=1.0\)"
    hint = r"n_clusters=50 sets k_max=100: give a smaller n_clusters, or k_max$"
    with pytest.raises(InputError, match=rf"k_max=100 is larger than {rows}; {hint}"):
        generate(store, client, n_clusters=50)
    with pytest.raises(InputError, match=r"k_min=25 must be <= k_max=6; n_clusters=50 sets k_min=25: .*"):
        generate(store, client, n_clusters=50, k_max=6)
    with pytest.raises(InputError, match=rf"k_max=10 is larger than {rows}$"):
        generate(store, client, n_clusters=3)  # any K up to 5 sets [2, 10]: no smaller K helps
    with pytest.raises(InputError, match=rf"k_max=50 is larger than {rows}$"):
        generate(store, client, n_clusters=50, k_max=50)


def test_a_fine_ensemble_draws_k_up_to_the_square_root_and_labels_every_row(kdd_store, client):
    """``k_max: sqrt`` and ``extend``: many small clusters, and a row outside a clustering's subsample gets
    the cluster of the nearest centre (mean of the subsample's members) instead of -1."""
    from ensemble_dask.partitions.models import ClusterCenters, nearest_centers

    plans = plan_ensemble(2000, 30, k_min=3, k_max="sqrt", rate=0.5, seed=1, extend=True)
    ks = [p["k"] for p in plans]
    assert 3 <= min(ks) and max(ks) <= 44 < 2 * max(ks) and all(p["extend"] for p in plans)
    assert {p["k"] for p in plan_ensemble(10, 5, k_min=3, k_max="sqrt", rate=0.5)} == {3}  # floor(sqrt(10))
    info = generate(
        kdd_store, client, n_clusterings=6, rate=0.5, k_max="sqrt", n_clusters=4, extend=True, seed=3
    )
    assert info == {"n_clusterings": 6, "k_min": 2, "k_max": 44, "computed": 6, "skipped": False} | {
        "outdated": []
    }
    lab = kdd_store["labels"][:]
    assert (lab >= 0).all()
    X = kdd_store["X"][:]
    for u, spec in enumerate(kdd_store["labels"].attrs["partitions"]):
        idx = subsample_of(spec, 2000)
        out = np.setdiff1d(np.arange(2000), idx)
        acc = ClusterCenters(1, X.shape[1])
        acc.add(X[idx], lab[idx, u][:, None])
        assert np.array_equal(nearest_centers(X[out], acc.centers)[:, 0], lab[out, u])
    assert kdd_store.record("generate")["params"]["extend"] is True


def test_the_fine_defaults_follow_the_k_asked_and_old_records_keep_their_identity():
    from ensemble_dask.stages.generate import generate_params

    p = generate_params(n_clusters=7, fine=True)
    assert (p["k_min"], p["k_max"], p["extend"], p["max_rows"]) == (7, "sqrt", True, 20_000)
    assert "extend" not in generate_params(n_clusters=7) and "fine" not in p
    assert "max_rows" not in generate_params(n_clusters=7)
    assert generate_params(n_clusters=7, fine=True, extend=False, k_min=3, k_max=14) == {
        **generate_params(n_clusters=7),
        "max_rows": 20_000,
    }
    with pytest.raises(InputError, match="'k_max' parameter must be an integer or 'sqrt'; got 'root'"):
        plan_ensemble(100, 2, k_max="root")
    with pytest.raises(InputError, match="'extend' parameter takes true or false; got 'yes'"):
        generate_params(extend="yes")


def test_a_workflow_takes_k_max_sqrt_and_extend_and_names_a_bad_value():
    from ensemble_dask._workflow_checks import validate_workflow

    spec = {"data": {"url": "synthetic:kdd99?n=600"}, "consensus": {"graph": {"n_clusters": 3}}}
    validate_workflow({**spec, "generate": {"k_min": 3, "k_max": "sqrt", "extend": True}})
    validate_workflow({**spec, "generate": {"k_min": 5, "k_max": "sqrt", "rate": 0.3}})
    with pytest.raises(InputError, match="'generate'.*'k_max' parameter must be an integer or 'sqrt'"):
        validate_workflow({**spec, "generate": {"k_max": "root"}})
    with pytest.raises(InputError, match="section 'generate'.*'extend' parameter takes true or false"):
        validate_workflow({**spec, "generate": {"extend": "yes"}})


def test_max_rows_cuts_each_subsample_and_extend_labels_the_rest(kdd_store, client):
    """``max_rows``: a base clustering's subsample holds at most that many rows, so its cost stops growing
    with the data (graph's ensemble: 20,000); with ``extend`` every other row gets its nearest centre. Not
    given, the plans are those of before it (no key), and so are the stores made then."""
    from ensemble_dask._workflow_checks import validate_workflow

    plans = plan_ensemble(2000, 4, k_min=3, k_max="sqrt", rate=0.5, seed=1, extend=True, max_rows=300)
    assert {p["m"] for p in plans} == {300} and {p["max_rows"] for p in plans} == {300}
    assert max(p["k"] for p in plans) <= 44  # floor(sqrt(2000)): k counts the rows, not the subsample
    assert all(len(subsample_of(p, 2000)) == 300 for p in plans)
    assert "max_rows" not in plan_ensemble(2000, 2, rate=0.5)[0]
    unset = plan_ensemble(2000, 3, k_max="sqrt", rate=0.5, seed=1, extend=True)
    wide = plan_ensemble(2000, 3, k_max="sqrt", rate=0.5, seed=1, extend=True, max_rows=5000)
    assert [{k: v for k, v in p.items() if k != "max_rows"} for p in wide] == unset  # not binding: same draws
    info = generate(kdd_store, client, n_clusterings=4, rate=0.5, k_max=8, extend=True, max_rows=300, seed=3)
    assert info["computed"] == 4 and (kdd_store["labels"][:] >= 0).all()
    assert kdd_store.record("generate")["params"]["max_rows"] == 300
    with pytest.raises(InputError, match=r"k_max=50 is larger than a subsample of 40 points .*max_rows=40"):
        plan_ensemble(2000, 2, k_max=50, rate=0.5, max_rows=40)
    spec = {"data": {"url": "synthetic:kdd99?n=600"}, "consensus": {"graph": {"n_clusters": 3}}}
    with pytest.raises(InputError, match="section 'generate'.*'max_rows'"):
        validate_workflow({**spec, "generate": {"max_rows": 1}})


def test_k_max_sqrt_stops_growing_at_the_graph_s_sample():
    from ensemble_dask.partitions.clusterers import SQRT_ROWS, resolve_k_max

    assert resolve_k_max(10_000, 2, "sqrt") == 100 and resolve_k_max(SQRT_ROWS, 2, "sqrt") == 141
    assert resolve_k_max(5_000_000, 2, "sqrt") == 141 and resolve_k_max(5_000_000, 300, "sqrt") == 300
    assert resolve_k_max(100, 2, "sqrt", rate=0.05) == 5  # at most a subsample's points


def test_new_base_clusterings_name_the_results_they_outdate_and_a_result_up_to_date_says_so(
    kdd_store, client, capsys
):
    """A user's day: generate again with new settings left every consensus result out of date and said
    nothing; a repeated consensus command did not say it was up to date; what graph kept was not printed."""
    from ensemble_dask.cli import main

    generate(kdd_store, client, n_clusterings=6, rate=0.5, k_max="sqrt", n_clusters=3, extend=True, seed=3)
    url = str(kdd_store.url)
    assert main(["consensus", "graph", "--store", url, "--n-clusters", "3"]) == 0
    first = capsys.readouterr().out
    assert "up to date" not in first and re.search(r"\ngraph \((genie-ca|genie-weighted|spectral)\) ", first)
    assert main(["consensus", "graph", "--store", url, "--n-clusters", "3"]) == 0
    assert "consensus graph: up to date (fitted 20" in capsys.readouterr().out
    info = generate(kdd_store, client, n_clusterings=6, rate=0.5, k_min=2, k_max=5, seed=3)
    assert info["outdated"] == ["graph"]
    assert generate(kdd_store, client, n_clusterings=6, rate=0.5, k_min=2, k_max=5, seed=3)["outdated"] == []

import warnings

import numpy as np
import pytest

from ensemble_dask import InputError
from ensemble_dask.io.store import RunStore
from ensemble_dask.pipeline import apply_overrides, run_workflow, validate_workflow


def test_memory_store_runs_on_an_embedded_cluster_of_threads():
    spec = {
        "seed": 5,
        "store": "memory://pipeline-demo",
        "dask": {"n_workers": 2},
        "data": {"url": "synthetic:blobs?n=600&d=3&centers=3&seed=2"},
        "generate": {"n_clusterings": 5, "k_min": 2, "k_max": 4, "rate": 0.8},
    }
    report = run_workflow(spec)
    assert report["dataset"]["n"] == 600
    assert report["base_partitions"]["H"]["max"] > 0.9
    lab = RunStore("memory://pipeline-demo")["labels"][:]
    assert lab.shape == (600, 5) and np.isclose((lab == -1).mean(), 0.2)


def test_memory_store_refuses_an_external_scheduler():
    spec = {
        "store": "memory://x",
        "scheduler": "tcp://127.0.0.1:1",
        "data": "synthetic:blobs?n=50",
        "generate": {},
    }
    with pytest.raises(InputError, match="lives in this process's memory"):
        run_workflow(spec)


def test_overrides():
    spec = {"data": {"url": "a.csv"}, "generate": {"n_clusterings": 3}}
    out = apply_overrides(spec, ["generate.rate=0.5", "generate.algorithms=[kmeans, ward]"], data="b.csv")
    assert out["generate"] == {"n_clusterings": 3, "rate": 0.5, "algorithms": ["kmeans", "ward"]}
    assert out["data"]["url"] == "b.csv" and spec["data"]["url"] == "a.csv"
    with pytest.raises(InputError, match="--set expects key=value"):
        apply_overrides(spec, ["generate.rate"])


def _spec(store, **consensus):
    return {
        "seed": 1,
        "store": store,
        "dask": {"n_workers": 2},
        "data": {"url": "synthetic:blobs?n=800&d=6&centers=3&seed=3"},
        "generate": {"n_clusterings": 10, "k_min": 2, "k_max": 6, "rate": 0.5},
        "coassoc": {"strategy": "per-point", "l": 15},
        "consensus": consensus,
    }


@pytest.mark.slow
def test_consensus_methods_end_to_end():
    store_url = "memory://pipeline-consensus"
    report = run_workflow(
        _spec(
            store_url, **{"pcc-kl": {"n_clusters": 3}, "pcc-l2": {"n_clusters": 3}, "ppc": {"n_clusters": 3}}
        )
    )
    store = RunStore(store_url)
    assert set(report["methods"]) == {"pcc-kl", "pcc-l2", "ppc"}
    for name, m in report["methods"].items():
        assert set(m) >= {"H", "ARI", "NMI", "effective_k", "seconds", "objective"}
        Y = store[f"consensus/{name}/Y"][:]
        assert Y.shape == (800, 3) and np.allclose(Y.sum(1), 1, atol=1e-5)
        np.testing.assert_array_equal(store[f"consensus/{name}/labels"][:], Y.argmax(1))
        u = store[f"consensus/{name}/uncertainty"][:]
        assert ((u >= 0) & (u <= 1)).all()
    assert report["methods"]["pcc-kl"]["H"] > max(0.95, report["base_partitions"]["H"]["mean"])
    assert store["consensus/pcc-l2"].attrs["params"]["divergence"] == "l2"
    # half of the entries are missing: some stored pairs were never co-present, and are skipped
    assert (store["pairs/both"][:] == 0).any()


@pytest.mark.slow
def test_stale_results_leave_the_report():
    store_url = "memory://pipeline-stale"
    run_workflow(_spec(store_url, **{"pcc-kl": {"n_clusters": 3}}))
    spec = _spec(store_url, **{"pcc-l2": {"n_clusters": 3}})
    spec["coassoc"]["l"] = 10  # new pairs: the old pcc-kl result no longer matches them
    report = run_workflow(spec)
    assert set(report["methods"]) == {"pcc-l2"}


def test_unknown_consensus_method():
    with pytest.raises(InputError, match="unknown method 'pcx'"):
        run_workflow(_spec("memory://pipeline-bad", pcx={}))
    with pytest.raises(InputError, match="n_clusters"):
        run_workflow(_spec("memory://pipeline-bad2", **{"pcc-kl": {"n_clusters": 0}}))
    assert RunStore("memory://pipeline-bad2").record("consensus/pcc-kl") is None


@pytest.mark.slow
def test_bayesian_methods_end_to_end():
    store_url = "memory://pipeline-bce"
    methods = {
        "bce": {"n_clusters": 3},
        "mm": {"n_clusters": 3, "n_init": 5},
        "gbce": {"n_clusters": 3},
        "bce-local": {"method": "bce", "n_clusters": 3},
    }
    spec = _spec(store_url, **methods)
    del spec["coassoc"]
    # on the z-scores of the blobs: GBCE's single random start ended at H 0.595 there, where BCE and MM reach
    # 0.995; its spectral start (issue 28) is theirs
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # recorded as 'converged' with the result
        report = run_workflow(spec)
    store = RunStore(store_url)
    assert set(report["methods"]) == set(methods)
    for name, m in report["methods"].items():
        assert m["H"] > max(0.9, report["base_partitions"]["H"]["mean"]), name
        Y = store[f"consensus/{name}/Y"][:]
        assert Y.shape == (800, 3) and np.allclose(Y.sum(1), 1, atol=1e-5)
    beta = store["consensus/bce/beta"]
    assert beta.shape[0] == 3 and beta.attrs["offsets"][-1] == beta.shape[1]
    assert store["consensus/bce/alpha"].shape == (3,)
    # labels that fit in memory: BCE runs in this process, from its seeded k-means++ start
    from ensemble_dask.consensus.bce import BCE

    params = store["consensus/bce"].attrs["params"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        local = BCE(3, random_state=params["random_state"]).fit(store["labels"][:])
    assert store["consensus/bce"].attrs["converged"] == local.converged_
    assert store["consensus/bce"].attrs["metrics"]["converged"] == local.converged_
    np.testing.assert_allclose(store["consensus/bce/Y"][:], local.memberships_, atol=1e-5)


@pytest.mark.slow
def test_large_labels_run_bce_on_the_cluster(monkeypatch):
    """Above DASK_LABELS_BYTES the E-step runs on the workers' row blocks: with init: random, the same fit
    as in memory from the same random starts (at least 5 of them)."""
    from sklearn.exceptions import ConvergenceWarning

    from ensemble_dask.consensus.bce import BCE
    from ensemble_dask.stages import consensus as stage

    monkeypatch.setattr(stage, "DASK_LABELS_BYTES", 0)
    store_url = "memory://pipeline-bce-dask"
    spec = _spec(
        store_url, bce={"n_clusters": 3, "max_iter": 15, "init": "random"}
    )  # a few EM rounds keep the test short
    del spec["coassoc"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        run_workflow(spec)
        store = RunStore(store_url)
        params = store["consensus/bce"].attrs["params"]
        local = BCE(3, init="random", n_init=5, max_iter=15, random_state=params["random_state"])
        local.fit(store["labels"][:])
    assert store["consensus/bce"].attrs["converged"] == local.converged_
    np.testing.assert_allclose(store["consensus/bce/Y"][:], local.memberships_, atol=1e-5)


@pytest.mark.slow
def test_bad_consensus_parameters_keep_the_previous_result():
    store_url = "memory://pipeline-keep"
    run_workflow(_spec(store_url, **{"pcc-kl": {"n_clusters": 3}}))
    with pytest.raises(InputError, match="n_clusters"):
        run_workflow(_spec(store_url, **{"pcc-kl": {"n_clusters": 10_000}}))
    store = RunStore(store_url)
    assert store.record("consensus/pcc-kl")["complete"]
    assert store["consensus/pcc-kl/Y"].shape == (800, 3)


def test_strategy_override_replaces_the_strategy_parameters(caplog):
    """Before: --set coassoc.strategy=per-point on a workflow with p failed with "Unknown parameter(s)
    ['p']"."""
    spec = {"data": {"url": "a.csv"}, "coassoc": {"strategy": "uniform", "p": 0.01, "block_size": 512}}
    with caplog.at_level("WARNING", logger="ensemble_dask.pipeline"):
        out = apply_overrides(spec, ["coassoc.strategy=per-point"])
    assert out["coassoc"] == {"strategy": "per-point", "block_size": 512}
    assert "dropped ['p'], the parameter(s) of strategy 'uniform'; 'per-point' takes ['l']" in caplog.text
    # a parameter given with the new strategy stays, whatever the order; a section without strategy is uniform
    out = apply_overrides(spec, ["coassoc.l=7", "coassoc.strategy=cocluster", "coassoc.fraction=0.25"])
    assert out["coassoc"] == {"strategy": "cocluster", "l": 7, "fraction": 0.25, "block_size": 512}
    out = apply_overrides({"data": "a.csv", "coassoc": {"p": 0.1}}, ["coassoc.strategy=full"])
    assert out["coassoc"] == {"strategy": "full"}
    # the same keys in the workflow file itself: the error says how to switch
    with pytest.raises(
        InputError, match=r"unknown key\(s\) \['p'\] for strategy 'per-point'.*override drops them"
    ):
        validate_workflow({"data": {"url": "a.csv"}, "coassoc": {"strategy": "per-point", "p": 0.1}})


@pytest.mark.parametrize(
    "section, value, match",
    [
        (
            "generate",
            {"rate": "abc"},
            r"'generate': The 'rate' parameter must be a number in \(0, 1\]; got 'abc'",
        ),
        ("generate", {"k_min": 5, "k_max": 3}, r"'generate': k_min=5 must be <= k_max=3"),
        ("generate", {"ensemble": "type3"}, r"'generate': The 'ensemble' parameter must be one of"),
        ("generate", {"n_clusterings": 0}, r"'generate': The 'n_clusterings' parameter must be >= 1"),
        ("coassoc", {"strategy": "ring"}, r"'coassoc': The 'strategy' parameter must be one of"),
        ("coassoc", {"strategy": "full", "max_n": 1}, r"'max_n' parameter must be >= 2"),
        ("coassoc", {"count_mode": "fast"}, r"'count_mode' parameter must be one of"),
        (
            "consensus",
            {"pcc-kl": {"n_clusters": 0}},
            r"consensus method 'pcc-kl': The 'n_clusters' parameter",
        ),
        ("consensus", {"pcc-kl": {}}, r"consensus method 'pcc-kl' needs n_clusters"),  # was a KeyError
        ("consensus", {"bce": {}}, r"consensus method 'bce' needs n_clusters"),  # was K = 2, silently
        (
            "consensus",
            {"pcc-kl": {"n_clusters": 1}},  # was an error naming HBGF, the start, after the other stages
            r"consensus method 'pcc-kl': The 'n_clusters' parameter (of PCC )?must be an integer >= 2; got 1 "
            r"\(one cluster holds every row; ConsensusClustering\(n_clusters=1\) gives it\)",
        ),
        (
            "consensus",
            {"pcc-kl": {"n_clusters": 3, "divergence": "l2"}},  # was an L2 fit recorded as pcc-kl
            r"consensus method 'pcc-kl' is pcc with divergence='kl'; got divergence='l2'",
        ),
        (
            "consensus",
            {"pcc-kl": {"n_clusters": 3, "method": "pcc", "divergence": "l2"}},  # (a review: with 'method')
            r"consensus method 'pcc-kl' is pcc with divergence='kl'; got divergence='l2'",
        ),
        (
            "consensus",
            {"bce": {"n_clusters": 3, "method": "kcc"}},  # (a user review) was a KCC fit recorded as bce
            r"consensus result 'bce' is named after the method 'bce'; got method='kcc'",
        ),
        (
            "consensus",
            {"ppc": {"n_clusters": 3, "tol": -1}},
            r"consensus method 'ppc': The 'tol' parameter of PPC must be 'auto' or a number > 0",
        ),
        (
            "consensus",
            {"mm": {"n_clusters": 3, "n_init": 0}},
            r"consensus method 'mm': The 'n_init' parameter of MM must be an integer >= 1",
        ),
        (
            "consensus",
            {"bce": {"n_clusters": 3, "e_step_max_iter": 0}},
            r"'e_step_max_iter' parameter of BCE must be an integer >= 1",
        ),
        ("consensus", {"pcc": "n_clusters=3"}, r"consensus method 'pcc': its parameters must be a mapping"),
        ("consensus", ["pcc-kl"], r"'consensus' must map method names to parameters"),
        ("dask", {"n_workers": 0}, r"'dask.n_workers' parameter must be >= 1"),
    ],
)
def test_bad_parameters_fail_before_any_stage(section, value, match, tmp_path):
    spec = _spec(str(tmp_path / "run.zarr"), **{"pcc-kl": {"n_clusters": 3}})
    spec[section] = value
    with pytest.raises(InputError, match=match):
        run_workflow(spec)
    assert not (tmp_path / "run.zarr").exists()


def test_valid_workflows_pass_validation():
    from pathlib import Path

    from ensemble_dask.pipeline import load_workflow

    paths = sorted((Path(__file__).resolve().parents[1] / "workflows").glob("*.yaml"))
    checked = [p.name for p in paths if "federated" not in load_workflow(p)]
    assert "demo.yaml" in checked and len(checked) >= 3, checked
    for name in checked:
        assert validate_workflow(load_workflow(Path(paths[0]).parent / name)) is None  # raises when invalid
    entry = {"pcc-k8": {"method": "pcc", "n_clusters": 8, "n_init": 3}}
    assert validate_workflow(_spec("memory://x", **entry)) is None
    with pytest.raises(InputError, match="'n_init' parameter of PCC"):  # the same entry, one value wrong
        validate_workflow(_spec("memory://x", **{"pcc-k8": {**entry["pcc-k8"], "n_init": 0}}))


@pytest.mark.slow
def test_kcc_and_the_baselines_as_workflow_entries():
    """Every method name of the KCC issue runs from a workflow's consensus section, on labels or pairs."""
    names = ["kcc", "gkcc", "eac-sl", "eac-al", "cspa", "hgpa", "mcla", "hbgf"]
    params = {"gkcc": {"n_clusters": 3, "n_candidates": 5}}
    spec = _spec("memory://pipeline-baselines", **{n: params.get(n, {"n_clusters": 3}) for n in names})
    spec["coassoc"] = {"strategy": "cocluster", "l": 15}
    report = run_workflow(spec)
    store = RunStore("memory://pipeline-baselines")
    assert set(report["methods"]) == set(names)
    base = report["base_partitions"]["ARI"]["mean"]
    for name, m in report["methods"].items():
        Y = store[f"consensus/{name}/Y"][:]
        assert Y.shape == (800, 3) and np.allclose(Y.sum(1), 1, atol=1e-5), name
        if name != "eac-sl":  # single link chains (see the KCC issue's figures)
            assert m["ARI"] >= base, (name, m["ARI"], base)
    assert store["consensus/kcc"].attrs["converged"] in (True, False)
    assert store["consensus/hbgf"].attrs["converged"] is None  # no iterations to converge
    # GKCC records which partition it kept, Algorithm 1's or KCC's, by the higher ANMI
    gkcc = report["methods"]["gkcc"]
    assert set(gkcc["anmi"]) == {"greedy", "kcc"} and gkcc["kept"] == max(gkcc["anmi"], key=gkcc["anmi"].get)


@pytest.mark.parametrize(
    "method, tol, message",
    [
        ("pcc-kl", "auto", None),  # PCC's own default, refused before
        ("ppc", 1e-3, None),
        ("bce", 0.0, None),  # 0: run to max_iter, as BCE(tol=0.0) does; refused before
        ("kcc", 0.0, None),
        ("pcc-l2", 0.0, "of PCC must be 'auto' or a number > 0; got 0.0"),
        ("mm", "auto", "of MM must be a number >= 0; got 'auto'"),  # before: accepted, failed in the stage
        ("gkcc", -1.0, "of GKCC must be a number >= 0; got -1.0"),  # the same
    ],
)
def test_tol_is_checked_as_each_estimator_takes_it(method, tol, message, tmp_path):
    spec = _spec(str(tmp_path / "run.zarr"), **{method: {"n_clusters": 3, "tol": tol}})
    if message is None:
        validate_workflow(spec)
    else:
        with pytest.raises(InputError, match=f"consensus method '{method}': The 'tol' parameter {message}"):
            validate_workflow(spec)


@pytest.mark.slow
def test_a_method_stopped_at_its_cap_is_recorded_as_not_converged():
    """The stage's record, metrics.json and the report page say 'not converged' (issue 9: they said true)."""
    capped = {"n_clusters": 3, "max_iter": 1}
    spec = _spec(
        "memory://pipeline-capped",
        **{"pcc-l2": capped, "bce": {**capped, "tol": 0.0}, "kcc": {**capped, "init": "k-means++"}},
    )
    report = run_workflow(spec)
    store = RunStore("memory://pipeline-capped")
    for name in ("pcc-l2", "bce", "kcc"):
        attrs = store[f"consensus/{name}"].attrs
        assert report["methods"][name]["converged"] is False, name
        assert attrs["converged"] is False and attrs["n_iter"] == 1, name
        assert any("max_iter=1" in w for w in attrs["warnings"]), (name, attrs["warnings"])
        # and the warnings themselves, beside the scores (a user's review: only in the log and the store)
        assert report["methods"][name]["warnings"] == attrs["warnings"], name
    import fsspec

    page = fsspec.filesystem("memory").cat(report["html"]).decode()
    assert page.count("no (iteration cap)") == 3
    assert "id='fit-warnings'" in page and page.count("ConvergenceWarning") >= 3


@pytest.mark.slow
def test_ensemble_and_pairs_too_small_for_the_k_asked_are_recorded():
    """Both numbers in each warning; the result is kept, with its warnings, not reported as clean."""
    spec = _spec("memory://pipeline-coarse", **{"pcc-l2": {"n_clusters": 8}, "bce": {"n_clusters": 8}})
    spec["generate"] = {"n_clusterings": 6, "k_min": 2, "k_max": 4}
    spec["coassoc"] = {"strategy": "per-point", "l": 5}
    run_workflow(spec)
    store = RunStore("memory://pipeline-coarse")
    pcc = store["consensus/pcc-l2"].attrs["warnings"]
    assert any(
        w.startswith(
            "CoarseEnsembleWarning: 0 of the 6 base partitions have n_clusters=8 clusters or more (at most 4,"
        )
        for w in pcc
    ), pcc
    assert any(w.startswith("TooFewPairsWarning:") and "fewer than the 16 (2 K" in w for w in pcc), pcc
    bce = store["consensus/bce"].attrs["warnings"]
    kinds = {w.split(":")[0] for w in bce}
    assert "CoarseEnsembleWarning" in kinds and "TooFewPairsWarning" not in kinds, bce  # BCE uses no pairs


@pytest.mark.slow
def test_generate_takes_its_k_range_from_the_k_asked():
    spec = _spec("memory://pipeline-krange", bce={"n_clusters": 12})
    spec["generate"] = {"n_clusterings": 8}
    spec["coassoc"] = None
    run_workflow(spec)
    meta = RunStore("memory://pipeline-krange")["labels"].attrs["partitions"]
    ks = [m["k"] for m in meta]
    assert min(ks) >= 6 and max(ks) <= 24 and max(ks) > 10, ks
    assert RunStore("memory://pipeline-krange")["consensus/bce"].attrs["warnings"] == []


@pytest.mark.slow
def test_a_workflow_of_data_and_consensus_runs_the_stages_between():
    """With no ``generate:`` or ``coassoc:`` section, the stages the consensus methods need run with their
    defaults; labels brought with ``import-labels`` are not generated over; pairs counted on other labels
    than the store's are counted again."""
    from ensemble_dask.stages.generate import import_labels

    store_url = "memory://pipeline-defaults"
    spec = {
        "seed": 1,
        "store": store_url,
        "dask": {"n_workers": 2},
        "data": {"url": "synthetic:blobs?n=600&d=4&centers=3&seed=3"},
        "consensus": {"pcc-l2": {"n_clusters": 3}, "bce": {"n_clusters": 3}},
    }
    report = run_workflow(spec)
    store = RunStore(store_url)
    assert set(store.records()) >= {"ingest", "generate", "coassoc", "consensus/pcc-l2", "consensus/bce"}
    assert store["labels"].shape == (600, 100)  # generate's default n_clusterings
    assert store.record("coassoc")["params"]["strategy"] == "cocluster"
    assert report["methods"]["pcc-l2"]["ARI"] > 0.9 and report["methods"]["bce"]["ARI"] > 0.9

    # imported labels stay: only the consensus runs on them
    imported = "memory://pipeline-defaults-imported"
    RunStore(imported)
    run_workflow({**spec, "store": imported, "consensus": {}})  # ingest alone
    own = np.tile(np.repeat(np.arange(3), 200)[:, None], (1, 4)).astype(np.int32)
    import_labels(RunStore(imported), "mine", labels=own)
    run_workflow({**spec, "store": imported})
    store = RunStore(imported)
    np.testing.assert_array_equal(store["labels"][:], own)
    assert store.record("coassoc")["inputs"] == [store.stage_hash("generate")]

    # new labels from an explicit generate section: the pairs follow them
    run_workflow({**spec, "generate": {"n_clusterings": 12, "k_min": 2, "k_max": 5}})
    store = RunStore(store_url)
    assert store["labels"].shape == (600, 12)
    assert store.record("coassoc")["inputs"] == [store.stage_hash("generate")]


@pytest.mark.parametrize("n_fine, warned", [(1, True), (2, False), (3, False)])  # the bar: a quarter
def test_an_ensemble_mostly_coarser_than_the_k_asked_is_recorded(n_fine, warned):
    """Some partitions reach K but most do not (k drawn in [2, 10] for K = 10): the result says so."""
    from ensemble_dask.stages.consensus import consensus_stage
    from ensemble_dask.stages.generate import import_labels

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(8), 40)
    cols = [rng.permutation(8)[y] for _ in range(n_fine)] + [y // 4 for _ in range(6 - n_fine)]
    store = RunStore(f"memory://pipeline-mostly-coarse-{n_fine}")
    import_labels(store, "labels-table", labels=np.column_stack(cols).astype(np.int32))
    consensus_stage(store, "bce", seed=0, n_clusters=8)
    notes = store["consensus/bce"].attrs["warnings"]
    coarse = [w for w in notes if w.startswith("CoarseEnsembleWarning")]
    if warned:
        assert coarse and f"{n_fine} of the 6 base partitions have n_clusters=8 clusters or more" in coarse[0]
        assert "at most 8, median 2" in coarse[0], coarse
    else:
        assert not coarse, notes


def test_a_result_using_fewer_clusters_than_asked_is_recorded():
    """Two identical base partitions of 2 clusters asked for 4: the labels use 2, and the record says so."""
    from ensemble_dask.stages.consensus import consensus_stage
    from ensemble_dask.stages.generate import import_labels

    col = np.repeat([0, 1], 30).astype(np.int32)
    store = RunStore("memory://pipeline-fewer-used")
    import_labels(store, "labels-table", labels=np.column_stack([col, col]))
    metrics = consensus_stage(store, "hbgf", seed=0, n_clusters=4)
    notes = store["consensus/hbgf"].attrs["warnings"]
    assert metrics["effective_k"] < 4
    assert any(
        w.startswith(f"FewerClustersWarning: the labels use {metrics['effective_k']} of the n_clusters=4")
        for w in notes
    ), notes


def _starts_spec(name, **consensus):
    return {
        "seed": 3,
        "store": f"memory://{name}",
        "data": {"url": "synthetic:blobs?n=600&d=3&centers=3&seed=2"},
        "generate": {"n_clusterings": 6, "k_min": 2, "k_max": 5, "rate": 0.5},
        "consensus": consensus or {"pcc-kl": {"n_clusters": 3}, "pcc-l2": {"n_clusters": 3}},
    }


def _spy_starts(
    monkeypatch, *, fail_first=False, coassoc_error=None, hold=None, after_coassoc=False, ahead=True
):
    """The calls of ``label_starts``, each ``(its thread, whether the coassoc stage had begun by then)``, and
    ``label_starts`` itself. Each call waits (up to 10 s) for the coassoc stage to begin, and the stage for a
    call to begin, so a start computed before or after the stage is seen as such. Both pass through to the
    real functions; ``fail_first``: the first call raises instead, ``coassoc_error``: the stage raises it,
    ``hold``: each call waits for that event first (and sets ``calls.finished`` at its end),
    ``after_coassoc``: each call goes on only once the coassoc stage has ended; ``ahead=False``: the stage
    does not wait for a call."""
    import threading

    from ensemble_dask.consensus import starts as starts_module
    from ensemble_dask.stages import coassoc as coassoc_module

    real_starts, real_coassoc = starts_module.label_starts, coassoc_module.coassoc_stage
    coassoc_begun, coassoc_ended, start_begun = threading.Event(), threading.Event(), threading.Event()

    class _Calls(list):
        pass

    calls = _Calls()
    calls.finished = threading.Event()

    def label_starts(labels, n_clusters, **kw):
        start_begun.set()
        name = threading.current_thread().name
        calls.append(("label-starts" if name.startswith("label-starts") else name, coassoc_begun.wait(10)))
        try:
            if hold is not None:
                hold.wait(10)
            if after_coassoc:
                coassoc_ended.wait(10)
            if fail_first and len(calls) == 1:
                raise MemoryError("no memory for the start here")
            return real_starts(labels, n_clusters, **kw)
        finally:
            calls.finished.set()

    def coassoc_stage(*args, **kw):
        coassoc_begun.set()
        start_begun.wait(10 if ahead else 0)
        try:
            if coassoc_error is not None:
                raise coassoc_error
            return real_coassoc(*args, **kw)
        finally:
            coassoc_ended.set()

    monkeypatch.setattr(starts_module, "label_starts", label_starts)
    monkeypatch.setattr(coassoc_module, "coassoc_stage", coassoc_stage)
    return calls, real_starts


def _kept_starts(store):
    from ensemble_dask.stages.consensus import STARTS_CACHE

    return sorted(store[STARTS_CACHE].array_keys()) if STARTS_CACHE in store else []


def test_the_pair_methods_start_is_computed_while_the_pairs_are_built(monkeypatch):
    """The label start of PCC/PPC (HBGF on the labels) needs no pairs: a workflow computes it on a thread of
    its own while its coassoc stage runs (500,000 points, K = 8: the start and the pairs 0.3-0.4 s sooner),
    once for PCC-KL and PCC-L2 of one K, and the consensus stage reads it from the store."""
    from ensemble_dask.stages.consensus import STARTS_CACHE

    calls, real_starts = _spy_starts(monkeypatch)
    run_workflow(_starts_spec("starts-alongside"), report=False)
    assert calls == [("label-starts", True)]
    store = RunStore("memory://starts-alongside")
    (key,) = _kept_starts(store)
    rs = store.record("consensus/pcc-kl")["params"]["random_state"]
    expected = real_starts(store["labels"][:], 3, random_state=rs)[0]
    np.testing.assert_array_equal(store[f"{STARTS_CACHE}/{key}"][0], expected)
    assert all(store.record(f"consensus/{name}")["complete"] for name in ("pcc-kl", "pcc-l2"))


def test_starts_of_two_k_are_both_computed_while_the_pairs_are_built(monkeypatch):
    """Both are waited for when the coassoc stage ends first. (A review's find: the second start, still
    queued when the pairs were done, was cancelled, and the run failed with a CancelledError before its
    consensus.)"""
    calls, _ = _spy_starts(monkeypatch, after_coassoc=True)
    spec = _starts_spec("starts-alongside-two-k", **{"pcc-kl": {"n_clusters": 3}, "ppc": {"n_clusters": 4}})
    run_workflow(spec, report=False)
    assert calls == [("label-starts", True)] * 2
    store = RunStore("memory://starts-alongside-two-k")
    assert len(_kept_starts(store)) == 2
    assert all(store.record(f"consensus/{name}")["complete"] for name in ("pcc-kl", "ppc"))


def test_a_start_that_fails_alongside_the_pairs_is_computed_again_by_the_consensus(monkeypatch, caplog):
    calls, _ = _spy_starts(monkeypatch, fail_first=True)
    with caplog.at_level("INFO", logger="ensemble_dask.pipeline"):
        run_workflow(_starts_spec("starts-alongside-failed"), report=False)
    assert calls == [("label-starts", True), ("MainThread", True)]
    note = "label starts for K=3 not computed ahead: MemoryError('no memory for the start here')"
    assert note in caplog.text
    store = RunStore("memory://starts-alongside-failed")
    assert all(store.record(f"consensus/{name}")["complete"] for name in ("pcc-kl", "pcc-l2"))


def test_a_failed_coassoc_stage_reports_at_once_and_keeps_no_start(monkeypatch):
    """The coassoc stage's error reaches the caller while the start is still under way (it is not waited
    for), and the start is not kept."""
    import threading

    hold = threading.Event()
    calls, _ = _spy_starts(monkeypatch, coassoc_error=InputError("the pairs failed here"), hold=hold)
    with pytest.raises(InputError, match="the pairs failed here"):
        run_workflow(_starts_spec("starts-alongside-coassoc-failed"), report=False)
    assert calls == [("label-starts", True)] and not calls.finished.is_set()  # the start is still held
    hold.set()
    assert calls.finished.wait(10)
    for thread in threading.enumerate():
        if thread.name == "label-starts":
            thread.join(10)
    store = RunStore("memory://starts-alongside-coassoc-failed")
    assert _kept_starts(store) == [] and not store.record("coassoc")


def test_labels_above_the_ahead_bytes_have_their_start_after_the_pairs(monkeypatch):
    """Above AHEAD_LABELS_BYTES (lowered to 0 here) the start waits for the pairs, as before: its memory
    (2.5 times the labels' at 500,000 points) never adds to the pair build's on a large run."""
    from ensemble_dask.stages import consensus as stage

    monkeypatch.setattr(stage, "AHEAD_LABELS_BYTES", 0)
    calls, _ = _spy_starts(monkeypatch, ahead=False)
    run_workflow(_starts_spec("starts-after-the-pairs"), report=False)
    assert calls == [("MainThread", True)]


_START_THREAD_IMPORTS = """
import json
import logging
import sys
import threading

imported, starts = [], []


class Recorder:  # sees each module the first time any thread imports it
    def find_spec(self, name, path=None, target=None):
        if threading.current_thread().name == "label-starts":
            imported.append(name)


class Starts(logging.Handler):  # the threads that computed a start
    def emit(self, record):
        if record.getMessage().startswith("label starts for K=") and " computed in " in record.getMessage():
            starts.append(record.threadName)


if __name__ == "__main__":
    sys.meta_path.insert(0, Recorder())
    log = logging.getLogger("ensemble_dask.stages.consensus")
    log.setLevel(logging.INFO)
    log.addHandler(Starts())
    from ensemble_dask.pipeline import run_workflow

    run_workflow(json.loads(sys.argv[1]), report=False)
    print(json.dumps({"imported": imported, "starts": starts}))
"""


@pytest.mark.slow
def test_the_start_thread_imports_nothing(tmp_path):
    """In a fresh process the start's thread imports nothing: the calling thread imported what it runs
    first, down to Numba's imports on a first kernel call. Two threads importing at once can meet a
    concurrent circular import, which CPython resolves by handing one a half-initialised module:
    benchmarks/peers.py, whose start thread imported the consensus package while its main thread imported
    the coassoc package, failed in most fresh processes ("cannot import name 'PairCounts' from partially
    initialized module"). Here the labels were brought by an earlier process, so nothing of scikit-learn's
    is imported before the start (its thread imported 1,184 modules so)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    import ensemble_dask
    from ensemble_dask.stages.generate import import_labels

    script = tmp_path / "imports.py"
    script.write_text(_START_THREAD_IMPORTS)
    env = {**os.environ, "PYTHONPATH": str(Path(ensemble_dask.__file__).parents[1])}  # this checkout's
    spec = {k: v for k, v in _starts_spec("unused").items() if k not in ("generate", "consensus")}
    spec = {**spec, "store": str(tmp_path / "run.zarr"), "dask": {"n_workers": 1}}
    run_workflow(spec)  # ingest alone, here; then labels of many distinct rows (HBGF runs on them)
    labels = np.random.default_rng(0).integers(0, 4, size=(600, 6)).astype(np.int32)
    import_labels(RunStore(spec["store"]), "labels", labels=labels)
    cmd = [sys.executable, str(script), json.dumps({**spec, "consensus": {"pcc-kl": {"n_clusters": 3}}})]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["starts"] == ["label-starts"]
    assert seen["imported"] == []


def test_a_result_named_after_a_method_with_a_suffix_is_that_method():
    """A review (2026-12-06): the docs say ``bce-k4`` runs BCE, and the rule split the name at its first
    hyphen: ``pcc-l2-k4`` ran PCC with the KL divergence, ``eac-al-k4`` was an unknown method 'eac', and
    ``bce-k4`` with ``method: kcc`` ran KCC. The longest method or alias before a hyphen names it now."""
    from ensemble_dask.stages.consensus import resolve_method

    assert resolve_method("pcc-l2-k4", {}) == ("pcc", {"divergence": "l2"})
    assert resolve_method("eac-al-k4", {}) == ("eac-al", {})
    assert resolve_method("pcc-k8", {"method": "pcc", "init": "random"}) == ("pcc", {"init": "random"})
    assert resolve_method("mine", {"method": "bce"}) == ("bce", {})
    with pytest.raises(InputError, match="'bce-k4' is named after the method 'bce'; got method='kcc'"):
        resolve_method("bce-k4", {"method": "kcc"})
    with pytest.raises(InputError, match="'pcc-l2-x' is pcc with divergence='l2'; got divergence='kl'"):
        resolve_method("pcc-l2-x", {"divergence": "kl"})
    with pytest.raises(InputError, match=r"unknown method 'foo-bar'; known: .*--set method=M\)"):
        resolve_method("foo-bar", {})

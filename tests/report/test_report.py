"""The HTML report (report/index.html): built from a real small run, checked as files and in a browser."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import struct
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import fsspec
import numpy as np
import pytest
import zarr

from ensemble_dask import InputError, metrics
from ensemble_dask.io.store import RunStore
from ensemble_dask.pipeline import run_workflow
from ensemble_dask.stages.report_page import report_page, sample_points
from tests.conftest import EXE, figures_drawn

METHODS = {
    "pcc-kl": {"n_clusters": 3},
    "pcc-l2": {"n_clusters": 3},
    "ppc": {"n_clusters": 3, "max_iter": 100},
    "bce": {"n_clusters": 3},
}


@pytest.fixture(scope="module", autouse=True)
def _with_figures():
    """The figures are what these tests are about (the other tests leave them out: tests/conftest.py)."""
    with figures_drawn():
        yield


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A small real run on disk: 1,500 blob points, 8 clusterings, per-point pairs, four methods."""
    store = tmp_path_factory.mktemp("report") / "run.zarr"
    spec = {
        "seed": 4,
        "store": str(store),
        "dask": {"n_workers": 1},
        "data": {"url": "synthetic:blobs?n=1500&d=5&centers=3&seed=7"},
        "generate": {"n_clusterings": 8, "k_min": 2, "k_max": 6, "rate": 0.7},
        "coassoc": {"strategy": "per-point", "l": 15},
        "consensus": METHODS,
    }
    report = run_workflow(spec)  # a solver's warnings are logged and recorded with its result
    return store, report


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.cells, self.stack, self.ids = [], [], [], set()
        self._in_table = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "img":
            self.images.append(attrs["src"])
        if tag == "table" and attrs.get("id") == "accuracy-table":
            self._in_table += 1
        self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag == "table" and self._in_table:
            self._in_table -= 1

    def handle_data(self, data):
        if self._in_table and data.strip():
            self.cells.append(data.strip())


def _image_size(data):
    """(width, height) of PNG bytes (IHDR) or of an SVG's root element; raises if neither."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        assert data[12:16] == b"IHDR"
        return struct.unpack(">II", data[16:24])
    assert b"<svg" in data[:2000], "neither PNG nor SVG"
    return (1, 1)


def _decode(data):
    """Decode PNG bytes in full (a truncated or corrupt file raises) or parse an SVG as XML."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        from io import BytesIO

        from PIL import Image

        Image.open(BytesIO(data)).load()
    else:
        import xml.etree.ElementTree as ET

        assert ET.fromstring(data).tag.endswith("svg")


def test_page_parses_and_every_image_exists(run):
    store, report = run
    index = Path(report["html"])
    assert index == store / "report" / "index.html" and index.exists()
    page = _Page()
    page.feed(index.read_text())
    page.close()
    assert {"facts", "accuracy"} <= page.ids
    # one figure per method, the base partitions' distribution
    assert len(page.images) == len(METHODS) + 1
    for src in page.images:
        assert "/" not in src and not src.startswith("data:")
        data = (index.parent / src).read_bytes()
        w, h = _image_size(data)
        assert len(data) > 20_000 and w > 400 and h > 300, src
        _decode(data)  # the whole image, not only its header
    # the table holds every method of the run, and the base partitions
    for name in METHODS:
        assert name in page.cells
    assert "base partitions" in page.cells
    # no stale figure of an earlier report stays beside the page
    assert sorted(p.name for p in index.parent.glob("fig-*")) == sorted(page.images)


def test_table_values_are_exact_and_best_is_marked(run):
    store, report = run
    s = RunStore(store, mode="r")
    y = s["y_true"][:]
    html = (store / "report" / "index.html").read_text()
    best_h = max(report["methods"], key=lambda m: report["methods"][m]["H"])
    for name in METHODS:
        lab = s[f"consensus/{name}/labels"][:]
        mp = metrics.micro_precision(lab, y)
        assert f"{mp:.4f}" in html
        assert f"{metrics.normalized_rand(lab, y):.4f}" in html
    assert f"{report['methods'][best_h]['H']:.4f}&#9733;" in html


def test_table_scores_equal_the_metrics_module():
    rng = np.random.default_rng(0)
    for _ in range(5):
        true = rng.integers(0, 4, 300)
        pred = np.where(rng.random(300) < 0.3, true, rng.integers(-1, 5, 300))
        keep = pred >= 0
        table = metrics.contingency_counts(pred, true)
        np.testing.assert_array_equal(table, metrics.contingency(pred, true))
        got = metrics.table_scores(table)
        assert got["H"] == pytest.approx(metrics.h_criterion(pred, true))
        assert got["ARI"] == pytest.approx(metrics.ari(pred, true))
        assert got["NMI"] == pytest.approx(metrics.nmi(pred, true))
        assert got["MP"] == pytest.approx(metrics.micro_precision(pred, true))
        assert got["R_n"] == pytest.approx(metrics.normalized_rand(pred[keep], true[keep]))
    # empty clusters (zero rows) change nothing and warn about nothing
    assert metrics.table_scores(np.array([[2, 0], [0, 0], [0, 2]])) == metrics.table_scores(np.eye(2) * 2)


def test_sample_is_seeded_nested_and_reads_few_blocks():
    a, b = sample_points(1000, 200, seed=3), sample_points(1000, 200, seed=3)
    np.testing.assert_array_equal(a.rows, b.rows)
    assert not np.array_equal(a.rows, sample_points(1000, 200, seed=4).rows)
    assert len(np.unique(a.rows)) == 200 and a.rows.max() < 1000
    sub = a.subset(50)
    assert len(sub) == 50 and np.all(np.diff(sub) > 0) and sub.max() < 200
    assert sample_points(50, 200, seed=0).note() == "all 50 points"
    # on large n the sample lies in 8 blocks of 65,536 rows, so a reader touches few chunks
    big = sample_points(5_000_000, 20_000, seed=3)
    assert len(np.unique(big.rows // 65536)) == 8 and "seed 3" in big.note()
    arr = zarr.create_array(
        zarr.storage.MemoryStore(), shape=(5_000_000,), chunks=(65536,), dtype="int32", fill_value=0
    )
    from ensemble_dask.stages.report_page import _read_rows

    arr[: 65536 * 3] = 1
    got = _read_rows(arr, big.rows)
    assert got.shape == (20_000,) and set(np.unique(got)) <= {0, 1}


def test_memory_store_without_consensus(tmp_path):
    url = "memory://report-no-consensus"
    spec = {
        "seed": 1,
        "store": url,
        "dask": {"n_workers": 1},
        "data": {"url": "synthetic:blobs?n=400&d=3&centers=2&seed=1"},
        "generate": {"n_clusterings": 4, "k_min": 2, "k_max": 3},
    }
    report = run_workflow(spec)
    assert report["html"] == f"{url}/report/index.html"
    fs = fsspec.filesystem("memory")
    html = fs.cat(f"{url}/report/index.html").decode()
    assert "No consensus result in this store yet" in html
    assert fs.exists(f"{url}/report/fig-base-partitions.png")
    # SVG figures too
    path = report_page(RunStore(url), fmt="svg")
    _decode(fs.cat(f"{url}/report/fig-base-partitions.svg"))
    assert not fs.exists(f"{url}/report/fig-base-partitions.png") and path.endswith("index.html")


@pytest.mark.parametrize("spelling", ["main", "fed-branch"])
def test_federated_coordinator_store(tmp_path, spelling):
    """A coordinator store holds only the model and counts; the page shows rows per site and the mode."""
    store = RunStore(tmp_path / "coord.zarr")
    with store.stage("federated", {"sites": ["site-a", "site-b"]}, []):
        g = store.group.require_group("federated")
        g.create_array("alpha", data=np.ones(3))
        trace = np.cumsum(np.linspace(5, 0.1, 40)).tolist()
        if spelling == "main":  # what federated_stage writes today
            g.attrs.update(
                {
                    "mode": "secure",
                    "sites": ["site-a", "site-b"],
                    "n_clusters": 3,
                    "n_iter": 40,
                    "converged": True,
                    "lower_bound": trace[-1],
                    "lower_bound_trace": trace,
                    "messages": {"masked-stats": 80},
                }
            )
        else:  # the spelling of the federated issue's branch, with TLS and rows per site
            g.attrs.update(
                {
                    "mode": "secure",
                    "tls": True,
                    "sites": ["site-a", "site-b"],
                    "rows_per_site": {"site-a": 1200, "site-b": 800},
                    "n_clusters": 3,
                    "iterations": 40,
                    "converged": False,
                    "lower_bound": trace[-1],
                    "bound_trace": trace,
                    "H": 0.97,
                    "ARI": 0.9,
                    "NMI": 0.88,
                }
            )
    index = Path(report_page(store))
    html = index.read_text()
    page = _Page()
    page.feed(html)
    assert "federated" in page.ids and page.images == ["fig-federated.png"]
    w, h = _image_size((index.parent / "fig-federated.png").read_bytes())
    assert w > 400 and h > 200
    assert "site-a" in html and "site-b" in html and "secure" in html
    if spelling == "fed-branch":
        assert "1,200" in html and "800" in html and "H 0.9700" in html
        assert "<th>TLS</th><td>on</td>" in html
    else:
        assert "<th>TLS</th><td>not recorded</td>" in html


def test_bad_input(tmp_path):
    empty = RunStore(tmp_path / "empty.zarr")
    with pytest.raises(InputError, match="holds no stage results"):
        report_page(empty)
    with pytest.raises(InputError, match="'fmt' parameter"):
        report_page(empty, fmt="gif")
    with pytest.raises(InputError, match="'sample_size' parameter"):
        report_page(empty, sample_size=0)


def test_a_zarr_group_that_no_stage_wrote_is_named_not_a_run_store(tmp_path, capsys):
    """From a user review: report on a zarr group of arrays (a 1-d 'labels') failed with an IndexError."""
    import zarr

    from ensemble_dask.cli import main

    zarr.open_group(str(tmp_path / "other.zarr"), mode="w").create_array("labels", data=np.arange(5))
    assert main(["report", "--store", str(tmp_path / "other.zarr")]) == 2
    err = capsys.readouterr().err
    assert "holds no stage records: it is not a run store" in err and "Traceback" not in err


# --------------------------------------------------------------------------- figures kept between reports


@pytest.fixture
def drawn(monkeypatch):
    """Names of the method figures drawn (for real) by report_page while the test runs."""
    from ensemble_dask.report import plots

    calls = []
    real = plots.method_figure

    def counting(name, **kwargs):
        calls.append(name)
        return real(name, **kwargs)

    monkeypatch.setattr(plots, "method_figure", counting)
    return calls


def _copy_of_run(run, tmp_path):
    """A copy of the module's run (its report included), to change without touching the others' store."""
    path = tmp_path / "run.zarr"
    shutil.copytree(run[0], path)
    return path


def _figures(folder):
    return {p.name: p.read_bytes() for p in sorted(Path(folder).glob("fig-*"))}


def _read_json_or_none(path):
    return json.loads(path.read_text()) if path.exists() else None


def _without_times(html):
    """The page but its line of when it was written and how long drawing took."""
    return re.sub(r"written \S+ &middot; figures drawn in [0-9.]+ s", "", html)


def test_second_report_reuses_unchanged_figures(run, tmp_path, drawn, caplog):
    """Before, each report drew every method's figure again: 4 draws here each time (and one more per
    result, each ~0.4 s on 50,000 points, with every consensus command)."""
    path = _copy_of_run(run, tmp_path)
    folder = path / "report"
    store = RunStore(path)
    (folder / "figures.json").unlink(missing_ok=True)  # no keys: every figure drawn
    report_page(store)
    assert sorted(drawn) == sorted(METHODS)
    first, page1 = _figures(folder), _without_times((folder / "index.html").read_text())
    assert len(first) == len(METHODS) + 1
    keys = _read_json_or_none(folder / "figures.json")

    drawn.clear()
    with caplog.at_level(logging.INFO, logger="ensemble_dask.stages.report_page"):
        report_page(store)
    assert drawn == []
    assert f"{len(METHODS)} of {len(METHODS)} method figures reused" in caplog.text
    assert _figures(folder) == first
    assert _without_times((folder / "index.html").read_text()) == page1
    assert sorted(keys["figures"]) == sorted(f"fig-method-{m}.png" for m in METHODS)
    assert _read_json_or_none(folder / "figures.json") == keys

    # what was kept is what drawing afresh gives
    (folder / "figures.json").unlink()
    report_page(store)
    assert sorted(drawn) == sorted(METHODS) and _figures(folder) == first


def _parsed(path):
    page = _Page()
    page.feed(Path(path).read_text())
    page.close()
    return page


def test_figures_off_keeps_the_tables_and_the_next_report_with_them_draws_them(run, tmp_path, drawn):
    """The dask config ``ensemble-dask.report.figures: false`` leaves drawing out (about a second a figure):
    the page keeps its facts and table, no figure file stays, and the key of the report says so, so a later
    report with figures is not taken as up to date."""
    import dask

    from ensemble_dask.report.html import FIGURES_OFF
    from ensemble_dask.stages.report import write_report

    path = _copy_of_run(run, tmp_path)
    folder, store = path / "report", RunStore(path)
    with_figures = _parsed(folder / "index.html")
    metrics_before = json.loads((folder / "metrics.json").read_text())
    with dask.config.set({"ensemble-dask.report.figures": False}):
        out = write_report(store)
    page = _parsed(out["html"])
    assert drawn == [] and _figures(folder) == {} and page.images == []
    html = (folder / "index.html").read_text()
    assert FIGURES_OFF in html and "Top: co-association" not in html  # no caption of panels not drawn
    assert page.cells == with_figures.cells and page.ids == with_figures.ids
    assert json.loads((folder / "metrics.json").read_text()) == metrics_before
    assert _read_json_or_none(folder / "figures.json")["figures"] == {}

    out = write_report(store)  # figures on again (the default): drawn, not "up to date"
    assert sorted(drawn) == sorted(METHODS) and len(_parsed(out["html"]).images) == len(METHODS) + 1
    assert sorted(_figures(folder)) == sorted(with_figures.images)

    for bad in ("maybe", 2):
        with dask.config.set({"ensemble-dask.report.figures": bad}):
            with pytest.raises(InputError, match=r"'ensemble-dask.report.figures' \(env DASK_ENSEMBLE_DASK_"):
                write_report(store)
        with pytest.raises(InputError, match=f"got {bad!r}"):
            report_page(store, figures=bad)

    # a page written without figures by report_page itself (not write_report) is not taken as up to date
    drawn.clear()
    report_page(store, figures="FALSE")
    assert _figures(folder) == {} and drawn == []
    write_report(store)
    assert sorted(drawn) == sorted(METHODS) and len(_figures(folder)) == len(METHODS) + 1
    with dask.config.set({"ensemble-dask.report.figures": 0}):  # DASK_..._FIGURES=0 reads as the int 0
        write_report(store)
    assert _figures(folder) == {}


def test_a_bad_figures_setting_stops_a_command_before_its_stage(run, tmp_path):
    path = _copy_of_run(run, tmp_path)
    env = {**os.environ, "DASK_ENSEMBLE_DASK__REPORT__FIGURES": "maybe"}
    r = subprocess.run(
        [EXE, "consensus", "hbgf", "--store", path, "--set", "n_clusters=3", "--report"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    said = "(env DASK_ENSEMBLE_DASK__REPORT__FIGURES) must be true or false; got 'maybe'"
    assert r.returncode == 2 and said in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and RunStore(path, mode="r").record("consensus/hbgf") is None


def test_recomputed_result_is_drawn_again_and_removed_result_removed(run, tmp_path, drawn):
    from ensemble_dask.stages.consensus import consensus_stage

    path = _copy_of_run(run, tmp_path)
    folder = path / "report"
    store = RunStore(path)
    report_page(store)
    before = _figures(folder)
    drawn.clear()
    consensus_stage(store, "pcc-l2", seed=4, n_clusters=2)  # other parameters
    for name in ("ppc", "bce"):  # ppc removed; bce removed and fitted again with the same parameters
        del store.group["consensus"][name]
        store._set_record(f"consensus/{name}", None)
    consensus_stage(store, "bce", seed=4, **METHODS["bce"])
    report_page(store)
    assert sorted(drawn) == ["bce", "pcc-l2"]
    after = _figures(folder)
    assert sorted(after) == [
        "fig-base-partitions.png",
        "fig-method-bce.png",
        "fig-method-pcc-kl.png",
        "fig-method-pcc-l2.png",
    ]
    assert after["fig-method-pcc-kl.png"] == before["fig-method-pcc-kl.png"]
    assert after["fig-method-pcc-l2.png"] != before["fig-method-pcc-l2.png"]
    page = _Page()
    page.feed((folder / "index.html").read_text())
    assert sorted(page.images) == sorted(after) and "ppc" not in page.cells
    assert sorted(json.loads((folder / "figures.json").read_text())["figures"]) == [
        "fig-method-bce.png", "fig-method-pcc-kl.png", "fig-method-pcc-l2.png"
    ]  # fmt: skip


def test_corrupt_keys_or_figures_and_other_settings_are_drawn_again(run, tmp_path, drawn):
    path = _copy_of_run(run, tmp_path)
    folder = path / "report"
    store = RunStore(path)
    report_page(store)
    good = _figures(folder)
    other_version = json.loads((folder / "figures.json").read_text())
    other_version["version"] -= 1  # the keys of another figure code
    from ensemble_dask.stages._figure_keys import known_figures

    for doc in ("{not json", "[]", '{"figures": {"fig-method-bce.png": "a key"}}', json.dumps(other_version)):
        (folder / "figures.json").write_text(doc)
        assert known_figures(store) == {}, doc  # no figure is taken as drawn under these keys
    drawn.clear()
    report_page(store)  # (the last of them: drawn again, each figure as before)
    assert sorted(drawn) == sorted(METHODS) and _figures(folder) == good
    # a figure cut short, or removed, or rewritten by someone else, is drawn again; the others kept
    drawn.clear()
    (folder / "fig-method-bce.png").write_bytes(good["fig-method-bce.png"][:1000])
    (folder / "fig-method-ppc.png").unlink()
    (folder / "fig-method-pcc-kl.png").write_bytes(good["fig-method-pcc-l2.png"])
    report_page(store)
    assert sorted(drawn) == ["bce", "pcc-kl", "ppc"] and _figures(folder) == good
    # another format or sample: every figure drawn
    for kwargs in ({"fmt": "svg"}, {"sample_size": 500}):
        drawn.clear()
        report_page(store, **kwargs)
        assert sorted(drawn) == sorted(METHODS)


def test_figures_reused_in_an_object_store_until_an_earlier_stage_changes(run, drawn, s3_bucket):
    """On S3 (a moto server): the object store the figure keys are for (``memory://`` takes the same path
    through fsspec, and is left out: each case draws every figure twice, 25 s)."""
    bucket, options = s3_bucket
    url = f"s3://{bucket}/run.zarr"
    fs, root = fsspec.core.url_to_fs(url, **options)
    fs.put(str(run[0]), root, recursive=True)
    try:
        store = RunStore(url, options)
        if fs.exists(f"{root}/report/figures.json"):
            fs.rm(f"{root}/report/figures.json")
        report_page(store)
        assert sorted(drawn) == sorted(METHODS)
        first = {p: fs.cat(p) for p in fs.glob(f"{root}/report/fig-*")}
        assert len(first) == len(METHODS) + 1
        drawn.clear()
        fs.invalidate_cache()
        report_page(store)
        assert drawn == []
        fs.invalidate_cache()
        assert {p: fs.cat(p) for p in fs.glob(f"{root}/report/fig-*")} == first
        # the pairs store written again (e.g. other parameters): every method's figure reads it
        rec = store.record("coassoc")
        store._set_record("coassoc", {**rec, "finished": "2100-01-01T00:00:00+00:00"})
        report_page(store)
        assert sorted(drawn) == sorted(METHODS)
    finally:
        fs.rm(root, recursive=True)


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "ensemble_dask.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )


def test_cli_report_formats(run, tmp_path, capsys):
    store, report = run
    r = _cli("report", "--store", store, "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert set(doc["methods"]) == set(METHODS) and doc["html"] == str(store / "report" / "index.html")
    # the other formats print the same report differently (in-process: the page is not drawn again)
    from ensemble_dask.cli.report import show as _report

    assert _report(report, "html") == 0
    assert capsys.readouterr().out.strip() == report["html"]
    assert _report(report, "table") == 0
    out = capsys.readouterr().out
    assert "pcc-kl" in out and out.strip().endswith(f"report: {report['html']}")
    assert _report({**report, "html": None}, "table") == 1
    RunStore(tmp_path / "empty.zarr")
    r = _cli("report", "--store", tmp_path / "empty.zarr", "--format", "html")
    assert r.returncode == 2 and "holds no" in r.stderr and r.stdout == ""


# --------------------------------------------------------------------------- in a real browser

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary on PATH (Debian: apt-get install -y chromium)"
)


def _chromium(tmp_path, *args):
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@needs_chromium
def test_browser_screenshot_is_not_blank(run, tmp_path):
    from PIL import Image

    store, report = run
    shot = tmp_path / "page.png"
    r = _chromium(tmp_path, "--window-size=1400,2400", f"--screenshot={shot}", Path(report["html"]).as_uri())
    assert shot.exists(), r.stderr[-2000:]
    rgb = np.asarray(Image.open(shot).convert("RGB"), dtype=np.float64)
    img = rgb.mean(axis=2)
    assert img.shape == (2400, 1400)
    assert img.std() > 20  # a blank or single-colour page has ~0
    # the figures were loaded: the page's text and tables are grey, its figures coloured. (The lower
    # half's grey-level spread, checked before, was as large with every image missing: alt texts.)
    colour = rgb.max(axis=2) - rgb.min(axis=2) > 60
    assert colour[1200:].mean() > 0.01, colour[1200:].mean()  # measured: 11% with figures, 0.01% without


@needs_chromium
def test_browser_dom_lists_every_method(run, tmp_path):
    store, report = run
    r = _chromium(tmp_path, "--dump-dom", Path(report["html"]).as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    page = _Page()
    page.feed(r.stdout)
    for name in METHODS:
        assert name in page.cells
    assert "Consensus clustering report" in r.stdout


# every test here runs the command, a workflow or a process: the quick set (-m "not slow") leaves them out
pytestmark = pytest.mark.slow


def test_the_page_says_what_auto_chose_and_defines_h():
    """From a user review: auto's choice and every candidate's ANMI, and GKCC's kept partition, were in
    metrics.json only; "H" was defined nowhere on the page."""
    from ensemble_dask.report.html import accuracy_html

    rows = [
        ("auto", {"ARI": 0.9}, {"metrics": {"chosen": "kcc", "anmi": {"kcc": 0.71, "hbgf": 0.70}}}, None),
        ("gkcc", {"ARI": 0.8}, {"metrics": {"kept": "kcc", "anmi": {"kcc": 0.68, "algorithm1": 0.45}}}, None),
        ("bce", {"ARI": 0.85}, {"metrics": {}}, None),
    ]
    page = accuracy_html(rows, None)
    assert "<strong>auto</strong> chose kcc (ANMI: kcc 0.7100, hbgf 0.7000)" in page
    assert "<strong>gkcc</strong> kept kcc (ANMI: kcc 0.6800, algorithm1 0.4500)" in page
    assert "H is the accuracy with the clusters matched one to one to the classes" in page

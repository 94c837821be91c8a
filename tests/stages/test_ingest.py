import gzip
import re

import numpy as np
import pandas as pd
import pytest
import zarr

from ensemble_dask import InputError
from ensemble_dask.io.datasets import KDD99_COLUMNS
from ensemble_dask.io.store import RunStore
from ensemble_dask.stages.ingest import ingest


def kdd_frame(path):
    return pd.read_csv(path, header=None, names=KDD99_COLUMNS)


def test_kdd_schema(kdd_sample, tmp_path):
    store = RunStore(tmp_path / "run.zarr")
    info = ingest(store, str(kdd_sample), schema="kdd99")
    raw = kdd_frame(kdd_sample)
    assert info["n"] == len(raw) == store["X"].shape[0]
    X = store["X"][:]
    assert X.dtype == np.float32 and np.isfinite(X).all()
    # standardised, constant columns dropped
    np.testing.assert_allclose(X.mean(0), 0, atol=1e-4)
    np.testing.assert_allclose(X.std(0), 1, rtol=1e-3)
    assert "num_outbound_cmds" in info["dropped_constant"]
    assert info["d"] == X.shape[1] == 41 - len(info["dropped_constant"])
    # labels kept apart, trailing dot removed
    y = store["y_true"][:]
    classes = store["y_true"].attrs["classes"]
    assert "smurf" in classes and "label" not in info["feature_names"]
    np.testing.assert_array_equal(np.asarray(classes)[y], raw["label"].str.rstrip(".").to_numpy())
    # categoricals ordinal-coded by sorted vocabulary, then standardised
    j = info["feature_names"].index("protocol_type")
    codes = np.searchsorted(sorted(raw["protocol_type"].unique()), raw["protocol_type"])
    np.testing.assert_allclose(X[:, j], (codes - codes.mean()) / codes.std(), atol=1e-5)
    assert store.record("ingest")["complete"] is True


def test_classes_and_seeded_subset(kdd_sample, tmp_path):
    def run(seed, path):
        store = RunStore(path)
        ingest(
            store,
            str(kdd_sample),
            schema="kdd99",
            classes=["smurf", "neptune", "normal"],
            subset=1000,
            seed=seed,
        )
        return store

    a, b, c = run(0, tmp_path / "a"), run(0, tmp_path / "b"), run(1, tmp_path / "c")
    assert a["X"].shape[0] == 1000
    assert set(a["y_true"].attrs["classes"]) == {"smurf", "neptune", "normal"}
    np.testing.assert_array_equal(a["X"][:], b["X"][:])
    assert not np.array_equal(a["X"][:], c["X"][:])


def test_chunked_read_equals_whole_read(kdd_sample, tmp_path):
    small, big = RunStore(tmp_path / "s"), RunStore(tmp_path / "b")
    ingest(small, str(kdd_sample), schema="kdd99", chunk_rows=333, subset=2000)
    ingest(big, str(kdd_sample), schema="kdd99", subset=2000)
    np.testing.assert_array_equal(small["X"][:], big["X"][:])
    np.testing.assert_array_equal(small["y_true"][:], big["y_true"][:])


def test_rerun_is_skipped_and_changed_input_is_not(kdd_sample, tmp_path):
    store = RunStore(tmp_path / "run.zarr")
    assert ingest(store, str(kdd_sample), schema="kdd99", subset=500)["skipped"] is False
    assert ingest(store, str(kdd_sample), schema="kdd99", subset=500)["skipped"] is True
    assert ingest(store, str(kdd_sample), schema="kdd99", subset=500, chunk_rows=77)["skipped"] is True
    assert ingest(store, str(kdd_sample), schema="kdd99", subset=500, seed=3)["skipped"] is False


@pytest.mark.parametrize("fmt", ["parquet", "npy", "zarr", "csv-header"])
def test_other_formats(fmt, tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 4))
    y = rng.integers(0, 3, 300)
    if fmt == "parquet":
        path = tmp_path / "t.parquet"
        frame = pd.DataFrame(x, columns=list("abcd")).assign(cls=y)
        frame.to_parquet(path, row_group_size=70)
        kw = dict(label_column="cls")
    elif fmt == "npy":
        path = tmp_path / "t.npy"
        np.save(path, x)
        kw = {}
    elif fmt == "zarr":
        path = tmp_path / "t.zarr"
        g = zarr.open_group(str(path), mode="w")
        g.create_array("X", data=x, chunks=(64, 4))
        g.create_array("y", data=y, chunks=(64,))
        kw = dict(label_column="label")
    else:
        path = tmp_path / "t.csv"
        pd.DataFrame(x, columns=list("abcd")).assign(cls=y).to_csv(path, index=False)
        kw = dict(label_column="cls", header=True)
    store = RunStore(tmp_path / "run.zarr")
    info = ingest(store, str(path), chunk_rows=64, standardize=False, **kw)  # the values as read
    np.testing.assert_allclose(store["X"][:], x.astype(np.float32))
    assert info["d"] == 4
    if kw:
        np.testing.assert_array_equal(store["y_true"][:], y)


def test_file_url_and_memory_store(kdd_sample):
    store = RunStore("memory://ingest-test")
    info = ingest(store, f"file://{kdd_sample}", schema="kdd99", subset=100)
    assert info["n"] == 100 and RunStore("memory://ingest-test")["X"].shape[0] == 100


def test_synthetic_kdd99_is_chunk_independent(tmp_path):
    a, b = RunStore(tmp_path / "a"), RunStore(tmp_path / "b")
    ingest(a, "synthetic:kdd99?n=20000&seed=4", chunk_rows=3000)
    ingest(b, "synthetic:kdd99?n=20000&seed=4")
    np.testing.assert_array_equal(a["X"][:], b["X"][:])
    assert set(a["y_true"].attrs["classes"]) >= {"smurf", "neptune", "normal"}


def _write(path, lines):
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(lines) + "\n")


def _bad_cases(kdd_sample, tmp_path):
    with gzip.open(kdd_sample, "rt") as fh:
        good = [next(fh).strip() for _ in range(50)]
    wrong_cols = good[:10] + [good[10] + ",1"] + good[11:]
    short = good[:10] + [",".join(good[10].split(",")[:30])] + good[11:]
    fields = good[5].split(",")
    fields[4] = "12x"
    nonnum = good[:5] + [",".join(fields)] + good[6:]
    fields = good[7].split(",")
    fields[5] = "inf"
    inf = good[:7] + [",".join(fields)] + good[8:]
    cases = {}
    for name, lines, match in [
        ("wrong_cols", wrong_cols, "line 11 has 43 fields, expected 42"),
        ("short", short, "line 11 has 30 fields, expected 42"),
        ("nonnum", nonnum, r"line 6: non-numeric value '12x' in numeric column 'src_bytes'"),
        ("inf", inf, r"line 8: .*column 'dst_bytes'"),
    ]:
        path = tmp_path / f"{name}.csv.gz"
        _write(path, lines)
        cases[name] = (path, match)
    return cases


@pytest.mark.parametrize("case", ["wrong_cols", "short", "nonnum", "inf"])
def test_bad_csv_rows(case, kdd_sample, tmp_path):
    path, match = _bad_cases(kdd_sample, tmp_path)[case]
    store = RunStore(tmp_path / "run.zarr")
    with pytest.raises(InputError, match=match) as err:
        ingest(store, str(path), schema="kdd99")
    assert str(path) in str(err.value)
    assert store.record("ingest") is None and "X" not in store


def test_nan_is_an_error_unless_imputed(tmp_path):
    path = tmp_path / "nan.csv"
    path.write_text("a,b\n1,2\n3,\n5,6\n")
    store = RunStore(tmp_path / "run.zarr")
    with pytest.raises(InputError, match=r"nan.csv, line 3: value nan in column 'b'"):
        ingest(store, str(path), header=True)
    assert "X" not in store
    ingest(store, str(path), header=True, impute="mean", standardize=False)
    np.testing.assert_allclose(store["X"][:], [[1, 2], [3, 4], [5, 6]])


def test_missing_file_and_empty_table(tmp_path):
    store = RunStore(tmp_path / "run.zarr")
    with pytest.raises(InputError, match="does not exist"):
        ingest(store, str(tmp_path / "nope.csv"))
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match="empty"):
        ingest(store, str(empty))
    assert store.records() == {}


def _corrupt(kind, path):
    """Write a truncated, mislabelled or corrupt input of ``kind``; return its path."""
    table = b"".join(b"%d,%d,%d\n" % (i, i * 7 % 11, i % 5) for i in range(50_000))
    if kind == "truncated gzip":  # a download cut short
        data = gzip.compress(table)
        path = path / "t.csv.gz"
        path.write_bytes(data[: len(data) // 2])
    elif kind == "not gzip":
        path = path / "t.csv.gz"
        path.write_bytes(table)
    elif kind == "not bz2":
        path = path / "t.csv.bz2"
        path.write_bytes(table)
    elif kind == "not parquet":
        path = path / "t.parquet"
        path.write_bytes(table)
    else:  # "not npy"
        path = path / "t.npy"
        path.write_bytes(table)
    return path


@pytest.mark.parametrize(
    "kind, what",
    [
        ("truncated gzip", "a CSV file compressed with gzip (Compressed file ended before"),
        ("not gzip", "a CSV file compressed with gzip (Not a gzipped file"),
        ("not bz2", "a CSV file compressed with bz2 (Invalid data stream)"),
        ("not parquet", "a Parquet file ("),
        ("not npy", "a NumPy .npy file ("),
    ],
)
def test_corrupt_input_is_one_clear_error(kind, what, tmp_path):
    """Before: Python's EOFError, BadGzipFile, OSError, ArrowInvalid or ValueError traceback, exit 1."""
    path = _corrupt(kind, tmp_path)
    store = RunStore(tmp_path / "run.zarr")
    with pytest.raises(InputError) as err:
        ingest(store, str(path))
    assert str(err.value).startswith(f"{path}: cannot read it as {what}")
    assert str(err.value).endswith("is the file truncated or corrupt?")
    assert store.records() == {}


def test_unknown_class_and_too_large_subset(kdd_sample, tmp_path):
    store = RunStore(tmp_path / "run.zarr")
    with pytest.raises(InputError, match=r"classes \['nosuch'\] do not occur"):
        ingest(store, str(kdd_sample), schema="kdd99", classes=["nosuch"])
    with pytest.raises(InputError, match=r"'subset' parameter \(10000000\) exceeds"):
        ingest(store, str(kdd_sample), schema="kdd99", subset=10_000_000)


def test_store_of_another_data_set(kdd_sample, tmp_path):
    store = RunStore(tmp_path / "run.zarr")
    ingest(store, str(kdd_sample), schema="kdd99", subset=300)
    with pytest.raises(InputError, match="n=400 .* n=300"):
        ingest(store, str(kdd_sample), schema="kdd99", subset=400)
    assert store["X"].shape[0] == 300 and store.record("ingest")["complete"]
    ingest(store, str(kdd_sample), schema="kdd99", subset=400, overwrite=True)
    assert store["X"].shape[0] == 400


def test_standardisation_is_exact_for_columns_with_a_large_offset(tmp_path):
    rng = np.random.default_rng(0)
    x = np.column_stack([1.6e9 + rng.normal(size=5000), rng.normal(size=5000)])
    np.save(tmp_path / "x.npy", x)
    store = RunStore(tmp_path / "run.zarr")
    ingest(store, str(tmp_path / "x.npy"), standardize=True, chunk_rows=700)
    X = store["X"][:].astype(np.float64)
    np.testing.assert_allclose(X.std(0), 1.0, rtol=1e-3)
    np.testing.assert_allclose(X[:, 0], (x[:, 0] - x[:, 0].mean()) / x[:, 0].std(), atol=1e-4)


def test_zarr_group_labels_are_never_features(tmp_path):
    g = zarr.open_group(str(tmp_path / "in.zarr"), mode="w")
    g.create_array("X", data=np.arange(20.0).reshape(10, 2))
    g.create_array("y", data=np.arange(10) % 2)
    store = RunStore(tmp_path / "run.zarr")
    info = ingest(store, str(tmp_path / "in.zarr"))
    assert info["feature_names"] == ["x0", "x1"]
    np.testing.assert_array_equal(store["y_true"][:], np.arange(10) % 2)


def test_a_changed_zarr_input_is_read_again(tmp_path):
    g = zarr.open_group(str(tmp_path / "in.zarr"), mode="w")
    g.create_array("X", data=np.arange(20.0).reshape(10, 2), chunks=(5, 2))
    store = RunStore(tmp_path / "run.zarr")
    ingest(store, str(tmp_path / "in.zarr"), standardize=False)
    assert ingest(store, str(tmp_path / "in.zarr"), standardize=False)["skipped"]
    g["X"][:5] = -1.0  # rewrites chunk files inside the directory
    assert not ingest(store, str(tmp_path / "in.zarr"), standardize=False)["skipped"]
    assert store["X"][0, 0] == -1.0


@pytest.mark.parametrize(
    "text, line, fields",
    [
        ("1,2,3\n4,5,6\n7,8,9\n1,2\n3,4,5\n", 4, 2),  # before: "value nan in column 2 ... set impute: mean"
        ("1,2,3\n4,5,6,7\n", 2, 4),
        ('1,"a,b",3\n"x\ny",5,6\n7,8\n', 4, 2),  # quoted separators and line breaks are not counted
        ("\n\n1,2,3\r\n\r\n4,5,6\r\n7,8", 6, 2),  # blank lines, CRLF, no final line break
    ],
)
def test_rows_with_another_number_of_fields(text, line, fields, tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(text.encode())
    store = RunStore(tmp_path / "run.zarr")
    with pytest.raises(InputError, match=rf"t.csv, line {line} has {fields} fields, expected 3$"):
        ingest(store, str(path), impute="mean", categorical=[1])
    assert store.records() == {} and "X" not in store


def test_field_counts_across_read_blocks(tmp_path):
    rng = np.random.default_rng(0)
    x = np.round(rng.normal(size=(40_000, 3)), 6)  # ~1 MB: several of pandas' 256 kB reads
    lines = ['"a,1",b,"c\nd"'] + [",".join(map(str, row)) for row in x]
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines) + "\n")
    store = RunStore(tmp_path / "run.zarr")
    ingest(store, str(path), header=True, chunk_rows=7_000, standardize=False)
    np.testing.assert_allclose(store["X"][:], x.astype(np.float32))
    assert store["X"].attrs["feature_names"] == ["a,1", "b", "c\nd"]
    lines[31_234] = lines[31_234].rsplit(",", 1)[0]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"line 31236 has 2 fields, expected 3"):  # the header spans 2 lines
        ingest(store, str(path), header=True, chunk_rows=7_000)


def test_every_column_constant(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("a,b\n1,5\n1,5\n1,5\n")
    store = RunStore(tmp_path / "run.zarr")
    for drop_constant in (False, True):
        with pytest.raises(
            InputError, match=r"every feature column is constant over the 3 rows kept \(a, b\)"
        ):
            ingest(store, str(path), header=True, drop_constant=drop_constant)
    assert store.records() == {}


def test_another_source_with_the_same_n(tmp_path):
    """Before: silently re-ingested, and every later stage recomputed, where the README says it stops."""
    rng = np.random.default_rng(1)
    np.save(tmp_path / "a.npy", rng.normal(size=(30, 2)))
    np.save(tmp_path / "b.npy", rng.normal(size=(30, 3)))
    store = RunStore(tmp_path / "run.zarr")
    ingest(store, str(tmp_path / "a.npy"))
    with pytest.raises(
        InputError, match=r"holds the data set read from '.*a.npy', not from '.*b.npy'; use another"
    ):
        ingest(store, str(tmp_path / "b.npy"))
    assert store.record("ingest")["complete"] and store["X"].shape == (30, 2)
    # the same file under another name is the same source; a changed file is read again
    (tmp_path / "sub").mkdir()
    other_name = str(tmp_path / "sub" / ".." / "a.npy")  # another spelling of the same source: skipped
    assert ingest(store, other_name)["skipped"] is True
    np.save(tmp_path / "a.npy", rng.normal(size=(30, 4)))
    assert ingest(store, str(tmp_path / "a.npy"))["d"] == 4
    assert ingest(store, str(tmp_path / "b.npy"), overwrite=True)["d"] == 3


def test_missing_parquet_column_names_the_columns(tmp_path):
    pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 1.0]}).to_parquet(tmp_path / "t.parquet")
    store = RunStore(tmp_path / "run.zarr")
    with pytest.raises(InputError, match=r"t.parquet: no column 'nosuch'; columns are \['a', 'b'\]"):
        ingest(store, str(tmp_path / "t.parquet"), label_column="nosuch")


def test_quotes_inside_unquoted_fields_are_not_miscounted(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('h,size,w\n1,5\'11",3\n2,"6\'1""",4\n3,7,5\n')  # a literal quote; an escaped one
    store = RunStore(tmp_path / "run.zarr")
    info = ingest(store, str(path), header=True, categorical=["size"])
    assert info["n"] == 3 and store["X"].attrs["vocabularies"]["size"] == ["5'11\"", "6'1\"", "7"]


@pytest.mark.parametrize(
    "text, header",
    [
        ("sepal,petal,class\n5.1,1.4,setosa\n4.9,1.3,setosa\n6.2,4.5,versicolor\n", True),
        ("5.1,1.4,setosa\n4.9,1.3,setosa\n6.2,4.5,versicolor\n", False),  # UCI style: data from line 1
        ("x,y,label\n?,1.4,0\n4.9,,1\n6.2,4.5,0\n", True),  # missing tokens say nothing either way
        ("0,tcp,http,1\n1,udp,dns,0\n2,tcp,ftp,1\n", False),  # a number on the first line: data
        ("\n\na,b,label\n1,2,0\n3,4,1\n", True),  # blank lines first
        ("0,1,2,digit\n0.0,5.0,13.0,1\n", True),  # numbered columns (pandas' to_csv) above floats
        (",0,1\n0,-1.25,3.5\n1,0.5,2.0\n", True),  # and an index column
        ("0,1,2\n0.5,1,2\n", True),  # (one number below them written otherwise is enough)
        ("1,2,3\n4.5,1,2\n", False),  # numbered from 1: data
        ("0,x,1\n0.5,y,1\n", False),  # 0 and 1 not in one run: data
        ("0,1,x\n1,0,y\n", False),  # two of them above integers: two binary columns as likely
    ],
)
def test_csv_header_is_guessed_when_not_said(text, header, tmp_path):
    from ensemble_dask.io.readers import csv_has_header

    path = tmp_path / "t.csv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(text)
    assert csv_has_header(str(path)) is header


def test_ingest_reads_a_csv_with_header_without_being_told(tmp_path):
    """A table whose first line names its columns is read by those names with no ``header`` option; said
    explicitly, ``header=False`` still reads that line as data (and says why it fails)."""
    path = tmp_path / "named.csv"
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"width": rng.normal(size=50), "height": rng.normal(size=50), "kind": rng.integers(0, 3, 50)}
    )
    frame.to_csv(path, index=False)
    store = RunStore(str(tmp_path / "s.zarr"))
    info = ingest(store, str(path), label_column="kind", standardize=False)
    assert info["n"] == 50 and info["feature_names"] == ["width", "height"]
    np.testing.assert_allclose(store["X"][:], frame[["width", "height"]].to_numpy(), rtol=1e-6)
    with pytest.raises(InputError, match="no column 'kind'; the file has no header"):
        ingest(RunStore(str(tmp_path / "t.zarr")), str(path), label_column="kind", header=False)


_TABLE = [[5.1, 3.5, 0], [4.9, 3.0, 1], [6.2, 2.9, 1], [5.8, 2.7, 0]]


@pytest.mark.parametrize(
    "sep, line",
    [
        (",", "{},{},{}"),
        ("\t", "{}\t{}\t{}"),
        (";", "{};{};{}"),
        ("|", "{}|{}|{}"),
        (r"\s+", "{} {} {}"),
        (r"\s+", "  {}   {}  {}"),  # runs of spaces, leading blanks: the UCI .data layout
    ],
)
@pytest.mark.parametrize("header", [False, True])
def test_the_field_separator_is_guessed(sep, line, header, tmp_path):
    """A table separated by commas, tabs, semicolons, bars or whitespace is read the same with no ``sep``
    given; the guess is the separator that splits the first lines into equally many fields."""
    from ensemble_dask.io.readers import detect_separator

    names = line.format("width", "height", "kind") if header else None
    rows = [line.format(*r) for r in _TABLE]
    path = tmp_path / "t.data.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(([names] if header else []) + rows) + "\n")
    assert detect_separator(str(path)) == sep
    label = "kind" if header else "2"
    store = RunStore(str(tmp_path / "s.zarr"))
    info = ingest(store, str(path), label_column=label, standardize=False)
    assert (info["n"], info["d"]) == (4, 2)
    np.testing.assert_allclose(store["X"][:], np.array(_TABLE)[:, :2], rtol=1e-6)
    np.testing.assert_array_equal(store["y_true"][:], [0, 1, 1, 0])


def test_a_table_of_one_column_and_a_bad_separator(tmp_path):
    from ensemble_dask.io.readers import detect_separator

    path = tmp_path / "one.csv"
    path.write_text("1.5\n2.5\n3.5\n")
    assert detect_separator(str(path)) == ","
    info = ingest(RunStore(str(tmp_path / "s.zarr")), str(path), standardize=False)
    assert (info["n"], info["d"]) == (3, 1)
    with pytest.raises(InputError, match="The 'sep' parameter must be one character.*got 'ab'"):
        ingest(RunStore(str(tmp_path / "t.zarr")), str(path), sep="ab")


def test_a_uci_data_file_is_read_as_it_is(uci_dir, tmp_path):
    """The UCI repository's whitespace-separated glass.data, no option given: 214 points, 9 features."""
    path = uci_dir / "glass.data.gz"
    store = RunStore(str(tmp_path / "s.zarr"))
    info = ingest(store, str(path), standardize=False)
    assert (info["n"], info["d"]) == (214, 9)
    np.testing.assert_allclose(store["X"][:], np.loadtxt(path), rtol=1e-6)
    # said explicitly, the same store is up to date (the guess is recorded as the separator it found)
    assert ingest(store, str(path), standardize=False, sep="whitespace")["skipped"]


@pytest.mark.parametrize("option", ["label_column", "categorical"])
def test_a_missing_column_of_a_whitespace_separated_file_is_named(option, tmp_path):
    """A UCI-style file (whitespace between the fields) and a column it does not have: the message that a
    comma-separated file gives, not pandas' "Usecols do not match columns" (which was a traceback)."""
    path = tmp_path / "t.data"
    path.write_text("1 2.5 3.1 1\n2 2.1 3.3 2\n3 2.7 3.0 1\n")
    value = {"label_column": "99", "categorical": ["99"]}[option]
    with pytest.raises(InputError, match=r"t.data: no column 99; the file has no header .* numbered 0..3"):
        ingest(RunStore(str(tmp_path / "s.zarr")), str(path), **{option: value})
    assert not (tmp_path / "s.zarr").exists() or RunStore(str(tmp_path / "s.zarr")).record("ingest") is None


def test_an_unknown_column_to_drop_is_an_error(tmp_path):
    """``drop`` names columns as ``label_column`` and ``categorical`` do: one the table does not have is an
    error naming it (it was left out of nothing, silently), in any format, and no stage is marked."""
    frame = pd.DataFrame({"a": [1.0, 2.0, 4.0], "b": [3.0, 1.0, 0.0], "class": ["x", "y", "x"]})
    frame.to_parquet(tmp_path / "t.parquet")
    frame.to_csv(tmp_path / "t.csv", index=False)
    np.save(tmp_path / "t.npy", frame[["a", "b"]].to_numpy())
    store = RunStore(str(tmp_path / "s.zarr"))
    for name, columns in (("t.parquet", "['a', 'b', 'class']"), ("t.csv", "['a', 'b', 'class']")):
        with pytest.raises(InputError, match=rf"{name}: no column 'nope'; columns are {re.escape(columns)}"):
            ingest(store, str(tmp_path / name), label_column="class", drop=["b", "nope"])
    with pytest.raises(InputError, match=r"t.npy: no column 'nope'; columns are \['x0', 'x1'\]"):
        ingest(store, str(tmp_path / "t.npy"), drop=["nope"])
    assert store.record("ingest") is None
    assert ingest(store, str(tmp_path / "t.parquet"), label_column="class", drop=["b"])["feature_names"] == [
        "a"
    ]


def test_a_first_line_of_column_numbers(tmp_path):
    """``0,1,...,63,digit`` (pandas' ``to_csv`` of a frame with numbered columns) was read as a data row when
    no header was said: one point too many, silently. Above floats it is a header; above integers it could
    be a row as well, and ingest asks which."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(20, 3)))
    frame["digit"] = rng.integers(0, 2, 20)
    frame.to_csv(tmp_path / "floats.csv", index=False)
    store = RunStore(str(tmp_path / "s.zarr"))
    info = ingest(store, str(tmp_path / "floats.csv"), label_column="digit", standardize=False)
    assert (info["n"], info["feature_names"]) == (20, ["0", "1", "2"])
    np.testing.assert_allclose(store["X"][:], frame[[0, 1, 2]].to_numpy(), rtol=1e-6)
    frame[[0, 1, 2]] = rng.integers(0, 9, (20, 3))
    frame.to_csv(tmp_path / "ints.csv", index=False)
    other = RunStore(str(tmp_path / "t.zarr"))
    with pytest.raises(
        InputError, match=r"ints.csv: the first line \('0,1,2,digit'\) numbers the columns 0..2"
    ):
        ingest(other, str(tmp_path / "ints.csv"), label_column="digit")
    assert other.record("ingest") is None
    assert ingest(other, str(tmp_path / "ints.csv"), label_column="digit", header=True)["n"] == 20
    assert (
        ingest(other, str(tmp_path / "ints.csv"), label_column="3", header=False, overwrite=True)["n"] == 21
    )


def test_a_categorical_column_of_numbers_with_decimals_is_named(tmp_path, caplog):
    """A measurement declared categorical was coded silently, ranked by its text ('10.5' before '2.25'): a
    warning names it and its number of values; whole numbers and text stay quiet, as they were."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "size": rng.normal(5, 3, 40).round(2),  # a measurement
            "code": rng.integers(1, 12, 40).astype(float),  # whole numbers: codes written as floats
            "proto": rng.choice(["tcp", "udp"], 40),
            "x": rng.normal(size=40),
        }
    )
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    with caplog.at_level("WARNING", logger="ensemble_dask.stages.ingest"):
        info = ingest(RunStore(tmp_path / "a.zarr"), str(path), categorical=["size", "code", "proto"])
    n_sizes = frame["size"].astype(str).nunique()
    assert info["numbers_as_categories"] == {"size": n_sizes}
    assert f"'size' ({n_sizes} values)" in caplog.text
    assert "leave a measurement out of 'categorical'" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="ensemble_dask.stages.ingest"):
        info = ingest(RunStore(tmp_path / "b.zarr"), str(path), categorical=["code", "proto"])
    assert info["numbers_as_categories"] == {} and "categorical" not in caplog.text


def test_a_missing_value_of_a_categorical_column_is_named(tmp_path):
    """An empty field of a categorical column ended ingest in a TypeError traceback (pandas 3 keeps it
    missing as text, which does not sort against the other values): an error naming its line and column."""
    path = tmp_path / "gap.csv"
    path.write_text("proto,x\ntcp,1\n,2\nudp,3\n")
    store = RunStore(tmp_path / "gap.zarr")
    with pytest.raises(InputError, match="gap.csv, line 3: missing value in categorical column 'proto'"):
        ingest(store, str(path), categorical=["proto"])
    assert store.records() == {}
    # review: only the rows kept count (a class filter drops the row with the gap), and a token pandas reads
    # as missing (region "NA") is said to be one
    (tmp_path / "kept.csv").write_text("proto,x,label\ntcp,1,a\n,2,b\nudp,3,a\ntcp,4,a\n")
    info = ingest(RunStore(tmp_path / "k.zarr"), str(tmp_path / "kept.csv"), categorical=["proto"],
                  label_column="label", classes=["a"])  # fmt: skip
    assert info["n"] == 3
    (tmp_path / "na.csv").write_text("region,x\nEU,1\nNA,2\nEU,3\n")
    with pytest.raises(InputError, match=r"line 3: missing value .* a token read as missing: NA"):
        ingest(RunStore(tmp_path / "na.zarr"), str(tmp_path / "na.csv"), categorical=["region"])


def test_a_categorical_column_of_numbers_is_coded_as_written_in_any_block(tmp_path):
    """Review: a CSV's categorical column of numbers was parsed block by block, so 1 read as '1' in a block of
    whole numbers and as '1.0' in a block that also held 1.5: two categories of one value, and codes that
    depended on the block size. It is read as the text written."""
    sizes = ["1", "2", "3", "1", "2", "1.5", "2.5", "1", "2", "3"]
    path = tmp_path / "t.csv"
    path.write_text("size,x\n" + "".join(f"{v},{i}\n" for i, v in enumerate(sizes)))
    stores = {}
    for rows in (5, 100):
        stores[rows] = RunStore(tmp_path / f"b{rows}.zarr")
        info = ingest(stores[rows], str(path), categorical=["size"], chunk_rows=rows)
        assert info["numbers_as_categories"] == {"size": 5}
        assert stores[rows]["X"].attrs["vocabularies"] == {"size": ["1", "1.5", "2", "2.5", "3"]}
    np.testing.assert_array_equal(stores[5]["X"][:], stores[100]["X"][:])


def test_data_ingested_into_a_store_of_imported_labels_keeps_them_and_their_results(tmp_path):
    """Review: ``ingest`` into a store that held imported labels (and pairs and results made from them)
    deleted all of them, exit 0, as if it replaced another data set; the guide says to ingest data there to
    use gbce. They stay, and the results fitted before the data brought y_true are scored against it."""
    from ensemble_dask.stages.coassoc import coassoc_stage
    from ensemble_dask.stages.consensus import consensus_stage, current_results
    from ensemble_dask.stages.generate import import_labels

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 40)
    X = rng.normal(size=(120, 3)) + 4.0 * y[:, None]
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "class": y}).to_csv(
        tmp_path / "t.csv", index=False
    )
    labels = np.column_stack([np.where(rng.random(120) < 0.9, y, rng.integers(0, 3, 120)) for _ in range(6)])
    store = RunStore(tmp_path / "s.zarr")
    import_labels(store, "mine", labels=labels.astype(np.int32))
    coassoc_stage(store, seed=0)
    consensus_stage(store, "bce", seed=0, n_clusters=3)
    assert "ARI" not in current_results(store)["bce"]  # no y_true yet
    before = {name: store.record(name)["finished"] for name in ("coassoc", "consensus/bce")}
    ingest(store, str(tmp_path / "t.csv"), label_column="class")
    np.testing.assert_array_equal(store["labels"][:], labels)
    assert {name: (store.record(name) or {}).get("finished") for name in before} == before
    results = current_results(store)
    assert set(results) == {"bce"} and results["bce"]["ARI"] > 0.9  # up to date, now scored
    assert consensus_stage(store, "bce", seed=0, n_clusters=3)["ARI"] == results["bce"]["ARI"]  # (skipped)
    consensus_stage(store, "gbce", seed=0, n_clusters=3)
    assert set(current_results(store)) == {"bce", "gbce"}


def test_a_column_without_a_name_is_named_in_a_warning(tmp_path, caplog):
    """Review: a CSV written by pandas' to_csv with its index was ingested with the row number as a feature,
    'Unnamed: 0', with no word."""
    import logging

    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "b": [0.5, 0.1, 0.7, 0.2]})
    frame.to_csv(tmp_path / "t.csv")  # (index=True: an unnamed first column 0, 1, 2, 3)
    with caplog.at_level(logging.WARNING, logger="ensemble_dask"):
        info = ingest(RunStore(tmp_path / "s.zarr"), str(tmp_path / "t.csv"))
    assert info["feature_names"] == ["Unnamed: 0", "a", "b"]
    assert "without a name in the header, read as features: Unnamed: 0" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ensemble_dask"):
        ingest(RunStore(tmp_path / "d.zarr"), str(tmp_path / "t.csv"), drop=["Unnamed: 0"])
    assert "without a name" not in caplog.text


def test_an_ingest_that_stopped_halfway_is_not_taken_for_a_store_of_labels_alone(tmp_path, monkeypatch):
    """Review: a re-ingest of other data that stopped while writing X (its record gone) was, on the next
    ingest, taken for the first data of a store of imported labels: the results computed from the old data
    stayed current beside the new."""
    from ensemble_dask.stages import ingest as ingest_module
    from ensemble_dask.stages.coassoc import coassoc_stage
    from ensemble_dask.stages.consensus import consensus_stage, current_results
    from ensemble_dask.stages.generate import import_labels

    rng = np.random.default_rng(0)

    def table(y):
        X = rng.normal(size=(120, 3)) + 4.0 * y[:, None]
        pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "class": y}).to_csv(
            tmp_path / "t.csv", index=False
        )

    y = np.repeat(np.arange(3), 40)
    table(y)
    store = RunStore(tmp_path / "s.zarr")
    ingest(store, str(tmp_path / "t.csv"), label_column="class")
    import_labels(store, "mine", labels=np.column_stack([y] * 4).astype(np.int32))  # (its record reads X's)
    coassoc_stage(store, seed=0)
    consensus_stage(store, "bce", seed=0, n_clusters=3)
    table(rng.permutation(y))  # other data of the same n

    class Stopped(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stopped

    with monkeypatch.context() as m:  # ingest's content hash: in the write pass, after the record is unmarked
        m.setattr(ingest_module, "hashlib", type("hashlib", (), {"sha256": staticmethod(stop)}))
        with pytest.raises(Stopped):
            ingest(store, str(tmp_path / "t.csv"), label_column="class", overwrite=True)
    assert store.record("ingest") is None
    ingest(store, str(tmp_path / "t.csv"), label_column="class")
    assert current_results(store) == {} and "labels" not in store


def test_a_byte_order_mark_is_not_part_of_the_first_column_name(tmp_path):
    """From a user review: Excel's "CSV UTF-8" begins with a byte-order mark, which became part of the first
    column's name ('\\ufeffalcohol'): --label-column alcohol, or predict's new rows by name, missed it."""
    from ensemble_dask.io.readers import iter_table_chunks

    frame = pd.DataFrame({"alcohol": [1.0, 2.0, 3.0, 4.0], "hue": [0.5, 0.6, 0.7, 0.9], "kind": list("abab")})
    frame.to_csv(tmp_path / "bom.csv", index=False, encoding="utf-8-sig")
    assert (tmp_path / "bom.csv").read_bytes().startswith(b"\xef\xbb\xbf")
    chunks = iter_table_chunks(str(tmp_path / "bom.csv"), header=True, sep=",", usecols=["alcohol", "kind"])
    ((_, got),) = chunks
    assert list(got.columns) == ["alcohol", "kind"]
    store = RunStore(tmp_path / "run.zarr")
    ingest(store, str(tmp_path / "bom.csv"), label_column="kind")
    assert store["X"].attrs["feature_names"] == ["alcohol", "hue"]


def test_a_csv_read_as_one_column_hints_at_its_separator(tmp_path):
    """From a user review: new rows separated by ';' read with ',' said only "no column 'a'; columns are
    ['a;b']"."""
    from ensemble_dask.io.readers import iter_table_chunks

    pd.DataFrame({"a": [1, 2], "b": [3, 4]}).to_csv(tmp_path / "semi.csv", sep=";", index=False)
    with pytest.raises(InputError, match=r"columns are \['a;b'\] \(one column: are its fields separated by"):
        list(iter_table_chunks(str(tmp_path / "semi.csv"), header=True, sep=",", usecols=["a"]))
    pd.DataFrame({"a": [1, 2], "b": [3, 4]}).to_csv(tmp_path / "comma.csv", index=False)
    with pytest.raises(InputError, match=r"columns are \['a', 'b'\]$"):  # no hint where it is split
        list(iter_table_chunks(str(tmp_path / "comma.csv"), header=True, sep=",", usecols=["c"]))


def test_reading_the_same_source_into_other_data_keeps_the_results_unless_overwritten(tmp_path):
    """A user review (2026-12-06): ingesting the same file again with one option changed (``--drop``,
    ``--no-standardize``), or after an edit, replaced the data and deleted every result computed from it,
    with exit 0 and no word. Now that stops, naming the options and the results, unless overwritten; options
    that give the same data keep them (``test_content_stages.py``)."""
    from ensemble_dask.stages._same_data import OtherDataError
    from ensemble_dask.stages.generate import import_labels

    rng = np.random.default_rng(0)
    pd.DataFrame(rng.normal(size=(60, 3)), columns=["a", "b", "c"]).to_csv(tmp_path / "t.csv", index=False)
    store = RunStore(tmp_path / "s.zarr")
    ingest(store, str(tmp_path / "t.csv"))
    import_labels(store, "mine", labels=rng.integers(0, 3, (60, 4)).astype(np.int32))
    X = store["X"][:]
    said = r"results computed from the data read from .*t.csv' \(generate\); reading it again with other "
    with pytest.raises(OtherDataError, match=said + r"options \(drop\) gives other data"):
        ingest(store, str(tmp_path / "t.csv"), drop=["c"])
    with pytest.raises(OtherDataError, match=r"other options \(standardize\).*--overwrite"):
        ingest(store, str(tmp_path / "t.csv"), standardize=False)
    frame = pd.read_csv(tmp_path / "t.csv")
    frame.loc[5, "a"] += 1.0
    frame.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(OtherDataError, match=r"reading it again from changed content gives other data"):
        ingest(store, str(tmp_path / "t.csv"))
    assert store.record("ingest")["complete"] and store.record("generate")["complete"]
    np.testing.assert_array_equal(store["X"][:], X)
    assert ingest(store, str(tmp_path / "t.csv"), overwrite=True)["skipped"] is False
    assert store.record("generate") is None and "labels" not in store


def test_a_folder_of_the_users_own_keeps_its_files(tmp_path):
    """A user review (2026-12-06): ingesting into an existing folder that was no store deleted its
    ``report/`` subfolder (the store's report folder, cleared for new data where there was no old); and
    after the first ingest kept it, ``ingest(..., overwrite=True)`` still cleared it. Such a folder is no
    store: opening it to write is refused, and it is left as it was."""
    folder = tmp_path / "proj"
    (folder / "report").mkdir(parents=True)
    (folder / "report" / "notes.md").write_text("notes")
    with pytest.raises(InputError, match="is a folder of other files; give a new or empty folder"):
        RunStore(folder)
    assert sorted(p.name for p in folder.rglob("*")) == ["notes.md", "report"]


@pytest.mark.parametrize("label_column", [2, "2", "x2"])
def test_an_arrays_column_is_named_by_its_position_too(tmp_path, label_column):
    """An .npy's columns are x0, x1, ...: ``--label-column 2`` failed where ``x2`` worked (a CSV without
    header takes the position)."""
    rng = np.random.default_rng(0)
    x = np.c_[rng.normal(size=(50, 2)), rng.integers(0, 3, 50), rng.normal(size=50)]
    np.save(tmp_path / "t.npy", x)
    store = RunStore(tmp_path / "s.zarr")
    info = ingest(store, str(tmp_path / "t.npy"), label_column=label_column, standardize=False)
    assert info["feature_names"] == ["x0", "x1", "x3"]
    assert np.array_equal(store["X"][:], x[:, [0, 1, 3]].astype(np.float32))
    assert len(np.unique(store["y_true"][:])) == 3

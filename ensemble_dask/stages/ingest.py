"""Ingest: read a table from any URL into the run store's ``X`` (float32) and ``y_true``.

The input is streamed in row blocks three times, so it never has to fit in memory:

1. *scan*: only the label and categorical columns, to count rows, pick the rows to keep
   (class filter, seeded subset) and learn each categorical column's vocabulary;
2. *check*: every kept value is parsed and checked (non-numeric text, NaN, infinity), and
   per-column sums for standardisation are accumulated; nothing has been written yet, so bad
   input leaves the store untouched;
3. *write*: the transformed blocks are written to ``X`` and ``y_true``.

Preprocessing
-------------
- Numeric columns are parsed as float64; with ``standardize=True`` (the default, as diceR's
  ``scale=TRUE``: a clustering should not depend on the unit a column is measured in) each is
  centred and divided by its standard deviation over the kept rows; ``standardize=False`` keeps
  the values as read. A column constant over the kept rows has no scale: it
  is only centred, so it is all zeros in ``X`` (harmless to k-means and to the pair methods: it
  adds nothing to any distance), or dropped with ``drop_constant=True``. Either way the summary
  names it (``constant_columns`` when kept, ``dropped_constant`` when dropped).
- Categorical columns are **ordinal-coded**: a value's code is its rank in the sorted list of
  the values present in the kept rows (so the coding does not depend on row order or chunking),
  and the code column is then standardised like any numeric column. Values are ranked as text, so a
  categorical column of numbers with decimals (a measurement declared categorical by mistake) is
  coded in the order of its text, not of its value: a warning names it, and the summary's
  ``numbers_as_categories`` gives its number of distinct values. This is the "discretising"
  of Lourenço et al. 2015 Sect. 7.3, which turns the 41 KDD attributes into a 39-d space once the two
  constant columns of its 120,000-record subset are dropped.
- The label column is kept apart as ``y_true`` (int32 codes; the class names are in the
  ``classes`` attribute); it is never used to fit.
- ``impute="mean"`` replaces NaN by the column mean (over the kept rows); without it, NaN or
  infinity is an error naming the row and column.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import warnings

import numpy as np

from .._validation import InputError, check_int, stage_seed
from ..io import datasets
from ..io.lease import check_held
from ..io.readers import (
    check_sep,
    csv_has_header,
    detect_separator,
    iter_table_chunks,
    zarr_has_labels,
)
from ..io.store import RECORDS_DIR
from ..io.urls import infer_format, source_fingerprint
from ._ingest_blocks import _blocks, _identity, _merge_moments
from ._ingest_text import _missing_category, _numbers_with_decimals, _shorten
from ._same_data import check_results_kept, check_same_n, check_same_source, results_at_risk
from .reference import REFERENCE, drop_reference

__all__ = ["ingest", "ingest_params"]

logger = logging.getLogger(__name__)

SCHEMAS = {
    "kdd99": dict(
        columns=datasets.KDD99_COLUMNS,
        label_column=datasets.KDD99_LABEL,
        categorical=datasets.KDD99_CATEGORICAL,
        standardize=True,
        drop_constant=True,
        format="csv",
    ),
}


def ingest_params(
    url,
    *,
    format=None,
    schema=None,
    columns=None,
    label_column=None,
    labels=None,
    categorical=(),
    drop=(),
    header=None,
    sep=None,
    classes=None,
    subset=None,
    standardize=None,
    drop_constant=None,
    impute=None,
    chunk_rows=50_000,
):
    """Resolve the ingest options (schema defaults filled in), validating each.

    The options are those of :func:`ingest` and of the CLI's ``ingest``; three defaults need saying:

    Parameters
    ----------
    labels : str, default=None
        A file of the reference labels of their own, one per row of the table in its order, instead of a
        ``label_column`` (:func:`~ensemble_dask.stages.reference.read_reference`: ``.npy``, CSV or Parquet of
        one column).
    header : bool, default=None
        Whether a CSV's first line names its columns. None: guessed when the table is read
        (:func:`~ensemble_dask.io.readers.csv_has_header`: no number on the first line, one on the
        second; or column numbers 0, 1, ... above a number such as ``0.5``); without a header the columns are
        numbered 0, 1, ...
    sep : str, default=None
        A CSV's field separator: one character, ``"tab"`` or ``"whitespace"`` (runs of spaces and tabs,
        as in the UCI repository's ``.data`` files). None: guessed when the table is read
        (:func:`~ensemble_dask.io.readers.detect_separator`: the first of ``,``, tab, ``;``, ``|`` and
        whitespace that splits its first lines into equally many fields).
    standardize : bool, default=None
        Centre each feature column and divide it by its standard deviation over the kept rows
        (z-scores). None means True: k-means and the pair methods compare distances, which a
        column in large units would otherwise dominate. False keeps the values as read
        (``ingest --no-standardize``): for features in one unit, whose spread carries meaning. The
        benchmarks page ("The CLI's defaults") measures both on the UCI sets.
    drop_constant : bool, default=None
        Drop the columns constant over the kept rows (True for the ``kdd99`` schema); otherwise
        they are kept, as zeros when standardised, and named in the summary's ``constant_columns``.
    """
    if schema is not None and schema not in SCHEMAS:
        raise InputError(f"The 'schema' parameter must be one of {sorted(SCHEMAS)} or None; got {schema!r}")
    base = dict(SCHEMAS.get(schema, {}))
    p = dict(
        url=str(url),
        format=format or base.get("format") or infer_format(str(url)),
        schema=schema,
        columns=list(columns) if columns is not None else base.get("columns"),
        label_column=label_column if label_column is not None else base.get("label_column"),
        labels=None if labels is None else str(labels),
        categorical=list(categorical) or list(base.get("categorical", [])),
        drop=list(drop),
        header=None if header is None else bool(header),
        sep=check_sep(sep),
        classes=None if classes is None else [str(c) for c in classes],
        subset=None if subset is None else check_int(subset, "subset", min_value=1),
        standardize=bool(base.get("standardize", True) if standardize is None else standardize),
        drop_constant=bool(base.get("drop_constant", False) if drop_constant is None else drop_constant),
        impute=impute,
        chunk_rows=check_int(chunk_rows, "chunk_rows", min_value=1),
    )
    if impute not in (None, "mean"):
        raise InputError(f"The 'impute' parameter must be None or 'mean'; got {impute!r}")
    if p["url"].startswith("synthetic:"):
        p["format"] = "synthetic"
        p["columns"] = None
    if p["format"] == "synthetic" and p["label_column"] is None and labels is None:
        p["label_column"] = "label"
    if labels is not None and p["label_column"] is not None:
        raise InputError(
            "The reference labels come from a column of the table (label_column) or from a file of their own "
            f"(labels), not both; got label_column={p['label_column']!r} and labels={p['labels']!r}"
        )
    if p["url"].startswith("synthetic:kdd99"):
        p["categorical"] = p["categorical"] or list(datasets.KDD99_CATEGORICAL)
        if drop_constant is None:
            p["drop_constant"] = True
    return p


def _label_strings(series):
    s = series.astype(str).str.strip()
    return s.str.removesuffix(".")


def positional_csv(p):
    """Whether ``p`` (:func:`ingest_params`) reads a CSV whose columns are its places: no header, no
    ``columns``."""
    return p["format"] == "csv" and not p["header"] and p["columns"] is None


def positional_width(p, frame):
    """The columns of a table whose columns are named by their place (a ``.npy`` or zarr array: ``x0``,
    ``x1``, ...; a CSV without header or ``columns``: 0, 1, ...), from a block of it read whole; None for a
    table of named columns. New rows of another width would be read with their columns shifted
    (``predict``)."""
    if p["format"] in ("npy", "zarr"):
        return sum(1 for c in frame.columns if re.fullmatch(r"x\d+", str(c)))  # (not a group's labels)
    if positional_csv(p):
        return frame.shape[1]
    return None


class _Reader:
    """The three passes over one source, sharing the row selection and the encodings."""

    #: what a message about a missing number says to do (predict's reader says its own)
    nan_remedy = "set impute: mean (--impute mean; ConsensusClustering's data_params) to replace NaN"

    def __init__(self, p, storage_options):
        position = None
        if positional_csv(p):
            # a CSV without header has columns 0, 1, ...: "3" (from the command line) means column 3
            def position(c):
                return int(c) if isinstance(c, str) and c.isdigit() else c

        elif p["format"] == "npy":
            # an array's columns are x0, x1, ...: a position (3, or "3" from the command line) means x3
            def position(c):
                digits = isinstance(c, str) and c.isdigit()
                return f"x{int(c)}" if digits or (isinstance(c, int) and not isinstance(c, bool)) else c

        if position is not None:
            p = dict(p)
            p["label_column"] = position(p["label_column"])
            p["categorical"] = [position(c) for c in p["categorical"]]
            p["drop"] = [position(c) for c in p["drop"]]
        self.p = p
        self.storage_options = storage_options
        self.fmt = p["format"]
        self.row_base = 2 if p["header"] else 1  # line number of row 0 in a text file
        self.unseen_counts = {}  # predict's unseen="mean": values outside the vocabulary, by column

    def chunks(self, usecols=None, check_fields=False):
        """The source's blocks; only the first pass checks the CSV lines' field counts."""
        p = self.p
        kw = dict(
            check_fields=check_fields,
            format=self.fmt,
            storage_options=self.storage_options,
            chunk_rows=p["chunk_rows"],
            columns=p["columns"],
            header=p["header"],
            sep=p["sep"],
        )
        if self.fmt == "csv" and p["categorical"]:  # codes of the text written, whatever else a block holds
            kw["text_columns"] = list(p["categorical"])
        if usecols is not None and self.fmt in ("csv", "parquet"):
            kw["usecols"] = usecols
        yield from iter_table_chunks(p["url"], **kw)

    def where(self, offset, i):
        if self.fmt == "csv":
            return f"{self.p['url']}, line {offset + i + self.row_base}"
        return f"{self.p['url']}, row {offset + i}"

    def _column(self, frame, col):
        if col not in frame.columns:
            raise InputError(f"{self.p['url']}: no column {col!r}; columns are {list(frame.columns)}")
        return frame[col]

    # -- pass 1 -------------------------------------------------------------------------------
    def scan(self, seed):
        import pandas as pd

        p = self.p
        keys = ([p["label_column"]] if p["label_column"] is not None else []) + p["categorical"]
        keys += [c for c in p["drop"] if c not in keys]  # read too, so that an unknown one is named
        first = None
        if self.fmt == "csv" and p["columns"] is None and not p["header"] and not keys:
            first = [0]
        labels, cats, n_total, gaps_of = [], {c: [] for c in p["categorical"]}, 0, {}
        for offset, frame in self.chunks(usecols=keys or first, check_fields=True):
            n_total = offset + len(frame)
            for c in p["drop"]:
                self._column(frame, c)
            if p["label_column"] is not None:
                lab = self._column(frame, p["label_column"])
                if lab.isna().any():
                    i = int(np.flatnonzero(lab.isna().to_numpy())[0])
                    raise InputError(
                        f"{self.where(offset, i)}: missing value in label column {p['label_column']!r} "
                        "(a row with too few columns?)"
                    )
                labels.append(pd.Categorical(_label_strings(lab)))
            for c in p["categorical"]:
                col = self._column(frame, c)
                gaps = np.flatnonzero(col.isna().to_numpy())
                if gaps.size:  # an error only if a kept row holds it (the rows kept are known below)
                    gaps_of.setdefault(c, []).append(offset + gaps)
                cats[c].append(pd.Categorical(col.astype(str).str.strip().mask(col.isna())))
        if n_total == 0:
            raise InputError(f"{p['url']}: the table is empty")
        if p["labels"] is not None:  # a file of their own, a label for each row of the table
            from .reference import read_reference

            labels = [
                pd.Categorical(
                    read_reference(p["labels"], n_total, f"data {p['url']!r}", self.storage_options)
                )
            ]
        self.n_total = n_total
        self.labels = pd.api.types.union_categoricals(labels) if labels else None
        keep = np.ones(n_total, dtype=bool)
        if p["classes"] is not None:
            if self.labels is None:
                raise InputError("The 'classes' option needs a label column; set label_column")
            present = set(self.labels.categories)
            missing = [c for c in p["classes"] if c not in present]
            if missing:
                raise InputError(
                    f"{p['url']}: classes {missing} do not occur in label column {p['label_column']!r}; "
                    f"present classes: {sorted(present)[:30]}"
                )
            keep &= np.isin(np.asarray(self.labels), p["classes"])
        idx = np.flatnonzero(keep)
        if idx.size == 0:
            raise InputError(f"{p['url']}: no row is left after selecting classes {p['classes']}")
        if p["subset"] is not None:
            if p["subset"] > idx.size:
                raise InputError(
                    f"The 'subset' parameter ({p['subset']}) exceeds the {idx.size} rows "
                    f"available in {p['url']}"
                )
            rng = np.random.default_rng(stage_seed(seed, "ingest"))
            idx = np.sort(rng.choice(idx, size=p["subset"], replace=False))
        self.keep = np.zeros(n_total, dtype=bool)
        self.keep[idx] = True
        self.n = int(idx.size)
        for c, parts in gaps_of.items():
            gaps = np.concatenate(parts)
            kept = gaps[self.keep[gaps]]
            if kept.size:
                raise InputError(f"{self.where(0, int(kept[0]))}: {_missing_category(c)}")
        self.vocab = {}
        for c, parts in cats.items():
            allc = pd.api.types.union_categoricals(parts)
            self.vocab[c] = sorted(set(np.asarray(allc)[self.keep]))
        self.numbers_as_categories = {
            str(c): len(v) for c, v in self.vocab.items() if _numbers_with_decimals(v)
        }
        if self.labels is not None:
            kept = np.asarray(self.labels)[self.keep]
            self.classes = sorted(set(kept))
            self.y = np.searchsorted(self.classes, kept).astype(np.int32)
        else:
            self.classes, self.y = None, None

    def _category_text(self, s, c, offset, rows=None):
        """The values of categorical column ``c`` as stripped text; a missing value is an error naming its row
        (pandas keeps it missing as text, and it would sort against the text of the others)."""
        missing = s.isna().to_numpy()
        if missing.any():
            i = int(np.flatnonzero(missing)[0])
            raise InputError(f"{self.where(offset, i if rows is None else rows[i])}: {_missing_category(c)}")
        return s.astype(str).str.strip()

    # -- passes 2 and 3 -------------------------------------------------------------------------
    def features(self, offset, frame, unseen=None):
        """Numeric float64 block of the kept rows of ``frame`` (categoricals coded; ``keep`` None: every row).

        ``unseen="error"``: a categorical value outside the vocabulary is an error naming it (new rows coded
        with the vocabulary of a fitted data set); ``"mean"``: its code is NaN (the caller puts the column's
        mean there), counted by column in ``unseen_counts``."""
        import pandas as pd

        p = self.p
        sel = (
            np.ones(len(frame), dtype=bool) if self.keep is None else self.keep[offset : offset + len(frame)]
        )
        frame = frame.loc[sel]
        rows = np.flatnonzero(sel)
        drop = set(p["drop"]) | ({p["label_column"]} if p["label_column"] is not None else set())
        cols = [c for c in frame.columns if c not in drop]
        self.feature_names = [str(c) for c in cols]
        out = np.empty((len(frame), len(cols)), dtype=np.float64)
        for j, c in enumerate(cols):
            s = frame[c]
            if c in self.vocab:
                values = self._category_text(s, c, offset, rows).to_numpy()
                codes = np.searchsorted(self.vocab[c], values)
                out[:, j] = codes
                if unseen in ("error", "mean"):
                    vocab = np.asarray(self.vocab[c], dtype=object)
                    bad = (codes >= len(vocab)) | (vocab[np.minimum(codes, len(vocab) - 1)] != values)
                    if bad.any() and unseen == "error":
                        i = int(np.flatnonzero(bad)[0])
                        raise InputError(
                            f"{self.where(offset, rows[i])}: value {values[i]!r} of categorical column {c!r} "
                            f"is none of the {len(vocab)} the store's data set holds (--unseen mean: place "
                            "such values at the column's mean)"
                        )
                    if bad.any():
                        out[bad, j] = np.nan
                        self.unseen_counts[str(c)] = self.unseen_counts.get(str(c), 0) + int(bad.sum())
                continue
            if pd.api.types.is_numeric_dtype(s.dtype):
                v = s.to_numpy(dtype=np.float64, na_value=np.nan)
            else:
                v = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64)
                bad = np.isnan(v) & s.notna().to_numpy()
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    raise InputError(
                        f"{self.where(offset, rows[i])}: non-numeric value {s.iloc[i]!r} in numeric "
                        f"column {c!r} (declare it in 'categorical' or 'drop' it: --categorical, --drop, or "
                        "ConsensusClustering's data_params)"
                    )
            if p["impute"] is None and not np.isfinite(v).all():
                i = int(np.flatnonzero(~np.isfinite(v))[0])
                raise InputError(
                    f"{self.where(offset, rows[i])}: value {v[i]} in column {c!r}; X must be finite "
                    f"({self.nan_remedy})"
                )
            if np.isinf(v).any():
                i = int(np.flatnonzero(np.isinf(v))[0])
                raise InputError(f"{self.where(offset, rows[i])}: infinite value in column {c!r}")
            out[:, j] = v
        return out


def ingest(store, url, *, seed=0, storage_options=None, overwrite=False, check_n=None, **options):
    """Read the table at ``url`` into ``store`` (a :class:`~ensemble_dask.io.store.RunStore`).

    Parameters
    ----------
    store : RunStore
    url : str
        Path or fsspec URL of the input, or ``synthetic:kdd99?n=...&seed=...``.
    seed : int, default=0
        Seed of the class-filtered subset draw.
    storage_options : dict, default=None
        fsspec options for reading ``url``.
    overwrite : bool, default=False
        Allow replacing a store that holds another data set (read from another source, or with
        another number of points); otherwise that is an error.
    check_n : callable or None, default=None
        Called with the number of rows kept once they are counted, before anything is written: the caller's
        checks of the data's size (a workflow's ``n_clusters``), so that one that fails leaves the stage
        unmarked.
    **options
        See :func:`ingest_params` (``schema="kdd99"``, ``classes``, ``subset``, ``label_column``,
        ``categorical``, ``standardize``, ``impute``, ...).

    Returns
    -------
    dict
        ``{"n", "d", "n_total", "classes", "class_counts", "feature_names", "dropped_constant",
        "constant_columns", "skipped"}``; ``constant_columns`` names the columns kept in ``X``
        although constant over the kept rows (all zeros when standardised).
    """
    p = ingest_params(url, **options)
    if p["format"] == "csv" and p["sep"] is None:  # not said: guessed from the first lines
        p["sep"] = detect_separator(p["url"], storage_options)
    if p["format"] == "csv" and p["header"] is None:  # not said: guessed from the first two lines
        p["header"] = p["columns"] is None and csv_has_header(p["url"], storage_options, p["sep"])
    if p["format"] == "zarr" and p["label_column"] is None and zarr_has_labels(p["url"], storage_options):
        if p["labels"] is not None:
            raise InputError(f"{p['url']} holds reference labels (its y): give no labels file beside it")
        p["label_column"] = "label"  # a group's ``y`` holds reference labels: never a feature
    # the stage's identity: everything that changes X, the input by its content (not how its URL
    # is spelt, nor the block size it is read in)
    params = {k: v for k, v in p.items() if k not in ("chunk_rows", "url")}
    params.update(seed=int(seed), source=source_fingerprint(p["url"], storage_options))
    if p["labels"] is not None:  # the labels file by its content too
        params["labels"] = source_fingerprint(p["labels"], storage_options)
    if store.is_complete("ingest", params, []):
        logger.info("ingest: up to date, skipped")
        return {**store["X"].attrs.asdict().get("summary", {}), "skipped": True}

    if not overwrite:
        check_same_source(store, p["url"], params["source"])
    reader = _Reader(p, storage_options)
    reader.scan(int(seed))
    if check_n is not None:
        check_n(reader.n)
    if not overwrite:
        check_same_n(store, reader.n, p["url"])

    # pass 2: validate everything and collect the column statistics before writing anything
    cnt = mean = m2 = None
    for offset, frame in reader.chunks():
        block = reader.features(offset, frame)
        if cnt is None:
            cnt, mean, m2 = (np.zeros(block.shape[1]) for _ in range(3))
        cnt, mean, m2 = _merge_moments(cnt, mean, m2, block)
    # statistics over the observed values (with impute="mean", NaN become the column mean)
    std = np.sqrt(m2 / np.maximum(cnt, 1))
    names = reader.feature_names
    constant = std <= 1e-12 * np.maximum(1.0, np.abs(mean))
    if len(names) == 0:
        raise InputError(f"{p['url']}: no feature column is left (label and dropped columns removed)")
    if constant.all():
        raise InputError(
            f"{p['url']}: every feature column is constant over the {reader.n} rows kept "
            f"({_shorten(names)}); nothing to cluster"
        )
    keep_cols = ~constant if p["drop_constant"] else np.ones(len(names), bool)
    scale = np.where(constant, 1.0, std) if p["standardize"] else np.ones_like(std)
    center = mean if p["standardize"] else np.zeros_like(mean)
    d = int(keep_cols.sum())
    kept = [nm for nm, k in zip(names, keep_cols, strict=True) if k]
    blocks = functools.partial(_blocks, reader, p, mean, center, scale, keep_cols)
    risk = None if overwrite else results_at_risk(store, params)  # the same source, other options or content
    if risk:  # a pass over the data tells whether they give other data
        content = hashlib.sha256()
        for _, block in blocks():
            content.update(block.tobytes())
        check_results_kept(store, p["url"], risk, _identity(content, reader, d, kept))

    # a store of labels imported before any data: nothing in it was computed from an X (no ingest record, no
    # X, and the labels' record reads none). Anything else, an ingest that stopped halfway included (its
    # record is gone, its X partly written), is taken for other data.
    labels_alone = (
        store.record("ingest") is None
        and "X" not in store
        and (store.record("generate") or {}).get("inputs") == []
    )
    before = (store.record("ingest") or {}).get("output")
    # a store that held nothing: no result to delete (and a folder of the user's own keeps its files)
    fresh = before is None and "X" not in store and not store.records()
    # labels imported with a reference of their own (import-labels --reference): the data's first ingest
    # keeps it unless it brings its own labels (which replace it)
    keep_reference = labels_alone and not overwrite and reader.y is None and store.record(REFERENCE)
    meta = {"url": p["url"], **({"labels": p["labels"]} if p["labels"] is not None else {})}
    writes = ("X",) if keep_reference else ("X", "y_true")
    with store.stage("ingest", params, [], meta=meta, writes=writes) as record:
        for name in writes:
            if name in store:
                del store.group[name]
        content = hashlib.sha256()  # the identity of what is written: the later stages key on it
        row_chunk = max(1, min(reader.n, 2**22 // max(d, 1)))
        X = store.group.create_array("X", shape=(reader.n, d), chunks=(row_chunk, d), dtype="float32")
        pos = 0
        width = None
        for frame, block in blocks():
            width = positional_width(p, frame) if width is None else width
            X[pos : pos + len(block)] = block
            content.update(block.tobytes())
            pos += len(block)
        summary = {
            "n": reader.n,
            "d": d,
            "n_total": reader.n_total,
            "feature_names": kept,
            "dropped_constant": [nm for nm, k in zip(names, keep_cols, strict=True) if not k],
            # kept although constant over the kept rows: all zeros when standardised, else as read
            "constant_columns": [nm for nm, c, k in zip(names, constant, keep_cols, strict=True) if c and k],
            "numbers_as_categories": reader.numbers_as_categories,
            "classes": reader.classes,
        }
        if width is not None:  # new rows are read by place too: predict checks their width
            summary["positional_width"] = width
        if reader.y is not None:
            y = store.group.create_array("y_true", shape=(reader.n,), chunks=(row_chunk,), dtype="int32")
            y[:] = reader.y
            y.attrs["classes"] = reader.classes
            summary["class_counts"] = dict(
                zip(
                    reader.classes, np.bincount(reader.y, minlength=len(reader.classes)).tolist(), strict=True
                )
            )
        record["output"] = _identity(content, reader, d, kept)
        if not fresh and record["output"] != before:
            if overwrite or not labels_alone:
                # other data: what was computed from the old X goes, its report too
                with warnings.catch_warnings():  # the report folder is no zarr node, and zarr says so
                    warnings.filterwarnings("ignore", "Object at .* is not recognized", UserWarning)
                    names = list(store.group.keys())
                for name in names:
                    if name not in ("X", "y_true", RECORDS_DIR):
                        del store.group[name]
                check_held(store.url)  # a writer whose lease was taken over clears nothing of the holder's
                store.clear_records()
            else:
                # the first data of a store of imported labels (check_n: of their n): nothing was computed
                # from an X, so the labels and their results stay (gbce and predict need X)
                check_held(store.url)
                if not keep_reference:
                    drop_reference(store)
            store.clear_report()  # either way its page redrawn (with y_true, for imported labels)
        X.attrs.update(
            {
                "feature_names": summary["feature_names"],
                "center": center[keep_cols].tolist(),
                "scale": scale[keep_cols].tolist(),
                "vocabularies": reader.vocab,
                "summary": summary,
            }
        )
    if summary.get("numbers_as_categories"):
        logger.warning(
            "ingest: categorical column(s) of numbers with decimals, coded in the order of their text, "
            "not of their value: %s; leave a measurement out of 'categorical'",
            ", ".join(f"{c!r} ({k} values)" for c, k in summary["numbers_as_categories"].items()),
        )
    unnamed = [nm for nm in summary["feature_names"] if re.fullmatch(r"Unnamed: \d+", nm)]
    if unnamed:  # pandas' name for a column whose header field is empty: often the index to_csv writes
        logger.warning(
            "ingest: column(s) without a name in the header, read as features: %s (the row index pandas' "
            "to_csv writes?); drop them (--drop, or 'drop' under 'data') if they are not features",
            _shorten(unnamed),
        )
    if summary["constant_columns"]:
        logger.info(
            "ingest: columns constant over the kept rows, kept %s: %s",
            "as zeros (centred)" if p["standardize"] else "as read",
            _shorten(summary["constant_columns"]),
        )
    return {**summary, "skipped": False}

"""Reading tables from any fsspec URL, in row chunks.

Every reader yields ``(first_row, DataFrame)`` pairs, so a caller can process an input that
does not fit in memory one block at a time (CSV blocks, Parquet row groups, zarr/npy row
slices). Formats: CSV (plain or compressed, inferred from the suffix), Parquet, a zarr array
(or a group holding ``X`` and optionally ``y``), ``.npy``, and the built-in synthetic sources
``synthetic:NAME`` of :mod:`ensemble_dask.datasets`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from urllib.parse import parse_qsl

import fsspec
import numpy as np
import pandas as pd

from .._validation import InputError
from .urls import FORMATS, _check_exists, infer_format, make_zarr_store, strip_file_scheme

__all__ = ["iter_table_chunks", "zarr_has_labels"]

def iter_table_chunks(
    url: str,
    *,
    format: str | None = None,
    storage_options: dict | None = None,
    chunk_rows: int = 100_000,
    columns: list[str] | None = None,
    usecols: list | None = None,
    header: bool = False,
    sep: str = ",",
    check_fields: bool = True,
) -> Iterator[tuple[int, pd.DataFrame]]:
    """Yield ``(first_row, frame)`` blocks of the table at ``url``.

    Parameters
    ----------
    url : str
        Local path or fsspec URL (``file://``, ``memory://``, ``s3://`` ...), or ``synthetic:NAME?k=v``.
    format : {"csv", "parquet", "zarr", "npy", "synthetic"}, default=None
        Inferred from the name when None.
    storage_options : dict, default=None
        Passed to fsspec (e.g. ``{"endpoint_url": ..., "key": ..., "secret": ...}`` for s3).
    chunk_rows : int, default=100_000
        Rows per block (CSV, npy, zarr); Parquet yields whole row groups.
    columns : list of str, default=None
        Column names for a CSV without header (e.g. a fixed schema).
    usecols : list, default=None
        Read only these columns (names or positions), when the format allows it.
    header : bool, default=False
        Whether the CSV's first line holds column names.
    sep : str, default=","
        CSV field separator (``r"\\s+"`` for whitespace-separated files).
    check_fields : bool, default=True
        Check that every CSV line has as many fields as the first (single-character separators);
        a caller that reads the same file again may leave it to its first pass.
    """
    fmt = format or infer_format(url)
    if fmt not in FORMATS:
        raise InputError(f"The 'format' parameter must be one of {list(FORMATS)}; got {fmt!r}")
    if fmt == "synthetic":
        from ..datasets import iter_synthetic_chunks

        name, _, query = url[len("synthetic:") :].partition("?")
        yield from iter_synthetic_chunks(name, chunk_rows=chunk_rows, **dict(parse_qsl(query)))
        return
    url = strip_file_scheme(url)
    if fmt == "csv":
        yield from _iter_csv(url, storage_options, chunk_rows, columns, usecols, header, sep, check_fields)
    elif fmt == "parquet":
        yield from _iter_parquet(url, storage_options, usecols)
    elif fmt == "zarr":
        yield from _iter_zarr(url, storage_options, chunk_rows)
    else:
        yield from _iter_npy(url, storage_options, chunk_rows)


class _FieldCountingReader:
    """A binary file wrapper that checks, as pandas reads through it, that every line has as many
    fields as the first (or as ``expected``), so a short row is reported as such instead of as
    the NaN pandas fills it with.

    Fields are counted per line with NumPy on the raw bytes: separators outside double quotes,
    one more than their number (quoted separators and line breaks do not count; ``""`` inside a
    quoted field toggles the quote state twice). Blank lines are skipped, as pandas skips them.
    """

    def __init__(self, raw, url, sep, expected=None):
        self.raw = raw
        self.url = url
        self.sep = ord(sep)
        self.expected = expected
        self.pending = b""
        self.line = 0  # line breaks before carry
        self.carry = b""  # the current, unfinished line
        self.quoted = 0  # the quote state at the start of carry (1: inside a quoted field)
        self.active = True

    def first_fields(self):
        """The fields of the first non-blank line, as text (the header or the first row)."""
        import csv

        buf = b""
        while True:
            lines = buf.split(b"\n")
            for line in lines[:-1]:
                if line.strip():
                    self.pending = buf
                    text = line.decode("utf-8", errors="replace").rstrip("\r")
                    return next(csv.reader([text], delimiter=chr(self.sep), skipinitialspace=True))
            more = self.raw.read(1 << 16)
            if not more:
                self.pending = buf
                text = buf.decode("utf-8", errors="replace").strip()
                if not text:
                    return None
                return next(csv.reader([text], delimiter=chr(self.sep), skipinitialspace=True))
            buf += more

    def read(self, size=-1):
        if self.pending:
            data, self.pending = self.pending, b""
        else:
            data = self.raw.read(size)
        if self.active:
            self._check(data, final=not data)
        return data

    def _check(self, data, final=False):
        if final:  # a last line without a line break
            if self.carry.strip():
                self._check_lines(self.carry + b"\n")
            self.carry = b""
            return
        data = self.carry + data if self.carry else data
        self.carry = data[self._check_lines(data) :]

    def _check_lines(self, data):
        """Check the complete lines of ``data`` (which starts a line); return where the rest begins."""
        buf = np.frombuffer(data, dtype=np.uint8)
        newline = buf == ord("\n")
        is_sep = buf == self.sep
        if self.quoted or b'"' in data:
            # quote state along buf: a separator or line break counts only outside quotes
            outside = ((np.cumsum(buf == ord('"'), dtype=np.int64) + self.quoted) & 1) == 0
            ends = np.flatnonzero(newline & outside)
            seps = np.flatnonzero(is_sep & outside)
        else:
            ends = np.flatnonzero(newline)
            seps = np.flatnonzero(is_sep)
        if ends.size == 0:
            return 0  # no complete line yet: the quote state at the start of buf stays
        self.quoted = 0  # a counted line break is outside quotes
        fields = np.diff(np.searchsorted(seps, ends), prepend=0) + 1
        starts = np.concatenate([[0], ends[:-1] + 1])
        # physical line number (1-based) of each record's last line
        if ends.size == np.count_nonzero(newline[: ends[-1] + 1]):
            lines = self.line + np.arange(1, ends.size + 1)
        else:
            lines = self.line + np.cumsum(newline[: ends[-1] + 1], dtype=np.int64)[ends]
        self.line = int(lines[-1])

        def blank(k):  # pandas skips blank lines
            return not buf[starts[k] : ends[k]].tobytes().strip()

        if self.expected is None:
            first = next((k for k in range(len(ends)) if not blank(k)), None)
            if first is None:
                return int(ends[-1]) + 1
            self.expected = int(fields[first])
        for k in np.flatnonzero(fields != self.expected):
            if not blank(k):
                raise InputError(
                    f"{self.url}, line {lines[k]} has {fields[k]} fields, expected {self.expected}"
                )
        return int(ends[-1]) + 1


def _csv_columns(url, first, columns, header):
    """The column labels pandas will give a CSV whose first line holds ``first``."""
    if columns is not None:
        return list(columns)
    if first is None:
        return []
    if header:
        return [f.strip() for f in first]
    return list(range(len(first)))


def _iter_csv(url, storage_options, chunk_rows, columns, usecols, header, sep, check_fields=True):
    _check_exists(url, storage_options)
    kwargs = dict(
        header=0 if header else None,
        names=columns,
        usecols=usecols,
        sep=sep,
        chunksize=chunk_rows,
        skipinitialspace=True,
        low_memory=False,
    )
    single = len(sep) == 1 and sep != '"' and sep.isascii()
    if single:
        kwargs["engine"] = "c"
    with fsspec.open(url, "rb", compression="infer", **(storage_options or {})) as raw:
        fh = raw
        if single:
            fh = _FieldCountingReader(raw, url, sep, expected=len(columns) if columns is not None else None)
            fh.active = check_fields
            first = fh.first_fields()
            if usecols is not None and first is not None:
                known = _csv_columns(url, first, columns, header)
                missing = [c for c in usecols if c not in known]
                if missing:
                    if not header and columns is None:
                        raise InputError(
                            f"{url}: no column {missing[0]!r}; the file has no header (pass header=True / "
                            f"--header if its first line names the columns), so its columns are "
                            f"numbered 0..{len(known) - 1}"
                        )
                    raise InputError(f"{url}: no column {missing[0]!r}; columns are {known}")
        offset = 0
        try:
            for frame in pd.read_csv(fh, **kwargs):
                yield offset, frame
                offset += len(frame)
        except pd.errors.ParserError as exc:
            m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
            if m:
                want, line, saw = m.groups()
                raise InputError(f"{url}, line {line} has {saw} fields, expected {want}") from exc
            raise InputError(f"{url}: malformed CSV: {exc}") from exc
        except pd.errors.EmptyDataError as exc:
            raise InputError(f"{url}: the table is empty") from exc


def _iter_parquet(url, storage_options, usecols):
    import pyarrow.parquet as pq

    _check_exists(url, storage_options)
    with fsspec.open(url, "rb", **(storage_options or {})) as fh:
        pf = pq.ParquetFile(fh)
        missing = [c for c in usecols or () if c not in pf.schema_arrow.names]
        if missing:
            raise InputError(f"{url}: no column {missing[0]!r}; columns are {pf.schema_arrow.names}")
        offset = 0
        for g in range(pf.num_row_groups):
            frame = pf.read_row_group(g, columns=usecols).to_pandas()
            yield offset, frame
            offset += len(frame)


def _numeric_frames(x, y, chunk_rows):
    n = x.shape[0]
    if x.ndim != 2:
        raise InputError(f"expected a 2-d array of features; got shape {x.shape}")
    cols = [f"x{j}" for j in range(x.shape[1])]
    for start in range(0, n, chunk_rows):
        stop = min(n, start + chunk_rows)
        frame = pd.DataFrame(np.asarray(x[start:stop]), columns=cols)
        if y is not None:
            frame["label"] = np.asarray(y[start:stop])
        yield start, frame


def zarr_has_labels(url, storage_options=None):
    """Whether the zarr input at ``url`` is a group holding reference labels ``y``."""
    import zarr


    try:
        node = zarr.open(
            store=make_zarr_store(strip_file_scheme(url), storage_options, read_only=True), mode="r"
        )
    except (FileNotFoundError, KeyError):
        return False
    return isinstance(node, zarr.Group) and "y" in node


def _iter_zarr(url, storage_options, chunk_rows):
    import zarr


    try:
        node = zarr.open(store=make_zarr_store(url, storage_options, read_only=True), mode="r")
    except (FileNotFoundError, KeyError) as exc:
        raise InputError(f"input zarr {url!r} does not exist") from exc
    if isinstance(node, zarr.Group):
        if "X" not in node:
            raise InputError(f"zarr group {url!r} has no array 'X'")
        x, y = node["X"], node["y"] if "y" in node else None
    else:
        x, y = node, None
    yield from _numeric_frames(x, y, chunk_rows)


def _iter_npy(url, storage_options, chunk_rows):
    fs, path = _check_exists(url, storage_options)
    if "://" not in url and os.path.exists(url):
        x = np.load(url, mmap_mode="r")
    else:
        with fs.open(path, "rb") as fh:
            x = np.load(fh)
    yield from _numeric_frames(x, None, chunk_rows)

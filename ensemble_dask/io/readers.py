"""Reading tables from any fsspec URL, in row chunks.

Every reader yields ``(first_row, DataFrame)`` pairs, so a caller can process an input that
does not fit in memory one block at a time (CSV blocks, Parquet row groups, zarr/npy row
slices). Formats: CSV (plain or compressed, inferred from the suffix), Parquet, a zarr array
(or a group holding ``X`` and optionally ``y``), ``.npy``, and the built-in synthetic sources
``synthetic:NAME`` of :mod:`ensemble_dask.io.datasets`.
"""

from __future__ import annotations

import contextlib
import csv
import lzma
import os
import re
import threading
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

import fsspec
import numpy as np

from .._validation import InputError
from .urls import FORMATS, _check_exists, infer_format, make_zarr_store, strip_file_scheme

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["iter_table_chunks", "zarr_has_labels", "csv_has_header", "detect_separator", "check_sep"]

MISSING_TOKENS = {"", "?", "na", "nan", "null", "none", "n/a"}


def _is_number(field):
    try:
        float(field)
    except ValueError:
        return False
    return True


#: the field separators :func:`detect_separator` tries, in this order; whitespace (``r"\s+"``) comes last
SEPARATORS = (",", "\t", ";", "|")
WHITESPACE = r"\s+"


def _head_lines(url, storage_options, count):
    """The first ``count`` non-blank lines of the (possibly compressed) text file at ``url``."""
    _check_exists(url, storage_options)
    compression = fsspec.utils.infer_compression(url)
    lines = []
    with (
        _readable(
            url, f"a CSV file compressed with {compression}" if compression else "a CSV file", _CORRUPT_TEXT
        ),
        fsspec.open(
            url, "rt", compression="infer", encoding="utf-8-sig", errors="replace", **(storage_options or {})
        ) as fh,
    ):
        for line in fh:
            if line.strip():
                lines.append(line.rstrip("\r\n"))
            if len(lines) == count:
                break
    return lines


def sep_hint(columns, sep):
    """A hint when a CSV read as one column holds another separator in its name: it was split wrongly."""
    if len(columns) == 1 and any(c in str(columns[0]) for c in ";,\t|" if c != sep):
        return f" (one column: are its fields separated by something other than {sep!r}? pass sep, or --sep)"
    return ""


def _split(line, sep):
    r"""The fields of one CSV line (quotes understood; ``r"\s+"``: runs of whitespace, as pandas reads it)."""
    if sep == WHITESPACE:
        return line.split()
    return next(csv.reader([line], delimiter=sep, skipinitialspace=True))


_SEP_NAMES = {"tab": "\t", "whitespace": WHITESPACE, "space": WHITESPACE}


def check_sep(sep):
    r"""``sep`` as the CSV reader takes it (the ``sep`` of ``ingest``, ``predict`` and ``import-labels``):
    None (guess it), one character, whitespace (``r"\s+"``), or a name of :data:`_SEP_NAMES`."""
    if sep is None or sep == WHITESPACE:
        return sep
    if isinstance(sep, str) and sep.lower() in _SEP_NAMES:
        return _SEP_NAMES[sep.lower()]
    if sep == "\\t":  # a shell's literal backslash-t
        return "\t"
    if not isinstance(sep, str) or len(sep) != 1 or sep in ('"', "\n", "\r"):
        raise InputError(
            f"The 'sep' parameter must be one character, 'tab', 'whitespace' or None (guessed); got {sep!r}"
        )
    return sep


def detect_separator(url, storage_options=None, lines=20):
    r"""The field separator of the CSV at ``url``, guessed from its first ``lines`` non-blank lines.

    The first of ``,``, tab, ``;`` and ``|`` that splits every one of them into the same number of fields,
    at least two; else whitespace (``r"\s+"``, e.g. the UCI repository's ``.data`` files) when it does; else
    ``,`` (a table of one column).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.data"
    >>> _ = path.write_text("5.1 3.5 1.4 0.2\n4.9  3.0 1.4 0.2\n")
    >>> detect_separator(str(path))
    '\\s+'
    >>> _ = path.write_text("a;b;label\n1,5;2,5;x\n")
    >>> detect_separator(str(path))
    ';'
    """
    head = _head_lines(url, storage_options, lines)
    for sep in (*SEPARATORS, WHITESPACE):
        counts = {len(_split(line, sep)) for line in head}
        if len(counts) == 1 and counts.pop() >= 2:
            return sep
    return ","


def csv_has_header(url, storage_options=None, sep=","):
    """Whether the CSV at ``url`` starts with a line of column names, guessed from its first two lines.

    A header when no field of the first non-blank line is a number (empty or missing tokens such as
    ``?`` and ``NA`` aside) while the second line holds at least one number: ``sepal_length,...,class``
    above ``5.1,...,Iris-setosa``. A table of text columns only cannot be told apart from its header
    (pass ``header=True``).

    A first line whose numbers are the column numbers ``0, 1, ..., m-1`` in a run of m >= 2 fields (text
    either side of it: ``0,1,...,63,digit``, pandas' ``to_csv`` of a frame with numbered columns) is a
    header when a number below one of them is written otherwise than an integer (``0.0``, ``-1.25``);
    when every number below them is an integer too, it could as well be a row of data: with three or more
    of them an :class:`InputError` asks to say which; two (``0,1``) are taken for a row.
    """
    lines = _head_lines(url, storage_options, 2)

    def kinds(fields):
        vals = [f.strip() for f in fields if f.strip().lower() not in MISSING_TOKENS]
        return [_is_number(f) for f in vals]

    if len(lines) < 2:  # one line of names and no row is a header (the table is then empty, and said so)
        head = kinds(_split(lines[0], sep)) if lines else []
        return bool(head) and not any(head)
    first, second = (_split(line, sep) for line in lines)

    head, row = kinds(first), kinds(second)
    if bool(head) and not any(head) and any(row):
        return True
    numbered = [j for j, f in enumerate(first) if _is_number(f.strip())]
    if len(numbered) < 2 or any(
        first[j].strip() != str(i) or j != numbered[0] + i for i, j in enumerate(numbered)
    ):
        return False
    below = [second[j].strip() for j in numbered if j < len(second)]
    if any(_is_number(f) and np.isfinite(float(f)) and not re.fullmatch(r"[+-]?\d+", f) for f in below):
        return True  # "0,1,2" above "5.1,3.5,1.4": written otherwise than the data
    if len(numbered) < 3:
        return False  # "0,1" above integers: as likely a row of two binary columns (or of two labels)
    text = lines[0] if len(lines[0]) <= 40 else lines[0][:37] + "..."
    raise InputError(
        f"{url}: the first line ({text!r}) numbers the columns 0..{len(numbered) - 1} as a header would, "
        "but could be a row of data; say which: header=True or False (--header or --no-header)"
    )


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
    text_columns: list | None = None,
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
    text_columns : list, default=None
        A CSV's columns read as the text written (names or positions): a column of numbers is otherwise
        parsed block by block, and ``1`` reads as ``1.0`` in a block that also holds ``1.5``.
    """
    fmt = format or infer_format(url)
    if fmt not in FORMATS:
        raise InputError(f"The 'format' parameter must be one of {list(FORMATS)}; got {fmt!r}")
    if fmt == "synthetic":
        from .datasets import iter_synthetic_chunks

        name, _, query = url[len("synthetic:") :].partition("?")
        yield from iter_synthetic_chunks(name, chunk_rows=chunk_rows, **dict(parse_qsl(query)))
        return
    url = strip_file_scheme(url)
    if fmt == "csv":
        yield from _iter_csv(
            url, storage_options, chunk_rows, columns, usecols, header, sep, check_fields, text_columns
        )
    elif fmt == "parquet":
        yield from _iter_parquet(url, storage_options, usecols)
    elif fmt == "zarr":
        yield from _iter_zarr(url, storage_options, chunk_rows)
    else:
        yield from _iter_npy(url, storage_options, chunk_rows)


# what reading a corrupt, truncated or mislabelled file raises (gzip/bz2: OSError, a cut gzip: EOFError,
# text that is not UTF-8: UnicodeDecodeError; Parquet: pyarrow's ArrowInvalid, np.load: ValueError)
_CORRUPT_TEXT = (EOFError, OSError, zlib.error, lzma.LZMAError, UnicodeDecodeError)
_CORRUPT_BINARY = (EOFError, OSError, ValueError)


@contextlib.contextmanager
def _readable(url, what, errors):
    """Turn ``errors`` raised while reading ``url`` into one :class:`InputError` naming the file."""
    try:
        yield
    except InputError:
        raise
    except errors as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(
            f"{url}: cannot read it as {what} ({msg}); is the file truncated or corrupt?"
        ) from exc


class _FieldCountingReader:
    """A binary file wrapper that checks, as pandas reads through it, that every line has as many
    fields as the first (or as ``expected``), so a short row is reported as such instead of as
    the NaN pandas fills it with.

    Blocks without a double quote are counted with NumPy on the raw bytes (separators per line);
    blocks with quotes go through the :mod:`csv` module, which knows quoted separators and line
    breaks. Blank lines are skipped, as pandas skips them. Input the csv module finds malformed
    (text after a closing quote) is left to pandas: the check stops there.
    """

    def __init__(self, raw, url, sep, expected=None):
        self.raw = raw
        self.url = url
        self.sep = sep
        self.expected = expected
        self.pending = b""
        self.line = 0  # lines before carry
        self.carry = b""  # the current, unfinished record
        self.active = True

    def first_fields(self):
        """The fields of the first non-blank line, as text (the header or the first row)."""
        buf = b""
        while True:
            lines = buf.split(b"\n")
            for line in lines[:-1]:
                if line.strip():
                    self.pending = buf
                    return self._fields(line)
            more = self.raw.read(1 << 16)
            if not more:
                self.pending = buf
                return self._fields(buf) if buf.strip() else None
            buf += more

    def _fields(self, line):
        text = line.decode("utf-8-sig", errors="replace").rstrip("\r\n")  # (a byte-order mark is no text)
        return next(csv.reader([text], delimiter=self.sep, skipinitialspace=True))

    def read(self, size=-1):
        if self.pending:
            data, self.pending = self.pending, b""
        else:
            data = self.raw.read(size)
        if self.active:
            if data:
                data_all = self.carry + data if self.carry else data
                self.carry = data_all[self._check(data_all) :]
            elif self.carry.strip():  # a last line without a line break
                self._check(self.carry + b"\n")
                self.carry = b""
        return data

    def _check(self, data):
        """Check the complete records of ``data`` (which starts one); return where the rest begins."""
        if b'"' in data:
            return self._check_quoted(data)
        buf = np.frombuffer(data, dtype=np.uint8)
        ends = np.flatnonzero(buf == ord("\n"))
        if ends.size == 0:
            return 0
        seps = np.flatnonzero(buf[: ends[-1]] == ord(self.sep))
        fields = np.diff(np.searchsorted(seps, ends), prepend=0) + 1
        starts = np.concatenate([[0], ends[:-1] + 1])
        lines = self.line + np.arange(1, ends.size + 1)
        self.line += ends.size
        if self.expected is None:
            first = next((k for k in range(ends.size) if data[starts[k] : ends[k]].strip()), None)
            if first is None:
                return int(ends[-1]) + 1
            self.expected = int(fields[first])
        for k in np.flatnonzero(fields != self.expected):
            if data[starts[k] : ends[k]].strip():  # pandas skips blank lines
                self._fail(lines[k], fields[k])
        return int(ends[-1]) + 1

    def _check_quoted(self, data):
        lines = data.split(b"\n")[:-1]  # complete lines (the tail has no line break yet)
        reader = csv.reader(
            (line.decode("utf-8", errors="replace") + "\n" for line in lines),
            delimiter=self.sep,
            skipinitialspace=True,
            strict=True,
        )
        done = 0  # lines of the records checked so far
        while True:
            try:
                record = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                if "unexpected end of data" not in str(exc):
                    self.active = False  # malformed quoting: pandas will say what it makes of it
                    return len(data)
                break  # a quoted field goes on in the next block
            done = reader.line_num
            if not record or (len(record) == 1 and not record[0].strip()):
                continue
            if self.expected is None:
                self.expected = len(record)
            elif len(record) != self.expected:
                self._fail(self.line + done, len(record))
        self.line += done
        return sum(len(line) + 1 for line in lines[:done])

    def _fail(self, line, fields):
        raise InputError(f"{self.url}, line {line} has {fields} fields, expected {self.expected}")


def _csv_columns(url, first, columns, header):
    """The column labels pandas will give a CSV whose first line holds ``first``."""
    if columns is not None:
        return list(columns)
    if first is None:
        return []
    if header:  # an empty name is pandas' "Unnamed: j" (the index column to_csv writes, say)
        return [f.strip() or f"Unnamed: {j}" for j, f in enumerate(first)]
    return list(range(len(first)))


def _iter_csv(
    url, storage_options, chunk_rows, columns, usecols, header, sep, check_fields=True, text_columns=None
):
    import pandas as pd  # here, not at the top: a command that reads no table does not pay its import

    _check_exists(url, storage_options)
    kwargs = dict(
        header=0 if header else None,
        names=columns,
        usecols=usecols,
        sep=sep,
        chunksize=chunk_rows,
        skipinitialspace=True,
        low_memory=False,
        dtype=dict.fromkeys(text_columns, str) if text_columns else None,
        encoding="utf-8-sig",  # Excel's "CSV UTF-8" begins with a byte-order mark: not part of the first name
    )
    single = len(sep) == 1 and sep != '"' and sep.isascii()
    if single:
        kwargs["engine"] = "c"
    compression = fsspec.utils.infer_compression(url)
    what = f"a CSV file compressed with {compression}" if compression else "a CSV file"
    with (
        _readable(url, what, _CORRUPT_TEXT),
        fsspec.open(url, "rb", compression="infer", **(storage_options or {})) as raw,
    ):
        fh, first = raw, None
        if single:
            fh = _FieldCountingReader(raw, url, sep, expected=len(columns) if columns is not None else None)
            fh.active = check_fields
            first = fh.first_fields()
        elif usecols is not None:  # whitespace (r"\s+"): pandas would say only "Usecols do not match"
            head = _head_lines(url, storage_options, 1)
            first = _split(head[0], sep) if head else None
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
                hint = sep_hint(known, sep)
                raise InputError(f"{url}: no column {missing[0]!r}; columns are {known}{hint}")
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
    with (
        _readable(url, "a Parquet file", _CORRUPT_BINARY),
        fsspec.open(url, "rb", **(storage_options or {})) as fh,
    ):
        pf = pq.ParquetFile(fh)
        missing = [c for c in usecols or () if c not in pf.schema_arrow.names]
        if missing:
            raise InputError(f"{url}: no column {missing[0]!r}; columns are {pf.schema_arrow.names}")
        offset = 0
        for g in range(pf.num_row_groups):
            frame = pf.read_row_group(g, columns=usecols).to_pandas()
            yield offset, frame
            offset += len(frame)


def _numeric_frames(x, y, chunk_rows, url):
    import pandas as pd

    if x.ndim != 2:
        raise InputError(
            f"{url}: expected a 2-d array, a row per point and a column per feature (or partition); got "
            f"shape {x.shape}"
        )
    n = x.shape[0]
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
    yield from _numeric_frames(x, y, chunk_rows, url)


#: NumPy parses a ``.npy`` header with ``ast.literal_eval``, and CPython 3.11's ``ast`` keeps state that
#: two threads parsing at once can corrupt: Dask worker threads reading row blocks at once raised
#: "SystemError: AST constructor recursion depth mismatch" (CI, Python 3.11.7). Loads through
#: :func:`load_npy` take turns
_NPY_LOCK = threading.Lock()


def load_npy(file, **kwargs):
    """``np.load(file, **kwargs)``, one thread at a time (see ``_NPY_LOCK``); with ``mmap_mode`` only the
    header is read under the lock."""
    with _NPY_LOCK:
        return np.load(file, **kwargs)


def _iter_npy(url, storage_options, chunk_rows):
    fs, path = _check_exists(url, storage_options)
    with _readable(url, "a NumPy .npy file", _CORRUPT_BINARY):
        if "://" not in url and os.path.exists(url):
            x = load_npy(url, mmap_mode="r")
        else:  # remote: read the header, then one row block at a time (never the whole file)
            with fs.open(path, "rb") as fh:
                x = _NpyRows(fh)
                yield from _numeric_frames(x, None, chunk_rows, url)
                return
        yield from _numeric_frames(x, None, chunk_rows, url)


class _NpyRows:
    """Row slices of a C-ordered ``.npy`` file opened for reading, read as they are asked for."""

    def __init__(self, fh):
        fmt = np.lib.format
        version = fmt.read_magic(fh)
        readers = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
        shape, fortran, dtype = readers[version](fh) if version in readers else ((), True, None)
        if fortran or dtype is None or dtype.hasobject or len(shape) != 2:
            fh.seek(0)
            self._whole = load_npy(fh)
            self.shape, self.ndim = self._whole.shape, self._whole.ndim
            return
        self._whole = None
        self._fh, self._offset, self.dtype = fh, fh.tell(), dtype
        self.shape, self.ndim = tuple(shape), 2
        self._row_bytes = dtype.itemsize * shape[1]

    def __getitem__(self, rows):
        if self._whole is not None:
            return self._whole[rows]
        start, stop, _ = rows.indices(self.shape[0])
        self._fh.seek(self._offset + start * self._row_bytes)
        data = self._fh.read((stop - start) * self._row_bytes)
        return np.frombuffer(data, dtype=self.dtype).reshape(stop - start, self.shape[1])

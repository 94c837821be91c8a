"""URLs: schemes, formats, fingerprints of inputs, and zarr stores for any fsspec URL."""

from __future__ import annotations

import hashlib
from urllib.parse import urlsplit

import fsspec
from zarr.storage import FsspecStore, LocalStore

from .._validation import InputError

__all__ = ["FORMATS", "strip_file_scheme", "infer_format", "source_fingerprint", "make_zarr_store"]

FORMATS = ("csv", "parquet", "zarr", "npy", "synthetic")


def strip_file_scheme(url: str) -> str:
    """``file:///a/b`` -> ``/a/b``; other URLs are returned unchanged."""
    return url[len("file://") :] if url.startswith("file://") else url


def infer_format(url: str) -> str:
    """Guess the format of ``url`` from its scheme and suffix."""
    if url.startswith("synthetic:"):
        return "synthetic"
    path = urlsplit(url).path if "://" in url else url
    path = path.rstrip("/").lower()
    for comp in (".gz", ".bz2", ".xz", ".zst", ".zip"):
        if path.endswith(comp):
            path = path[: -len(comp)]
    if path.endswith((".csv", ".txt", ".data", ".tsv")):
        return "csv"
    if path.endswith((".parquet", ".pq")):
        return "parquet"
    if path.endswith(".zarr"):
        return "zarr"
    if path.endswith(".npy"):
        return "npy"
    raise InputError(f"cannot tell the format of {url!r} from its name; pass format= one of {list(FORMATS)}")


def _check_exists(url, storage_options):
    try:
        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
        exists = fs.exists(path)
    except FileNotFoundError:
        exists = False
    except Exception as exc:  # bad bucket, credentials, unreachable endpoint ...
        raise InputError(f"cannot open {url!r}: {exc}") from exc
    if not exists:
        raise InputError(f"input file {url!r} does not exist")
    return fs, path


def source_fingerprint(url, storage_options=None) -> dict:
    """Size and modification marker of the source, to tell a changed input from a re-run."""
    if url.startswith("synthetic:"):
        return {"url": url}
    fs, path = _check_exists(url, storage_options)
    keys = ("size", "mtime", "ETag", "LastModified", "last_modified")
    if fs.isdir(path):  # a zarr directory: its files change, not the directory entry
        listing = sorted(
            (name, *(str(info.get(k)) for k in keys)) for name, info in fs.find(path, detail=True).items()
        )
        return {"url": url, "files": hashlib.sha256(repr(listing).encode()).hexdigest()}
    info = fs.info(path)
    return {"url": url, **{k: str(info[k]) for k in keys if info.get(k) is not None}}


def make_zarr_store(url, storage_options=None, *, read_only=False):
    """A zarr store for ``url``: a :class:`LocalStore` for paths and ``file://``, else fsspec."""
    url = strip_file_scheme(str(url))
    if "://" not in url:
        return LocalStore(url, read_only=read_only)
    return FsspecStore.from_url(url, storage_options=storage_options or {}, read_only=read_only)

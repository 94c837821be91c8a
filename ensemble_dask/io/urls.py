"""URLs: schemes, formats, fingerprints of inputs, and zarr stores for any fsspec URL."""

from __future__ import annotations

import hashlib
import os
from urllib.parse import urlsplit

import fsspec
from zarr.storage import FsspecStore, LocalStore

from .._validation import InputError

__all__ = ["FORMATS", "strip_file_scheme", "infer_format", "source_fingerprint", "make_zarr_store"]

FORMATS = ("csv", "parquet", "zarr", "npy", "synthetic")


def strip_file_scheme(url: str) -> str:
    """``file:///a/b`` -> ``/a/b``; other URLs are returned unchanged."""
    return url[len("file://") :] if url.startswith("file://") else url


#: fsspec protocols of object stores: their ``makedirs`` of a path creates its bucket (a mistyped one is an
#: error here, never made in the user's account)
OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl"})


def protocol_of(fs) -> str:
    """The name of the fsspec file system ``fs``'s protocol (its first, when it has several)."""
    return fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]


def is_object_store(fs) -> bool:
    """Whether ``fs`` is an object store (:data:`OBJECT_STORES`): no folders to make, a bucket to find."""
    return protocol_of(fs) in OBJECT_STORES


def location(url, storage_options=None):
    """``(protocol, path)`` of ``url`` spelt one way: a local path absolute, its links resolved."""
    fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    if protocol_of(fs) in ("file", "local"):
        return "file", os.path.realpath(path)
    return protocol_of(fs), path.rstrip("/")


def nested(a, b) -> bool:
    """Whether :func:`location` ``a`` is ``b``, inside it, or holds it."""
    return a[0] == b[0] and (a[1] == b[1] or a[1].startswith(b[1] + "/") or b[1].startswith(a[1] + "/"))


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
    raise InputError(
        f"cannot tell the format of {url!r} from its name (.csv, .parquet, .zarr or .npy, compressed or "
        "not): rename it, or give its format where the command takes one (ingest --format, 'format' under "
        "'data')"
    )


def _check_exists(url, storage_options):
    try:
        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
        exists = fs.exists(path)
    except FileNotFoundError:
        exists = False
    except Exception as exc:  # bad bucket, credentials, unreachable endpoint ...
        raise InputError(f"cannot open {url!r}: {exc}") from exc
    if not exists:
        hint = ""
        if str(url).rsplit("/", 1)[-1].startswith("kddcup.data"):  # the KDD workflows name the file alone
            hint = (
                f"; the KDD Cup 99 files are in the UCI KDD archive ({KDD99_SOURCE}): download one and give "
                "its path or URL with --data"
            )
        raise InputError(f"input file {url!r} does not exist{hint}")
    return fs, path


#: where the KDD Cup 99 files come from (the workflows for them name the file, not where it is)
KDD99_SOURCE = "http://kdd.ics.uci.edu/databases/kddcup99/kddcup99.html"


# Inputs up to this size are hashed whole; larger ones by size plus evenly spaced sample blocks.
_FULL_HASH_BYTES = 256 << 20
_SAMPLE_BLOCK = 1 << 20
_N_SAMPLES = 16
_READ_BLOCK = 8 << 20


def _file_identity(fs, path, info, budget, sample=_SAMPLE_BLOCK, n_samples=_N_SAMPLES):
    """Content identity of one file: the object store's version or ETag, else a hash of its bytes.

    Files up to ``budget`` bytes are hashed whole; larger ones by ``n_samples`` blocks of ``sample`` bytes
    at evenly spaced offsets (first and last included). The size is part of the identity either way.
    """
    size = int(info.get("size") or 0)
    for key in ("VersionId", "version_id", "ETag", "etag", "md5Hash", "md5"):
        value = info.get(key)
        if value:
            return f"{size}:{key}:{str(value).strip(chr(34))}"
    h = hashlib.sha256()
    with fs.open(path, "rb") as fh:
        if size <= budget:
            while block := fh.read(_READ_BLOCK):
                h.update(block)
            return f"{size}:sha256:{h.hexdigest()}"
        last = max(0, size - sample)
        for k in range(n_samples):
            fh.seek(last * k // (n_samples - 1))
            h.update(fh.read(sample))
    return f"{size}:sampled-sha256:{h.hexdigest()}"


def source_fingerprint(url, storage_options=None) -> dict:
    """The content identity of the input at ``url``, independent of how its URL is spelt.

    A file's identity is its size plus its object-store version/ETag when the store reports one,
    else a SHA-256 of its bytes (whole up to 256 MiB, else of 16 evenly spaced 1 MiB blocks). A
    directory (zarr) is identified by its files' relative names and identities (each hashed whole while
    the directory holds at most 256 MiB). ``./x.csv`` and
    ``/abs/x.csv`` (or a copy of the file elsewhere) have the same fingerprint; changing one byte
    (of a file hashed whole) changes it. ``synthetic:`` URLs are their own content.
    """
    if url.startswith("synthetic:"):
        return {"synthetic": url}
    fs, path = _check_exists(url, storage_options)
    if fs.isdir(path):  # a zarr directory: the names (relative to it) and contents of its files
        root = fs._strip_protocol(path).rstrip("/")
        found = fs.find(path, detail=True)
        total = sum(int(info.get("size") or 0) for info in found.values())
        # a large directory: each file by its size, first and last 64 KiB
        small = total <= _FULL_HASH_BYTES
        kw = {} if small else {"sample": 1 << 16, "n_samples": 2}
        budget = _FULL_HASH_BYTES if small else 1 << 17
        listing = sorted(
            (name[len(root) :].lstrip("/"), _file_identity(fs, name, info, budget, **kw))
            for name, info in found.items()
        )
        digest = hashlib.sha256(repr(listing).encode()).hexdigest()
        return {"size": total, "files": len(listing), "content": digest}
    info = fs.info(path)
    return {"size": int(info.get("size") or 0), "content": _file_identity(fs, path, info, _FULL_HASH_BYTES)}


#: how run stores are opened: zarr 3, as they are made (no probe for a zarr 2 store's three keys), and never
#: through consolidated metadata (a copy that goes stale when a stage writes)
GROUP_FORMAT = {"zarr_format": 3, "use_consolidated": False}


def make_zarr_store(url, storage_options=None, *, read_only=False):
    """A zarr store for ``url``: a :class:`LocalStore` for paths and ``file://``, else fsspec."""
    url = strip_file_scheme(str(url))
    if "://" not in url:
        return LocalStore(url, read_only=read_only)
    return FsspecStore.from_url(url, storage_options=storage_options or {}, read_only=read_only)

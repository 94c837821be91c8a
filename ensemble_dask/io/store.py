"""The run store: one zarr v3 group at a URL holding every stage's output.

Layout (see DESIGN.md): ``X``, ``y_true``, ``labels``, ``pairs/...``, ``consensus/<method>/...``,
``report/metrics.json``. Each stage's record is one JSON document ``_stages/<name>.json``
``{"params", "inputs", "hash", "content", "output", "meta", "complete", "started", "finished", "seconds"}``;
``inputs`` are the content identities of the stage's inputs (see :meth:`RunStore.stage_hash`), ``content``
describes what it wrote. A stage is marked complete only after all its data is written; a stage whose record
matches the requested parameters and inputs, and whose output matches its record, is skipped on re-run.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import logging
import os
import re
import time

import fsspec
import zarr
import zarr.errors

from .._validation import EnsembleDaskError, InputError
from .lease import check_held
from .urls import GROUP_FORMAT, make_zarr_store, strip_file_scheme

__all__ = [
    "RunStore",
    "StageContentError",
    "make_zarr_store",
    "stage_hash",
    "workflow_store_url",
    "RECORDS_DIR",
    "REPORT_DIR",
]

RECORDS_DIR = "_stages"
#: the stages in the order a workflow runs them (consensus/<name> under "consensus"): it orders
#: records whose times are equal or missing
STAGE_ORDER = ("ingest", "generate", "coassoc", "consensus", "federated")
#: the folder the report stage (and the Dask cluster's facts) are written into
REPORT_DIR = "report"
#: the attribute of an array naming the stage (and its hash) that wrote it
WRITTEN_BY = "_written_by"
#: checks of a stage's output by its content, which the stages' modules register: ``{stage: check(store,
#: record) -> [problems]}`` (:meth:`RunStore.verify` with ``content=True``)
CONTENT_CHECKS = {}

logger = logging.getLogger(__name__)


def workflow_store_url(spec):
    """The run store of a workflow ``spec``: its ``store``, else ``runs/NAME.zarr`` with NAME the workflow's
    ``name`` (default ``run``, or ``federated`` for a workflow with a ``federated`` section)."""
    return spec.get("store") or f"runs/{spec.get('name', 'federated' if 'federated' in spec else 'run')}.zarr"


#: how many chunk files :meth:`RunStore.bytes_digest` reads in one request (an object store's run at once)
_DIGEST_BATCH = 64

#: the mark of a stage record that does not parse (:meth:`RunStore.records` lists it, as complete)
_UNPARSABLE = "_unparsable"


class StageContentError(InputError):
    """A stage is recorded complete, but its output is not what its record says (see :meth:`RunStore.verify`).

    Not "not run": a caller that would run a missing stage (a workflow's default ``generate``) must not
    run it over this one's output, which may be the user's own (imported labels).
    """


def _jsonable(obj):
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


def _run_order(item):
    """Sort key of a ``(name, record)`` pair: when the stage started (records written before
    ``started`` existed: when it finished, to the second), then its place in :data:`STAGE_ORDER`."""
    name, rec = item
    when = None
    with contextlib.suppress(TypeError, ValueError):
        when = _dt.datetime.fromisoformat(rec.get("started") or rec.get("finished")).timestamp()
    top = name.split("/", 1)[0]
    rank = STAGE_ORDER.index(top) if top in STAGE_ORDER else len(STAGE_ORDER)
    return (when is None, when or 0.0, rank, name)


def stage_hash(params, inputs):
    """Hash of a stage's parameters and its inputs' hashes (hex, 16 chars)."""
    blob = json.dumps({"params": params, "inputs": inputs}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


#: the root attribute that makes a zarr group a run store (set when a store is opened to write without it)
MARK = "ensemble_dask"
#: zarr's temporary file for the root's ``zarr.json`` (written, then renamed): a store being created
_ZARR_PARTIAL = re.compile(r"zarr\.[0-9a-f]{32}\.partial")


def _not_a_store(path):
    """What the local folder ``path`` is, if it holds files but no run store: ``"a folder of other files"``
    (no ``zarr.json``) or ``"a zarr group that is not a run store"`` (neither :data:`MARK` nor stage
    records); None otherwise. A store written there would mix with those files, and its stages remove what
    they replace (``report``, ``_stages``, the arrays of an ``ingest --overwrite``). Hidden names (``.git``)
    are none a store writes. The limit: a folder given by a URL other than a path or ``file://`` (an object
    store's prefix) is not checked, which would take a listing request each time a store is opened."""
    try:
        names = os.listdir(path)
    except OSError:  # none there yet, or unreadable: zarr says which
        return None
    theirs = [
        n for n in names if not n.startswith(".") and not _ZARR_PARTIAL.fullmatch(n) and n != "zarr.json"
    ]
    if not theirs or RECORDS_DIR in theirs:
        return None
    if "zarr.json" not in names:
        return "a folder of other files"
    # read after the listing: a store's creator marks its zarr.json before it writes anything else there
    try:
        with open(os.path.join(path, "zarr.json"), "rb") as f:
            attributes = json.load(f).get("attributes") or {}
    except (OSError, ValueError, AttributeError):
        attributes = {}
    return None if MARK in attributes else "a zarr group that is not a run store"


class RunStore:
    """A run store at ``url``.

    Parameters
    ----------
    url : str
        Local path, ``file://``, ``memory://``, ``s3://`` ... URL of the zarr group.
    storage_options : dict, default=None
        fsspec options (credentials, ``endpoint_url`` ...).
    mode : {"a", "r+", "r"}, default="a"
        ``"a"`` creates the store if needed, in a new or empty folder (a local folder of other files, or a
        zarr group of other data, is refused); ``"r+"`` (read and write) and ``"r"`` require it to exist, so
        a mistyped URL is an error rather than a new empty store.
    """

    def __init__(self, url, storage_options=None, *, mode="a"):
        if not str(url).strip() or str(url).strip() in ("file://", "/"):
            raise InputError(f"the run store URL is empty or the root folder ({url!r}); give a path or URL")
        url = strip_file_scheme(str(url)).rstrip("/")
        # an absolute path: worker processes may run in another directory
        self.url = url if "://" in url else os.path.abspath(url)
        self.storage_options = dict(storage_options or {})
        self.mode = mode
        self._verified = set()  # (stage, hash, finished) of the records whose output was checked
        if "://" not in self.url and os.path.isfile(self.url):
            raise InputError(f"run store {self.url!r} is a file; a run store is a folder (give another path)")
        if mode == "a" and "://" not in self.url and (what := _not_a_store(self.url)):
            raise InputError(
                f"{self.url!r} is {what}; give a new or empty folder for the run store "
                "(a store's stages replace what they write there, such as its report folder)"
            )
        if mode != "a" and "://" not in self.url and not os.path.isdir(self.url):
            raise InputError(f"run store {self.url!r} does not exist")
        try:
            store = make_zarr_store(self.url, self.storage_options, read_only=mode == "r")
            self.group = zarr.open_group(store=store, mode=mode, **GROUP_FORMAT)
            if mode == "a" and MARK not in self.group.attrs:  # a new store, or one of before the mark
                self.group.attrs[MARK] = {"about": "a run store of ensemble_dask (its docs: The run store)"}
        except (FileNotFoundError, zarr.errors.NodeNotFoundError) as exc:
            raise InputError(f"run store {self.url!r} does not exist") from exc
        except OSError as exc:  # missing bucket, permission, unreachable endpoint
            raise InputError(f"cannot open run store {self.url!r}: {exc}") from exc

    # -- arrays -----------------------------------------------------------------------------
    def __contains__(self, path):
        return path in self.group

    def __getitem__(self, path):
        try:
            return self.group[path]
        except KeyError:
            raise InputError(
                f"run store {self.url!r} has no {path!r}; run the stage that writes it"
            ) from None

    @property
    def n(self):
        """Number of points of the data set in this store (from ``X`` or ``labels``), or None."""
        for name in ("X", "labels"):
            if name in self.group:
                return self.group[name].shape[0]
        return None

    def check_n(self, n, what, remedy="use another store"):
        """Raise when ``n`` differs from the number of points already in the store; the message ends with
        ``remedy`` (what the caller's command offers)."""
        have = self.n
        if have is not None and have != n:
            raise InputError(
                f"{what} has n={n} points but run store {self.url!r} holds a data set of n={have}; {remedy}"
            )

    # -- stage records ----------------------------------------------------------------------
    # One small JSON document per stage under ``_stages/`` (``_stages/consensus/pcc-kl.json``):
    # writers of different stages never rewrite each other's records (one shared attribute
    # would be read, modified and written back by each, losing concurrent updates).
    def _record_url(self, name):
        return self._file_url(f"{RECORDS_DIR}/{name}.json")

    def _fs(self):
        fs, root = fsspec.core.url_to_fs(strip_file_scheme(self.url), **self.storage_options)
        return fs, root.rstrip("/")

    def records(self):
        """``{stage name: record}`` of every stage recorded in the store, in the order they ran."""
        fs, root = self._fs()
        base = f"{root}/{RECORDS_DIR}"
        out = {}
        try:
            names = fs.find(base)
        except FileNotFoundError:
            names = []
        for path in sorted(names):
            if path.endswith(".json") and not path.endswith("/zarr.json"):
                rel = path[len(fs._strip_protocol(base)) :].strip("/")
                rec = self._raw_record(rel[: -len(".json")])
                if rec is not None:
                    out[rel[: -len(".json")]] = rec
        return dict(sorted(out.items(), key=_run_order))

    def record(self, name):
        """The record of stage ``name``, or None; a record that does not parse raises
        :class:`StageContentError` naming the repair."""
        rec = self._raw_record(name)
        if rec is not None and rec.get(_UNPARSABLE):
            raise StageContentError(
                f"run store {self.url!r}: the record of stage {name!r} ({RECORDS_DIR}/{name}.json) does not "
                f"parse, a damaged stage; run `ensemble-dask verify --store {self.url} --repair` to unmark "
                "it (it runs again), then run the same command again"
            )
        return rec

    def _raw_record(self, name):
        """The record of stage ``name``, None, or ``{"complete": True, _UNPARSABLE: True}`` for one that does
        not parse (so that :meth:`verify` names it and :meth:`repair` unmarks it)."""
        try:
            data = self.read_bytes(f"{RECORDS_DIR}/{name}.json")
        except FileNotFoundError:
            return None
        try:
            rec = json.loads(data)
        except ValueError:
            rec = None
        return rec if isinstance(rec, dict) else {"complete": True, _UNPARSABLE: True}

    def stage_hash(self, name):
        """Content identity of a complete stage's output, or raise if it is not complete.

        It is the hash of the output's content when the stage recorded one (``output``: ingest's
        ``X``, generate's ``labels``), else the hash of its parameters and its inputs' identities.
        Either way it depends on content only: a stage recomputed with the same result keeps it, so
        the stages after it are still up to date.
        """
        rec = self.record(name)
        if rec and rec.get("stale"):  # it completed, then what it read was replaced
            raise InputError(
                f"stage {name!r} is out of date in run store {self.url!r} (what it read has changed since it "
                "ran); run it again"
            )
        if not rec or not rec.get("complete"):
            raise InputError(f"stage {name!r} has not completed in run store {self.url!r}; run it first")
        self._check_content(name, rec)
        return rec.get("output") or rec["hash"]

    def is_complete(self, name, params, inputs):
        """Whether stage ``name`` is complete with these parameters and inputs (then it is skipped).

        Its output is checked against its record first (see :meth:`verify`): a store whose content is not
        what the record says raises :class:`InputError` naming the repair, never passes as up to date.
        """
        rec = self.record(name)
        if not (rec and rec.get("complete") and rec.get("hash") == stage_hash(_jsonable(params), inputs)):
            return False
        self._check_content(name, rec)
        return True

    def stamped(self, path, name, params, inputs):
        """Whether the array at ``path`` bears the stamp of stage ``name`` completed with these parameters and
        inputs (the stamp outlives the record, which the stage's next run unmarks when it starts)."""
        stamp = self.group[path].attrs.get(WRITTEN_BY)
        return stamp == {"stage": name, "hash": stage_hash(_jsonable(params), inputs)}

    # -- content identity -------------------------------------------------------------------------
    # A stage's record lists what it wrote (``content``: shape, dtype and stored chunk count per array)
    # and stamps each array with the record's hash (``_written_by``); a re-run verifies both before it
    # trusts the record. Content from another run (two writers, a store copied over, a crash between
    # data and record) then disagrees with the record instead of passing as up to date.
    def _arrays(self, paths):
        for path in paths:
            try:
                node = self.group[path]  # (one read: `path in group` and then `group[path]` were two)
            except KeyError:
                continue
            if isinstance(node, zarr.Array):
                yield path, node
            else:
                for sub, member in node.members(max_depth=None):
                    if isinstance(member, zarr.Array):
                        yield f"{path}/{sub}", member

    def _seal(self, name, digest, writes):
        """Stamp the arrays under ``writes`` with the stage's hash; their description for its record: shape,
        dtype, stored chunk count and the digest of the stored chunks' bytes (:meth:`bytes_digest`)."""
        content = {}
        for path, arr in self._arrays(writes):
            arr.attrs[WRITTEN_BY] = {"stage": name, "hash": digest}
            content[path] = [
                list(arr.shape),
                str(arr.dtype),
                int(arr.nchunks_initialized),
                self.bytes_digest(path),
            ]
        return content

    def bytes_digest(self, path):
        """The digest (BLAKE2b, hex) of the array ``path`` as stored: every chunk's key and encoded bytes, in
        key order. The chunks are read as stored, not decoded; the array's ``zarr.json`` (its metadata, with
        the stamp) is left out, shape and dtype being checked on their own."""
        fs, root = self._fs()
        base = fs._strip_protocol(f"{root}/{path}").rstrip("/")
        try:
            files = sorted(f for f in fs.find(base) if f.rsplit("/", 1)[-1] != "zarr.json")
        except FileNotFoundError:
            files = []
        h = hashlib.blake2b(digest_size=16)
        for i in range(0, len(files), _DIGEST_BATCH):
            batch = files[i : i + _DIGEST_BATCH]
            blobs = fs.cat(batch, on_error="raise") if len(batch) > 1 else {batch[0]: fs.cat_file(batch[0])}
            for f in batch:
                data = blobs[f]
                h.update(f"{f[len(base) :]}\0{len(data)}\0".encode())
                h.update(data)
        return h.hexdigest()

    def verify(self, name, *, chunks=True, content=False):
        """What in the output of stage ``name`` disagrees with its record (a list of sentences; empty
        when all agree, or when the record predates content identities). ``chunks=False`` leaves out the
        count of stored chunks (a listing of the store, where the rest reads metadata only); ``content=True``
        reads every stored chunk too, against the digest of the bytes the stage wrote (a chunk changed in
        place, or restored from another copy, keeps the shape, the count and the stamp), and runs the stage's
        check of :data:`CONTENT_CHECKS`. Records written before digests have no bytes to compare."""
        rec = self._raw_record(name) or {}
        if rec.get(_UNPARSABLE):
            return [f"its record ({RECORDS_DIR}/{name}.json) does not parse"]
        return self._problems(name, rec, chunks, content)

    def _problems(self, name, rec, chunks, content):
        """:meth:`verify` of stage ``name`` against its record ``rec``, read once by the caller."""
        problems = self._verify(name, rec, chunks)
        if content and not problems:
            problems = self._verify_bytes(name, rec)
        check = CONTENT_CHECKS.get(name)
        if content and not problems and check is not None:
            problems = check(self, rec)
        return problems

    def _verify(self, name, rec, chunks):
        problems, count_chunks = [], chunks
        for path, (shape, dtype, chunks, *_) in (rec.get("content") or {}).items():
            try:
                arr = self.group[path]
            except KeyError:
                problems.append(f"{path} is missing")
                continue
            if not isinstance(arr, zarr.Array):
                problems.append(f"{path} is not an array")
                continue
            stamp = arr.attrs.get(WRITTEN_BY) or {}
            if list(arr.shape) != shape or str(arr.dtype) != dtype:
                problems.append(f"{path} is {tuple(arr.shape)} {arr.dtype}, recorded {tuple(shape)} {dtype}")
            elif stamp != {"stage": name, "hash": rec.get("hash")}:
                problems.append(f"{path} was written by another run ({stamp or 'no stamp'})")
            elif count_chunks and (stored := int(arr.nchunks_initialized)) != chunks:
                problems.append(f"{path} holds {stored} chunks, recorded {chunks}")
        return problems

    def _verify_bytes(self, name, rec):
        entries = (rec.get("content") or {}).items()
        return [
            f"{path}'s stored bytes are not those stage {name!r} wrote (changed in place since, or restored "
            "from another copy)"
            for path, entry in entries
            if len(entry) > 3 and self.bytes_digest(path) != entry[3]
        ]

    def _check_content(self, name, rec):
        if not rec.get("content"):
            return
        # the stored chunks are counted once per record and store object (a listing each time); shapes,
        # dtypes and stamps (metadata) every time
        key = (name, rec.get("hash"), rec.get("finished"))
        problems = self._problems(name, rec, key not in self._verified, False)  # (the record read once)
        if not problems:
            self._verified.add(key)
            return
        raise StageContentError(
            f"run store {self.url!r}: stage {name!r} is recorded complete, but its output is not "
            f"what the record says ({'; '.join(problems)}); "
            f"run `ensemble-dask verify --store {self.url} --repair` "
            "to unmark it (and the stages that read it), then run the same command again"
        )

    def repair(self, *, content=False):
        """Unmark every complete stage whose output disagrees with its record (``content``: as
        :meth:`verify`), and the stages that read it; return ``{stage: problems}`` of those found."""
        found = {}
        for name, rec in self.records().items():
            if rec.get("complete") and (problems := self.verify(name, content=content)):
                found[name] = problems
                if rec.get(_UNPARSABLE):  # nothing of it to keep: the stage runs again
                    self._set_record(name, None)
                    continue
                self._set_record(name, {**rec, "complete": False, "broken": problems})
                self._unmark_readers_of(rec.get("output") or rec["hash"])
        return found

    def _set_record(self, name, rec):
        url = self._record_url(name)
        if rec is not None and RECORDS_DIR not in self.group:
            # a (childless) zarr group: zarr then knows the folder of records is part of the store; a
            # concurrent writer (another worker process) may create it between the check and here
            with contextlib.suppress(zarr.errors.ContainsGroupError):
                self.group.require_group(RECORDS_DIR).attrs["about"] = "one JSON record per stage"
        if rec is None:
            self.remove(f"{RECORDS_DIR}/{name}.json")
            return
        self._put(url, json.dumps(rec, sort_keys=True, default=str).encode())

    def clear_records(self):
        """Forget every stage record (the data they describe is being replaced)."""
        fs, root = self._fs()
        with contextlib.suppress(FileNotFoundError):
            fs.rm(f"{root}/{RECORDS_DIR}", recursive=True)

    def clear_report(self):
        """Remove the report folder (its pages and figures describe data that is being replaced)."""
        fs, root = self._fs()
        with contextlib.suppress(FileNotFoundError):
            fs.rm(f"{root}/{REPORT_DIR}", recursive=True)

    @contextlib.contextmanager
    def stage(self, name, params, inputs, *, meta=None, writes=()):
        """Context for running stage ``name``: unmark it, yield, then mark it complete.

        If the body raises, the stage stays unmarked (its partial output is never trusted). The
        body may set ``output`` in the yielded dict: a hash of the stage's output content, which
        the stages after it then key on (see :meth:`stage_hash`). ``meta`` is stored in the record
        but is not part of the stage's identity (e.g. the URL the input was read from). ``writes``
        names the arrays or groups the stage writes: they are stamped with its hash and described
        in its record, which a re-run verifies (:meth:`verify`). A process that took the store's lease and
        has lost it since (another writer took it over) starts and marks nothing:
        :func:`~ensemble_dask.io.lease.check_held` raises :class:`~ensemble_dask.io.lease.StoreBusyError`
        before the stage's record is unmarked, and again before it is marked complete.
        """
        if self.mode == "r":
            raise EnsembleDaskError(f"run store {self.url!r} is open read-only")
        params = _jsonable(params)
        check_held(self.url)  # a writer whose lease was taken over unmarks and writes nothing of the holder's
        before = self.record(name) or {}
        old_identity = (before.get("output") or before.get("hash")) if before.get("complete") else None
        self._set_record(name, None)
        started = _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")  # orders the records
        t0 = time.perf_counter()
        result = {}
        yield result
        seconds = time.perf_counter() - t0
        check_held(self.url)  # a writer whose lease was taken over marks nothing complete
        digest = stage_hash(params, inputs)
        content = self._seal(name, digest, writes)
        self._set_record(
            name,
            {
                "params": params,
                "inputs": inputs,
                "hash": digest,
                "content": content,
                "output": result.get("output"),
                "meta": _jsonable(meta or {}),
                "complete": True,
                "started": started,
                "finished": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                "seconds": round(seconds, 3),
            },
        )
        new_identity = result.get("output") or digest
        if old_identity is not None and old_identity != new_identity:
            self._unmark_readers_of(old_identity)
        logger.info("stage %s complete in %.2f s", name, seconds)

    def _unmark_readers_of(self, identity):
        """Unmark every stage that read the output ``identity`` (replaced now), and the stages after them:
        a result computed from old content is never shown beside the new (a re-run recomputes it)."""
        stale = [identity]
        while stale:
            gone = stale.pop()
            for other, rec in self.records().items():
                if rec.get("complete") and gone in (rec.get("inputs") or []):
                    logger.info("stage %s read replaced content: no longer complete", other)
                    # kept, unmarked: what it was made with (coassoc updates its pairs from it)
                    self._set_record(other, {**rec, "complete": False, "stale": True})
                    stale.append(rec.get("output") or rec.get("hash"))

    # -- JSON documents (report/) -------------------------------------------------------------
    def _file_url(self, path):
        return f"{strip_file_scheme(self.url)}/{path}"

    def file_system(self, path):
        """``(fsspec file system, path in it)`` of the file or folder ``path`` of the store."""
        return fsspec.core.url_to_fs(self._file_url(path), **self.storage_options)

    def check_report_folder(self):
        """Raise :class:`InputError` when ``report`` in a local store exists but is not a folder.

        The report stage writes ``report/metrics.json``, ``report/index.html`` ... and the stages that
        start a Dask cluster write ``report/cluster.json``: a file in its place would fail them with
        a traceback after their work, so the commands call this before any stage runs. Object
        stores are not checked (a key ``report`` and keys under ``report/`` coexist there).
        """
        path = self._file_url(REPORT_DIR)
        if "://" not in path and os.path.lexists(path) and not os.path.isdir(path):
            raise InputError(
                f"{path!r} is a file, but the report of run store {self.url!r} is written into a folder "
                "of that name; move or remove that file"
            )

    def read_bytes(self, path):
        """The bytes of the file ``path`` of the store (:class:`FileNotFoundError` when there is none), in
        one request to an object store (an open file, and s3fs's ``cat_file`` with no start, ask the size
        first)."""
        fs, target = self.file_system(path)
        return fs.cat_file(target, start=0)

    def write_json(self, path, obj):
        """Write ``obj`` as the JSON document ``path`` of the store, in one step (:meth:`write_bytes`)."""
        self.write_bytes(path, json.dumps(obj, indent=2, default=float).encode())

    def write_bytes(self, path, data):
        """Write the file ``path`` of the store in one step: a local file beside and renamed, so a reader
        never sees half of it; an object store's in one PUT. Returns its path or URL."""
        url = self._file_url(path)
        self._put(url, data)
        return url

    def remove(self, path):
        """Remove the file ``path`` of the store, if there is one."""
        fs, target = self.file_system(path)
        with contextlib.suppress(FileNotFoundError):
            fs.rm(target)

    def _put(self, url, data):
        if "://" not in url:
            os.makedirs(os.path.dirname(url), exist_ok=True)
            tmp = f"{url}.{os.getpid()}.{time.monotonic_ns()}.tmp"
            try:
                with open(tmp, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())  # on disk before it takes the name (a machine that stops then)
                os.replace(tmp, url)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.remove(tmp)
                raise
            return
        fs, path = fsspec.core.url_to_fs(url, **self.storage_options)
        fs.pipe_file(path, data)

    def write_file(self, path, local_path):
        """Copy the local file ``local_path`` to ``path`` in the store (e.g. ``report/x.html``)."""
        url = self._file_url(path)
        if "://" not in url:
            os.makedirs(os.path.dirname(url), exist_ok=True)
        fs, target = fsspec.core.url_to_fs(url, **self.storage_options)
        fs.put_file(local_path, target)

"""One writer per run store: a lease file created atomically, kept alive by a heartbeat, released at the end.

``STORE.lease`` beside the store (outside its zarr hierarchy) holds
``{owner, host, pid, command, started, heartbeat}``. It is created with the file system's own exclusive create
(``open(..., "xb")``: ``O_EXCL`` on a local disk, a PUT with ``If-None-Match: *`` on S3), never by a
read-then-write check, so of two writers started at once exactly one gets it. The holder rewrites
``heartbeat`` every :data:`HEARTBEAT` seconds; a lease whose heartbeat is older than :data:`STALE_AFTER`
seconds belongs to a writer that died, and ``take_over=True`` replaces it (by removing it and creating it
again exclusively, so two that take over at once still end with one holder). A lease whose writer ran on this
host and has exited (killed: no such process, or another process under its pid) is replaced at once, so a
killed run resumes with the same command.

The lease is the workflow's, not the process's: the client process takes it, and the stages' tasks on
any number of Dask workers write under it. Readers never need it.

A holder that lost its lease (it stalled for longer than :data:`STALE_AFTER`, and another writer took it over)
starts and marks no stage: :meth:`~ensemble_dask.io.store.RunStore.stage` asks :func:`check_held` before it
unmarks a stage's record and again before it marks it complete, which reads the lease and raises
:class:`StoreBusyError`. What a stage wrote between the two is not fenced (zarr's writes are not conditional):
the stage stays unmarked, and the writer that holds the lease writes it again.

On S3 the heartbeat, the release and the take-over are conditional too: each reads the lease with its ETag
(one consistent read), checks its owner, and then rewrites (``If-Match``) or removes (``DELETE`` with
``If-Match``) only that version of it, so a take-over between the read and the write is never overwritten or
removed; a heartbeat that the store refuses reads the lease again at the next beat (and stops if it is another
writer's). This holds on S3 servers that honour conditional requests (AWS S3 and moto do); one that ignores
``If-Match`` leaves the read-then-write window below. Every other file system (a local disk, GCS, Azure) has
no such condition here: the heartbeat reads the lease and then rewrites it, and the release reads it and then
removes it, so a take-over between the two can be overwritten (the writer that then finds another owner in the
lease stops too) or removed.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import socket
import sys
import threading
import uuid

import fsspec

from .._validation import EnsembleDaskError
from .urls import is_object_store, protocol_of, strip_file_scheme

__all__ = ["StoreLease", "StoreBusyError", "check_held", "LEASE_SUFFIX", "HEARTBEAT", "STALE_AFTER"]

LEASE_SUFFIX = ".lease"
HEARTBEAT = 10.0  # seconds between two heartbeats of the holder
STALE_AFTER = 60.0  # seconds without a heartbeat after which a lease belongs to a dead writer

logger = logging.getLogger(__name__)


class StoreBusyError(EnsembleDaskError):
    """Another writer holds the run store's lease (the message names it, and how to wait or take over)."""


def _process_started(pid):
    """When process ``pid`` started (seconds since the epoch), or None when there is no such process."""
    import psutil

    try:
        return round(psutil.Process(pid).create_time(), 3)
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


def _precondition_failed(exc):
    """Whether ``exc`` is S3's answer to a condition that did not hold (412 PreconditionFailed, or 409
    ConditionalRequestConflict, which s3fs raises as an ``OSError``; a 412 without a body too)."""
    response = getattr(exc.__cause__, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return (
        code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")
        or status in (409, 412)
        or "pre-conditions you specified did not hold" in str(exc)
    )


def _now():
    return _dt.datetime.now(_dt.UTC)


#: the leases this process holds, by their store (:func:`_key`)
_HELD = {}


def _key(url):
    """A store's URL as the lease and the store both name it: a local path absolute, its links resolved (a
    store reached through a link, or as ``store/.``, had a lease of its own beside the holder's)."""
    url = strip_file_scheme(str(url)).rstrip("/")
    return url if "://" in url else os.path.realpath(url)


def _machine():
    """``(boot, pid namespace)`` of this process: with the host name, what tells that a lease's pid is a
    process of this machine's view (a container that shares the host's name has other pids). Without
    ``/proc`` (macOS): the boot's time, and no namespace."""
    import psutil

    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = f"booted {psutil.boot_time():.0f}"
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return boot, namespace


def check_held(url):
    """Raise :class:`StoreBusyError` when this process took the lease of the run store at ``url`` and another
    writer holds it now; nothing when it still holds it, or never took it (a library caller that writes a
    store without its lease)."""
    lease = _HELD.get(_key(url))
    if lease is not None:
        lease.check()


def _write_synced(path, data):
    """Write ``data`` to the local file ``path`` and sync it to the disk."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _iso(t):
    return t.isoformat(timespec="seconds")


class StoreLease:
    """The lease of the run store at ``url`` (a context manager: acquired on enter, released on exit).

    Parameters
    ----------
    url : str
        The run store's URL or path.
    storage_options : dict, default=None
        fsspec options of ``url``.
    take_over : bool, default=False
        Replace a stale lease (no heartbeat for ``stale_after`` seconds); a live one is never replaced.
    heartbeat, stale_after : float
        Seconds between heartbeats, and without one before a lease is stale.
    """

    def __init__(
        self, url, storage_options=None, *, take_over=False, heartbeat=HEARTBEAT, stale_after=STALE_AFTER
    ):
        self.url = strip_file_scheme(str(url)).rstrip("/")
        self._key = _key(self.url)  # the store as check_held names it (a relative path: from here)
        self.fs, root = fsspec.core.url_to_fs(self.url, **(storage_options or {}))
        self.root = root.rstrip("/")
        if not is_object_store(self.fs) and protocol_of(self.fs) in ("file", "local"):
            self.root = os.path.realpath(self.root)  # one lease whatever the spelling (links, '.', '..')
        self.path = f"{self.root}{LEASE_SUFFIX}"
        self.parent = self.root.rsplit("/", 1)[0] if "/" in self.root else "."
        self.take_over = bool(take_over)
        self.heartbeat, self.stale_after = float(heartbeat), float(stale_after)
        self.doc = None
        self._stop = threading.Event()
        self._thread = None
        self._io = threading.Lock()  # the heartbeat's rewrite and :meth:`check`'s read, one at a time
        self.lost = False
        protocols = self.fs.protocol if isinstance(self.fs.protocol, (tuple, list)) else (self.fs.protocol,)
        #: S3: the lease is rewritten and removed only in the version last read (by its ETag)
        self._conditional = "s3" in protocols
        #: a local disk: the lease written whole to a temporary file, then linked or moved in place
        self._local = not is_object_store(self.fs) and protocol_of(self.fs) in ("file", "local")

    # -- the file ------------------------------------------------------------------------------
    def _create(self, doc):
        """Create the lease file exclusively, whole or not at all; False if it exists."""
        data = json.dumps(doc).encode()
        if self._local:  # written, synced, then linked in place: a file-size limit cannot half-write it
            tmp = f"{self.path}.{doc['owner']}.tmp"
            try:
                _write_synced(tmp, data)
                try:
                    os.link(tmp, self.path)  # fails if the lease exists (as O_EXCL would)
                    return True
                except FileExistsError:
                    return False
                except OSError:  # a file system without hard links: created exclusively, as on S3
                    pass
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        try:
            with self.fs.open(self.path, "xb") as f:  # on S3 a PUT with If-None-Match: *
                f.write(data)
        except FileExistsError:
            return False
        return True

    def _unparsable(self):
        """The lease document of a lease file that does not parse: owner ``"?"`` and, as its heartbeat, the
        file's last write (a file being written is young; one half-written by a writer that died grows stale
        like any other)."""
        try:
            info = self.fs.info(self.path)
            when = info.get("mtime", info.get("LastModified"))
            when = (
                when if isinstance(when, _dt.datetime) else _dt.datetime.fromtimestamp(float(when), _dt.UTC)
            )
        except Exception:  # gone since, or no time: as a lease being written now
            when = _now()
        return {"owner": "?", "heartbeat": _iso(when), "unparsable": True}

    def _read_versioned(self):
        """``(document, ETag)`` of the lease in one consistent read (s3fs reads the body on the condition
        of the ETag it found), or ``(None, None)``."""
        self.fs.invalidate_cache(self.path)  # the ETag from a request now, not from a cached listing
        try:
            with self.fs.open(self.path, "rb") as f:
                data, etag = f.read(), f.details.get("ETag")
        except FileNotFoundError:
            return None, None
        try:
            return json.loads(data.decode()), etag
        except ValueError:
            return self._unparsable(), etag

    def _replace(self, version, data=None):
        """Write ``data`` over (``None``: remove) the lease, on the condition that it is still at ``version``
        (its ETag; no condition on a file system without one). False if S3 refused the condition;
        ``FileNotFoundError`` if the lease is gone."""
        if not self._conditional:
            if data is None:
                self.fs.rm(self.path)
            elif self._local:  # a whole new file put in place: a reader never sees it half-written
                tmp = f"{self.path}.{self.doc['owner']}.tmp"
                try:
                    _write_synced(tmp, data)
                    os.replace(tmp, self.path)
                finally:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
            else:
                with self.fs.open(self.path, "wb") as f:
                    f.write(data)
            return True
        if version is None:  # an S3 lease read without its ETag: no condition to write on
            return False
        try:
            if data is None:
                bucket, key, _ = self.fs.split_path(self.path)
                self.fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=version)
                self.fs.invalidate_cache(self.path)
            else:
                self.fs.pipe_file(self.path, data, IfMatch=version)
        except FileNotFoundError:
            raise
        except OSError as exc:
            if _precondition_failed(exc):  # also a retry of a write the store had applied: read again
                self.fs.invalidate_cache(self.path)
                return False
            raise
        return True

    def _read_own(self):
        """``(held, version)``: the lease as read now, and on S3 its version (ETag). A lease unreadable this
        time reads as owner ``"?"``."""
        try:
            if self._conditional:
                held, version = self._read_versioned()
            else:
                held, version = self.read(), None
        except Exception:  # an S3 503, a reset connection, a half-written file: as a lease being written
            return {"owner": "?", "heartbeat": _iso(_now())}, None
        return held, version

    def _remove(self):
        """Remove the lease if it is still this writer's (on S3: the version read, by its ETag)."""
        for _ in range(3):  # a refused removal: the lease changed since it was read; read it again
            held, version = self._read_own()
            if held is None or held.get("owner") != self.doc["owner"]:
                if held is not None:
                    why = "it could not be read" if held.get("owner") == "?" else "another writer holds it"
                    logger.warning("left the lease of run store %s: %s", self.url, why)
                return
            try:
                if self._replace(version):
                    return
            except FileNotFoundError:
                return
            except Exception as exc:  # never raised from a release: it may end a run that failed otherwise
                logger.warning("could not remove the lease of %s (%s): it goes stale", self.url, exc)
                return
        logger.warning("could not remove the lease of %s: it changed at each try; it goes stale", self.url)

    def read(self):
        """The current lease document, or None."""
        self.fs.invalidate_cache(self.path)  # its size from a request now, not from a cached listing
        try:
            with self.fs.open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError:  # a failing request: its holder is alive
            return {"owner": "?", "heartbeat": _iso(_now())}
        try:
            return json.loads(data.decode())
        except ValueError:
            return self._unparsable()

    def _age(self, doc):
        try:
            return (_now() - _dt.datetime.fromisoformat(doc["heartbeat"])).total_seconds()
        except (KeyError, TypeError, ValueError):
            return float("inf")

    # -- acquire and release -------------------------------------------------------------------
    def acquire(self):
        self._made_parent = False
        # a local path's folder; an object store has none, and its makedirs creates a bucket: a mistyped
        # bucket must stop the command (the lease's first write does), not be created in the user's account
        if not is_object_store(self.fs):
            with contextlib.suppress(Exception):
                self._made_parent = not self.fs.exists(self.parent)
                self.fs.makedirs(self.parent, exist_ok=True)
        now = _iso(_now())
        self.doc = {
            "owner": uuid.uuid4().hex,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "command": " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]])[:300],
            "pid_started": _process_started(os.getpid()),
            "machine": list(_machine()),
            "started": now,
            "heartbeat": now,
        }
        first = f"run store {self.url!r}: another writer took over its lease first"
        created = self._create(self.doc)
        for _ in range(3):
            if created:
                break
            held, version = self._read_own()
            if held is None:  # released since: create it again
                created = self._create(self.doc)
                continue
            age = self._age(held)
            dead = self._holder_is_gone(held)
            if not (dead or (age > self.stale_after and self.take_over)):
                raise StoreBusyError(self._busy_message(held, age))
            logger.warning(
                "taking over the lease of %s: %s",
                self.url,
                "its writer on this host has exited" if dead else f"no heartbeat for {age:.0f} s",
            )
            with contextlib.suppress(FileNotFoundError):
                if not self._replace(version):  # on S3 only the version read, the stale one
                    raise StoreBusyError(first)
            if not self._create(self.doc):
                raise StoreBusyError(first)
            created = True
        if not created:
            raise StoreBusyError(first)
        self._thread = threading.Thread(target=self._beat, name="store-lease", daemon=True)
        self._thread.start()
        _HELD[self._key] = self
        return self

    def _read_checked(self):
        """The lease read under the lock the heartbeat takes; any failure reads as owner ``"?"``."""
        with self._io:
            return self._read_own()[0]

    def check(self):
        """Raise :class:`StoreBusyError` unless the lease file still names this holder, read now (a lease
        unreadable for a moment, being written or behind a failing request, is read again)."""
        for attempt in range(4):
            held = self._read_checked()
            if held is None or held.get("owner") != "?":
                break
            self._stop.wait(0.2 * (attempt + 1))
        if held is not None and held.get("owner") == "?":
            raise StoreBusyError(
                f"run store {self.url!r}: its lease {self.path!r} could not be read to confirm that this "
                "writer still holds it; its stage is not marked complete (run the same command again)"
            )
        if held is None or held.get("owner") != self.doc["owner"]:
            self.lost = True
            who = "nobody" if held is None else f"pid {held.get('pid', '?')} on {held.get('host', '?')}"
            raise StoreBusyError(
                f"run store {self.url!r}: this writer lost its lease (now held by {who}: another writer took "
                "it over after no heartbeat); its stage is not marked complete"
            )

    @staticmethod
    def _holder_is_gone(held):
        """Whether the lease's writer ran on this host and its process no longer exists (killed). This host
        means its name, boot and pid namespace: a container or another machine of the same name has pids of
        its own, so its lease ends only by staleness (``take_over``)."""
        if held.get("host") != socket.gethostname() or not isinstance(held.get("pid"), int):
            return False
        if "machine" in held and held["machine"] != list(_machine()):  # (a lease of an older version: none)
            return False
        started = _process_started(held["pid"])
        return started is None or (held.get("pid_started") is not None and started != held["pid_started"])

    def _busy_message(self, held, age):
        if held.get("unparsable"):
            if age > self.stale_after:
                return (
                    f"run store {self.url!r}: its lease file {self.path!r} does not parse (last written "
                    f"{age:.0f} s ago, a writer that stopped while writing it): run again with --take-over, "
                    "or remove that file"
                )
            return (
                f"run store {self.url!r}: its lease file {self.path!r} is being written (it does not parse "
                f"yet, {age:.0f} s old); wait, or if no writer is running, remove it or run again with "
                f"--take-over after {self.stale_after:.0f} s"
            )
        who = (
            f"pid {held.get('pid', '?')} on {held.get('host', '?')} ({held.get('command', '?')!s}), "
            f"started {held.get('started', '?')}"
        )
        if age > self.stale_after:
            return (
                f"run store {self.url!r} has a stale lease of {who}, no heartbeat for {age:.0f} s: if that "
                "process is gone, run again with --take-over (or remove "
                f"{self.path!r})"
            )
        return (
            f"run store {self.url!r} is being written by {who}, last heartbeat {age:.0f} s ago; wait for it "
            "to finish (one writer per store), or use another store"
        )

    def _beat(self):
        while not self._stop.wait(self.heartbeat):
            with self._io:
                if not self._beat_once():
                    self.lost = True
                    return

    def _beat_once(self):
        """One heartbeat; False when the lease is another writer's (or gone)."""
        held, version = self._read_own()
        if held is not None and held.get("owner") == "?":  # unreadable this time: the next beat
            logger.debug("lease of run store %s unreadable; again at the next beat", self.url)
            return True
        if held is None or held.get("owner") != self.doc["owner"]:
            logger.error("lost the lease of run store %s to %s", self.url, (held or {}).get("pid"))
            return False
        self.doc["heartbeat"] = _iso(_now())
        try:  # refused on S3 when the lease changed since the read: the next beat reads it again
            self._replace(version, json.dumps(self.doc).encode())
        except Exception:  # a failed request (an S3 503, a reset connection): the next beat
            logger.debug("heartbeat of run store %s failed; again at the next beat", self.url)
        return True

    def release(self):
        acquired = self._thread is not None  # (after an acquire that failed: nothing of ours to remove)
        if _HELD.get(self._key) is self:
            del _HELD[self._key]
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self.doc is not None:
            if acquired:
                self._remove()
            if getattr(self, "_made_parent", False):  # a folder made for the lease alone goes with it
                with contextlib.suppress(Exception):
                    if not self.fs.ls(self.parent, detail=False):
                        self.fs.rmdir(self.parent)
            self.doc = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()

"""One writer per run store (issue 29): a lease created atomically, on a local disk and on S3 (moto's
server)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from ensemble_dask.io.lease import LEASE_SUFFIX, StoreBusyError, StoreLease, check_held
from tests.conftest import REPO, _free_port, _stop, _wait_port, start_s3_server

EXE = [sys.executable, "-m", "ensemble_dask.cli"]


def race(url, storage_options=None, n=8):
    """``n`` threads take the lease of ``url`` at once: how many got it, and the others' errors."""
    barrier = threading.Barrier(n)
    got, errors = [], []

    def take():
        lease = StoreLease(url, storage_options)
        barrier.wait()
        try:
            lease.acquire()
            got.append(lease)
        except StoreBusyError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=take) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for lease in got:
        lease.release()
    return len(got), errors


def test_of_writers_started_at_once_exactly_one_gets_the_lease(tmp_path):
    for i in range(20):
        got, errors = race(str(tmp_path / f"s{i}.zarr"))
        assert got == 1 and len(errors) == 7
        assert all("is being written by pid" in e and "wait for it to finish" in e for e in errors)
    assert not any((tmp_path / f"s{i}.zarr{LEASE_SUFFIX}").exists() for i in range(20))  # released


@pytest.mark.slow
def test_the_lease_is_atomic_on_s3(s3_bucket):
    bucket, opts = s3_bucket
    for i in range(20):
        got, errors = race(f"s3://{bucket}/s{i}.zarr", opts)
        assert got == 1 and len(errors) == 7, errors


@pytest.mark.slow
def _stale_view(lease, monkeypatch):
    """Every read ``lease`` makes from now on comes just before a take-over: it finds its own lease (at the
    version it has now)."""
    mine, version = lease.read(), lease.fs.info(lease.path)["ETag"]
    monkeypatch.setattr(lease, "read", lambda: dict(mine))  # (the code before: read, then write)
    monkeypatch.setattr(lease, "_read_versioned", lambda: (dict(mine), version), raising=False)
    return mine


def test_a_take_over_on_s3_is_never_overwritten_by_the_old_holder(s3_bucket, monkeypatch):
    """A heartbeat read the lease, found its own, and rewrote it: a take-over between the read and the write
    was overwritten. On S3 the write is conditional on the version read (If-Match on its ETag)."""
    import s3fs

    bucket, opts = s3_bucket
    url, path = f"s3://{bucket}/s.zarr", f"{bucket}/s.zarr{LEASE_SUFFIX}"
    fs = s3fs.S3FileSystem(**opts)
    old = StoreLease(url, opts, heartbeat=0.05).acquire()
    _stale_view(old, monkeypatch)
    with old._io:  # the take-over, between two heartbeats
        fs.rm(path)
        new = StoreLease(url, opts, heartbeat=60).acquire()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and json.loads(fs.cat(path))["heartbeat"] == new.doc["heartbeat"]:
            time.sleep(0.05)  # until a second has passed: a heartbeat that overwrote would now differ
        time.sleep(0.3)  # and a few beats more
        held = json.loads(fs.cat(path))
        assert held == new.doc, "the old holder's heartbeat overwrote the new lease"
        monkeypatch.undo()
        with pytest.raises(StoreBusyError, match="this writer lost its lease"):
            old.check()
    finally:
        old.release()
        new.release()
    assert not fs.exists(path)


def test_a_release_on_s3_after_a_take_over_leaves_the_new_lease(s3_bucket, monkeypatch):
    """The release read the lease and then removed it: a take-over between the two lost its lease."""
    import s3fs

    bucket, opts = s3_bucket
    url, path = f"s3://{bucket}/s.zarr", f"{bucket}/s.zarr{LEASE_SUFFIX}"
    fs = s3fs.S3FileSystem(**opts)
    old = StoreLease(url, opts, heartbeat=60).acquire()
    _stale_view(old, monkeypatch)  # the release's reads came just before the take-over
    fs.rm(path)
    with StoreLease(url, opts, heartbeat=60) as new:
        old.release()
        assert fs.exists(path) and json.loads(fs.cat(path))["owner"] == new.doc["owner"]
    assert not fs.exists(path)


def test_two_take_overs_on_s3_end_with_one_holder(s3_bucket, monkeypatch):
    """Review: a take-over read the stale lease and removed whatever lease was there: another writer's
    take-over between the two lost its fresh lease. On S3 only the stale version read is removed."""
    import s3fs

    bucket, opts = s3_bucket
    url, path = f"s3://{bucket}/s.zarr", f"{bucket}/s.zarr{LEASE_SUFFIX}"
    fs = s3fs.S3FileSystem(**opts)
    dead = {"owner": "dead", "host": "elsewhere", "pid": 1, "heartbeat": "2020-01-01T00:00:00+00:00"}
    fs.pipe_file(path, json.dumps(dead).encode())
    late = StoreLease(url, opts, take_over=True, heartbeat=60)
    stale = (dead, fs.info(path)["ETag"])  # read before the other's take-over
    monkeypatch.setattr(late, "read", lambda: dict(dead))  # (the code before: read, then remove)
    monkeypatch.setattr(late, "_read_versioned", lambda: stale, raising=False)
    with StoreLease(url, opts, take_over=True, heartbeat=60) as first:
        with pytest.raises(StoreBusyError, match="another writer took over its lease first"):
            late.acquire()
        assert json.loads(fs.cat(path))["owner"] == first.doc["owner"]
    assert not fs.exists(path)


def test_a_take_over_that_finds_no_lease_never_removes_a_new_one_on_s3(s3_bucket, monkeypatch):
    """Review: a take-over whose exclusive create failed, and whose read then found no lease (its holder had
    released it), took the missing lease for a stale one and removed, without a condition, the lease a third
    writer had created since."""
    import s3fs

    bucket, opts = s3_bucket
    url, path = f"s3://{bucket}/s.zarr", f"{bucket}/s.zarr{LEASE_SUFFIX}"
    fs = s3fs.S3FileSystem(**opts)
    late, third, tries = StoreLease(url, opts, take_over=True, heartbeat=60), [], []
    real_create = late._create

    def create(doc):  # the first create meets the lease of a writer that releases it at once
        tries.append(1)
        return False if len(tries) == 1 else real_create(doc)

    def then_third(read):  # the lease read as gone; a third writer creates it just after
        def wrapped():
            out = read()
            if not third:
                third.append(StoreLease(url, opts, heartbeat=60).acquire())
            return out

        return wrapped

    monkeypatch.setattr(late, "_create", create)
    monkeypatch.setattr(late, "read", then_third(late.read))
    if hasattr(late, "_read_versioned"):
        monkeypatch.setattr(late, "_read_versioned", then_third(late._read_versioned))
    try:
        with pytest.raises(StoreBusyError, match="is being written by"):
            late.acquire()
        assert json.loads(fs.cat(path))["owner"] == third[0].doc["owner"], "the third writer lost its lease"
    finally:
        for lease in third:
            lease.release()
    assert not fs.exists(path)


def test_a_heartbeat_whose_answer_was_lost_keeps_the_lease_on_s3(s3_bucket, monkeypatch):
    """Review: a heartbeat PUT that S3 applied but whose answer was lost is sent again by botocore with the
    same If-Match, and refused (the lease changed: by that very write). The writer keeps its lease (the next
    beat reads it again), and its release removes it."""
    bucket, opts = s3_bucket
    url = f"s3://{bucket}/s.zarr"
    with StoreLease(url, opts, heartbeat=0.05) as lease:
        real = lease.fs.pipe_file

        def applied_then_retried(path, data, **kw):
            real(path, data, **kw)  # applied; its answer lost
            return real(path, data, **kw)  # the retry

        monkeypatch.setattr(lease.fs, "pipe_file", applied_then_retried)
        first = lease.read()["heartbeat"]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and lease.read()["heartbeat"] == first:
            time.sleep(0.05)
        time.sleep(0.3)
        assert lease.read()["heartbeat"] > first and not lease.lost and lease._thread.is_alive()
        check_held(url)
        fs = lease.fs
    assert not fs.exists(f"{bucket}/s.zarr{LEASE_SUFFIX}")


def test_the_test_s3_server_decides_conditional_writes_atomically():
    """The lease test above is only as good as its server: moto checks ``If-None-Match: *`` and then
    writes, so two PUTs of one new key could both win (the lease test failed so once in a full run).
    tests/_s3_server.py takes the writes of one key one at a time, as S3 decides them. With a thread switch
    at every chance (the switch interval at 1 us) moto alone gave two winners in about 5 of 100 rounds."""
    import s3fs

    port = _free_port()
    proc = start_s3_server(port, "--switch-interval", "1e-6")
    try:
        _wait_port(port, proc)
        fs = s3fs.S3FileSystem(
            key="testing", secret="testing", skip_instance_cache=True,
            client_kwargs={"endpoint_url": f"http://127.0.0.1:{port}", "region_name": "us-east-1"},
        )  # fmt: skip
        fs.call_s3("create_bucket", Bucket="atomic")
        winners = []
        for i in range(60):
            barrier, got = threading.Barrier(16), []

            def put(i=i, barrier=barrier, got=got):
                barrier.wait()
                try:
                    with fs.open(f"atomic/k{i}", "xb") as f:
                        f.write(b"x")
                    got.append(1)
                except FileExistsError:
                    pass

            threads = [threading.Thread(target=put) for _ in range(16)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            winners.append(len(got))
        assert winners == [1] * 60
    finally:
        _stop(proc)


def test_a_stale_lease_is_taken_over_only_when_asked(tmp_path):
    url = str(tmp_path / "s.zarr")
    dead = StoreLease(url, heartbeat=3600).acquire()  # a writer that stops beating (as if killed)
    dead._stop.set()
    with pytest.raises(StoreBusyError, match="is being written by"):
        StoreLease(url, stale_after=60).acquire()
    with pytest.raises(StoreBusyError, match="stale lease.*--take-over"):
        StoreLease(url, stale_after=0).acquire()
    lease = StoreLease(url, stale_after=0, take_over=True).acquire()
    assert json.loads((tmp_path / f"s.zarr{LEASE_SUFFIX}").read_text())["owner"] == lease.doc["owner"]
    dead.release()  # the old holder's release leaves the new holder's lease alone
    assert (tmp_path / f"s.zarr{LEASE_SUFFIX}").exists()
    lease.release()
    assert not (tmp_path / f"s.zarr{LEASE_SUFFIX}").exists()


def test_a_writer_whose_lease_was_taken_over_marks_nothing_complete(tmp_path):
    """A writer that stalls past STALE_AFTER (here: no heartbeat at all) can have its lease taken over with
    --take-over by another; it went on and marked its stages complete over what both wrote (its lease's
    ``lost`` was set, and read by nothing). It now stops at the mark, with the lease's holder named."""
    from ensemble_dask.io.store import RunStore

    url = str(tmp_path / "s.zarr")
    store = RunStore(url)
    take_over = (
        "import os; from ensemble_dask.io.lease import StoreLease; "
        f"StoreLease({url!r}, stale_after=0, take_over=True).acquire(); os._exit(0)"
    )
    with StoreLease(url, heartbeat=3600) as lease:
        with store.stage("one", {"a": 1}, []):
            store.group.create_array("one", data=np.arange(3))
        assert store.is_complete("one", {"a": 1}, [])
        lost = r"lost its lease \(now held by pid \d+ on .*not marked complete"
        with pytest.raises(StoreBusyError, match=lost):
            with store.stage("two", {"a": 2}, []):
                store.group.create_array("two", data=np.arange(3))
                subprocess.run([sys.executable, "-c", take_over], check=True, cwd=REPO)  # another writer
        assert lease.lost and not (store.record("two") or {}).get("complete")
        with pytest.raises(StoreBusyError, match=lost):  # nor does it start one: "one" stays as it is
            with store.stage("one", {"a": 1}, []):
                raise AssertionError("a lost writer ran a stage")
        assert store.is_complete("one", {"a": 1}, [])
        mine = lease.doc["owner"]
    # its release left the other writer's lease in place
    assert json.loads((tmp_path / f"s.zarr{LEASE_SUFFIX}").read_text())["owner"] != mine


def test_a_lease_unreadable_for_a_moment_is_not_lost(tmp_path, monkeypatch):
    """Review: one failed read of the lease in a heartbeat (an S3 503, a reset connection) read as owner "?",
    set ``lost`` for good and ended the heartbeat, and the next stage stopped saying another writer held the
    lease. An unreadable lease is read again at the next beat; one that stays unreadable is said to be so."""
    url = str(tmp_path / "s.zarr")
    with StoreLease(url, heartbeat=0.05) as lease:
        real, failures = lease.read, [2]

        def flaky():
            if failures[0]:
                failures[0] -= 1
                raise OSError("503 Slow Down")
            return real()

        monkeypatch.setattr(lease, "read", flaky)
        lease._stop.wait(0.5)
        assert failures == [0] and not lease.lost and lease._thread.is_alive()
        check_held(url)  # still this writer's
        monkeypatch.setattr(lease, "read", lambda: {"owner": "?"})
        with pytest.raises(StoreBusyError, match="could not be read to confirm that this writer still holds"):
            check_held(url)
        assert not lease.lost


def test_the_lease_of_a_relative_path_is_found_after_a_change_of_directory(tmp_path, monkeypatch):
    """Review: the lease's key was made again from its relative path at release, so after a change of
    directory it stayed registered, and a later write to that store without a lease was refused."""
    from ensemble_dask.io import lease as lease_module

    monkeypatch.chdir(tmp_path)
    lease = StoreLease("s.zarr").acquire()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    lease.release()
    assert str(tmp_path / "s.zarr") not in lease_module._HELD
    check_held(str(tmp_path / "s.zarr"))


def test_the_holder_keeps_the_lease_alive(tmp_path):
    url = str(tmp_path / "s.zarr")
    with StoreLease(url, heartbeat=0.05) as lease:
        first = lease.read()["heartbeat"]
        lease._stop.wait(1.2)
        assert lease.read()["heartbeat"] > first and not lease.lost


@pytest.mark.slow
def test_three_ingests_started_at_once_on_one_fresh_store(tmp_path):
    """Different data, one store: exactly one writes it (equal to a clean ingest of its data); the others
    exit 2, with the lease error (or, started after the winner finished, the store's refusal of another
    data set), and nothing of theirs is in the store."""
    datas = []
    for i in range(3):
        np.save(tmp_path / f"x{i}.npy", np.random.default_rng(i).normal(size=(300 + 100 * i, 4)))
        datas.append(tmp_path / f"x{i}.npy")
    store = tmp_path / "race.zarr"
    procs = [
        subprocess.Popen(
            [*EXE, "ingest", str(d), "--store", str(store)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for d in datas
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 2, 2], outs
    for code, (_, err) in zip(codes, outs, strict=True):
        if code:
            assert "is being written by pid" in err or "holds the data set read from" in err, err
            assert "Traceback" not in err, err
    winner = codes.index(0)
    from ensemble_dask.io.store import RunStore

    clean = tmp_path / "clean.zarr"
    subprocess.run([*EXE, "ingest", str(datas[winner]), "--store", str(clean)], cwd=REPO, check=True,
                   capture_output=True)  # fmt: skip
    a, b = RunStore(store, mode="r"), RunStore(clean, mode="r")
    np.testing.assert_array_equal(a["X"][:], b["X"][:])
    assert a.record("ingest")["hash"] == b.record("ingest")["hash"]
    assert not (tmp_path / f"race.zarr{LEASE_SUFFIX}").exists()


def test_the_lease_of_a_killed_writer_on_this_host_is_taken_over(tmp_path):
    """A run killed with SIGKILL leaves its lease; the same command then resumes at once (its pid is gone)."""
    url = str(tmp_path / "s.zarr")
    proc = subprocess.run(
        [sys.executable, "-c",
         f"from ensemble_dask.io.lease import StoreLease; StoreLease({url!r}).acquire()"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    held = json.loads((tmp_path / f"s.zarr{LEASE_SUFFIX}").read_text())
    with StoreLease(url) as lease:  # the writer exited without releasing: taken over, no waiting
        assert lease.doc["owner"] != held["owner"]


@pytest.mark.parametrize("spelling", ["link.zarr", "s.zarr/.", "sub/../s.zarr"])
def test_one_store_has_one_lease_however_it_is_spelt(tmp_path, monkeypatch, spelling):
    """From a stress review: a store reached through a link, or as ``store/.``, got a lease of its own beside
    the holder's; both writers ran, and the store was marked complete over the other run's columns."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.zarr").mkdir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.zarr").symlink_to(tmp_path / "s.zarr")
    with StoreLease(str(tmp_path / "s.zarr")):
        with pytest.raises(StoreBusyError, match="is being written by"):
            StoreLease(spelling).acquire()
        check_held(spelling)  # (this process holds it, under any spelling)
    assert not list(tmp_path.glob(f"*{LEASE_SUFFIX}")) and not list(tmp_path.glob(f"*/*{LEASE_SUFFIX}"))


def test_a_lease_of_a_pid_of_another_machine_view_is_not_taken_over(tmp_path):
    """From a stress review: a writer in a container that shares the host's name (or on another machine of
    that name, writing one S3 store) has pids of its own; its live lease was taken over at once because its
    pid was no process here. Only a lease of this host, boot and pid namespace ends with its pid."""
    import socket

    url = str(tmp_path / "s.zarr")
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    gone = int(proc.stdout)  # a pid with no process now
    other = {"owner": "other", "host": socket.gethostname(), "pid": gone, "pid_started": 1.0,
             "machine": ["another-boot", "pid:[4026531836]"], "started": "2026-01-01T00:00:00+00:00",
             "heartbeat": "2099-01-01T00:00:00+00:00"}  # fmt: skip
    (tmp_path / f"s.zarr{LEASE_SUFFIX}").write_text(json.dumps(other))
    with pytest.raises(StoreBusyError, match="is being written by"):
        StoreLease(url).acquire()
    other["machine"] = list(__import__("ensemble_dask.io.lease", fromlist=["_machine"])._machine())
    (tmp_path / f"s.zarr{LEASE_SUFFIX}").write_text(json.dumps(other))
    with StoreLease(url) as lease:  # this machine's view: its pid is gone, taken over at once
        assert lease.doc["owner"] != "other"


@pytest.mark.parametrize("content", [b"", b'{"owner": "ab', b"\x00\x00garbage"])
def test_a_lease_file_that_does_not_parse_goes_stale_and_a_take_over_takes_it(tmp_path, content):
    """A writer that hit a file-size limit while writing its lease left an empty or half-written file, which
    read as a lease being written now, for ever: every writer was told "being written by pid ? on ? (?)",
    --take-over was refused too, and nothing said to remove it."""
    import os

    url = str(tmp_path / "s.zarr")
    path = tmp_path / f"s.zarr{LEASE_SUFFIX}"
    path.write_bytes(content)
    with pytest.raises(StoreBusyError, match=r"lease file .* is being written \(it does not parse yet"):
        StoreLease(url, stale_after=60).acquire()
    os.utime(path, (time.time() - 120, time.time() - 120))  # its last write, two minutes ago
    with pytest.raises(StoreBusyError, match=r"does not parse \(last written 1[12]\d s ago.*--take-over"):
        StoreLease(url, stale_after=60).acquire()
    lease = StoreLease(url, stale_after=60, take_over=True).acquire()
    assert json.loads(path.read_text())["owner"] == lease.doc["owner"]
    lease.release()
    assert not path.exists() and not list(tmp_path.glob("*.tmp"))


def test_a_lease_is_never_seen_half_written_on_a_local_disk(tmp_path, monkeypatch):
    """The lease and each heartbeat are written whole to a temporary file and put in place: a writer stopped
    while writing (a file-size limit) leaves the old lease or none, never a part of one."""
    import os

    url = str(tmp_path / "s.zarr")
    path = tmp_path / f"s.zarr{LEASE_SUFFIX}"
    real_fsync = os.fsync

    def fail(fd):
        raise OSError(27, "File too large")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="File too large"):
        StoreLease(url).acquire()
    assert not path.exists() and not list(tmp_path.glob("*.tmp"))
    monkeypatch.setattr(os, "fsync", real_fsync)
    with StoreLease(url, heartbeat=3600) as lease:
        before = path.read_bytes()
        monkeypatch.setattr(os, "fsync", fail)
        with pytest.raises(OSError, match="File too large"):
            lease._replace(None, b'{"owner": "half')
        assert path.read_bytes() == before and not list(tmp_path.glob("*.tmp"))
        monkeypatch.setattr(os, "fsync", real_fsync)

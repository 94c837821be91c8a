"""The coordinator's BCE checkpoint in its run store: one object, written whole after every EM iteration."""

import fsspec
import numpy as np
import pytest

from ensemble_dask._validation import InputError
from ensemble_dask.io.store import RunStore
from ensemble_dask.stages.federated import CHECKPOINT, StoreCheckpoint


def states(k=3, n_cat=40, iterations=4):
    """The states a two-start run saves: iterations of start 0, then start 1 with start 0 as the best."""
    rng = np.random.default_rng(0)

    def params():
        return {"alpha": rng.random(k), "beta": rng.random((k, n_cat))}

    trace, out = [], []
    for t in range(iterations):
        trace = [*trace, -100.0 / (t + 1)]
        tag = f"{'ab' * 16}-{t + 1}"  # the session and round of the sites' E-step (their checkpoint's name)
        out.append(
            {"run_key": "0123456789abcdef", "init": 0, "trace": trace, "params": params(), "best": None,
             "gamma_tag": tag}
        )  # fmt: skip
    best = {"init": 0, "trace": trace, "params": out[-1]["params"], "converged": False, "tag": tag}
    out.append(
        {
            "run_key": "0123456789abcdef",
            "init": 1,
            "trace": [],
            "params": None,
            "best": best,
            "gamma_tag": None,
        }
    )
    out.append({**out[-1], "trace": [-7.5], "params": params(), "gamma_tag": f"{'cd' * 16}-1"})
    return out


def assert_same_state(got, want):
    assert {k: got[k] for k in ("run_key", "init", "trace", "gamma_tag")} == {
        k: want[k] for k in ("run_key", "init", "trace", "gamma_tag")
    }
    for key in ("params", "best"):
        assert (got[key] is None) == (want[key] is None)
    for a, b in [
        (got["params"], want["params"]),
        ((got["best"] or {}).get("params"), (want["best"] or {}).get("params")),
    ]:
        if b is not None:
            for name in ("alpha", "beta"):
                assert a[name].dtype == np.float64 and np.array_equal(a[name], b[name])  # exactly
    if want["best"] is not None:
        assert {k: got["best"][k] for k in ("init", "trace", "converged", "tag")} == {
            k: want["best"][k] for k in ("init", "trace", "converged", "tag")
        }


@pytest.mark.slow
def test_each_save_is_one_request_to_an_object_store_and_reads_back_exactly(s3_bucket, s3_requests):
    """On S3 each EM iteration's checkpoint was zarr arrays and attributes: 36-68 requests, 250 ms against
    the test's S3 server, more than the iteration itself. Now one PUT."""
    bucket, opts = s3_bucket
    store = RunStore(f"s3://{bucket}/coordinator.zarr", mode="a", storage_options=opts)
    checkpoint = StoreCheckpoint(store)
    assert checkpoint.load() is None
    for state in states():
        s3_requests.clear()
        checkpoint.save(state)
        assert [method for method, _ in s3_requests] == ["PUT"]
        s3_requests.clear()
        assert_same_state(checkpoint.load(), state)
        assert [method for method, _ in s3_requests] == ["GET"]  # (a resumed run reads it once)
    checkpoint.clear()
    assert checkpoint.load() is None
    assert not fsspec.filesystem("s3", **opts).exists(f"{bucket}/coordinator.zarr/{CHECKPOINT}")


def test_a_local_checkpoint_is_replaced_whole_and_reads_back_exactly(tmp_path, monkeypatch):
    import os

    store = RunStore(tmp_path / "coordinator.zarr", mode="a")
    folder = tmp_path / "coordinator.zarr" / "federated"
    checkpoint = StoreCheckpoint(store)
    saved = states()
    for state in saved:
        checkpoint.save(state)
        assert_same_state(checkpoint.load(), state)
        assert [p.name for p in folder.iterdir()] == ["checkpoint.npz"]  # nothing left beside it
    # a save that fails before its file takes the name (a full disk, Ctrl-C): the last one stays, whole
    replace = os.replace

    def fails(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fails)
    with pytest.raises(OSError, match="No space left"):
        checkpoint.save(saved[0])
    monkeypatch.setattr(os, "replace", replace)
    assert_same_state(checkpoint.load(), saved[-1])
    assert [p.name for p in folder.iterdir()] == ["checkpoint.npz"]
    checkpoint.clear()
    checkpoint.clear()  # nothing there: nothing to do
    assert checkpoint.load() is None


def test_the_zarr_group_of_earlier_versions_is_named_and_cleared(tmp_path, caplog):
    """Before, the checkpoint was the zarr group federated/checkpoint: a run stopped then starts over (it
    says so), and --restart or the end of the run removes the group (else the stage's record lists it)."""
    store = RunStore(tmp_path / "coordinator.zarr", mode="a")
    old = store.group.require_group("federated").require_group("checkpoint")
    old.create_array("alpha", data=np.ones(3))
    old.attrs.update({"run_key": "0123456789abcdef", "init": 0, "trace": [1.0], "complete": True})
    checkpoint = StoreCheckpoint(store)
    assert checkpoint.load() is None
    assert "checkpoint of an earlier version" in caplog.text
    checkpoint.clear()
    assert "federated/checkpoint" not in store.group and "federated" in store.group


def test_a_checkpoint_that_cannot_be_reached_is_not_called_unreadable(tmp_path):
    """An I/O error (a folder in its place here; a permission or a network error) is raised as it is: no
    advice to discard a checkpoint that may be sound."""
    store = RunStore(tmp_path / "coordinator.zarr", mode="a")
    (tmp_path / "coordinator.zarr" / CHECKPOINT).mkdir(parents=True)
    with pytest.raises(OSError) as info:
        StoreCheckpoint(store).load()
    assert not isinstance(info.value, InputError)


@pytest.mark.parametrize("content", [b"", b"not a checkpoint", b"PK\x03\x04 a broken zip"])
def test_an_unreadable_checkpoint_is_named_with_the_way_out(tmp_path, content):
    store = RunStore(tmp_path / "coordinator.zarr", mode="a")
    store.write_bytes(CHECKPOINT, content)
    with pytest.raises(
        InputError, match=r"checkpoint '.*federated/checkpoint\.npz' cannot be read.*--restart"
    ):
        StoreCheckpoint(store).load()

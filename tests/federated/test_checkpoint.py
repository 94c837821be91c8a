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
        out.append(
            {"run_key": "0123456789abcdef", "init": 0, "trace": trace, "params": params(), "best": None}
        )
    best = {"init": 0, "trace": trace, "params": out[-1]["params"], "converged": False}
    out.append({"run_key": "0123456789abcdef", "init": 1, "trace": [], "params": None, "best": best})
    out.append({**out[-1], "trace": [-7.5], "params": params()})
    return out


def assert_same_state(got, want):
    assert {k: got[k] for k in ("run_key", "init", "trace")} == {
        k: want[k] for k in ("run_key", "init", "trace")
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
        assert {k: got["best"][k] for k in ("init", "trace", "converged")} == {
            k: want["best"][k] for k in ("init", "trace", "converged")
        }


@pytest.mark.slow
def test_each_save_is_one_request_to_an_object_store_and_reads_back_exactly(s3_bucket, monkeypatch):
    """On S3 each EM iteration's checkpoint was zarr arrays and attributes: about 20 requests, 250 ms against
    the test's S3 server, more than the iteration itself. Now one PUT."""
    from aiobotocore.endpoint import AioEndpoint

    sent = []
    send = AioEndpoint._send

    async def counted(self, request):  # every request of every S3 client in this process, zarr's included
        sent.append(request.method)
        return await send(self, request)

    monkeypatch.setattr(AioEndpoint, "_send", counted)
    bucket, opts = s3_bucket
    store = RunStore(f"s3://{bucket}/coordinator.zarr", mode="a", storage_options=opts)
    checkpoint = StoreCheckpoint(store)
    assert checkpoint.load() is None
    for state in states():
        sent.clear()
        checkpoint.save(state)
        assert sent == ["PUT"]
        assert_same_state(checkpoint.load(), state)
    checkpoint.clear()
    assert checkpoint.load() is None
    assert not fsspec.filesystem("s3", **opts).exists(f"{bucket}/coordinator.zarr/{CHECKPOINT}")


def test_a_local_checkpoint_is_replaced_whole_and_reads_back_exactly(tmp_path):
    store = RunStore(tmp_path / "coordinator.zarr", mode="a")
    checkpoint = StoreCheckpoint(store)
    for state in states():
        checkpoint.save(state)
        assert_same_state(checkpoint.load(), state)
        # written beside and renamed: no partial file is ever in the checkpoint's place, none left beside it
        assert [p.name for p in (tmp_path / "coordinator.zarr" / "federated").iterdir()] == ["checkpoint.npz"]
    checkpoint.clear()
    checkpoint.clear()  # nothing there: nothing to do
    assert checkpoint.load() is None


@pytest.mark.parametrize("content", [b"", b"not a checkpoint", b"PK\x03\x04 a broken zip"])
def test_an_unreadable_checkpoint_is_named_with_the_way_out(tmp_path, content):
    store = RunStore(tmp_path / "coordinator.zarr", mode="a")
    store.write_bytes(CHECKPOINT, content)
    with pytest.raises(
        InputError, match=r"checkpoint '.*federated/checkpoint\.npz' cannot be read.*--restart"
    ):
        StoreCheckpoint(store).load()

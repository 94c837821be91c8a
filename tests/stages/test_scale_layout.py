"""Layouts that scale: labels chunked for readers by rows and by columns, remote .npy read by row blocks."""

import numpy as np
import pytest

from ensemble_dask.io.readers import iter_table_chunks
from ensemble_dask.io.store import RunStore
from ensemble_dask.runtime.clients import dask_client
from ensemble_dask.stages.generate import _column_groups, generate, label_chunks
from ensemble_dask.stages.ingest import ingest


@pytest.mark.slow
def test_labels_do_not_depend_on_the_number_of_workers(kdd_sample, tmp_path):
    out = []
    for workers in (1, 2, 4):
        store = RunStore(tmp_path / f"w{workers}.zarr")
        ingest(store, str(kdd_sample), schema="kdd99", subset=1500)
        with dask_client(n_workers=workers, processes=False) as client:
            generate(store, client, n_clusterings=20, k_min=2, k_max=5, rate=0.7, seed=0)
        out.append(store)
    full = out[0]["labels"][:]
    assert (full == -1).any() and full.max() >= 1
    for store in out[1:]:
        np.testing.assert_array_equal(store["labels"][:], full)
        assert store.stage_hash("generate") == out[0].stage_hash("generate")
    labels = out[0]["labels"]
    rows, cols = labels.chunks
    assert cols > 1  # several columns per chunk: a row block is a few chunks, not one per column
    # readers by rows and by columns get the same labels back
    for a in range(0, 1500, 400):
        np.testing.assert_array_equal(labels[a : a + 400], full[a : a + 400])
    for u in range(20):
        np.testing.assert_array_equal(labels[:, u], full[:, u])


def test_each_generate_task_owns_whole_column_chunks():
    specs = [{"index": i} for i in range(7, 40)]
    _, width = label_chunks(10_000, 40)
    groups = _column_groups(specs, width)
    assert [s for g in groups for s in g] == specs
    chunk_of = [{s["index"] // width for s in g} for g in groups]
    assert all(len(c) == 1 for c in chunk_of)
    assert len({c.pop() for c in chunk_of}) == len(groups)  # no chunk is written by two tasks


@pytest.mark.parametrize("order", ["C", "F"])
def test_remote_npy_is_read_by_row_blocks(order, tmp_path):
    import fsspec

    x = (
        np.asfortranarray(np.arange(700 * 3, dtype=np.float64).reshape(700, 3))
        if order == "F"
        else (np.arange(700 * 3, dtype=np.float64).reshape(700, 3))
    )
    url = f"memory://npy-{order}-{tmp_path.name}/x.npy"
    with fsspec.open(url, "wb") as fh:
        np.save(fh, x)
    blocks = list(iter_table_chunks(url, format="npy", chunk_rows=256))
    assert [off for off, _ in blocks] == [0, 256, 512]
    np.testing.assert_array_equal(np.concatenate([f.to_numpy() for _, f in blocks]), x)

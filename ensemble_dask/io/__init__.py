"""Where data lives: URLs, chunked table readers, and the run store.

* :mod:`.urls` - URL schemes, formats, fingerprints of inputs, zarr stores for any fsspec URL;
* :mod:`.readers` - CSV, Parquet, zarr and ``.npy`` tables read in blocks;
* :mod:`.store` - the run store (a zarr group with a record per stage).
"""

from .readers import iter_table_chunks, zarr_has_labels
from .store import RunStore, stage_hash
from .urls import infer_format, make_zarr_store, source_fingerprint, strip_file_scheme

__all__ = [
    "RunStore",
    "make_zarr_store",
    "stage_hash",
    "infer_format",
    "iter_table_chunks",
    "zarr_has_labels",
    "source_fingerprint",
    "strip_file_scheme",
]

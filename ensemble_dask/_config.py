"""ensemble-dask's settings in dask's config (``ensemble-dask.*``), read where they are used.

Each is set like any dask setting: ``DASK_ENSEMBLE_DASK__REPORT__FIGURES=False`` in the environment, or
``ensemble-dask: {report: {figures: false}}`` in a dask config file.
"""

from __future__ import annotations

from ._validation import InputError

__all__ = ["flag"]


def _env(key):
    return "DASK_ENSEMBLE_DASK__" + key.upper().replace(".", "__").replace("-", "_")


def flag(key, value=None, *, default=True):
    """``value``, or when None the boolean dask config ``ensemble-dask.KEY`` (``default`` when unset).

    Accepted: true or false (also the strings "true"/"false" in any case, and 1/0); anything else raises
    :class:`InputError` naming the setting and its environment variable.
    """
    if value is None:
        import dask

        value = dask.config.get(f"ensemble-dask.{key}", default=default)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if isinstance(value, (bool, int)) and value in (0, 1):
        return bool(value)
    raise InputError(
        f"the dask config 'ensemble-dask.{key}' (env {_env(key)}) must be true or false; got {value!r}"
    )

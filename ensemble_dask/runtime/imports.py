"""Imports on first use made safe for threads.

Two threads of one process that import the same package for the first time at the same moment can meet a
concurrent circular import: one thread loads a submodule while the other still runs the package's
``__init__``, each then waits for a module the other is importing, and CPython's import locks resolve that by
handing one of them a half-initialised module (``ImportError: cannot import name ... from partially
initialized module``, or a ``KeyError`` on the package). Code that runs on several threads at once and
imports on first use (a base clustering on a Dask worker of several threads) imports through
:func:`import_once`, which lets one thread of the process import at a time.

:func:`lazy_names` makes a package's names imported on first use (PEP 562), so that a process imports only
the modules it uses.
"""

from __future__ import annotations

import importlib
import threading

__all__ = ["import_once", "lazy_names"]

_LOCK = threading.Lock()
_LOADED: set[str] = set()


def import_once(*names):
    """Import the modules ``names`` (dotted names), one thread of the process at a time; once they are
    imported, a set lookup.

    The lock orders only the imports made through this function: a thread that imports the same package
    another way is not held back by it.
    """
    if _LOADED.issuperset(names):
        return
    with _LOCK:
        for name in names:
            if name not in _LOADED:
                importlib.import_module(name)
                _LOADED.add(name)


def lazy_names(package, homes):
    """``(__getattr__, __dir__)`` for the package ``package`` whose names ``homes`` maps to the submodules
    that define them (``{"PairCounts": ".counting"}``): each is imported when a name of it is first read."""

    def __getattr__(name):
        if name in homes:
            return getattr(importlib.import_module(homes[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(vars(importlib.import_module(package))) | set(homes))

    return __getattr__, __dir__

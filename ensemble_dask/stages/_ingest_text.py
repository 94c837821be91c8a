"""How ``ingest`` names what it finds in a table's text: a missing category, a categorical column of numbers
with decimals (coded by their text), a long list of columns."""

from __future__ import annotations

import numpy as np

from ..io.readers import MISSING_TOKENS


def _missing_category(c):
    return (
        f"missing value in categorical column {c!r} (an empty field, or a token read as missing: NA, N/A, "
        "null, None, NaN, #N/A ...); give a missing category a value of its own in the input, e.g. 'unknown'"
    )


def _numbers_with_decimals(values):
    """Whether the text ``values`` of a categorical column are all numbers (missing tokens aside) and one of
    them has a fractional part: a measurement, most likely, that ordinal coding ranks by its text."""
    fractional = False
    for v in values:
        if v.lower() in MISSING_TOKENS:
            continue
        try:
            x = float(v)
        except ValueError:
            return False
        if not np.isfinite(x):
            return False
        fractional = fractional or not x.is_integer()
    return fractional


def _shorten(names, k=8):
    names = [str(n) for n in names]
    return ", ".join(names[:k]) + (f", ... ({len(names)} columns)" if len(names) > k else "")

"""Data-set schemas and built-in sources.

- The KDD Cup 99 schema (41 features + label) and its preprocessing options, used by
  :func:`ensemble_dask.stages.ingest.ingest` with ``format: kdd99``.
- ``synthetic:kdd99``: a seeded synthetic table of the KDD Cup 99 schema that ships with the
  package (the README's demo runs on it; no download needed).
- ``synthetic:blobs``: isotropic Gaussian blobs with labels, for small checks.
- :func:`load_uci`: the small UCI sets of the papers' tables, read from a data directory.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from .._validation import InputError

__all__ = [
    "KDD99_COLUMNS",
    "KDD99_CATEGORICAL",
    "KDD99_LABEL",
    "iter_synthetic_chunks",
    "load_uci",
]

KDD99_COLUMNS = [
    "duration", "protocol_type", "service", "flag", "src_bytes", "dst_bytes", "land",
    "wrong_fragment", "urgent", "hot", "num_failed_logins", "logged_in", "num_compromised",
    "root_shell", "su_attempted", "num_root", "num_file_creations", "num_shells",
    "num_access_files", "num_outbound_cmds", "is_host_login", "is_guest_login", "count",
    "srv_count", "serror_rate", "srv_serror_rate", "rerror_rate", "srv_rerror_rate",
    "same_srv_rate", "diff_srv_rate", "srv_diff_host_rate", "dst_host_count",
    "dst_host_srv_count", "dst_host_same_srv_rate", "dst_host_diff_srv_rate",
    "dst_host_same_src_port_rate", "dst_host_srv_diff_host_rate", "dst_host_serror_rate",
    "dst_host_srv_serror_rate", "dst_host_rerror_rate", "dst_host_srv_rerror_rate", "label",
]  # fmt: skip
KDD99_CATEGORICAL = ["protocol_type", "service", "flag"]
KDD99_LABEL = "label"

# Block size of the synthetic generators: randomness is drawn per block of this many rows from
# SeedSequence([seed, block]), so the table is the same whatever chunk size a reader asks for.
_SYNTH_BLOCK = 8192

# (class, share, protocol, services, flags, {column: (mean, sd)}); unlisted numeric columns are 0.
_KDD_CLASSES = [
    ("smurf", 0.56, "icmp", ["ecr_i"], ["SF"],
     {"src_bytes": (1032, 30), "count": (500, 30), "srv_count": (500, 30), "same_srv_rate": (1, 0),
      "dst_host_count": (255, 5), "dst_host_srv_count": (255, 5), "dst_host_same_srv_rate": (1, 0.02),
      "dst_host_same_src_port_rate": (1, 0.03)}),
    ("neptune", 0.22, "tcp", ["private", "telnet", "finger", "ftp_data"], ["S0", "REJ"],
     {"count": (120, 60), "srv_count": (10, 5), "serror_rate": (1, 0.05), "srv_serror_rate": (1, 0.05),
      "same_srv_rate": (0.05, 0.03), "diff_srv_rate": (0.07, 0.03), "dst_host_count": (255, 5),
      "dst_host_srv_count": (12, 6), "dst_host_same_srv_rate": (0.05, 0.03),
      "dst_host_diff_srv_rate": (0.07, 0.03), "dst_host_serror_rate": (1, 0.03),
      "dst_host_srv_serror_rate": (1, 0.03)}),
    ("normal", 0.20, "tcp", ["http", "smtp", "ftp", "domain_u"], ["SF"],
     {"duration": (20, 60), "src_bytes": (300, 150), "dst_bytes": (2500, 2000), "logged_in": (1, 0),
      "count": (8, 6), "srv_count": (10, 8), "same_srv_rate": (1, 0.02), "dst_host_count": (120, 90),
      "dst_host_srv_count": (200, 60), "dst_host_same_srv_rate": (0.9, 0.1),
      "dst_host_diff_srv_rate": (0.02, 0.02), "dst_host_same_src_port_rate": (0.05, 0.05)}),
    ("satan", 0.02, "tcp", ["other", "private", "http"], ["REJ", "RSTO", "SF"],
     {"count": (40, 30), "srv_count": (3, 2), "rerror_rate": (0.8, 0.2), "srv_rerror_rate": (0.8, 0.2),
      "same_srv_rate": (0.1, 0.05), "diff_srv_rate": (0.6, 0.2), "dst_host_count": (200, 60),
      "dst_host_srv_count": (3, 2), "dst_host_diff_srv_rate": (0.6, 0.2),
      "dst_host_rerror_rate": (0.8, 0.2), "dst_host_srv_rerror_rate": (0.8, 0.2)}),
]  # fmt: skip
_RATE_COLUMNS = {c for c in KDD99_COLUMNS if c.endswith("_rate")}


def _synthetic_kdd99_block(rng, size):
    import pandas as pd

    shares = np.array([c[1] for c in _KDD_CLASSES])
    cls = rng.choice(len(_KDD_CLASSES), size=size, p=shares / shares.sum())
    data = {c: np.zeros(size) for c in KDD99_COLUMNS}
    data["protocol_type"] = np.empty(size, dtype=object)
    data["service"] = np.empty(size, dtype=object)
    data["flag"] = np.empty(size, dtype=object)
    data["label"] = np.empty(size, dtype=object)
    for c, (name, _, proto, services, flags, numeric) in enumerate(_KDD_CLASSES):
        rows = np.flatnonzero(cls == c)
        m = rows.size
        data["protocol_type"][rows] = proto
        data["service"][rows] = rng.choice(services, size=m)
        data["flag"][rows] = rng.choice(flags, size=m)
        data["label"][rows] = name + "."
        for col, (mean, sd) in numeric.items():
            data[col][rows] = rng.normal(mean, sd, size=m)
    frame = pd.DataFrame(data, columns=KDD99_COLUMNS)
    for col in KDD99_COLUMNS:
        if col in KDD99_CATEGORICAL or col == "label":
            continue
        values = np.maximum(frame[col].to_numpy(), 0.0)
        if col in _RATE_COLUMNS:
            frame[col] = np.round(np.minimum(values, 1.0), 2)
        else:
            frame[col] = np.round(values)
    return frame


def _synthetic_blobs_block(rng, size, centers):
    import pandas as pd

    cls = rng.integers(0, centers.shape[0], size=size)
    x = centers[cls] + rng.normal(size=(size, centers.shape[1]))
    frame = pd.DataFrame(x, columns=[f"x{j}" for j in range(centers.shape[1])])
    frame["label"] = cls
    return frame


def iter_synthetic_chunks(name, *, chunk_rows=100_000, n=10_000, seed=0, **params):
    """Yield ``(first_row, frame)`` blocks of a built-in synthetic table.

    Parameters
    ----------
    name : {"kdd99", "blobs"}
        ``kdd99``: the 41 KDD Cup 99 columns plus ``label`` (classes smurf, neptune, normal,
        satan in proportions close to the real 10% file). ``blobs``: ``d`` features (default
        5) around ``centers`` (default 4) Gaussian centres, plus ``label``.
    chunk_rows : int, default=100_000
    n : int, default=10_000
        Number of rows.
    seed : int, default=0
        The table is a function of ``(name, n, seed, params)`` only, not of ``chunk_rows``.
    """
    import pandas as pd

    def number(key, value):
        try:
            return int(value)
        except (TypeError, ValueError):
            raise InputError(f"synthetic:{name}: {key} must be an integer; got {value!r}") from None

    n, seed = number("n", n), number("seed", seed)
    for key in ("d", "centers"):
        if key in params:
            params[key] = number(key, params[key])
    if n < 1:
        raise InputError(f"synthetic:{name}: n must be >= 1; got {n}")
    if seed < 0:
        raise InputError(f"synthetic:{name}: seed must be a non-negative integer; got {seed}")
    if name == "kdd99":
        make = _synthetic_kdd99_block
    elif name == "blobs":
        d, k = int(params.pop("d", 5)), int(params.pop("centers", 4))
        centers = np.random.default_rng([seed, 2**31]).uniform(-8, 8, size=(k, d))

        def make(rng, size):
            return _synthetic_blobs_block(rng, size, centers)
    else:
        raise InputError(f"unknown synthetic data set {name!r}; choose 'kdd99' or 'blobs'")
    if params:
        raise InputError(f"synthetic:{name}: unknown parameters {sorted(params)}")
    blocks = (
        make(np.random.default_rng([seed, b]), min(_SYNTH_BLOCK, n - b * _SYNTH_BLOCK))
        for b in range((n + _SYNTH_BLOCK - 1) // _SYNTH_BLOCK)
    )
    buf, start = [], 0
    for block in blocks:
        buf.append(block)
        while sum(len(f) for f in buf) >= chunk_rows:
            frame = pd.concat(buf, ignore_index=True)
            yield start, frame.iloc[:chunk_rows].reset_index(drop=True)
            start += chunk_rows
            buf = [frame.iloc[chunk_rows:]]
    rest = pd.concat(buf, ignore_index=True) if buf else None
    if rest is not None and len(rest):
        yield start, rest.reset_index(drop=True)


def load_uci(name, data_dir):
    """Load a UCI set of the papers' tables: ``(X float64 (n, d), y int (n,))``.

    ``data_dir`` holds ``NAME.data.gz`` (whitespace-separated numbers) and ``NAME.labels0.gz``.
    """
    data_dir = Path(data_dir)
    xf, yf = data_dir / f"{name}.data.gz", data_dir / f"{name}.labels0.gz"
    for f in (xf, yf):
        if not f.exists():
            raise InputError(f"UCI file {str(f)!r} does not exist")
    with gzip.open(xf, "rt") as fh:
        x = np.loadtxt(fh, ndmin=2)
    with gzip.open(yf, "rt") as fh:
        y = np.loadtxt(fh, dtype=np.int64, ndmin=1)
    if len(x) != len(y):
        raise InputError(f"{xf} has {len(x)} rows but {yf} has {len(y)} labels")
    return x, y

"""Peak memory of a site agent answering one secure-sum round with the largest vector a site computes; prints.

A coordinator chooses the vector's size (a ``label_counts`` request of 2**24 entries in all, the site's
limit). The site encodes it in fixed point, adds its self mask and its pair masks (``secagg.masked_input``)
and encodes the answer for the wire. Each case runs in a fresh process and prints its peak resident memory:
the masks computed ``MASK_CHUNK`` entries at a time (today) and over the whole vector at once (as before),
side by side, and their ratio. With ``--exact``: the masks ``MASK_CHUNK`` entries at a time of a float
statistic and of an exact one (int64 whole parts and units, 16 bytes an entry: what BCE's E-step sends,
``secure.encode_exact``).

Usage: python benchmarks/site_memory.py [--size 16777216] [--sites 3] [--exact]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASE = """
import resource, sys
import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from ensemble_dask.federated.protocol import secagg, wire

size, n_sites, chunk, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
chunk = size if chunk == "whole" else int(chunk)
private = X25519PrivateKey.generate()
secrets = secagg.RoundSecrets(1, private, private.public_key().public_bytes_raw(), bytes(16))
others = [X25519PrivateKey.generate() for _ in range(n_sites)]
secrets.keys = {f"site-{i}": k.public_key().public_bytes_raw() for i, k in enumerate(others)}
rng = np.random.default_rng(0)
if kind == "exact":  # whole parts and units of 2**-32 (its own 16 bytes an entry)
    vector = np.stack([rng.integers(-100, 100, size), rng.integers(0, 2**40, size)])
else:
    vector = rng.random(size)  # the statistic (its own 8 bytes an entry)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
words = secagg.masked_input(vector, "site-0", secrets, "session", n_sites=n_sites, chunk=chunk)
masked = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
body = wire.encode({"result": {"words": words}})
print(before / 1024, masked / 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def peak(size, n_sites, chunk, kind="float"):
    out = subprocess.run(
        [sys.executable, "-c", CASE, str(size), str(n_sites), str(chunk), kind],
        capture_output=True, text=True, check=True, env={"PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    return [float(v) for v in out.stdout.split()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1 << 24, help="entries of the vector (default 2**24)")
    ap.add_argument("--sites", type=int, default=3, help="sites of the federation (pair masks: one fewer)")
    ap.add_argument("--exact", action="store_true", help="a float statistic against an exact one")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from ensemble_dask.federated.protocol.secagg import MASK_CHUNK

    mb = f"{args.size * 8 / 2**20:.0f} MB"
    mb += f", {args.size * 16 / 2**20:.0f} MB exact" if args.exact else ""
    print(f"vector of {args.size:,} entries ({mb}), {args.sites} sites; peak MB")
    print(f"{'masks computed':<28} {'before':>8} {'masked':>8} {'encoded':>8}")
    rows = {}
    cases = (
        (f"{MASK_CHUNK:,} entries at a time", MASK_CHUNK, "float"),
        ("over the whole vector", "whole", "float"),
    )
    if args.exact:
        cases = (("float, in chunks", MASK_CHUNK, "float"), ("exact, in chunks", MASK_CHUNK, "exact"))
    for name, chunk, kind in cases:
        rows[name] = peak(args.size, args.sites, chunk, kind)
        print(f"{name:<28} " + " ".join(f"{v:8.0f}" for v in rows[name]))
    (a, b) = rows.values()
    what = "float / exact" if args.exact else "chunks / whole"
    print(f"ratio ({what}): masked {a[1] / b[1]:.2f}, encoded {a[2] / b[2]:.2f}")


if __name__ == "__main__":
    main()

"""Secure aggregation primitives: 128-bit fixed point, pairwise key agreement and masks.

Everything here is NumPy plus the ``cryptography`` package; nothing knows about Dask.

* **Fixed point.** A float vector travels as signed integers modulo ``2**128`` with 64 fraction bits,
  held in two 64-bit words per entry (an array of shape ``(2, n)``: high words, low words). Any
  ``|x| < 2**63 / n_sites`` is encoded exactly up to ``2**-64``; the sum of the sites' encodings is
  exact (integer addition modulo ``2**128``). Per EM iteration a BCE site's statistics are bounded by
  its rows times the clusterings times a few hundred (counts, digamma sums, bound terms): 10 million
  rows x 200 clusterings is below ``2**41``, far inside the range.
* **Keys.** Each site has an X25519 key pair (``ensemble-dask certs`` writes it); every site's public
  key is pinned in the workflow. Sites ``p`` and ``q`` derive a pair key with X25519 and HKDF-SHA256
  (salt: the session id; info: both names), so each session has fresh pair keys.
* **Masks.** For round ``r`` the pair's mask is the ChaCha20 keystream of the pair key with nonce
  ``r``; the site whose name sorts first adds it, the other subtracts it, so the masks cancel in the
  total. A site refuses to mask twice under one (session, round) (a reused keystream would reveal the
  difference of two of its vectors).

With one site there is nothing to hide a vector among: the total is that site's vector.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field

import numpy as np

from .._validation import InputError

__all__ = [
    "FRAC_BITS",
    "COORDINATOR",
    "Message",
    "MessageLog",
    "encode_fixed",
    "decode_fixed",
    "add_words",
    "sum_words",
    "neg_words",
    "fixed_point_limit",
    "derive_pair_keys",
    "keystream_words",
    "mask_vector",
]

FRAC_BITS = 64
COORDINATOR = "coordinator"
_TWO64 = 2.0**64
_TWO32 = 2.0**32
_HKDF_INFO = b"ensemble-dask secure sum v1"


# --------------------------------------------------------------------------- fixed point (two words)


def fixed_point_limit(n_sites):
    """Largest magnitude a site's entry may have so that the sum of ``n_sites`` of them fits."""
    return 2.0**63 / max(int(n_sites), 1)


def encode_fixed(values, *, n_sites=1, name="values"):
    """Signed fixed point ``round(x * 2**64)`` modulo ``2**128`` as two uint64 words: shape ``(2, n)``.

    Raises :class:`InputError` (naming ``name``) for non-finite values or ``|x| >= 2**63 / n_sites``.
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    limit = fixed_point_limit(n_sites)
    if not np.all(np.isfinite(x)) or np.max(np.abs(x), initial=0.0) >= limit:
        bad = x[~np.isfinite(x) | (np.abs(x) >= limit)][0]
        raise InputError(
            f"{name}: value {bad!r} outside the fixed-point range (finite, |x| < {limit:.3g} for "
            f"{n_sites} sites)"
        )
    y = np.round(np.ldexp(x, FRAC_BITS))  # exact scaling by a power of two, then an integer
    hi = np.floor(y / _TWO64)  # |hi| < 2**63: exact in int64
    lo = y - hi * _TWO64  # in [0, 2**64), at most 53 significant bits: exact
    lo_hi = np.floor(lo / _TWO32)
    lo_lo = lo - lo_hi * _TWO32
    words = np.empty((2, x.size), dtype=np.uint64)
    words[0] = hi.astype(np.int64).view(np.uint64)
    words[1] = (lo_hi.astype(np.uint64) << np.uint64(32)) | lo_lo.astype(np.uint64)
    return words


def decode_fixed(words):
    """Float vector of a (sum of) two-word fixed-point vector(s) (inverse of :func:`encode_fixed`).

    Negative entries are decoded from their magnitude, so ``-2**-64`` does not round to 0.
    """
    words = np.asarray(words, dtype=np.uint64)
    negative = words[0].view(np.int64) < 0
    mag = words.copy()
    if negative.any():
        mag[:, negative] = neg_words(words[:, negative])
    hi = mag[0].astype(np.float64)  # < 2**63 after taking the magnitude
    lo = (mag[1] >> np.uint64(32)).astype(np.float64) * _TWO32 + (mag[1] & np.uint64(0xFFFFFFFF)).astype(
        np.float64
    )
    out = hi + lo / _TWO64
    return np.where(negative, -out, out)


def add_words(a, b):
    """``a + b`` modulo ``2**128`` for two-word vectors."""
    lo = a[1] + b[1]
    carry = (lo < a[1]).astype(np.uint64)
    out = np.empty_like(a)
    out[0] = a[0] + b[0] + carry
    out[1] = lo
    return out


def neg_words(a):
    """``-a`` modulo ``2**128``."""
    lo = ~a[1] + np.uint64(1)
    carry = (lo == 0).astype(np.uint64)  # ~lo + 1 overflowed
    out = np.empty_like(a)
    out[0] = ~a[0] + carry
    out[1] = lo
    return out


def sum_words(words_list):
    """Sum of two-word vectors modulo ``2**128``."""
    words_list = list(words_list)
    out = np.array(words_list[0], dtype=np.uint64, copy=True)
    for w in words_list[1:]:
        out = add_words(out, np.asarray(w, dtype=np.uint64))
    return out


# --------------------------------------------------------------------------- keys and masks


def derive_pair_keys(private_key, me, roster, session):
    """Pair keys of site ``me`` with every other site of ``roster``.

    Parameters
    ----------
    private_key : X25519PrivateKey
        The site's masking key (never leaves its workers).
    me : str
        The site's name.
    roster : dict
        ``{name: raw 32-byte X25519 public key}`` of every site of the session (already checked
        against the pins).
    session : str
        Session id (fresh per run; salts HKDF so every session has its own keys).

    Returns
    -------
    dict
        ``{other name: 32-byte key}``.
    """
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    keys = {}
    for other, pub in roster.items():
        if other == me:
            continue
        try:
            shared = private_key.exchange(X25519PublicKey.from_public_bytes(bytes(pub)))
        except ValueError as exc:  # a low-order point gives the all-zero secret
            raise InputError(f"site {me!r}: the public key of site {other!r} is invalid: {exc}") from exc
        a, b = sorted([me, other])
        info = _HKDF_INFO + b"|" + a.encode() + b"|" + b.encode()
        salt = hashlib.sha256(str(session).encode()).digest()
        keys[other] = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=info).derive(shared)
    return keys


def keystream_words(key, round_id, size):
    """ChaCha20 keystream of ``key`` for round ``round_id``, as ``(2, size)`` uint64 words."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    nonce = struct.pack("<IQI", 0, int(round_id), 0)  # 32-bit block counter, then the round
    enc = Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor()
    raw = enc.update(bytes(16 * size))
    return np.frombuffer(raw, dtype=np.uint64).reshape(2, size).copy()


def mask_vector(values, me, pair_keys, round_id, *, n_sites, name=None):
    """Fixed-point encoding of ``values`` plus site ``me``'s pairwise masks for round ``round_id``."""
    words = encode_fixed(values, n_sites=n_sites, name=f"site {me!r}" if name is None else name)
    size = words.shape[1]
    for other in sorted(pair_keys):
        m = keystream_words(pair_keys[other], round_id, size)
        words = add_words(words, m if me < other else neg_words(m))
    return words


# --------------------------------------------------------------------------- message log (column variant)


@dataclass(frozen=True)
class Message:
    """One protocol message of the column-distributed variant: who sent what to whom."""

    sender: str
    receiver: str
    kind: str
    payload: object = None


@dataclass
class MessageLog:
    """Record of the column-distributed protocol's messages (the row protocol does not write one)."""

    messages: list = field(default_factory=list)

    def record(self, sender, receiver, kind, payload=None):
        self.messages.append(Message(sender, receiver, kind, payload))

    def received_by(self, party):
        return [m for m in self.messages if m.receiver == party]

    def kinds(self, party):
        return {m.kind for m in self.received_by(party)}

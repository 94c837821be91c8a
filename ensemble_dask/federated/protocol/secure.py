"""Secure aggregation primitives: 128-bit fixed point, pairwise key agreement and masks.

Everything here is NumPy plus the ``cryptography`` package; nothing knows about Dask.

* **Fixed point.** A float vector travels as signed integers modulo ``2**128`` with 64 fraction bits,
  held in two 64-bit words per entry (an array of shape ``(2, n)``: high words, low words). Any
  ``|x| < 2**63 / n_sites`` is encoded as the integer nearest ``x * 2**64`` (ties to even), with no
  float rounding on the way; the sum of the sites' encodings is exact (integer addition modulo
  ``2**128``, no wrap) and decodes to the float64 nearest to it (correctly rounded).
* **Rows in range.** A site bounds each row's term of any statistic it sums by :data:`ROW_TERM_LIMIT`
  (counts are at most 1, KCC's squared errors at most twice the clusterings, and BCE's E-step clips its
  two unbounded terms, digamma sums and the bound, whatever parameters it is sent), and it joins only when
  its rows times that bound are inside the range (:func:`rows_in_range`: a test on public counts). So no
  sum it is asked for can leave the range, and a refusal never depends on its rows.
* **Sums that depend on the pooled rows only.** A site's float sum rounds as its own rows fall, and the
  exact fixed point keeps those roundings: the total of a round told the same rows split one way from
  another (a review read each site's label counts out of one round). So a sum whose terms are not
  integers comes exact (:func:`encode_exact`): each row's term rounded to ``2**-32`` on its own and the
  terms added as integers, so the total is the sum over the pooled rows of a function of each row.
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

import struct
from dataclasses import dataclass, field

import numpy as np

from ..._validation import InputError

__all__ = [
    "FRAC_BITS",
    "COORDINATOR",
    "Message",
    "MessageLog",
    "check_fixed",
    "encode_fixed",
    "check_exact",
    "encode_exact",
    "encode_exact_checked",
    "exact_value",
    "is_exact",
    "encode_checked",
    "decode_fixed",
    "add_words",
    "sum_words",
    "neg_words",
    "fixed_point_limit",
    "ROW_TERM_LIMIT",
    "rows_in_range",
    "keystream_words",
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


#: bound on one row's term of a statistic a site sums (BCE's E-step clips to it; a fit's are far inside)
ROW_TERM_LIMIT = 2.0**24


def rows_in_range(n_rows, n_clusterings, n_sites):
    """Whether any statistic of ``n_rows`` rows (each term within :data:`ROW_TERM_LIMIT`, or twice
    ``n_clusterings`` for KCC's squared errors) fits the fixed-point range of ``n_sites`` sites, and an
    exact one (:func:`encode_exact`) its int64 units: fewer than ``2**31`` rows."""
    return n_rows < 2**31 and n_rows * max(ROW_TERM_LIMIT, 2.0 * n_clusterings) < fixed_point_limit(n_sites)


def check_fixed(values, *, n_sites=1, name="values"):
    """``values`` as a flat float64 array, or :class:`InputError` (naming ``name`` and the first bad value)
    if any is not finite or not below ``2**63 / n_sites`` in magnitude (:func:`encode_fixed`'s range)."""
    x = np.asarray(values, dtype=np.float64).ravel()
    limit = fixed_point_limit(n_sites)
    bad = ~np.isfinite(x) | (np.abs(x) >= limit)
    if bad.any():
        first = float(x[np.flatnonzero(bad)[0]])  # printed as inf, not np.float64(inf)
        raise InputError(
            f"{name}: value {first!r} outside the fixed-point range (finite, |x| < {limit:.3g} for "
            f"{n_sites} sites)"
        )
    return x


def encode_fixed(values, *, n_sites=1, name="values"):
    """Signed fixed point ``round(x * 2**64)`` modulo ``2**128`` as two uint64 words: shape ``(2, n)``.

    Exact: each entry is the integer nearest to ``x * 2**64`` (ties to even, so ``encode(-x) ==
    -encode(x)``). Raises :class:`InputError` (naming ``name``) for non-finite values or
    ``|x| >= 2**63 / n_sites``.
    """
    return encode_checked(check_fixed(values, n_sites=n_sites, name=name))


def encode_checked(x):
    """:func:`encode_fixed` of a flat float64 array that :func:`check_fixed` has passed (not checked again:
    a caller that checks a whole vector once encodes it a piece at a time)."""
    # Encode |x| and negate the words: no float64 sum ever rounds. modf splits |x| < 2**63 exactly into
    # an integer part (the high word) and a fraction f < 1; f * 2**64 is exact (a power of two) and its
    # nearest integer is at most 2**64 - 2**11 (f <= 1 - 2**-53), so it never carries into the high word.
    frac, whole = np.modf(np.abs(x))
    low = np.rint(np.ldexp(frac, FRAC_BITS))  # ties to even; an integer in [0, 2**64)
    low_hi = np.floor(low / _TWO32)  # both halves < 2**32: exact conversions
    words = np.empty((2, x.size), dtype=np.uint64)
    words[0] = whole.astype(np.uint64)
    words[1] = (low_hi.astype(np.uint64) << np.uint64(32)) | (low - low_hi * _TWO32).astype(np.uint64)
    return np.where(x < 0, neg_words(words), words)


def is_exact(vec):
    """Whether ``vec`` is an exact vector (:func:`encode_exact`'s int64 whole parts and units), not floats."""
    return isinstance(vec, np.ndarray) and vec.dtype == np.int64 and vec.ndim == 2


def exact_value(q):
    """The float64 values of an exact vector: int64 ``(2, n)``, whole parts and units of ``2**-32``."""
    return q[0] + np.ldexp(q[1].astype(np.float64), -32)


def check_exact(q, *, n_sites=1, name="values", chunk=1 << 20):
    """``q`` if it is an exact vector (int64 ``(2, n)``: whole parts, then units ``>= 0`` of ``2**-32``) in
    :func:`check_fixed`'s range, else :class:`InputError` naming ``name`` (checked ``chunk`` entries at a
    time: no copy of the whole vector)."""
    q = np.asarray(q)
    if q.ndim != 2 or q.shape[0] != 2 or q.dtype != np.int64:
        raise InputError(f"{name}: an exact vector is int64 of shape (2, n); got {q.dtype} {q.shape}")
    first = None  # every chunk checked: a refusal takes the same time wherever its first bad value is
    for lo in range(0, q.shape[1], chunk):
        part = q[:, lo : lo + chunk]
        try:
            if (part[1] < 0).any():
                raise InputError(f"{name}: an exact vector's units are >= 0")
            check_fixed(exact_value(part), n_sites=n_sites, name=name)
        except InputError as exc:
            first = first or exc
    if first is not None:
        raise first
    return q


def encode_exact(q, *, n_sites=1, name="values"):
    """:func:`encode_fixed` of an exact vector (:func:`check_exact`) with no rounding at all: ``whole *
    2**64 + units * 2**32`` modulo ``2**128``."""
    return encode_exact_checked(check_exact(q, n_sites=n_sites, name=name))


def encode_exact_checked(q):
    """:func:`encode_exact` of a vector that :func:`check_exact` has passed (not checked again)."""
    words = np.empty(q.shape, dtype=np.uint64)
    words[0] = (q[0] + (q[1] >> 32)).view(np.uint64)  # |whole| + units / 2**32 < 2**63: no overflow
    words[1] = (q[1] & 0xFFFFFFFF).view(np.uint64) << np.uint64(32)
    return words


def decode_fixed(words):
    """Float vector of a (sum of) two-word fixed-point vector(s) (inverse of :func:`encode_fixed`).

    Correctly rounded: for words whose signed value ``v`` has ``|v| < 2**127``, each entry is the float64
    nearest to ``v / 2**64`` (ties to even), so ``decode(encode(x))`` is ``x`` rounded to a multiple of
    ``2**-64`` (``x`` itself when it is one) and the decoded sum of encodings is the rounded exact sum.
    """
    words = np.asarray(words, dtype=np.uint64)
    negative = words[0].view(np.int64) < 0
    hi, lo = np.where(negative, neg_words(words), words)  # the magnitude: hi < 2**63
    # One rounding only: shift the 128-bit magnitude right by s + 1 bits, where s is hi's bit length
    # (or one more: the float of hi may round up to a power of two), so that the result t has its
    # leading bit at 62 or 61 and converts from int64 in one correctly rounded step; the dropped bits
    # are ORed into t's last bit (a sticky bit, far below the rounding position, bit 8 or 9).
    s = np.minimum(np.frexp(hi.astype(np.float64))[1], 63)
    shift = s.astype(np.uint64)
    t = (hi << (np.uint64(63) - shift)) | (lo >> shift >> np.uint64(1))
    t |= ((lo << (np.uint64(63) - shift)) != 0).astype(np.uint64)
    small = (hi == 0) & (lo < np.uint64(2**63))  # fits int64 as it is: no shift
    t = np.where(small, lo, t)
    out = np.ldexp(t.astype(np.int64).astype(np.float64), np.where(small, 0, s + 1) - FRAC_BITS)
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


def keystream_words(key, round_id, size, start=0, stop=None):
    """ChaCha20 keystream of ``key`` for round ``round_id``, as ``(2, size)`` uint64 words: the stream's
    first ``size`` words are the high words, the next ``size`` the low words.

    ``start``, ``stop``: only the columns ``start:stop`` of that array (the same words; the stream is
    entered at the 64-byte block that holds each part), so that a long vector is masked a piece at a time.
    """
    stop = size if stop is None else stop
    if not 0 <= start <= stop <= size:
        raise ValueError(f"columns {start}:{stop} outside a keystream of {size}")
    return np.stack([_stream(key, round_id, start, stop), _stream(key, round_id, size + start, size + stop)])


def _stream(key, round_id, lo, hi):
    """Words ``lo:hi`` of the ChaCha20 keystream of ``key`` for round ``round_id`` (8 words a block)."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    block, skip = divmod(lo, 8)
    nonce = struct.pack("<IQI", block, int(round_id), 0)  # 32-bit block counter, then the round
    enc = Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor()
    raw = enc.update(bytes(8 * (hi - lo + skip)))
    return np.frombuffer(raw, dtype=np.uint64)[skip:]


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

"""Secure aggregation: fixed-point encoding, pairwise mask seeds, masked sums, and the message log.

Sites ``p < q`` agree on a seed by a Diffie-Hellman exchange (RFC 3526 2048-bit group; only public keys pass
through the coordinator), and per round ``p`` adds and ``q`` subtracts the same pseudo-random vector, so the
masks cancel in the sum; values travel as fixed-point integers modulo ``2**64``. Every protocol message can be
recorded in a :class:`MessageLog`.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field

import numpy as np

from .._validation import InputError

__all__ = ["COORDINATOR", "Message", "MessageLog", "encode_fixed", "decode_fixed"]

COORDINATOR = "coordinator"

# RFC 3526, 2048-bit MODP group 14, generator 2.
_DH_PRIME = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F"
    "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510"
    "15728E5A8AACAA68FFFFFFFFFFFFFFFF",
    16,
)
_DH_GENERATOR = 2


@dataclass(frozen=True)
class Message:
    """One protocol message: who sent what kind of payload to whom."""

    sender: str
    receiver: str
    kind: str
    payload: object = None


@dataclass
class MessageLog:
    """Record of every protocol message, for audits and tests."""

    messages: list = field(default_factory=list)

    def record(self, sender, receiver, kind, payload=None):
        self.messages.append(Message(sender, receiver, kind, payload))

    def received_by(self, party):
        """Messages whose receiver is ``party``."""
        return [m for m in self.messages if m.receiver == party]

    def kinds(self, party):
        """Set of message kinds ``party`` received."""
        return {m.kind for m in self.received_by(party)}


# --------------------------------------------------------------------------- fixed point, masks


def encode_fixed(values, frac_bits):
    """Signed fixed point ``round(x * 2**frac_bits)`` as uint64 (two's complement, i.e. modulo 2**64)."""
    scaled = np.round(np.asarray(values, dtype=np.float64) * float(2**frac_bits))
    return scaled.astype(np.int64).view(np.uint64)


def decode_fixed(words, frac_bits):
    """Inverse of :func:`encode_fixed` for a (sum of) encoded vector(s)."""
    return np.asarray(words, dtype=np.uint64).view(np.int64).astype(np.float64) / float(2**frac_bits)


def _mask(seed, round_id, size):
    bitgen = np.random.PCG64(np.random.SeedSequence([seed, round_id]))
    return bitgen.random_raw(size).astype(np.uint64)


def site_keygen():
    """A site's Diffie-Hellman key pair ``{"private": a, "public": g**a mod p}`` (kept on the site)."""
    a = secrets.randbits(256) | 1
    return {"private": a, "public": pow(_DH_GENERATOR, a, _DH_PRIME)}


def public_part(keys):
    return keys["public"]


def site_pair_seeds(keys, publics, me):
    """Pairwise seeds ``sha256(g**(a_p a_q))`` with every other site, keyed by its index."""
    seeds = {}
    for q, pub in enumerate(publics):
        if q == me:
            continue
        if not 1 < pub < _DH_PRIME - 1:
            raise InputError(f"site {q} sent an invalid public key")
        shared = pow(pub, keys["private"], _DH_PRIME)
        digest = hashlib.sha256(shared.to_bytes(256, "big")).digest()
        seeds[q] = int.from_bytes(digest, "big")
    return seeds


def site_masked_stats(vec, seeds, me, round_id, frac_bits, n_sites, site_name):
    """Fixed-point statistics plus the site's pairwise masks, modulo 2**64."""
    vec = np.asarray(vec, dtype=np.float64)
    limit = 2.0 ** (62 - frac_bits) / n_sites
    if not np.all(np.isfinite(vec)) or np.max(np.abs(vec), initial=0.0) >= limit:
        raise InputError(
            f"site {site_name!r}: statistics exceed the fixed-point range (|x| < {limit:.3g} with "
            f"frac_bits={frac_bits}); lower frac_bits"
        )
    out = encode_fixed(vec, frac_bits)
    for q, seed in seeds.items():
        m = _mask(seed, round_id, vec.size)
        if me < q:
            out = out + m
        else:
            out = out - m
    return out


def sum_words(*words):
    """Sum of uint64 vectors modulo 2**64."""
    out = np.zeros_like(words[0])
    for w in words:
        out = out + w
    return out

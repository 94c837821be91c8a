"""Secure aggregation that survives dropouts: the SecAgg+ round of Bell et al. (CCS 2020), complete graph.

Pure functions on bytes and NumPy arrays (``cryptography`` for X25519, HKDF, ChaCha20 and
ChaCha20-Poly1305; ``pycryptodome`` for Shamir's secret sharing); nothing here knows about the network.
One round of a session, for a federation of ``n`` sites with a roster sorted by name:

1. **Advertise** (each site ``u``, :func:`advertise`): a fresh X25519 mask key pair ``s_u`` and a fresh
   16-byte self-mask seed ``b_u``; ``b_u`` and ``s_u``'s private key are cut into Shamir shares with
   threshold ``t`` (:func:`threshold`), one share per roster member. The share for peer ``v`` is
   encrypted with ChaCha20-Poly1305 under the *channel key* of ``u`` and ``v`` (X25519 of their long-term
   masking keys, which every site pins in its own config, then HKDF salted by the session) and a fresh
   random nonce, with ``s_u``'s public key in the associated data. The coordinator relays public keys
   and ciphertexts; it cannot read a share, nor substitute a public key (the peer's decryption would
   fail), nor pose as a site (its key is pinned nowhere).
2. **Masked input** (:func:`masked_input`): the site checks every relayed key against the ciphertext
   that authenticates it (:func:`receive_shares`), then sends its fixed-point vector plus the self mask
   ``PRG(b_u)`` plus, for every other site ``v`` that advertised, ``+PRG(s_uv)`` if ``u < v`` else
   ``-PRG(s_uv)`` (``s_uv``: X25519 of the round keys), modulo ``2**128``.
3. **Confirm** (:func:`confirm_tag`, :func:`check_tags`): told the survivors (the sites whose masked input
   arrived), each survivor tags its view (key set, survivors, transcript) for every other survivor under
   their channel; a site reveals only when enough others' tags match its own view (the consistency check of
   Bonawitz et al.), so sites told different survivor sets never all reveal.
4. **Unmask** (:func:`reveal`): a site reveals,
   for each survivor, its share of ``b``; for each site that advertised but dropped out, its share of
   ``s``'s private key; never both for one site in one round. The coordinator (:func:`unmask`)
   reconstructs the survivors' self masks and the dropped sites' pair masks with the survivors, removes
   them, and obtains the survivors' sum and nothing else.

Every share is bound (as associated data) to the site's transcript of the session and the round's
operation and arguments: a site given another history or other arguments than its peers cannot verify
their shares, so one site cannot be made to compute alone what the sum would then reveal.

Threshold: ``t = max(min_sites, n // 2 + 1)``. A coordinator that told some sites that ``u`` survived and
others that it dropped would need ``t`` shares of each kind from disjoint sets of sites: impossible
when ``2 t > n``. Round keys and seeds are fresh every round, so what one round reveals (a survivor's
``b``, a dropped site's ``s``) unmasks nothing in another.

What this does not hide: the sum over the survivors of a round (the purpose), who survived, the vector
sizes, timing. Two rounds over different survivor sets with the same parameters give the difference of
two sums, over at most ``n - min_sites`` sites (a site accepts only survivor sets that shrink within a
session): tolerating dropouts has that price; with the default minimum (the whole federation) no site
can be left out.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

import numpy as np

from ..._validation import InputError
from .secure import (
    add_words,
    check_exact,
    check_fixed,
    encode_checked,
    encode_exact_checked,
    is_exact,
    keystream_words,
    neg_words,
)

__all__ = [
    "RoundSecrets",
    "threshold",
    "channel_keys",
    "advertise",
    "receive_shares",
    "masked_input",
    "confirm_tag",
    "check_tags",
    "reveal",
    "unmask_words",
]

_SEED_BYTES = 16
_SHARE_BYTES = 16
_PLAIN_BYTES = 3 * _SHARE_BYTES  # one share of b, two of s's private key (32 bytes in two Shamir secrets)
_LABEL = b"ensemble-dask secagg+ v1"


def threshold(n_sites, min_sites):
    """Shares needed to unmask: ``max(min_sites, n_sites // 2 + 1)`` (more than half, so no two disjoint
    sets of sites can each give the coordinator a kind of share for one site)."""
    return max(int(min_sites), int(n_sites) // 2 + 1)


def _hkdf(secret, salt, info, length=32):
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(secret)


def _salt(session):
    return hashlib.sha256(_LABEL + b"|" + str(session).encode()).digest()


def _exchange(private, public_raw, what):
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

    try:
        return private.exchange(X25519PublicKey.from_public_bytes(bytes(public_raw)))
    except ValueError as exc:  # not 32 bytes, or a low-order point (all-zero secret)
        raise InputError(f"{what} is not a valid X25519 public key: {exc}") from exc


def channel_keys(private_key, me, pins, session):
    """``{peer: 32-byte key}``: the authenticated channel of site ``me`` with each pinned peer, per session.

    ``private_key`` is the site's long-term X25519 masking key; ``pins`` maps every federation member to
    its pinned raw public key (the site's own config).
    """
    keys = {}
    for other in sorted(pins):
        if other == me:
            continue
        shared = _exchange(private_key, pins[other], f"the pinned key of site {other!r}")
        a, b = sorted([me, other])
        keys[other] = _hkdf(shared, _salt(session), _LABEL + b"|channel|" + a.encode() + b"|" + b.encode())
    return keys


_KEY_BYTES = 32  # an X25519 public key
_TAG_BYTES = 32  # an HMAC-SHA256 tag


def _wire_bytes(value, size, what):
    """``value`` (relayed by the coordinator) when it is bytes of length ``size``; else :class:`InputError`,
    before anything reads it (``bytes(n)`` of an int ``n`` allocates n bytes)."""
    if not isinstance(value, bytes) or len(value) != size:
        got = f"{len(value)} bytes" if isinstance(value, bytes) else type(value).__name__
        raise InputError(f"{what} must be {size} bytes; got {got}")
    return value


_NONCE_BYTES = 12  # ChaCha20-Poly1305's
#: a ciphertext of a site's shares on the wire: its random nonce, the shares, the 16-byte tag
_BOX_BYTES = _NONCE_BYTES + _PLAIN_BYTES + 16


def _seal(key, plain, aad):
    """``nonce + ChaCha20-Poly1305(key, nonce, plain, aad)`` under a fresh random nonce.

    The channel key is one per pair of sites and session id. A nonce made of what the coordinator names
    (the round, the direction) repeated itself whenever a session id was joined twice (a review's attack:
    an id that the sites' check read two ways, after a restart), and a repeated nonce gives the keystream
    away: shares revealed in one run then decrypt the same site's shares of the next. 96 random bits make
    a repeat as unlikely as guessing the key, whatever the coordinator sends."""
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    nonce = os.urandom(_NONCE_BYTES)
    return nonce + ChaCha20Poly1305(key).encrypt(nonce, plain, aad)


def _aad(session, round_id, sender, receiver, public, context=b""):
    """The shares' associated data: each field after its length, so that no two calls give the same bytes
    (joined by "|", sites named ``a`` and ``a|a`` read ``a|a|a`` either way: a ciphertext sent back to its
    sender verified, once the nonce no longer carried the direction)."""
    parts = [_LABEL, b"shares", str(session).encode(), str(int(round_id)).encode(), sender.encode(),
             receiver.encode(), bytes(public), bytes(context)]  # fmt: skip
    return b"".join(len(part).to_bytes(4, "big") + part for part in parts)


@dataclass
class RoundSecrets:
    """What a site keeps of one round between its phases (never sent)."""

    round_id: int
    private: object = field(repr=False)  # X25519PrivateKey of the round
    public: bytes
    seed: bytes = field(repr=False)
    held: dict = field(default_factory=dict, repr=False)  # {site: (b share, s share 1, s share 2)} held here
    keys: dict = field(default_factory=dict, repr=False)  # {site: round public key} after receive_shares
    context: bytes = b""  # the site's transcript hash, bound to its shares


def _split(secret, t, n):
    from Crypto.Protocol.SecretSharing import Shamir

    if t <= 1:  # pycryptodome needs k >= 2; a threshold of one hands the secret itself to each holder
        return [(i + 1, bytes(secret)) for i in range(n)]
    return Shamir.split(t, n, bytes(secret))


def _combine(shares, t):
    from Crypto.Protocol.SecretSharing import Shamir

    if len(shares) < max(t, 1):
        raise InputError(f"only {len(shares)} shares of a secret that needs {t}")
    if t <= 1:
        return shares[0][1]
    return Shamir.combine(shares)


def advertise(me, roster, channel, session, round_id, t, context=b""):
    """Phase 1 for site ``me``: ``(secrets kept here, round public key, {peer: ciphertext of its shares})``.

    ``context`` (the site's transcript of the session: every request it answered, and this round's
    operation and arguments) is bound to the shares: a peer given another history or other arguments
    cannot verify them, so all sites of a round computed the same thing.
    """
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    roster = sorted(roster)
    n = len(roster)
    private = X25519PrivateKey.generate()
    public = private.public_key().public_bytes_raw()
    seed = os.urandom(_SEED_BYTES)
    raw = private.private_bytes_raw()
    shares = [_split(seed, t, n), _split(raw[:16], t, n), _split(raw[16:], t, n)]
    secrets = RoundSecrets(round_id=int(round_id), private=private, public=public, seed=seed, context=context)
    out = {}
    for i, peer in enumerate(roster):
        triple = tuple(s[i][1] for s in shares)
        if peer == me:
            secrets.held[me] = triple
            continue
        out[peer] = _seal(channel[peer], b"".join(triple), _aad(session, round_id, me, peer, public, context))
    return secrets, public, out


def receive_shares(me, secrets, keys, ciphertexts, channel, session):
    """Phase 2's check: decrypt every peer's shares for ``me``; each authenticates its sender's round key.

    ``keys``: ``{site: round public key}`` of every site that advertised (``me`` included);
    ``ciphertexts``: ``{site: ciphertext for me}``. Raises :class:`InputError` naming the first site whose
    key or shares do not verify (a relayed key the site never sent, or shares altered on the way).
    """
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    # (the caller checked the sites' names; a ciphertext is a nonce, the shares and ChaCha20-Poly1305's tag)
    keys = {k: _wire_bytes(v, _KEY_BYTES, "a round key") for k, v in keys.items()}
    ciphertexts = {k: _wire_bytes(v, _BOX_BYTES, "a site's shares") for k, v in ciphertexts.items()}
    if keys.get(me) != secrets.public:
        raise InputError(f"the round key relayed for site {me!r} is not the one it advertised")
    if set(ciphertexts) != set(keys) - {me}:
        raise InputError(
            f"shares relayed from {sorted(ciphertexts)} do not match the keys relayed for {sorted(keys)}"
        )
    for sender in sorted(ciphertexts):
        if sender not in channel:
            raise InputError(f"site {sender!r} is not a pinned member of the federation")
        box, sealed = ChaCha20Poly1305(channel[sender]), ciphertexts[sender]
        try:
            plain = box.decrypt(
                sealed[:_NONCE_BYTES],
                sealed[_NONCE_BYTES:],
                _aad(session, secrets.round_id, sender, me, keys[sender], secrets.context),
            )
        except InvalidTag as exc:
            raise InputError(
                f"the round key or shares relayed for site {sender!r} do not verify under the key pinned "
                "for it (altered or forged)"
            ) from exc
        if len(plain) != _PLAIN_BYTES:
            raise InputError(f"site {sender!r} sent shares of {len(plain)} bytes")
        secrets.held[sender] = tuple(
            plain[i : i + _SHARE_BYTES] for i in range(0, _PLAIN_BYTES, _SHARE_BYTES)
        )
    secrets.keys = dict(keys)


#: entries masked at a time, so that the encoding's and the masks' temporaries (about 110 bytes an entry) are
#: of this many entries, not of the whole vector (a site's peak: ``benchmarks/site_memory.py``)
MASK_CHUNK = 1 << 20


def _self_key(seed, session):
    return _hkdf(seed, _salt(session), _LABEL + b"|self")


def _pair_key(private, other_public, me, other, session, round_id):
    shared = _exchange(private, other_public, f"the round key of site {other!r}")
    a, b = sorted([me, other])
    info = _LABEL + b"|pair|" + str(int(round_id)).encode() + b"|" + a.encode() + b"|" + b.encode()
    return _hkdf(shared, _salt(session), info)


def _self_mask(seed, session, round_id, size):
    return keystream_words(_self_key(seed, session), round_id, size)


def _pair_mask(private, other_public, me, other, session, round_id, size):
    return keystream_words(_pair_key(private, other_public, me, other, session, round_id), round_id, size)


def masked_input(values, me, secrets, session, *, n_sites, chunk=MASK_CHUNK):
    """Phase 2's answer: ``values`` in fixed point plus the self mask and the pair masks with every site
    that advertised this round (:attr:`RoundSecrets.keys`), as ``(2, size)`` uint64 words (computed
    ``chunk`` entries at a time: the same words). ``values``: floats, or an exact vector
    (:func:`~.secure.encode_exact`)."""
    exact = is_exact(values)
    if not exact:
        values = np.asarray(values, dtype=np.float64).ravel()
    size = values.shape[-1]
    chunk = int(chunk)
    if chunk < 1:
        raise ValueError(f"chunk must be a positive number of entries; got {chunk}")
    # the whole vector's range first: a refusal takes the same time wherever its first bad value is
    if exact:
        values = check_exact(values, n_sites=n_sites, name=f"site {me!r}", chunk=chunk)
    else:
        values = check_fixed(values, n_sites=n_sites, name=f"site {me!r}")
    r = secrets.round_id
    masks = [(_self_key(secrets.seed, session), False)] + [
        (_pair_key(secrets.private, secrets.keys[other], me, other, session, r), me > other)
        for other in sorted(secrets.keys)
        if other != me
    ]
    out = np.empty((2, size), dtype=np.uint64)
    for lo in range(0, size, chunk):
        hi = min(lo + chunk, size)
        words = encode_exact_checked(values[:, lo:hi]) if exact else encode_checked(values[lo:hi])
        for key, subtract in masks:
            m = keystream_words(key, r, size, lo, hi)
            words = add_words(words, neg_words(m) if subtract else m)
        out[:, lo:hi] = words
    return out


def confirm_tag(channel_key, session, secrets, me, peer, survivors):
    """The consistency check's tag from ``me`` to ``peer``: an HMAC, under their pinned channel, of the
    round's key set, its survivors and ``me``'s transcript. A site reveals shares only when the other
    survivors' tags verify against its own view: sites told different survivor sets (or key sets, or
    computations) cannot all be made to reveal, whatever the coordinator relays."""
    from cryptography.hazmat.primitives import hashes, hmac

    h = hmac.HMAC(channel_key, hashes.SHA256())
    for part in (_LABEL, b"confirm", str(session).encode(), str(secrets.round_id).encode(), me.encode(),
                 peer.encode(), ",".join(sorted(secrets.keys)).encode(), ",".join(sorted(survivors)).encode(),
                 secrets.context):  # fmt: skip
        h.update(len(part).to_bytes(4, "big") + part)
    return h.finalize()


def check_tags(me, secrets, survivors, tags, channel, session, t):
    """Verify the other survivors' :func:`confirm_tag` s to ``me``; raises :class:`InputError` unless at
    least ``t`` survivors (``me`` included) confirmed exactly ``me``'s view."""
    from cryptography.hazmat.primitives import constant_time

    if not set(tags) <= set(survivors) - {me}:
        raise InputError(f"confirmations from {sorted(set(tags) - set(survivors))} who are not survivors")
    if len(tags) + 1 < t:
        raise InputError(f"only {len(tags) + 1} survivors confirmed the round; {t} needed")
    for peer in sorted(tags):
        want = confirm_tag(channel[peer], session, secrets, peer, me, survivors)
        if not constant_time.bytes_eq(_wire_bytes(tags[peer], _TAG_BYTES, "a confirmation tag"), want):
            raise InputError(
                f"site {peer!r} did not confirm this round's survivors and keys as this site sees them "
                "(the sites were told different rounds)"
            )


def reveal(secrets, survivors):
    """Phase 3's answer: ``{site: share}``: of ``b`` for each survivor, of ``s`` for each site that
    advertised and did not survive. The caller checks ``survivors`` first (a subset of the advertisers)."""
    survivors = set(survivors)
    out = {}
    for site, (b, s1, s2) in secrets.held.items():
        if site not in secrets.keys:
            continue
        out[site] = b if site in survivors else s1 + s2
    return out


def unmask_words(total, roster, keys, survivors, reveals, session, round_id, t):
    """The survivors' sum (two-word fixed point) from the sum of their masked inputs.

    Parameters
    ----------
    total : ndarray of shape (2, size)
        Sum of the survivors' masked inputs.
    roster : list of str
        The federation (sorted: a site's position + 1 is its Shamir index).
    keys : dict
        ``{site: round public key}`` of every site that advertised.
    survivors : collection of str
        Sites whose masked input is in ``total``.
    reveals : dict
        ``{revealing site: {site: share}}`` from phase 3.
    t : int
        Shares needed per secret.
    """
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    roster = sorted(roster)
    index = {name: i + 1 for i, name in enumerate(roster)}
    survivors = sorted(survivors)
    size = total.shape[1]
    out = np.array(total, dtype=np.uint64, copy=True)

    def shares_of(site, lo, hi):
        got = [(index[r], bytes(rev[site])[lo:hi]) for r, rev in sorted(reveals.items()) if site in rev]
        return _combine(got, t)

    for u in survivors:
        seed = shares_of(u, 0, _SHARE_BYTES)
        out = add_words(out, neg_words(_self_mask(seed, session, round_id, size)))
    for u in sorted(set(keys) - set(survivors)):
        raw = shares_of(u, 0, _SHARE_BYTES) + shares_of(u, _SHARE_BYTES, 2 * _SHARE_BYTES)
        private = X25519PrivateKey.from_private_bytes(raw)
        for v in survivors:  # v added +m if v < u, else -m: take that back
            m = _pair_mask(private, keys[v], u, v, session, round_id, size)
            out = add_words(out, neg_words(m) if v < u else m)
    return out

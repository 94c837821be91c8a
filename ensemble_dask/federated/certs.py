"""Key material of a federated deployment: a CA, one TLS certificate per party, one masking key per site.

:func:`make_certs` (the ``ensemble-dask certs`` command) writes into ``out``:

* ``ca.pem`` and ``ca-key.pem``: a self-signed certificate authority (ECDSA P-256, 10 years). Keep
  ``ca-key.pem`` offline; every party needs only ``ca.pem``;
* per name ``NAME.pem`` and ``NAME-key.pem``: a TLS certificate signed by the CA (common name and DNS
  name ``NAME``, plus ``localhost`` and ``127.0.0.1``, for server and client authentication) and its
  private key, for distributed's ``Security`` (``dask scheduler|worker --tls-ca-file ca.pem --tls-cert
  NAME.pem --tls-key NAME-key.pem``);
* per name ``NAME-mask.key`` and ``NAME-mask.pub``: an X25519 key pair (PEM, PKCS#8 / SubjectPublicKeyInfo)
  for the pairwise masks of secure aggregation. The private key stays with the site's workers (loaded by
  ``--preload ensemble_dask.federated.site --mask-key NAME-mask.key``); the public key is pinned in the
  workflow (``federated.sites[].mask_key``: the path of ``NAME-mask.pub`` or its base64 text, see
  :func:`public_key_b64`), so a coordinator relaying public keys cannot substitute its own.

Private key files are written with mode 0600. Existing files are kept unless ``overwrite=True`` (a CA
is not silently replaced under certificates it signed).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
from pathlib import Path

from .._validation import InputError

__all__ = ["make_certs", "load_mask_private", "load_mask_public", "public_key_b64"]

_VALID_DAYS = 3650


def _write(path, data, private):
    path = Path(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = os.open(path, flags, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _private_pem(key):
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _public_pem(key):
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def _name(common_name):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _make_ca(out):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = _name("ensemble-dask federation CA")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(out / "ca-key.pem", _private_pem(key), private=True)
    _write(out / "ca.pem", cert.public_bytes(serialization.Encoding.PEM), private=False)
    return cert, key


def _load_ca(out):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert = x509.load_pem_x509_certificate((out / "ca.pem").read_bytes())
    key = serialization.load_pem_private_key((out / "ca-key.pem").read_bytes(), password=None)
    return cert, key


def _make_party(out, name, ca_cert, ca_key):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName(name),
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write(out / f"{name}-key.pem", _private_pem(key), private=True)
    _write(out / f"{name}.pem", cert.public_bytes(serialization.Encoding.PEM), private=False)


def _make_mask_pair(out, name):
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    key = X25519PrivateKey.generate()
    _write(out / f"{name}-mask.key", _private_pem(key), private=True)
    _write(out / f"{name}-mask.pub", _public_pem(key.public_key()), private=False)


def _check_name(name):
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
        raise InputError(f"certificate names must be letters, digits, '-', '_' or '.'; got {name!r}")
    if name == "ca":
        raise InputError("'ca' is reserved for the certificate authority (ca.pem); choose another name")


def make_certs(out, names, *, overwrite=False):
    """Write a CA and, per name, a TLS certificate, its key and an X25519 masking key pair into ``out``.

    Parameters
    ----------
    out : str or Path
        Directory (created if missing).
    names : list of str
        Parties, e.g. ``["coordinator", "site-a", "site-b"]``.
    overwrite : bool, default=False
        Replace existing files. Otherwise an existing CA is reused to sign new names and a name whose
        files exist is left alone.

    Returns
    -------
    dict
        ``{"ca": path, "created": [names written], "kept": [names whose files existed]}``.
    """
    names = list(names or [])
    if not names:
        raise InputError("certs needs at least one name (e.g. --names coordinator,site-a,site-b)")
    for n in names:
        _check_name(n)
    if len(set(names)) != len(names):
        raise InputError(f"names must be distinct; got {names}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    have_ca = (out / "ca.pem").exists() and (out / "ca-key.pem").exists()
    if have_ca and not overwrite:
        ca_cert, ca_key = _load_ca(out)
    else:
        ca_cert, ca_key = _make_ca(out)
    created, kept = [], []
    for n in names:
        files = [out / f"{n}.pem", out / f"{n}-key.pem", out / f"{n}-mask.key", out / f"{n}-mask.pub"]
        if not overwrite and have_ca and all(f.exists() for f in files):
            kept.append(n)
            continue
        _make_party(out, n, ca_cert, ca_key)
        _make_mask_pair(out, n)
        created.append(n)
    return {"ca": str(out / "ca.pem"), "created": created, "kept": kept}


# --------------------------------------------------------------------------- masking keys


def load_mask_private(path):
    """The X25519 private key in ``path`` (PEM, PKCS#8, as written by :func:`make_certs`)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the masking key {str(path)!r}: {exc}") from exc
    if not isinstance(key, X25519PrivateKey):
        raise InputError(f"{str(path)!r} is not an X25519 private key")
    return key


def load_mask_public(value):
    """Raw 32 bytes of an X25519 public key given as a ``.pub`` PEM path, PEM text or base64 text."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

    if isinstance(value, bytes) and len(value) == 32:
        return value
    text = str(value).strip()
    if "BEGIN" not in text and len(text) != 44:  # not base64 of 32 bytes: a path
        try:
            text = Path(text).read_text().strip()
        except OSError as exc:
            raise InputError(f"cannot read the pinned public key {str(value)!r}: {exc}") from exc
    if "BEGIN" in text:
        key = serialization.load_pem_public_key(text.encode())
        if not isinstance(key, X25519PublicKey):
            raise InputError(f"{str(value)!r} is not an X25519 public key")
        return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise InputError(f"pinned public key {str(value)!r} is neither a path, PEM nor base64") from exc
    if len(raw) != 32:
        raise InputError(f"pinned public key {str(value)!r} is not 32 bytes")
    return raw


def public_key_b64(value):
    """Base64 text of a public key (for pinning it inline in a workflow)."""
    return base64.b64encode(load_mask_public(value)).decode()

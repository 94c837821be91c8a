"""Key material of a federated deployment: a CA, one TLS certificate per party, one masking key per site.

The coordinator may be malicious and each site protects itself, so a site's private keys are
made on the site and never leave it; only public material is exchanged. A deployment runs:

1. on each site, :func:`init_site` (``ensemble-dask site init NAME --host HOST``), which writes
   ``NAME-key.pem`` (ECDSA P-256 TLS private key) and ``NAME-mask.key`` (X25519 masking private key),
   both mode 0600 and both staying on the site, and ``NAME.csr`` (a certificate signing request) and
   ``NAME-mask.pub`` (the public masking key), which the site sends out;
2. once, where the federation's CA is kept (offline if possible), :func:`make_ca`
   (``ensemble-dask certs ca --out DIR``): ``ca.pem`` and ``ca-key.pem``;
3. per CSR received, :func:`sign_csr` (``ensemble-dask certs sign --ca DIR NAME.csr``): ``NAME.pem``,
   sent back to the site with ``ca.pem``. The CA signs the names and hosts the CSR asks for: its
   operator checks them (the command prints them) before sending the certificate back;
4. every site pins every member's ``NAME-mask.pub`` in its own ``site.yaml`` (``federation:``, the path
   of ``NAME-mask.pub`` or its base64 text, see :func:`public_key_b64`), so a coordinator relaying
   public keys cannot substitute its own.

The site agent serves HTTPS with ``NAME.pem`` and ``NAME-key.pem`` and trusts ``ca.pem`` for its
callers (:mod:`~ensemble_dask.federated.site.agent`); the coordinator presents its own certificate, named
``coordinator``.

:func:`make_certs` (``ensemble-dask certs --out DIR --names coordinator,site-a,...``) is the
one-command local demo and does **not** follow this: it makes the CA and every party's private keys
(TLS and masking) in one directory, so whoever runs it, or can read that directory, can impersonate
any party and unmask every site. Use it only where one person plays every party (a demo, a test). It
writes into ``out``:

* ``ca.pem`` and ``ca-key.pem``: a self-signed certificate authority (ECDSA P-256, 10 years);
* per name ``NAME.pem`` and ``NAME-key.pem``: a TLS certificate signed by the CA (common name and DNS
  name ``NAME``, plus ``localhost`` and ``127.0.0.1``, for server and client authentication) and its
  private key;
* per name ``NAME-mask.key`` and ``NAME-mask.pub``: an X25519 key pair (PEM, PKCS#8 /
  SubjectPublicKeyInfo) for the pairwise masks of secure aggregation.

Private key files are written with mode 0600, and refused on load when their group or others may read
them (:func:`load_private_pem`; POSIX permissions). Existing private keys are never silently replaced:
:func:`init_site` and :func:`make_ca` refuse to, and :func:`make_certs` only with ``overwrite=True``
(nor is a CA replaced under the certificates it signed).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import re
import stat
from pathlib import Path

from ..._validation import InputError

__all__ = [
    "make_certs",
    "init_site",
    "make_ca",
    "sign_csr",
    "load_private_pem",
    "load_mask_private",
    "load_mask_public",
    "public_key_b64",
]

_VALID_DAYS = 3650


def _write(path, data, private, *, exclusive=False):
    path = Path(path)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    try:
        fd = os.open(path, flags, 0o600 if private else 0o644)
    except FileExistsError as exc:
        raise InputError(f"{str(path)!r} exists; refusing to overwrite a private key") from exc
    with os.fdopen(fd, "wb") as f:
        if private:  # an existing file keeps its mode through O_TRUNC: make it the owner's only
            os.fchmod(f.fileno(), 0o600)
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


def _make_ca(out, *, exclusive=False):
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
    _write(out / "ca-key.pem", _private_pem(key), private=True, exclusive=exclusive)
    _write(out / "ca.pem", cert.public_bytes(serialization.Encoding.PEM), private=False)
    return cert, key


def _load_ca(ca_dir):
    """The CA certificate and key in ``ca_dir`` (both must exist; the callers say what to do if not)."""
    from cryptography import x509

    pem, key_path = ca_dir / "ca.pem", ca_dir / "ca-key.pem"
    try:
        cert = x509.load_pem_x509_certificate(pem.read_bytes())
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the CA certificate {str(pem)!r}: {exc}") from exc
    key = load_private_pem(key_path, "CA key")
    if _public_pem(key.public_key()) != _public_pem(cert.public_key()):
        raise InputError(f"{str(key_path)!r} is not the key of {str(pem)!r}; bring back the matching pair")
    return cert, key


def _leaf_cert(name, public_key, san, ca_cert, ca_key, days=_VALID_DAYS):
    """A TLS certificate for ``name`` (server and client authentication, not a CA) signed by the CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )


def _make_party(out, name, ca_cert, ca_key):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    san = [
        x509.DNSName(name),
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    cert = _leaf_cert(name, key.public_key(), san, ca_cert, ca_key)
    _write(out / f"{name}-key.pem", _private_pem(key), private=True)
    _write(out / f"{name}.pem", cert.public_bytes(serialization.Encoding.PEM), private=False)


def _make_mask_pair(out, name):
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    key = X25519PrivateKey.generate()
    _write(out / f"{name}-mask.key", _private_pem(key), private=True)
    _write(out / f"{name}-mask.pub", _public_pem(key.public_key()), private=False)


def _check_name(name, what="certificate names"):
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
        raise InputError(f"{what} must be letters, digits, '-', '_' or '.'; got {name!r}")
    if name == "ca":
        raise InputError("'ca' is reserved for the certificate authority (ca.pem); choose another name")


_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?"
_DNS_NAME = re.compile(rf"(?:\*\.)?{_LABEL}(?:\.{_LABEL})*")  # a host name, or a wildcard *.domain


def _san_entries(name, hosts):
    """``DNS:name`` and, per host, a DNS name or an IP address (duplicates dropped)."""
    from cryptography import x509

    entries = [x509.DNSName(name)]
    for host in [hosts] if isinstance(hosts, str) else hosts:
        host = str(host).strip()
        try:
            entry = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            if not _DNS_NAME.fullmatch(host) or len(host) > 253:
                raise InputError(
                    f"a host must be a DNS name or an IP address (no scheme, port or path); got {host!r}"
                ) from None
            entry = x509.DNSName(host)
        if entry not in entries:
            entries.append(entry)
    return entries


def _make_folder(out):
    """Create the output folder ``out`` (a Path); a file in its place is refused, naming it."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {str(out)!r} is a file; give a folder (it is created if missing)")
    out.mkdir(parents=True, exist_ok=True)


def make_certs(out, names, *, overwrite=False):
    """Write a CA and, per name, a TLS certificate, its key and an X25519 masking key pair into ``out``.

    For a local demo or a test only: every party's private keys, and the CA's, are made here, so whoever
    runs this, or can read ``out``, can impersonate any party and unmask every site. A real federation
    makes each site's keys on the site (:func:`init_site`) and signs its request with the CA
    (:func:`make_ca`, :func:`sign_csr`).

    Parameters
    ----------
    out : str or Path
        Directory (created if missing).
    names : list of str
        Parties, e.g. ``["coordinator", "site-a", "site-b"]``.
    overwrite : bool, default=False
        Replace existing files, the CA included. Otherwise an existing CA is reused to sign new names
        and a name whose files exist is left alone.

    Returns
    -------
    dict
        ``{"ca": path, "created": [names written], "kept": [names whose files existed]}``.

    Raises
    ------
    InputError
        On a bad or repeated name; without ``overwrite``, when ``ca.pem`` exists without ``ca-key.pem``
        (moved offline: a new CA would replace ``ca.pem`` and every certificate it signed would stop
        verifying) or ``ca-key.pem`` without ``ca.pem``.
    """
    names = list(names or [])
    if not names:
        raise InputError("certs needs at least one name (e.g. --names coordinator,site-a,site-b)")
    for n in names:
        _check_name(n)
    if len(set(names)) != len(names):
        raise InputError(f"names must be distinct; got {names}")
    out = Path(out)
    _make_folder(out)
    ca_pem, ca_key_path = out / "ca.pem", out / "ca-key.pem"
    if not overwrite and ca_pem.exists() and not ca_key_path.exists():
        raise InputError(
            f"{str(ca_pem)!r} exists but {str(ca_key_path)!r} does not: a new CA would replace ca.pem and "
            "every certificate it signed would stop verifying. Bring the CA key back into "
            f"{str(out)!r}, or sign the new party's request where the key is kept: "
            "`ensemble-dask certs sign --ca CA_DIR NAME.csr` (after `ensemble-dask site init NAME` on it)"
        )
    if not overwrite and ca_key_path.exists() and not ca_pem.exists():
        raise InputError(
            f"{str(ca_key_path)!r} exists but {str(ca_pem)!r} does not: put the CA's ca.pem back (every "
            "party holds a copy) rather than replace the CA (--overwrite does)"
        )
    have_ca = ca_pem.exists() and ca_key_path.exists()
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
    return {"ca": str(ca_pem), "created": created, "kept": kept}


# --------------------------------------------------------------------------- keys made where they are used


def init_site(out, name, *, hosts=()):
    """Make a site's private keys on the site, and the public material it sends out.

    Writes into ``out`` (created if missing):

    * ``NAME-key.pem``: the TLS private key (ECDSA P-256, mode 0600). It stays here;
    * ``NAME.csr``: a certificate signing request for it (common name ``NAME``, subject alternative
      names ``DNS:NAME`` and ``hosts``), to send to the federation's CA (:func:`sign_csr`), which
      returns ``NAME.pem``;
    * ``NAME-mask.key``: the X25519 masking private key (mode 0600). It stays here;
    * ``NAME-mask.pub``: its public key, to send to the peers, which pin it in their workflow.

    Parameters
    ----------
    out : str or Path
        Directory.
    name : str
        The site's name (letters, digits, '-', '_' or '.').
    hosts : sequence of str, default=()
        Further names the site is reached by: DNS names or IP addresses.

    Returns
    -------
    list of Path
        The files written: ``NAME-key.pem``, ``NAME.csr``, ``NAME-mask.key``, ``NAME-mask.pub``.

    Raises
    ------
    InputError
        On a bad name or host, or when ``NAME-key.pem`` or ``NAME-mask.key`` exists (a private key is
        never replaced: move it away first to make new keys).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    _check_name(name)
    san = _san_entries(name, hosts)
    out = Path(out)
    key_path, csr_path = out / f"{name}-key.pem", out / f"{name}.csr"
    mask_path, pub_path = out / f"{name}-mask.key", out / f"{name}-mask.pub"
    for path in (key_path, mask_path):
        if path.exists() or path.is_symlink():
            raise InputError(
                f"{str(path)!r} exists; refusing to overwrite a private key (move it away to make new keys)"
            )
    _make_folder(out)
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(_name(name))
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .sign(key, hashes.SHA256())
    )
    mask = X25519PrivateKey.generate()
    _write(key_path, _private_pem(key), private=True, exclusive=True)
    _write(mask_path, _private_pem(mask), private=True, exclusive=True)
    _write(csr_path, csr.public_bytes(serialization.Encoding.PEM), private=False)
    _write(pub_path, _public_pem(mask.public_key()), private=False)
    return [key_path, csr_path, mask_path, pub_path]


def make_ca(out):
    """Make the federation's certificate authority: ``ca.pem`` and ``ca-key.pem`` (mode 0600) in ``out``.

    Every party needs ``ca.pem``; keep ``ca-key.pem`` offline, where requests are signed
    (:func:`sign_csr`).

    Parameters
    ----------
    out : str or Path
        Directory (created if missing).

    Returns
    -------
    list of Path
        ``ca.pem`` and ``ca-key.pem``.

    Raises
    ------
    InputError
        When ``ca.pem`` or ``ca-key.pem`` exists in ``out`` (a CA is not replaced under the
        certificates it signed).
    """
    out = Path(out)
    for path in (out / "ca.pem", out / "ca-key.pem"):
        if path.exists() or path.is_symlink():
            raise InputError(
                f"{str(path)!r} exists; refusing to replace a CA (every certificate it signed would stop "
                "verifying)"
            )
    _make_folder(out)
    _make_ca(out, exclusive=True)
    return [out / "ca.pem", out / "ca-key.pem"]


def _read_csr(csr_path):
    """The CSR in ``csr_path``, its common name and its subject alternative names, checked."""
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.x509.oid import NameOID

    where = repr(str(csr_path))
    try:
        csr = x509.load_pem_x509_csr(Path(csr_path).read_bytes())
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the certificate signing request {where}: {exc}") from exc
    try:
        valid = csr.is_signature_valid
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise InputError(f"cannot check the signature of the request {where}: {exc}") from exc
    if not valid:
        raise InputError(
            f"the signature of the request {where} does not verify (damaged or altered on the way); "
            "ask the site for its NAME.csr again"
        )
    cns = csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if len(cns) != 1:
        raise InputError(
            f"the request {where} must have one common name (the party's name); it has {len(cns)}"
        )
    name = str(cns[0].value)
    _check_name(name)
    try:
        san = list(csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        san = []
    except ValueError as exc:
        raise InputError(f"cannot read the extensions of the request {where}: {exc}") from exc
    other = [e for e in san if not isinstance(e, x509.DNSName | x509.IPAddress)]
    if other:
        raise InputError(f"the request {where} asks for names other than DNS names and IP addresses: {other}")
    if x509.DNSName(name) not in san:
        san.insert(0, x509.DNSName(name))
    return csr, name, san


def sign_csr(ca_dir, csr_path, *, out=None, days=_VALID_DAYS):
    """Sign a party's certificate signing request with the CA in ``ca_dir``: write ``NAME.pem``.

    The certificate has the request's common name ``NAME`` (which must be a valid party name) and its
    subject alternative names (DNS names and IP addresses, ``DNS:NAME`` added if missing), serves for
    TLS server and client authentication and is not a CA. Nothing else of the request is copied. The
    CA vouches for these names: check them (``ensemble-dask certs sign`` prints them) before sending
    the certificate back.

    Parameters
    ----------
    ca_dir : str or Path
        Directory of ``ca.pem`` and ``ca-key.pem`` (:func:`make_ca`).
    csr_path : str or Path
        The request, ``NAME.csr`` (:func:`init_site`).
    out : str or Path, default=None
        Directory of ``NAME.pem`` (created if missing); default: the request's directory.
    days : int, default=3650
        Validity of the certificate.

    Returns
    -------
    Path
        ``NAME.pem``. An existing one (an earlier request of ``NAME``) is replaced.

    Raises
    ------
    InputError
        When ``ca-key.pem`` or ``ca.pem`` is missing or they do not match, the CA key is readable by
        group or others, or the request cannot be read, its signature does not verify, it has no valid
        name or asks for names other than DNS names and IP addresses.
    """
    from cryptography.hazmat.primitives import serialization

    ca_dir = Path(ca_dir)
    days = int(days)
    if days < 1:
        raise InputError(f"days must be at least 1; got {days}")
    if not (ca_dir / "ca-key.pem").exists():
        raise InputError(
            f"no CA key {str(ca_dir / 'ca-key.pem')!r}: sign where the federation's ca-key.pem is kept "
            "(--ca DIR), or make a CA with `ensemble-dask certs ca --out DIR`"
        )
    if not (ca_dir / "ca.pem").exists():
        raise InputError(f"no CA certificate {str(ca_dir / 'ca.pem')!r} next to the CA key")
    ca_cert, ca_key = _load_ca(ca_dir)
    csr, name, san = _read_csr(csr_path)
    cert = _leaf_cert(name, csr.public_key(), san, ca_cert, ca_key, days=days)
    out = Path(csr_path).parent if out is None else Path(out)
    _make_folder(out)
    path = out / f"{name}.pem"
    _write(path, cert.public_bytes(serialization.Encoding.PEM), private=False)
    return path


def load_private_pem(path, what="private key"):
    """The private key in the PEM file ``path`` (unencrypted PKCS#8 or traditional), checked first.

    Parameters
    ----------
    path : str or Path
        The key file.
    what : str, default="private key"
        What the key is, for the error messages (e.g. ``"TLS key"``, ``"masking key"``).

    Returns
    -------
    private key
        A ``cryptography`` private key object.

    Raises
    ------
    InputError
        When the file cannot be read or parsed, or its group or others have any access to it
        (``mode & 0o077``; the message says ``chmod 600 PATH``). POSIX permissions only.
    """
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    path = Path(path)
    try:
        mode = path.stat().st_mode
        if mode & 0o077:
            raise InputError(
                f"the {what} {str(path)!r} may be read by its group or others (mode "
                f"{stat.S_IMODE(mode):04o}); make it the owner's only: chmod 600 {path}"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the {what} {str(path)!r}: {exc.strerror or exc}") from exc
    try:
        return serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise InputError(f"cannot read the {what} {str(path)!r}: {exc}") from exc


# --------------------------------------------------------------------------- masking keys


def load_mask_private(path):
    """The X25519 private key in ``path`` (PEM, PKCS#8, as written by :func:`init_site`).

    Refused, like every private key (:func:`load_private_pem`), when its group or others may read it.
    """
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    key = load_private_pem(path, "masking key")
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

"""``ensemble-dask certs``: the CA, the parties' TLS certificates and the sites' masking keys."""

import os
import ssl
import subprocess
import sys

import pytest
from cryptography import x509

from ensemble_dask import InputError
from ensemble_dask.federated.certs import load_mask_private, load_mask_public, make_certs, public_key_b64


def test_certs_command_writes_the_agreed_files(tmp_path):
    out = tmp_path / "certs"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ensemble_dask.cli",
            "certs",
            "--out",
            str(out),
            "--names",
            "coordinator,site-a",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.returncode == 0, proc.stderr
    names = {"ca.pem", "ca-key.pem"}
    for n in ("coordinator", "site-a"):
        names |= {f"{n}.pem", f"{n}-key.pem", f"{n}-mask.key", f"{n}-mask.pub"}
    assert {p.name for p in out.iterdir()} == names
    for key in ("ca-key.pem", "site-a-key.pem", "site-a-mask.key"):
        assert (out / key).stat().st_mode & 0o077 == 0, key  # private keys readable by the owner only
    ca = x509.load_pem_x509_certificate((out / "ca.pem").read_bytes())
    cert = x509.load_pem_x509_certificate((out / "site-a.pem").read_bytes())
    cert.verify_directly_issued_by(ca)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "site-a" in san.get_values_for_type(x509.DNSName)
    # usable by Python's TLS (what distributed's Security builds on)
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(out / "ca.pem"))
    ctx.load_cert_chain(str(out / "site-a.pem"), str(out / "site-a-key.pem"))
    # the masking key pair matches, as a path, PEM text or base64
    pub = load_mask_private(out / "site-a-mask.key").public_key().public_bytes_raw()
    assert load_mask_public(out / "site-a-mask.pub") == pub
    assert load_mask_public(public_key_b64(out / "site-a-mask.pub")) == pub


def test_certs_reuse_the_ca_and_refuse_bad_names(tmp_path):
    make_certs(tmp_path, ["coordinator"])
    ca_before = (tmp_path / "ca.pem").read_bytes()
    info = make_certs(tmp_path, ["coordinator", "site-b"])
    assert info["created"] == ["site-b"] and info["kept"] == ["coordinator"]
    assert (tmp_path / "ca.pem").read_bytes() == ca_before
    ca = x509.load_pem_x509_certificate(ca_before)
    x509.load_pem_x509_certificate((tmp_path / "site-b.pem").read_bytes()).verify_directly_issued_by(ca)
    with pytest.raises(InputError, match="'a/b'"):
        make_certs(tmp_path, ["a/b"])
    with pytest.raises(InputError, match="distinct"):
        make_certs(tmp_path, ["x", "x"])
    with pytest.raises(InputError, match="'ca' is reserved"):
        make_certs(tmp_path, ["ca"])

"""``ensemble-dask certs``: the CA, the parties' TLS certificates and the sites' masking keys."""

import ipaddress
import os
import ssl
import subprocess
import sys

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from ensemble_dask import InputError
from ensemble_dask.federated.protocol.certs import (
    load_mask_private,
    load_mask_public,
    make_certs,
    public_key_b64,
)


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


# --------------------------------------------------------------------------- keys made where they are used


def _cli(*args):
    proc = subprocess.run(
        [sys.executable, "-m", "ensemble_dask.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    return proc


def _refused(proc, *words):
    """Exit status 2 and one line of error naming ``words``."""
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ensemble-dask: error:"), proc.stderr
    for word in words:
        assert str(word) in lines[0], (word, lines[0])


def _site_and_ca(tmp_path):
    site, ca = tmp_path / "site", tmp_path / "ca"
    proc = _cli(
        "site", "init", "site-a", "--out", site, "--host", "site-a.example.org,10.0.0.5", "--host", "::1"
    )
    assert proc.returncode == 0, proc.stderr
    proc = _cli("certs", "ca", "--out", ca)
    assert proc.returncode == 0, proc.stderr
    return site, ca


def test_site_init_keeps_the_private_keys_and_writes_a_request(tmp_path):
    from ensemble_dask.federated.protocol.certs import load_private_pem

    site = tmp_path / "site"
    proc = _cli("site", "init", "site-a", "--out", site, "--host", "site-a.example.org", "--host", "10.0.0.5")
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in site.iterdir()} == {
        "site-a-key.pem",
        "site-a.csr",
        "site-a-mask.key",
        "site-a-mask.pub",
    }
    for key in ("site-a-key.pem", "site-a-mask.key"):
        assert (site / key).stat().st_mode & 0o777 == 0o600, key
    # the next step: the request and the public key go out, the keys stay
    assert "site-a.csr" in proc.stdout and "site-a-mask.pub" in proc.stdout and "certs sign" in proc.stdout
    csr = x509.load_pem_x509_csr((site / "site-a.csr").read_bytes())
    assert csr.is_signature_valid
    assert csr.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value == "site-a"
    san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["site-a", "site-a.example.org"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["10.0.0.5"]
    tls_key = load_private_pem(site / "site-a-key.pem", "TLS key")
    assert tls_key.public_key() == csr.public_key()  # the request is for the key that stays here
    pub = load_mask_private(site / "site-a-mask.key").public_key().public_bytes_raw()
    assert load_mask_public(site / "site-a-mask.pub") == pub


def test_certs_sign_makes_a_certificate_that_verifies_against_the_ca(tmp_path):
    from cryptography.x509.verification import PolicyBuilder, Store

    from ensemble_dask.federated.protocol.certs import sign_csr

    site, ca_dir = _site_and_ca(tmp_path)
    assert {p.name for p in ca_dir.iterdir()} == {"ca.pem", "ca-key.pem"}
    assert (ca_dir / "ca-key.pem").stat().st_mode & 0o777 == 0o600
    proc = _cli("certs", "sign", "--ca", ca_dir, site / "site-a.csr", "--out", tmp_path / "signed")
    assert proc.returncode == 0, proc.stderr
    assert "site-a.example.org" in proc.stdout  # the names the CA vouches for are shown to its operator
    cert = x509.load_pem_x509_certificate((tmp_path / "signed" / "site-a.pem").read_bytes())
    ca = x509.load_pem_x509_certificate((ca_dir / "ca.pem").read_bytes())
    store = Store([ca])
    for host in (
        x509.DNSName("site-a"),
        x509.DNSName("site-a.example.org"),
        x509.IPAddress(ipaddress.ip_address("10.0.0.5")),
    ):
        chain = PolicyBuilder().store(store).build_server_verifier(host).verify(cert, [])
        assert chain[-1] == ca
    assert PolicyBuilder().store(store).build_client_verifier().verify(cert, []).chain[-1] == ca
    with pytest.raises(x509.verification.VerificationError):
        PolicyBuilder().store(store).build_server_verifier(x509.DNSName("coordinator")).verify(cert, [])
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["site-a", "site-a.example.org"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["10.0.0.5", "::1"]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(eku) == {x509.ExtendedKeyUsageOID.SERVER_AUTH, x509.ExtendedKeyUsageOID.CLIENT_AUTH}
    # the certificate goes with the key that never left the site, in Python's TLS
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca_dir / "ca.pem"))
    ctx.load_cert_chain(str(tmp_path / "signed" / "site-a.pem"), str(site / "site-a-key.pem"))
    # without --out, next to the request; the Python API returns the path
    assert sign_csr(ca_dir, site / "site-a.csr") == site / "site-a.pem"


def test_what_the_site_and_the_ca_refuse_through_the_cli(tmp_path):
    site, ca_dir = _site_and_ca(tmp_path)
    key_before = (site / "site-a-key.pem").read_bytes()
    # a site's private key is never replaced
    _refused(_cli("site", "init", "site-a", "--out", site), site / "site-a-key.pem", "refusing to overwrite")
    assert (site / "site-a-key.pem").read_bytes() == key_before
    _refused(_cli("site", "init", "site-b", "--out", site, "--host", "https://b:443"), "'https://b:443'")
    # nor a CA
    ca_before = (ca_dir / "ca.pem").read_bytes()
    _refused(_cli("certs", "ca", "--out", ca_dir), ca_dir / "ca.pem", "refusing to replace a CA")
    assert (ca_dir / "ca.pem").read_bytes() == ca_before
    # signing needs the CA key
    _refused(_cli("certs", "sign", "--ca", site, site / "site-a.csr"), site / "ca-key.pem", "no CA key")
    # a request altered on the way (another name put in) is refused, and nothing is signed
    der = x509.load_pem_x509_csr((site / "site-a.csr").read_bytes()).public_bytes(serialization.Encoding.DER)
    forged = x509.load_der_x509_csr(der.replace(b"site-a", b"site-b"))
    assert forged.subject.rfc4514_string() == "CN=site-b" and not forged.is_signature_valid
    (tmp_path / "site-b.csr").write_bytes(forged.public_bytes(serialization.Encoding.PEM))
    _refused(_cli("certs", "sign", "--ca", ca_dir, tmp_path / "site-b.csr"), "site-b.csr", "does not verify")
    assert not (tmp_path / "site-b.pem").exists()
    _refused(_cli("certs", "sign", "--ca", ca_dir, tmp_path / "none.csr"), "none.csr")
    # a CA key its group may read is refused too
    (ca_dir / "ca-key.pem").chmod(0o640)
    _refused(_cli("certs", "sign", "--ca", ca_dir, site / "site-a.csr"), "chmod 600", ca_dir / "ca-key.pem")


def test_a_private_key_others_may_read_is_refused_on_load(tmp_path):
    make_certs(tmp_path, ["site-a"])
    mask = tmp_path / "site-a-mask.key"
    mask.chmod(0o640)
    with pytest.raises(InputError, match=f"masking key '{mask}'.*chmod 600 {mask}"):
        load_mask_private(mask)
    mask.chmod(0o600)
    load_mask_private(mask)
    # the TLS key, as the site's agent loads it
    from ensemble_dask.federated.protocol.certs import load_private_pem

    tls = tmp_path / "site-a-key.pem"
    tls.chmod(0o604)
    with pytest.raises(InputError, match=f"TLS key '{tls}'.*chmod 600 {tls}"):
        load_private_pem(tls, "TLS key")
    tls.chmod(0o600)
    assert (
        load_private_pem(tls, "TLS key").public_key()
        == x509.load_pem_x509_certificate((tmp_path / "site-a.pem").read_bytes()).public_key()
    )


def test_site_serve_runs_the_agent_with_its_config(monkeypatch):
    import types

    from ensemble_dask.cli import main

    called = []
    agent = types.ModuleType("ensemble_dask.federated.site.agent")
    agent.serve_main = lambda config: called.append(config) or 7
    monkeypatch.setitem(sys.modules, "ensemble_dask.federated.site.agent", agent)
    assert main(["site", "serve", "site-a.yaml"]) == 7
    assert called == ["site-a.yaml"]


def test_certs_refuse_a_new_ca_when_its_key_was_moved_offline(tmp_path):
    """Issue 29: adding a name without ca-key.pem made a new CA, and every certificate stopped verifying."""
    out, offline = tmp_path / "certs", tmp_path / "offline"
    assert _cli("certs", "--out", out, "--names", "coordinator,site-a").returncode == 0
    ca_before = (out / "ca.pem").read_bytes()
    offline.mkdir()
    (out / "ca-key.pem").rename(offline / "ca-key.pem")
    _refused(_cli("certs", "--out", out, "--names", "site-b"), "ca-key.pem", "certs sign")
    assert (out / "ca.pem").read_bytes() == ca_before
    assert not (out / "ca-key.pem").exists() and not (out / "site-b.pem").exists()
    # the key brought back: site-b is signed by the same CA
    (offline / "ca-key.pem").rename(out / "ca-key.pem")
    assert _cli("certs", "--out", out, "--names", "site-b").returncode == 0
    assert (out / "ca.pem").read_bytes() == ca_before
    ca = x509.load_pem_x509_certificate(ca_before)
    x509.load_pem_x509_certificate((out / "site-b.pem").read_bytes()).verify_directly_issued_by(ca)
    # nor is the CA key replaced when ca.pem is the one missing
    key_before = (out / "ca-key.pem").read_bytes()
    (out / "ca.pem").unlink()
    with pytest.raises(InputError, match="ca.pem"):
        make_certs(out, ["site-c"])
    assert (out / "ca-key.pem").read_bytes() == key_before


def test_an_out_folder_that_is_a_file_is_refused_naming_it(tmp_path):
    """Issue 29: `certs --out` a file ended in an OSError traceback (File exists)."""
    from ensemble_dask import InputError
    from ensemble_dask.federated.protocol.certs import init_site, make_ca, make_certs

    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    for make in (
        lambda: make_ca(afile),
        lambda: make_certs(afile, ["coordinator", "a"]),
        lambda: init_site(afile, "a"),
    ):
        with pytest.raises(InputError, match=r"--out '.*afile' is a file; give a folder"):
            make()
    assert afile.read_text() == "not a folder"


# every test here runs the command, a workflow or a process: the quick set (-m "not slow") leaves them out
pytestmark = pytest.mark.slow

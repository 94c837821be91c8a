"""A site's config: its policy and keys, in its own YAML file, read by the site alone.

Everything that decides what leaves the site is here, never in a message of the coordinator::

    name: site-a
    listen: 127.0.0.1:8443          # host:port (port 0: any free port, written to ready_file)
    coordinator: coordinator        # the certificate name (CN) of the only peer allowed to call
    tls: {ca: ca.pem, cert: site-a.pem, key: site-a-key.pem}
    mask_key: site-a-mask.key       # the site's X25519 key (0600; made here by `ensemble-dask site init`)
    federation:                     # every member, this site too, with its pinned public masking key
      site-a: site-a-mask.pub
      site-b: site-b-mask.pub       # a NAME-mask.pub path, or its base64 text
      site-c: site-c-mask.pub
    min_sites: 3                    # least sites in any sum (default: the whole federation)
    allow_plain: false              # statistics in clear on request: never, unless set here
    data: {labels: labels.zarr, reference: reference.zarr, storage_options: {}}
    output: memberships.zarr        # where this site writes its rows' memberships
    checkpoint: state/gamma         # E-step state for resuming (optional; of the last max_sessions runs)
    max_state_entries: 134217728    # rows x k a session may keep (its gamma and checkpoints; memberships)
    state: state                    # audit log and the sessions already joined
    audit_max_bytes: 67108864       # the audit log is renamed audit.log.1 at this size (two on disk at most)
    compute:                        # the site's own Dask cluster for its row blocks (federated.site_rows)
      processes: false              # false: threads of the agent (no port); true: worker processes over TLS
      n_workers: 1                  #   with credentials made in the agent; or scheduler: (+ tls:) the
                                    #   site's own
      block_rows: 65536

Relative paths are relative to the config file. :func:`load_config` refuses an unknown key, a missing TLS file
or key, the coordinator listed as a member, two members sharing one public key, a masking key that is not the
one pinned for the site, and a ``min_sites`` outside ``[2, members]``.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass, field
from pathlib import Path

from .._validation import InputError

__all__ = ["SiteConfig", "load_config"]

_CONFIG_KEYS = {
    "name", "listen", "coordinator", "tls", "mask_key", "federation", "min_sites", "allow_plain", "data",
    "output", "checkpoint", "state", "ready_file", "idle_timeout", "max_sessions", "storage_options",
    "compute", "max_body_bytes", "max_state_entries", "audit_max_bytes",
}  # fmt: skip


@dataclass
class SiteConfig:
    """A site's policy and keys, read from its own YAML (see the module docstring)."""

    name: str
    host: str
    port: int
    coordinator: str
    tls: dict
    mask_key: object = field(repr=False)  # X25519PrivateKey
    pins: dict = field(repr=False)
    min_sites: int
    allow_plain: bool
    labels: str
    reference: str | None
    storage_options: dict | None
    output: str | None
    checkpoint: str | None
    state: Path
    ready_file: Path | None = None
    idle_timeout: float = 900.0
    max_sessions: int = 4
    compute: dict = field(default_factory=dict)
    max_body_bytes: int = 256 << 20  # no message of the protocol comes near (the vectors are per cluster)
    #: rows x k of the state a BCE session keeps (gamma and the best start, 8 bytes an entry each, and their
    #: checkpoints): 2**27, 1 GiB a copy (5,000,000 rows at k = 26)
    max_state_entries: int = 1 << 27
    audit_max_bytes: int = 64 << 20

    @property
    def federation(self):
        return sorted(self.pins)


def _path(base, value, what):
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InputError(f"{what} must be a path or URL; got {value!r:.80}")
    if "://" in value:
        return value
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else (base / p))


class _Shown(reprlib.Repr):
    """reprlib's repr (strings cut before their repr, containers to their first entries, three levels deep)
    with bytes cut before theirs too."""

    def __init__(self, limit):
        super().__init__()
        self.maxstring = self.maxother = limit
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict, self.maxset = 3, 8, 8, 8, 8

    def repr_bytes(self, x, level):
        return repr(x[: self.maxstring]) + ("..." if len(x) > self.maxstring else "")


def shown(value, limit=80):
    """A repr of a value a caller chose, at most about ``limit`` characters, made without the whole repr of a
    large one (a 240 MB bytes value's repr is four times its size: cut after, it cost that much memory)."""
    text = _Shown(limit).repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _short(value, limit=80):
    """A value the caller chose, cut for a log line or a message (the caller decides its size, not us)."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"... ({len(value)} chars)"
    return shown(value, limit)


def _check_member(name, what):
    """A member's name as its certificate's (letters, digits, '-', '_', '.'): the names are fields of what
    the sites authenticate, and a '|' or ',' in one could read as two."""
    from .certs import _check_name

    _check_name(name if isinstance(name, str) else "", f"{what}: site names")


def load_config(path):
    """The :class:`SiteConfig` of a site's YAML; refuses a config that weakens the site (named)."""
    import yaml

    from .certs import load_mask_private, load_mask_public, load_private_pem

    path = Path(path)
    try:
        spec = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read the site config {str(path)!r}: {exc}") from exc
    if not isinstance(spec, dict):
        raise InputError(f"the site config {str(path)!r} must be a mapping")
    unknown = set(spec) - _CONFIG_KEYS
    if unknown:
        raise InputError(f"unknown key(s) {sorted(unknown)} in {str(path)!r}; known: {sorted(_CONFIG_KEYS)}")
    base = path.resolve().parent
    where = f"in {str(path)!r}"
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"'name' {where} must be the site's name")
    _check_member(name, f"'name' {where}")
    host, _, port = str(spec.get("listen", "127.0.0.1:0")).rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"'listen' {where} must be host:port; got {spec.get('listen')!r}")
    coordinator = str(spec.get("coordinator", "coordinator"))
    tls = spec.get("tls") or {}
    if not isinstance(tls, dict) or set(tls) != {"ca", "cert", "key"}:
        raise InputError(f"'tls' {where} must give ca, cert and key (the site's own TLS files)")
    tls = {k: _path(base, v, f"tls.{k} {where}") for k, v in tls.items()}
    load_private_pem(tls["key"], "TLS key")
    fed = spec.get("federation")
    if not isinstance(fed, dict) or name not in fed:
        raise InputError(f"'federation' {where} must map every member, {name!r} included, to its public key")
    if coordinator in fed:
        raise InputError(
            f"the coordinator {coordinator!r} is listed as a member of the federation {where}: it would hold "
            "a pair key of every site"
        )
    pins = {}
    for member, key in fed.items():
        _check_member(member, f"the member {member!r} of 'federation' {where}")
        value = (
            _path(base, key, f"the key of {member!r}") if key and not str(key).strip().endswith("=") else key
        )
        pins[str(member)] = load_mask_public(value)
    if len(set(pins.values())) != len(pins):
        raise InputError(f"two members of the federation {where} share one public key")
    mask_path = _path(base, spec.get("mask_key"), f"mask_key {where}")
    if mask_path is None:
        raise InputError(f"'mask_key' {where} must be the site's X25519 key (ensemble-dask site init)")
    mask_key = load_mask_private(mask_path)
    if mask_key.public_key().public_bytes_raw() != pins[name]:
        raise InputError(f"the masking key {mask_path!r} is not the key pinned for {name!r} {where}")
    allow_plain = spec.get("allow_plain", False)
    if not isinstance(allow_plain, bool):
        raise InputError(f"'allow_plain' {where} must be true or false; got {allow_plain!r}")
    n = len(pins)
    min_sites = spec.get("min_sites", n)
    if not isinstance(min_sites, int) or isinstance(min_sites, bool) or not 2 <= min_sites <= n:
        raise InputError(
            f"'min_sites' {where} must be an integer in [2, {n}] (the federation has {n} members); "
            f"got {min_sites!r}" + (" (a federation of one site hides nothing)" if n < 2 else "")
        )
    data = spec.get("data") or {}
    if not isinstance(data, dict) or not data.get("labels"):
        raise InputError(f"'data.labels' {where} must be the site's labels (a zarr array or .npy)")
    state = Path(_path(base, spec.get("state", f"{name}-state"), f"state {where}"))
    compute = spec.get("compute") or {}
    known = {"scheduler", "tls", "n_workers", "threads_per_worker", "processes", "block_rows"}
    if not isinstance(compute, dict) or set(compute) - known:
        raise InputError(f"'compute' {where} takes {sorted(known)}; got {compute!r}")
    if compute.get("tls"):
        compute["tls"] = {k: _path(base, v, f"compute.tls.{k} {where}") for k, v in compute["tls"].items()}
    return SiteConfig(
        name=name,
        host=host,
        port=int(port),
        coordinator=coordinator,
        tls=tls,
        mask_key=mask_key,
        pins=pins,
        min_sites=int(min_sites),
        allow_plain=allow_plain,
        labels=_path(base, data["labels"], f"data.labels {where}"),
        reference=_path(base, data.get("reference"), f"data.reference {where}"),
        storage_options=data.get("storage_options") or None,
        output=_path(base, spec.get("output"), f"output {where}"),
        checkpoint=_path(base, spec.get("checkpoint"), f"checkpoint {where}"),
        state=state,
        ready_file=Path(_path(base, spec["ready_file"], "ready_file")) if spec.get("ready_file") else None,
        idle_timeout=float(spec.get("idle_timeout", 900.0)),
        max_sessions=int(spec.get("max_sessions", 4)),
        compute=compute,
        max_body_bytes=_positive(spec, "max_body_bytes", 256 << 20, where),
        max_state_entries=_positive(spec, "max_state_entries", 1 << 27, where),
        audit_max_bytes=_positive(spec, "audit_max_bytes", 64 << 20, where),
    )


def _positive(spec, key, default, where):
    value = spec.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InputError(f"{key!r} {where} must be a positive integer; got {value!r}")
    return value

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
    compute:                        # the site's own Dask cluster for its row blocks (federated.site.rows)
      processes: false              # false: threads of the agent (no port); true: worker processes over TLS
      n_workers: 1                  #   with credentials made in the agent; or scheduler: (+ tls:) the
                                    #   site's own
      block_rows: 65536
    idle_timeout: 900               # seconds a session may stay unused before the site drops it
    write_timeout: 60               # seconds the caller has to read an answer; then its connection is closed
    limits:                         # the work one request may ask for (a request above is refused, audited)
      max_k: 128                    #   clusters of a BCE or KCC fit
      max_categories: 1048576       #   labels of all clusterings together
      e_step_max_iter: 200          #   sweeps of one E-step (the coordinator's default: 100)
      e_step_min_tol: 0.0           #   the smallest E-step tolerance (the coordinator's default: 1e-4; 0:
                                    #   any, the sweeps bound the work)

Relative paths are relative to the config file. :func:`load_config` reads it against one schema and
refuses, naming the key: an unknown key, a value of the wrong type, a key given twice (a member of the
federation listed twice with two keys), a file that does not exist, the coordinator listed as a member, two
members sharing one public key, a masking key that is not the one pinned for the site, and a ``min_sites``
outside ``[2, members]``.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..._validation import InputError

__all__ = ["Limits", "SiteConfig", "load_config"]

_CONFIG_KEYS = {
    "name", "listen", "coordinator", "tls", "mask_key", "federation", "min_sites", "allow_plain", "data",
    "output", "checkpoint", "state", "ready_file", "idle_timeout", "write_timeout", "max_sessions",
    "storage_options", "compute", "max_body_bytes", "max_state_entries", "audit_max_bytes", "limits",
}  # fmt: skip
_DATA_KEYS = {"labels", "reference", "storage_options"}
_COMPUTE_KEYS = {"scheduler", "tls", "n_workers", "threads_per_worker", "processes", "block_rows"}


@dataclass(frozen=True)
class Limits:
    """The work one request may ask of the site (its config's ``limits``): above any of them it is refused.

    An E-step's work is its sweeps times the site's distinct rows times ``k`` times the clusterings; a KCC
    step is one Lloyd assignment (rows times ``k`` times the clusterings) per request, whatever the
    coordinator asks."""

    max_k: int = 128
    max_categories: int = 1 << 20
    e_step_max_iter: int = 200
    e_step_min_tol: float = 0.0


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
    write_timeout: float = 60.0
    max_sessions: int = 4
    limits: Limits = field(default_factory=Limits)
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
    large one (a bytes value's repr is up to four times its size)."""
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
    from ..protocol.certs import _check_name

    _check_name(name if isinstance(name, str) else "", f"{what}: site names")


def _yaml(path):
    """The YAML at ``path``, a key given twice in one mapping refused (PyYAML keeps the last silently: a
    roster listing a member twice with two keys pinned the second)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                line = key_node.start_mark.line + 1
                raise InputError(f"the key {key!r} is given twice in {str(path)!r} (line {line})")
            seen.add(key)
        return loader.construct_mapping(node, deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        return yaml.load(path.read_text(), Loader=Loader)  # noqa: S506 - a SafeLoader
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read the site config {str(path)!r}: {exc}") from exc


def _mapping(value, key, known, where, required=()):
    value = {} if value is None else value
    if not isinstance(value, dict):
        raise InputError(f"{key!r} {where} must be a mapping of {sorted(known)}; got {shown(value)}")
    unknown, missing = set(value) - set(known), set(required) - set(value)
    if unknown or missing:
        raise InputError(
            f"{key!r} {where} takes {sorted(known)}"
            + (f"; unknown: {sorted(map(str, unknown))}" if unknown else "")
            + (f"; missing: {sorted(missing)}" if missing else "")
        )
    return value


def _file(base, value, what):
    """A path of the config that must name an existing file (a URL is taken as it is)."""
    path = _path(base, value, what)
    if path is None:
        raise InputError(f"{what} must be a file")
    if "://" not in path and not Path(path).is_file():
        raise InputError(f"{what}: no such file {path!r}")
    return path


def _number(spec, key, default, where, *, kind=int, lo=1):
    value = spec.get(key, default)
    ok = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
    if not ok or not np.isfinite(value) or value < lo:
        what = (
            "a positive integer"
            if (kind, lo) == (int, 1)
            else f"{'an integer' if kind is int else 'a number'} of at least {lo}"
        )
        raise InputError(f"{key!r} {where} must be {what}; got {shown(value)}")
    return kind(value)


def _limits(value, where):
    spec = _mapping(value, "limits", Limits.__dataclass_fields__, where)
    d = Limits()
    where = f"of 'limits' {where}"
    return Limits(
        max_k=_number(spec, "max_k", d.max_k, where),
        max_categories=_number(spec, "max_categories", d.max_categories, where),
        e_step_max_iter=_number(spec, "e_step_max_iter", d.e_step_max_iter, where),
        e_step_min_tol=_number(spec, "e_step_min_tol", d.e_step_min_tol, where, kind=float, lo=0),
    )


def _compute(value, base, where):
    compute = dict(_mapping(value, "compute", _COMPUTE_KEYS, where))
    where = f"of 'compute' {where}"
    for key in ("n_workers", "threads_per_worker", "block_rows"):
        if key in compute:
            compute[key] = _number(compute, key, None, where)
    if not isinstance(compute.get("processes", False), bool):
        raise InputError(f"'processes' {where} must be true or false; got {shown(compute['processes'])}")
    if "scheduler" in compute and not isinstance(compute["scheduler"], str):
        raise InputError(f"'scheduler' {where} must be an address; got {shown(compute['scheduler'])}")
    if compute.get("tls"):
        tls = _mapping(compute["tls"], "tls", {"ca", "cert", "key"}, where)
        compute["tls"] = {k: _file(base, v, f"compute.tls.{k} {where}") for k, v in tls.items()}
    return compute


def load_config(path):
    """The :class:`SiteConfig` of a site's YAML; refuses a config that weakens the site or that does not
    read (named: the key, and the file where one is missing)."""
    from ..protocol.certs import load_mask_private, load_mask_public, load_private_pem

    path = Path(path)
    spec = _yaml(path)
    where = f"in {str(path)!r}"
    spec = _mapping(spec, "the site config", _CONFIG_KEYS, where)
    base = path.resolve().parent
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"'name' {where} must be the site's name")
    _check_member(name, f"'name' {where}")
    host, _, port = str(spec.get("listen", "127.0.0.1:0")).rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise InputError(f"'listen' {where} must be host:port; got {shown(spec.get('listen'))}")
    coordinator = spec.get("coordinator", "coordinator")
    if not isinstance(coordinator, str) or not coordinator:
        raise InputError(f"'coordinator' {where} must be its certificate's name; got {shown(coordinator)}")
    tls = _mapping(spec.get("tls"), "tls", {"ca", "cert", "key"}, where, required={"ca", "cert", "key"})
    tls = {k: _file(base, v, f"tls.{k} {where}") for k, v in tls.items()}
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
        if not isinstance(key, str) or not key:
            raise InputError(f"the key of {member!r} in 'federation' {where} must be a path or base64 text")
        what = f"the key of {member!r} in 'federation' {where}"
        value = key if key.strip().endswith("=") else _file(base, key, what)
        pins[str(member)] = load_mask_public(value)
    if len(set(pins.values())) != len(pins):
        raise InputError(f"two members of the federation {where} share one public key")
    if spec.get("mask_key") is None:
        raise InputError(f"'mask_key' {where} must be the site's X25519 key (ensemble-dask site init)")
    mask_path = _file(base, spec.get("mask_key"), f"mask_key {where}")
    mask_key = load_mask_private(mask_path)
    if mask_key.public_key().public_bytes_raw() != pins[name]:
        raise InputError(f"the masking key {mask_path!r} is not the key pinned for {name!r} {where}")
    allow_plain = spec.get("allow_plain", False)
    if not isinstance(allow_plain, bool):
        raise InputError(f"'allow_plain' {where} must be true or false; got {shown(allow_plain)}")
    n = len(pins)
    min_sites = spec.get("min_sites", n)
    if not isinstance(min_sites, int) or isinstance(min_sites, bool) or not 2 <= min_sites <= n:
        raise InputError(
            f"'min_sites' {where} must be an integer in [2, {n}] (the federation has {n} members); "
            f"got {shown(min_sites)}" + (" (a federation of one site hides nothing)" if n < 2 else "")
        )
    data = _mapping(spec.get("data"), "data", _DATA_KEYS, where)
    if not data.get("labels"):
        raise InputError(f"'data.labels' {where} must be the site's labels (a zarr array or .npy)")
    storage_options = data.get("storage_options") or None
    if storage_options is not None and not isinstance(storage_options, dict):
        raise InputError(f"'data.storage_options' {where} must be a mapping; got {shown(storage_options)}")
    state = Path(_path(base, spec.get("state", f"{name}-state"), f"state {where}"))
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
        storage_options=storage_options,
        output=_path(base, spec.get("output"), f"output {where}"),
        checkpoint=_path(base, spec.get("checkpoint"), f"checkpoint {where}"),
        state=state,
        ready_file=Path(_path(base, spec["ready_file"], "ready_file")) if spec.get("ready_file") else None,
        idle_timeout=_number(spec, "idle_timeout", 900.0, where, kind=float),
        write_timeout=_number(spec, "write_timeout", 60.0, where, kind=float),
        max_sessions=_number(spec, "max_sessions", 4, where),
        compute=_compute(spec.get("compute"), base, where),
        max_body_bytes=_number(spec, "max_body_bytes", 256 << 20, where),
        max_state_entries=_number(spec, "max_state_entries", 1 << 27, where),
        audit_max_bytes=_number(spec, "audit_max_bytes", 64 << 20, where),
        limits=_limits(spec.get("limits"), where),
    )

"""deploy/: the local recipe run as real processes, the Compose and Kubernetes files validated.

The local demo (deploy/local/demo.sh) starts moto's S3 server, a TLS scheduler and a worker on
127.0.0.1 for the KDD workflow, then the federation the way real sites run it: a CA, each site's keys
made in its own directory (`ensemble-dask site init`, signed with `certs sign`), its share of the run's
labels (`split-sites`), its site.yaml and one `ensemble-dask site serve` process per site; then the
coordinator (`ensemble-dask federated`), which knows only the sites' names and addresses. The tests
check both runs' accuracy, what each party's directory holds, and that no process or port is left.

The Compose file is checked against the compose-spec JSON schema (shipped by check-jsonschema), the
Kubernetes core objects with kubernetes-validate and the Dask operator's objects against the CRD
schemas shipped by dask-kubernetes (all three in the `test` extra; a test whose validator is missing
skips and says so). Each Compose and Kubernetes site.yaml is loaded by the agent's own config loader on
the files as they would be mounted there; make-secrets.sh runs against a stand-in kubectl.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
COMPOSE = DEPLOY / "compose"
K8S = DEPLOY / "kubernetes"
BIN = Path(sys.executable).parent
SITES = ["site-a", "site-b", "site-c"]
COORDINATOR_NS = "ensemble-dask"


def _env(**extra):
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(REPO)}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's group: not ours
        return False
    return True


def _processes_mentioning(text):
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = str((proc / "cwd").resolve())
        except OSError:
            continue
        if text in cmd or cwd.startswith(text):
            found.append((int(proc.name), cmd))
    return found


def _port_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not a listener
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _assert_nothing_left(state_dir, text_with_ports=""):
    """No process group that ``state_dir/started`` lists is alive, no pid file is left, no process runs
    in or names ``state_dir``, and every 127.0.0.1 port in ``text_with_ports`` is free."""
    started = [line.split() for line in (state_dir / "started").read_text().splitlines()]
    assert started
    alive = [(name, pid) for name, pid in started if _group_alive(int(pid))]
    assert not alive, f"process groups still alive after stop: {alive}"
    assert not _processes_mentioning(str(state_dir)), "a process of the run directory survived"
    assert not list((state_dir / "pids").glob("*.pid"))
    ports = sorted(
        {int(p) for p in re.findall(r"(?:tls|tcp|http|https)://127\.0\.0\.1:(\d+)", text_with_ports)}
    )
    for port in ports:
        assert _port_free(port), f"port {port} still in use"
    return {name for name, _ in started}, ports


def _mode(path):
    return stat.S_IMODE(path.stat().st_mode)


# --------------------------------------------------------------------------- the parties' files


def _party_files(root, sites=SITES):
    """The key layout of deploy/make-federation.sh, made in-process with the package's functions (what
    `site init`, `certs ca` and `certs sign` do); the slow test checks the script makes the same files."""
    from ensemble_dask.federated.protocol.certs import init_site, make_ca, sign_csr

    make_ca(root / "ca")
    for party in ["coordinator", *sites]:
        keys = root / ("coordinator" if party == "coordinator" else f"sites/{party}") / "keys"
        init_site(keys, party, hosts=["127.0.0.1"])
        sign_csr(root / "ca", keys / f"{party}.csr")
        shutil.copy(root / "ca" / "ca.pem", keys / "ca.pem")
    for suffix in ("key", "pub"):
        (root / "coordinator" / "keys" / f"coordinator-mask.{suffix}").unlink()
    for site in sites:
        for peer in set(sites) - {site}:
            shutil.copy(root / f"sites/{peer}/keys/{peer}-mask.pub", root / f"sites/{site}/keys")
    return root


def _keys_layout(root):
    files = (p.relative_to(root) for p in root.rglob("*") if p.is_file())
    return sorted(str(p) for p in files if "keys" in p.parts)


def _rewrite(text, mounts):
    """``text`` with every absolute path under one of ``mounts`` (container path -> host path) moved
    to the host: the files as a container would see them."""
    pattern = "|".join(re.escape(m.rstrip("/")) for m in sorted(mounts, key=len, reverse=True))
    return re.sub(
        rf"(?<![\w./-])({pattern})(?=/|\s|$|[,}}\]])",
        lambda m: str(mounts[m.group(1)]),
        text,
    )


# --------------------------------------------------------------------------- local: real processes


@pytest.fixture(scope="module", autouse=True)
def _local_demo_started(request, tmp_path_factory):
    """deploy/local/demo.sh started when this module starts, if a test of it that is to run takes
    :func:`local_demo`: the demo spends most of its minute waiting on the processes it starts and stops, and
    the module's other tests run meanwhile (the tests that read the demo come last in the module)."""
    if not any(
        item.module is request.module and "local_demo" in item.fixturenames for item in request.session.items
    ):
        yield None
        return
    root = tmp_path_factory.mktemp("demo")
    run_dir, cwd = root / "run", root / "cwd"
    cwd.mkdir()
    with (root / "stdout").open("w") as out, (root / "stderr").open("w") as err:  # files: read at its end
        proc = subprocess.Popen(
            [str(DEPLOY / "local" / "demo.sh")],
            cwd=cwd,
            env=_env(
                RUN_DIR=run_dir,
                N=1000,
                N_CLUSTERINGS=6,
                N_WORKERS=1,
                # a looser EM tolerance keeps the federated part short; the accuracy below still holds
                FEDERATED_ARGS="--set federated.tol=0.01",
            ),
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    try:
        yield SimpleNamespace(proc=proc, root=root, run_dir=run_dir, cwd=cwd)
    finally:
        if proc.poll() is None:  # not waited for (a test failed first): the demo stops what it started
            proc.terminate()
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture(scope="module")
def local_demo(_local_demo_started):
    """deploy/local/demo.sh once (synthetic data, n=1000): S3, a TLS scheduler and one worker, the KDD
    workflow, then the federation (three site agents) and the coordinator; waited for here."""
    started = _local_demo_started
    started.proc.wait(timeout=900)
    out, err = (started.root / "stdout").read_text(), (started.root / "stderr").read_text()
    r = subprocess.CompletedProcess(started.proc.args, started.proc.returncode, out, err)
    return SimpleNamespace(
        r=r,
        out=r.stdout + r.stderr,
        run_dir=started.run_dir,
        fed=started.run_dir / "federation",
        cwd=started.cwd,
    )


@pytest.mark.slow
def test_failed_start_stops_what_started(tmp_path):
    # a CA the scheduler cannot read: S3 starts, then the scheduler cannot
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "ca.pem").write_text("not a certificate\n")
    run_dir = tmp_path / "run"
    r = subprocess.run(
        [str(DEPLOY / "local" / "cluster.sh"), "start"],
        env=_env(RUN_DIR=run_dir, CERT_DIR=certs, N_WORKERS=1, TIMEOUT=60),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode != 0
    assert "start failed" in r.stderr
    names, _ = _assert_nothing_left(run_dir)
    assert {"s3", "scheduler"} <= names
    # stop on a stopped run directory is harmless
    r = subprocess.run(
        [str(DEPLOY / "local" / "cluster.sh"), "stop"],
        env=_env(RUN_DIR=run_dir),
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 0


@pytest.mark.slow
def test_tls_scheduler_without_client_credentials_is_a_clear_error(tmp_path):
    from ensemble_dask import InputError
    from ensemble_dask.runtime.clients import dask_client

    run_dir = tmp_path / "run"
    env = _env(RUN_DIR=run_dir, S3=0, N_WORKERS=0)
    script = str(DEPLOY / "local" / "cluster.sh")
    r = subprocess.run([script, "start"], env=env, capture_output=True, text=True, timeout=300)
    try:
        assert r.returncode == 0, r.stderr
        address = re.search(r"SCHEDULER=(\S+)", (run_dir / "env.sh").read_text()).group(1)
        assert address.startswith("tls://127.0.0.1:")
        with pytest.raises(InputError, match="DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT"):
            with dask_client(address):
                pass
    finally:
        subprocess.run([script, "stop"], env=env, capture_output=True, timeout=120)
    _assert_nothing_left(run_dir, (run_dir / "env.sh").read_text())


# --------------------------------------------------------------------------- what recipes call


def _help(*cmd):
    r = subprocess.run(list(cmd) + ["--help"], env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _subcommands(help_text, *, argparse_style):
    if argparse_style:
        return set(re.search(r"\{([a-z,-]+)\}", help_text).group(1).split(","))
    return set(re.findall(r"^  ([a-z-]+)\s", help_text.split("Commands:")[1], re.M))


def _recipe_files():
    return [p for p in DEPLOY.rglob("*") if p.is_file() and p.suffix in {".sh", ".yaml", ""}]


def _command_lists(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("command", "args") and isinstance(value, list):
                yield [str(v) for v in value]
            else:
                yield from _command_lists(value)
    elif isinstance(node, list):
        for item in node:
            yield from _command_lists(item)


def _called_commands():
    """Every `ensemble-dask SUB [SUBSUB]` and `dask SUB` the recipes run, in scripts, comments and
    YAML argument lists."""
    called = []
    for path in _recipe_files():
        text = path.read_text()
        for line in text.splitlines():
            for segment in re.split(r"&&|\|\||;|\||\$\(|\(|`", line.strip().lstrip("#").strip()):
                called.append(segment.split())
        for doc in yaml.safe_load_all(text) if path.suffix == ".yaml" else ():
            called.extend(_command_lists(doc))
    return [w for w in called if len(w) > 1 and w[0] in ("ensemble-dask", "dask")]


def test_every_subcommand_a_recipe_calls_exists():
    word = re.compile(r"[a-z][a-z-]*")
    ours = _subcommands(_help(sys.executable, "-m", "ensemble_dask.cli"), argparse_style=True)
    dask = _subcommands(_help(str(BIN / "dask")), argparse_style=False)
    nested = {
        sub: _subcommands(_help(sys.executable, "-m", "ensemble_dask.cli", sub), argparse_style=True)
        for sub in ("site", "certs")
    }
    called = {"ensemble-dask": set(), "dask": set(), "site": set(), "certs": set()}
    for words in _called_commands():
        if word.fullmatch(words[1]):
            called[words[0]].add(words[1])
            if (
                words[0] == "ensemble-dask"
                and words[1] in nested
                and len(words) > 2
                and word.fullmatch(words[2])
            ):
                called[words[1]].add(words[2])
    assert called["ensemble-dask"] >= {
        "run",
        "federated",
        "split-sites",
        "certs",
        "site",
        "ingest",
        "generate",
    }
    assert called["ensemble-dask"] <= ours, called["ensemble-dask"] - ours
    assert called["site"] == {"init", "serve"} and called["site"] <= nested["site"]
    assert called["certs"] == {"ca", "sign"} and called["certs"] <= nested["certs"]
    assert {"scheduler", "worker"} == called["dask"] and called["dask"] <= dask


def test_no_recipe_makes_a_site_a_dask_worker():
    """The federation's sites run their own agents: nothing joins a site to anyone's Dask cluster."""
    text = "\n".join(p.read_text() for p in _recipe_files())
    # (ensemble_dask.federated.site was the module of a site as a Dask worker; now the agent's package)
    assert not re.search(r"ensemble_dask\.federated\.site(?![.\w])", text)
    for old in ("--resources", "--mask-key", "--pins", "DaskWorkerGroup"):
        assert old not in text, old
    assert "TLS=0" not in (DEPLOY / "README.md").read_text()  # no plain-TCP mode of the federation
    assert "insecure" not in (DEPLOY / "README.md").read_text()


def _env_names():
    names = set()
    for path in _recipe_files():
        names |= set(re.findall(r"\bDASK_[A-Z0-9_]*[A-Z0-9]\b(?!_)", path.read_text()))
    names.discard("DASK_WORKER_NAME")  # set by the Dask operator in its worker pods
    return names


def test_dask_environment_names_are_dask_config_keys():
    import dask
    import distributed  # noqa: F401  (loads distributed's defaults into dask.config)

    names = _env_names()
    assert "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT" in names
    for name in names:
        key = ".".join(part.lower().replace("_", "-") for part in name[len("DASK_") :].split("__"))
        dask.config.get(key)  # raises KeyError for a name distributed would silently ignore


def test_versions_pinned_for_the_images_satisfy_the_package():
    import tomllib

    from packaging.requirements import Requirement

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = {Requirement(r).name.lower(): Requirement(r) for r in pyproject["project"]["dependencies"]}
    wanted.update(
        {
            Requirement(r).name.lower(): Requirement(r)
            for r in pyproject["project"]["optional-dependencies"]["s3"]
        }
    )
    pins = {}
    for line in (DEPLOY / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.lower()] = version
    assert {"dask", "distributed", "tornado", "msgpack", "cryptography"} <= set(pins)
    assert pins["dask"] == pins["distributed"]  # released together
    for name, version in pins.items():
        assert name in wanted, f"{name} is pinned but not a requirement"
        assert wanted[name].specifier.contains(version), f"{name}=={version} vs {wanted[name]}"


def test_helpers_write_the_coordinators_workflow(tmp_path):
    from ensemble_dask import pipeline
    from ensemble_dask.stages.federated import _check_sites_section

    out = tmp_path / "federated.yaml"
    r = subprocess.run(
        [sys.executable, str(DEPLOY / "_helpers.py"), "federated-workflow",
         str(REPO / "workflows" / "federated-bce.yaml"), str(out), "/keys", "/runs/fed.zarr",
         "site-a=https://127.0.0.1:4001", "site-b=https://127.0.0.1:4002"],
        env=_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    spec = pipeline.load_workflow(str(out))
    pipeline.check_workflow(spec)
    fed = spec["federated"]
    assert fed["demo"] is False and fed["certs"] == "/keys" and spec["store"] == "/runs/fed.zarr"
    assert fed["sites"] == [
        {"name": "site-a", "address": "https://127.0.0.1:4001"},
        {"name": "site-b", "address": "https://127.0.0.1:4002"},
    ]
    assert _check_sites_section(fed["sites"], False) == fed["sites"]


# --------------------------------------------------------------------------- Compose


def _dockerfile():
    return (COMPOSE / "Dockerfile").read_text()


def test_dockerfile_pinned_non_root_wheels_only():
    text = _dockerfile()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)", text, re.M).group(1)
    assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", base), base
    assert all(f.split()[1].startswith("${PYTHON_IMAGE}") for f in re.findall(r"^FROM .*", text, re.M))
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0")
    installs = [c for c in re.split(r"(?<!\\)\n", text) if "pip install" in c]
    assert installs and all("--only-binary=:all:" in c and "constraints.txt" in c for c in installs)
    for src in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for path in src.split():
            assert (REPO / path).exists(), path
    assert "deploy/make-federation.sh" in text  # the Compose `federation` setup service runs it


def _compose():
    return yaml.safe_load((COMPOSE / "compose.yaml").read_text())


def test_compose_file_matches_the_compose_spec():
    try:
        from importlib.resources import files

        schema = json.loads(
            files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text()
        )
    except ModuleNotFoundError:
        pytest.skip(
            "check-jsonschema (test extra) ships the compose-spec schema; pip install check-jsonschema"
        )
    import jsonschema

    validator = jsonschema.validators.validator_for(schema)(schema)
    doc = _compose()
    assert [e.message for e in validator.iter_errors(doc)] == []
    bad = copy.deepcopy(doc)
    bad["services"]["site-a"]["healthchek"] = bad["services"]["site-a"].pop("healthcheck")
    assert list(validator.iter_errors(bad))  # the schema does catch a misspelt key


def _secret_file(doc, name):
    return Path(doc["secrets"][name]["file"])


def test_compose_sites_are_agents_on_networks_of_their_own():
    doc = _compose()
    services = doc["services"]
    dask_services = {n: s for n, s in services.items() if n != "minio"}
    assert {s["image"] for s in dask_services.values()} == {"ensemble-dask:0.1.0"}  # one image
    assert all(s["build"]["dockerfile"] == "deploy/compose/Dockerfile" for s in dask_services.values())
    for name in ["scheduler", "worker", *SITES, "minio"]:
        assert "test" in services[name]["healthcheck"], name
    for site in SITES:
        svc = services[site]
        (config,) = svc["configs"]
        assert svc["command"] == ["ensemble-dask", "site", "serve", config["target"]]
        assert svc["networks"] == [site] and doc["networks"][site] == {"internal": True}
        assert {n for n, s in services.items() if site in s.get("networks", [])} == {site, "coordinator"}
        assert "ports" not in svc and "environment" not in svc
        # its own files only: keys and pins from its own directory, data read-only, its own volume
        files = {_secret_file(doc, s["source"]) for s in svc["secrets"]}
        assert all(f.parent == Path(f"federation/sites/{site}/keys") for f in files), files
        assert {f"{site}-key.pem", f"{site}-mask.key"} <= {f.name for f in files}
        assert svc["volumes"] == [f"./federation/sites/{site}/data:/site/data:ro", f"{site}-work:/site/work"]
        assert f"{site}-work" in doc["volumes"]
    submit = services["submit"]
    assert submit["restart"] == "no" and submit["environment"]["SCHEDULER"] == "tls://scheduler:8786"
    assert all(v["condition"] == "service_healthy" for v in submit["depends_on"].values())
    assert int(submit["environment"]["MIN_WORKERS"]) == services["worker"]["deploy"]["replicas"]
    setup = services["federation"]
    assert setup["profiles"] == ["setup"] and setup["environment"]["SITES"] == ",".join(SITES)
    assert setup["command"][1] == "/opt/ensemble-dask/deploy/make-federation.sh"
    assert setup["volumes"] == ["./federation:/federation"] and setup["user"] == "1000:1000"


def test_compose_coordinator_knows_only_names_and_addresses():
    from ensemble_dask import pipeline
    from ensemble_dask.stages.federated import FEDERATED_KEYS, _check_sites_section

    doc = _compose()
    coord = doc["services"]["coordinator"]
    assert coord["command"][:2] == ["ensemble-dask", "federated"] and coord["restart"] == "no"
    assert set(coord["networks"]) == set(SITES)
    assert coord["depends_on"] == {s: {"condition": "service_healthy"} for s in SITES}
    files = {_secret_file(doc, s["source"]) for s in coord["secrets"]}
    assert {f.parent for f in files} == {Path("federation/coordinator/keys")}
    (config,) = coord["configs"]
    assert coord["command"][2] == config["target"]
    spec = pipeline.load_workflow(str(COMPOSE / doc["configs"][config["source"]]["file"]))
    pipeline.check_workflow(spec)
    fed = spec["federated"]
    assert set(fed) <= FEDERATED_KEYS and not fed.get("demo")
    assert _check_sites_section(fed["sites"], False) == [
        {"name": s, "address": f"https://{s}:8443"} for s in SITES
    ]
    assert fed["certs"] == "/run/secrets"
    assert {s["target"] for s in coord["secrets"]} == {"ca.pem", "coordinator.pem", "coordinator-key.pem"}
    volume, mount = coord["volumes"][0].split(":")
    assert spec["store"].startswith(mount + "/") and volume in doc["volumes"]


def test_compose_site_configs_load_with_their_mounted_secrets(tmp_path):
    """Each site's config, read by the agent's own loader over the files Compose would mount: the
    secrets (as they are on disk: mode 0600) in /run/secrets, the config itself, /site."""
    from ensemble_dask.federated.site.config import _CONFIG_KEYS, load_config

    doc = _compose()
    _party_files(tmp_path / "federation")
    for site in SITES:
        svc = doc["services"][site]
        root = tmp_path / "containers" / site
        (root / "secrets").mkdir(parents=True)
        for s in svc["secrets"]:
            shutil.copy2(tmp_path / _secret_file(doc, s["source"]), root / "secrets" / s["target"])
        (config,) = svc["configs"]
        text = (COMPOSE / doc["configs"][config["source"]]["file"]).read_text()
        assert set(yaml.safe_load(text)) <= _CONFIG_KEYS
        text = _rewrite(text, {"/run/secrets": root / "secrets", "/site": root / "site"})
        assert "/run/secrets" not in text
        (root / "site").mkdir()
        (root / "site" / "site.yaml").write_text(text)
        cfg = load_config(root / "site" / "site.yaml")
        assert cfg.name == site and cfg.federation == SITES and cfg.coordinator == "coordinator"
        assert (cfg.host, cfg.port) == ("0.0.0.0", 8443) and cfg.min_sites == len(SITES)
        assert not cfg.allow_plain and cfg.labels.startswith(str(root / "site" / "data"))
        assert cfg.state == root / "site" / "work" / "state"
    # a key its group could read is refused, as the agent refuses it
    (root / "secrets" / "mask.key").chmod(0o640)
    from ensemble_dask import InputError

    with pytest.raises(InputError, match="chmod 600"):
        load_config(root / "site" / "site.yaml")


# --------------------------------------------------------------------------- Kubernetes


def _k8s_docs():
    docs = []
    for path in sorted(K8S.rglob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [(str(path.relative_to(K8S)), d) for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _crd_schemas():
    spec = importlib.util.find_spec("dask_kubernetes")
    if spec is None:
        pytest.skip("dask-kubernetes (test extra) ships the operator's CRDs: pip install -e .[test]")
    root = Path(spec.submodule_search_locations[0]) / "operator" / "deployment" / "helm"
    schemas = {}
    for path in root.rglob("crds/*.yaml"):
        crd = yaml.load(path.read_text(), Loader=_LOADER)
        for version in crd["spec"]["versions"]:
            schema = _strict(version["schema"]["openAPIV3Schema"])
            schema["properties"].update(
                apiVersion={"type": "string"}, kind={"type": "string"}, metadata={"type": "object"}
            )
            schemas[(f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])] = schema
    assert schemas, f"no CRDs under {root}"
    return schemas


def _strict(schema):
    """Like the API server's strict field validation: no unknown field where the schema lists them."""
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def test_kubernetes_operator_objects_match_the_crds():
    import jsonschema

    schemas = _crd_schemas()
    kinds = []
    for name, doc in _k8s_docs():
        key = (doc["apiVersion"], doc["kind"])
        if key[0].startswith("kubernetes.dask.org/"):
            validator = jsonschema.Draft7Validator(schemas[key])
            assert [e.message for e in validator.iter_errors(doc)] == [], (name, doc["metadata"]["name"])
            kinds.append(doc["kind"])
            if "worker" in doc["spec"]:
                bad = copy.deepcopy(doc)
                bad["spec"]["worker"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
                assert list(validator.iter_errors(bad))  # a misspelt field is caught
    # the coordinator's own cluster only: no site is a worker group of it
    assert sorted(kinds) == ["DaskAutoscaler", "DaskCluster"]


def test_kubernetes_core_objects_validate():
    kv = pytest.importorskip(
        "kubernetes_validate",
        reason="kubernetes-validate (test extra): pip install -e .[test]",
    )
    kinds = []
    for _name, doc in _k8s_docs():
        if doc["apiVersion"].startswith("kubernetes.dask.org/"):
            # the pods the operator makes from them: validate each pod spec as a Pod
            for part in ("scheduler", "worker"):
                if part in doc["spec"]:
                    pod = {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"name": "p"},
                        "spec": doc["spec"][part]["spec"],
                    }
                    kv.validate(pod, "1.33", strict=True)
            continue
        kv.validate(doc, "1.33", strict=True)
        kinds.append(doc["kind"])
    assert kinds.count("Deployment") == len(SITES) + 1  # an agent per site, and MinIO
    assert kinds.count("NetworkPolicy") == len(SITES) + 1
    assert {"Job", "Service", "PersistentVolumeClaim", "ConfigMap", "Namespace"} <= set(kinds)
    bad = copy.deepcopy(_site_docs("site-a")["Namespace"])  # a misspelt field is caught
    bad["metadata"]["lables"] = bad["metadata"].pop("labels")
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, "1.33", strict=True)


def _containers(doc, init=False):
    spec = doc.get("spec", {})
    pods = []
    if doc["kind"] in ("Deployment", "Job"):
        pods.append(spec["template"]["spec"])
    for part in ("scheduler", "worker"):
        if isinstance(spec.get(part), dict) and "spec" in spec[part]:
            pods.append(spec[part]["spec"])
    return [c for pod in pods for c in pod["containers"] + (pod.get("initContainers", []) if init else [])]


def test_kubernetes_recipe_is_consistent():
    docs = {(d["kind"], d["metadata"]["name"]): d for _, d in _k8s_docs() if d["kind"] != "Namespace"}
    cluster = docs[("DaskCluster", "ensemble-dask")]
    address = "tls://ensemble-dask-scheduler:8786"  # the operator names the service CLUSTER-scheduler
    job = docs[("Job", "ensemble-dask-demo")]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in job["env"]}
    assert env["SCHEDULER"] == address and int(env["MIN_WORKERS"]) == cluster["spec"]["worker"]["replicas"]
    assert job["command"] == ["bash", "/opt/ensemble-dask/deploy/submit.sh"]
    assert "deploy/submit.sh" in _dockerfile()
    images = {c["image"] for _, d in _k8s_docs() for c in _containers(d, init=True)}
    assert images - {"minio/minio:RELEASE.2025-04-22T22-12-26Z"} == {"ensemble-dask:0.1.0"}
    assert _compose()["services"]["minio"]["image"] in images  # the same MinIO as Compose
    for container in _containers(cluster):
        assert container["resources"]["requests"]["cpu"]
    assert "'secretName': 'ensemble-dask-coordinator'" in str(cluster)  # the cluster's TLS secret
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert "federated.yaml" in kustomization["resources"]
    assert not any(r.startswith("sites") for r in kustomization["resources"])  # each site applies its own
    for resource in kustomization["resources"]:
        assert (K8S / resource).exists()
    assert docs[("DaskAutoscaler", "ensemble-dask")]["spec"]["cluster"] == "ensemble-dask"


def _site_docs(site):
    return {d["kind"]: d for d in yaml.safe_load_all((K8S / "sites" / f"{site}.yaml").read_text())}


def test_kubernetes_sites_are_reached_by_the_coordinator_only():
    from ensemble_dask import pipeline
    from ensemble_dask.stages.federated import _check_sites_section

    coord = {
        (d["kind"], d["metadata"]["name"]): d for path, d in _k8s_docs() if not path.startswith("sites/")
    }
    job = coord[("Job", "ensemble-dask-federated")]["spec"]["template"]
    job_labels = job["metadata"]["labels"]
    (container,) = job["spec"]["containers"]
    workflow = coord[("ConfigMap", "ensemble-dask-federated")]["data"]["federated.yaml"]
    spec = yaml.safe_load(workflow)
    pipeline.check_workflow(spec)
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in job["spec"]["volumes"]}
    assert container["args"][:2] == ["ensemble-dask", "federated"]
    assert container["args"][2] == f"{mounts['workflow']}/federated.yaml"
    assert spec["federated"]["certs"] == mounts["federation"]
    assert volumes["federation"]["secret"]["secretName"] == "ensemble-dask-federation"
    assert spec["store"].startswith(mounts["runs"] + "/")
    addresses = []
    for site in SITES:
        docs = _site_docs(site)
        ns = f"ensemble-dask-{site}"
        assert docs["Namespace"]["metadata"]["name"] == ns
        assert docs["Namespace"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
        assert {d["metadata"].get("namespace") for k, d in docs.items() if k != "Namespace"} == {ns}
        deploy, service, policy = docs["Deployment"], docs["Service"], docs["NetworkPolicy"]
        pod = deploy["spec"]["template"]
        assert deploy["spec"]["replicas"] == 1 and pod["spec"]["automountServiceAccountToken"] is False
        (agent,) = pod["spec"]["containers"]
        assert agent["args"][:3] == ["ensemble-dask", "site", "serve"] and "dask" not in agent["args"]
        config = yaml.safe_load(docs["ConfigMap"]["data"]["site.yaml"])
        (port,) = agent["ports"]
        assert config["listen"] == f"0.0.0.0:{port['containerPort']}"
        # the Service reaches the agent's port, and the coordinator's workflow names that Service
        assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
        (sport,) = service["spec"]["ports"]
        assert sport["targetPort"] == port["name"]
        addresses.append(
            {"name": site, "address": f"https://{service['metadata']['name']}.{ns}.svc:{sport['port']}"}
        )
        # only the coordinator's pods reach it, on that port; it reaches nothing
        assert policy["spec"]["podSelector"] == {} and set(policy["spec"]["policyTypes"]) == {
            "Ingress",
            "Egress",
        }
        assert policy["spec"]["egress"] == []
        ((rule),) = policy["spec"]["ingress"]
        ((peer),) = rule["from"]
        assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": COORDINATOR_NS}
        assert peer["podSelector"]["matchLabels"].items() <= job_labels.items()
        assert rule["ports"] == [{"port": port["containerPort"], "protocol": "TCP"}]
    assert _check_sites_section(spec["federated"]["sites"], False) == addresses


def _fake_kubectl(tmp_path):
    """A stand-in kubectl that logs each call (shell-quoted) and reads what is applied."""
    stub = tmp_path / "bin" / "kubectl"
    stub.parent.mkdir()
    stub.write_text(
        "#!/usr/bin/env bash\n"
        'printf "%q " "$@" >>"$KUBECTL_LOG"; echo >>"$KUBECTL_LOG"\n'
        'if [[ " $* " == *" apply "* ]]; then cat >/dev/null; else echo "kind: Secret"; fi\n'
    )
    stub.chmod(0o755)
    return stub.parent


def _created_secrets(log):
    """``{(namespace, name): {key: path}}`` of the secrets `kubectl create secret generic` made."""
    secrets = {}
    for line in log.read_text().splitlines():
        words = shlex.split(line)
        if "secret" not in words or "create" not in words:
            continue
        ns = words[words.index("-n") + 1]
        name = words[words.index("generic") + 1]
        files = {}
        for w in words:
            if w.startswith("--from-file="):
                value = w.removeprefix("--from-file=")
                key, _, path = value.partition("=") if "=" in value else (Path(value).name, "", value)
                files[key] = Path(path)
        secrets[(ns, name)] = files
    return secrets


def test_kubernetes_site_secret_is_made_from_the_sites_own_files_and_loads(tmp_path):
    """make-secrets.sh (against a stand-in kubectl) makes each site's secret from that site's own
    directory; the Deployment's init container, run for real on those files, gives the agent keys it
    accepts (0600, its own), and the site.yaml of the ConfigMap loads with them."""
    from ensemble_dask.federated.site.config import _CONFIG_KEYS, load_config

    fed = _party_files(tmp_path / "federation")
    log = tmp_path / "kubectl.log"
    env = _env(KUBECTL_LOG=log)
    env["PATH"] = f"{_fake_kubectl(tmp_path)}{os.pathsep}{env['PATH']}"
    script = str(K8S / "make-secrets.sh")
    for args in [
        *(["site", s, str(fed / "sites" / s / "keys")] for s in SITES),
        ["coordinator", str(fed / "coordinator" / "keys")],
    ]:
        r = subprocess.run([script, *args], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    secrets = _created_secrets(log)
    assert set(secrets) == {(f"ensemble-dask-{s}", "site-agent-keys") for s in SITES} | {
        (COORDINATOR_NS, "ensemble-dask-federation")
    }
    assert {p.parent for p in secrets[(COORDINATOR_NS, "ensemble-dask-federation")].values()} == {
        fed / "coordinator" / "keys"
    }
    for site in SITES:
        files = secrets[(f"ensemble-dask-{site}", "site-agent-keys")]
        assert {p.parent for p in files.values()} == {fed / "sites" / site / "keys"}  # its own files only
        assert files["tls-key.pem"].name == f"{site}-key.pem" and files["mask.key"].name == f"{site}-mask.key"
        docs = _site_docs(site)
        pod = docs["Deployment"]["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        (init,) = pod["initContainers"]
        (agent,) = pod["containers"]
        assert "secret" not in {m["name"] for m in agent["volumeMounts"]}  # the agent reads its copies
        secret_volume = next(n for n, v in volumes.items() if v.get("secret", {}).get("secretName"))
        assert volumes[secret_volume]["secret"]["secretName"] == "site-agent-keys"
        # the volumes on the host: the secret's files as Kubernetes projects them (read-only, 0440)
        root = tmp_path / "pods" / site
        host = {name: root / name for name in volumes}
        for d in host.values():
            d.mkdir(parents=True)
        for key, path in files.items():
            shutil.copy(path, host[secret_volume] / key)
            (host[secret_volume] / key).chmod(0o440)
        # the init container's own command, on those volumes
        init_mounts = {m["mountPath"]: host[m["name"]] for m in init["volumeMounts"]}
        command = [_rewrite(a, init_mounts) for a in init["command"]]
        r = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        keys = host[next(m["name"] for m in agent["volumeMounts"] if m["mountPath"].endswith("/keys"))]
        assert {_mode(p) for p in keys.iterdir() if p.name in ("tls-key.pem", "mask.key")} == {0o600}
        assert all(p.stat().st_uid == os.getuid() for p in keys.iterdir())
        # the agent's config over its mounts
        text = docs["ConfigMap"]["data"]["site.yaml"]
        assert set(yaml.safe_load(text)) <= _CONFIG_KEYS
        agent_mounts = {m["mountPath"]: host[m["name"]] for m in agent["volumeMounts"]}
        config_dir = next(p for m, p in agent_mounts.items() if m.endswith("/config"))
        (config_dir / "site.yaml").write_text(_rewrite(text, agent_mounts))
        assert agent["args"][-1].endswith("/config/site.yaml")
        cfg = load_config(config_dir / "site.yaml")
        assert cfg.name == site and cfg.federation == SITES and not cfg.allow_plain
        assert cfg.tls["key"] == str(keys / "tls-key.pem")
    # without the init container's copy, the secret's own (group-readable) files are refused
    from ensemble_dask import InputError
    from ensemble_dask.federated.protocol.certs import load_mask_private

    with pytest.raises(InputError, match="chmod 600"):
        load_mask_private(host[secret_volume] / "mask.key")


def test_shell_scripts_parse():
    scripts = list(DEPLOY.rglob("*.sh"))
    assert len(scripts) >= 6
    for path in scripts:
        r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert r.returncode == 0, (path, r.stderr)
        assert os.access(path, os.X_OK), f"{path} is not executable"


# --------------------------------------------------------------------------- the local demo's results
# (last in the module: the other tests run while the demo does, see _local_demo_started)


@pytest.mark.slow
def test_local_demo_runs_the_cluster_and_the_federation_and_leaves_nothing(local_demo):
    r, out = local_demo.r, local_demo.out
    assert r.returncode == 0, out[-4000:]
    # the coordinator's Dask cluster: the scheduler, the worker and this client run the same dask
    assert "on scheduler, workers and client" in out
    assert "s3://ensemble-dask/data/synthetic-kdd99-n1000.csv.gz" in out
    pcc = re.search(r"^pcc-l2\s+(\S+)\s+(\S+)\s+(\S+)", r.stdout, re.M)
    assert pcc and float(pcc.group(2)) > 0.5, r.stdout
    # the federation: the sites' agents, called over mutual TLS; the coordinator's store in S3
    assert "DEMO: every party's keys and data are made here" in out  # the demo says so
    assert re.search(r"federated BCE \(secure, mutual TLS\) over 3 sites \(\d+ rows\)", r.stdout), r.stdout
    fed = re.search(r"whole federation vs reference: H=(\S+) ARI=(\S+) NMI=(\S+)", r.stdout)
    assert fed and float(fed.group(2)) > 0.8, r.stdout
    assert "report: s3://ensemble-dask/runs/federated-bce.zarr/report/index.html" in r.stdout
    # nothing left: the cluster's processes and ports, the agents' processes and ports
    env_sh = (local_demo.run_dir / "env.sh").read_text()
    names, ports = _assert_nothing_left(local_demo.run_dir, env_sh)
    assert names == {"s3", "scheduler", "worker-0"} and len(ports) == 2  # the scheduler and S3
    workflow = (local_demo.fed / "coordinator" / "federated.yaml").read_text()
    names, ports = _assert_nothing_left(local_demo.fed, workflow)
    assert names == {f"agent-{s}" for s in SITES} and len(ports) == len(SITES)
    assert list(local_demo.cwd.iterdir()) == []


@pytest.mark.slow
def test_local_federation_keeps_each_partys_files_apart(local_demo, tmp_path):
    import zarr
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    from ensemble_dask.federated.protocol.certs import load_mask_public
    from ensemble_dask.federated.site.config import load_config

    assert local_demo.r.returncode == 0, local_demo.out[-4000:]
    fed = local_demo.fed
    private = {str(p.relative_to(fed)) for p in fed.rglob("*") if p.name.endswith(("-key.pem", ".key"))}
    expected = {"ca/ca-key.pem", "coordinator/keys/coordinator-key.pem"}
    for site in SITES:
        expected |= {f"sites/{site}/keys/{site}-key.pem", f"sites/{site}/keys/{site}-mask.key"}
    assert private == expected  # each site holds its own private keys, the coordinator no masking key
    assert all(_mode(fed / p) == 0o600 for p in private)
    ca = x509.load_pem_x509_certificate((fed / "ca" / "ca.pem").read_bytes())
    n_rows = int(re.search(r"over 3 sites \((\d+) rows\)", local_demo.r.stdout).group(1))
    rows = 0
    spec = yaml.safe_load((fed / "coordinator" / "federated.yaml").read_text())
    assert spec["federated"]["certs"] == str(fed / "coordinator" / "keys")
    assert [set(s) for s in spec["federated"]["sites"]] == [{"name", "address"}] * len(SITES)
    for site in SITES:
        d = fed / "sites" / site
        cert = x509.load_pem_x509_certificate((d / "keys" / f"{site}.pem").read_bytes())
        cert.verify_directly_issued_by(ca)  # signed by the federation's CA
        assert cert.subject.rfc4514_string() == f"CN={site}"
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert f"{site}" in sans.get_values_for_type(x509.DNSName)
        assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
        # the agent's own loader accepts the site's config; its pins are the peers' own public keys
        config = load_config(d / "site.yaml")
        assert config.name == site and config.federation == SITES and not config.allow_plain
        for peer in SITES:
            assert config.pins[peer] == load_mask_public(fed / "sites" / peer / "keys" / f"{peer}-mask.pub")
        # its rows, and its memberships written by itself, for each of its rows
        labels = zarr.open_array(str(d / "data" / "labels.zarr"), mode="r")
        memberships = zarr.open_array(str(d / "memberships.zarr"), mode="r")
        assert memberships.shape[0] == labels.shape[0] > 0
        rows += labels.shape[0]
        audit = [json.loads(line) for line in (d / "state" / "audit.log").read_text().splitlines()]
        assert {a["peer"] for a in audit} == {"coordinator"} and {a["outcome"] for a in audit} == {"ok"}
        assert {"join", "keys", "masked", "unmask", "close"} <= {a["op"] for a in audit}
    assert rows == n_rows
    assert not list((fed / "coordinator").rglob("labels.zarr"))
    # the Compose and Kubernetes tests emulate this layout in-process: it must be the script's
    assert _keys_layout(fed) == _keys_layout(_party_files(tmp_path))


@pytest.mark.slow
def test_failed_site_start_stops_the_started_agents(local_demo, tmp_path):
    assert local_demo.r.returncode == 0, local_demo.out[-4000:]
    fed = tmp_path / "federation"
    shutil.copytree(local_demo.fed, fed, symlinks=True, ignore=shutil.ignore_patterns("pids", "started"))
    # site-b's masking key readable by others: its agent refuses to start, after site-a's has started
    (fed / "sites" / "site-b" / "keys" / "site-b-mask.key").chmod(0o644)
    script = str(DEPLOY / "local" / "sites.sh")
    env = _env(RUN_DIR=tmp_path / "run", FED_DIR=fed, TIMEOUT=60)
    r = subprocess.run([script, "start"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "start failed" in r.stderr and "may be read by its group or others" in r.stderr, r.stderr
    names, _ = _assert_nothing_left(fed)
    assert names == {f"agent-{s}" for s in SITES}
    assert (fed / "sites" / "site-a" / "address").read_text().startswith("https://127.0.0.1:")  # it ran
    # stop on a stopped federation is harmless
    r = subprocess.run([script, "stop"], env=env, capture_output=True, timeout=60)
    assert r.returncode == 0

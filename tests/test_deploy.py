"""deploy/: the local recipe run as real processes, the Compose and Kubernetes files validated.

The local test starts moto's S3 server, a TLS scheduler and worker processes on 127.0.0.1 through
deploy/local/demo.sh, runs the KDD and the federated workflows on them, and checks afterwards that
no process and no listening port is left. The Compose file is checked against the compose-spec JSON
schema (shipped by check-jsonschema), the Kubernetes core objects with kubernetes-validate and the
Dask operator's objects against the CRD schemas shipped by dask-kubernetes (all three in the `test`
extra; a test whose validator is missing skips and says so).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import random_sites

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
BIN = Path(sys.executable).parent
SITES = ["site-a", "site-b", "site-c"]


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
        except OSError:
            continue
        if text in cmd:
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


def _assert_nothing_left(run_dir):
    started = [line.split() for line in (run_dir / "started").read_text().splitlines()]
    assert "scheduler" in {name for name, _ in started}
    alive = [(name, pid) for name, pid in started if _group_alive(int(pid))]
    assert not alive, f"process groups still alive after stop: {alive}"
    assert not _processes_mentioning(str(run_dir)), "a process of the run directory survived"
    assert not list((run_dir / "pids").glob("*.pid"))
    env = (run_dir / "env.sh").read_text() if (run_dir / "env.sh").exists() else ""
    ports = sorted({int(p) for p in re.findall(r"(?:tls|tcp|http)://127\.0\.0\.1:(\d+)", env)})
    for port in ports:
        assert _port_free(port), f"port {port} still in use"
    return started, ports


# --------------------------------------------------------------------------- local: real processes


def test_local_demo_over_tls_and_s3_leaves_nothing(tmp_path):
    run_dir = tmp_path / "run"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    r = subprocess.run(
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
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    # the scheduler, the workers and this client run the same dask/distributed
    assert "distributed" in out and "on scheduler, workers and client" in out
    assert "resources ['site-a', 'site-b', 'site-c']" in out
    # the KDD workflow's accuracy table, data and store in s3://
    assert "s3://ensemble-dask/data/synthetic-kdd99-n1000.csv.gz" in out
    pcc = re.search(r"^pcc-l2\s+(\S+)\s+(\S+)\s+(\S+)", r.stdout, re.M)
    assert pcc and float(pcc.group(2)) > 0.5, r.stdout
    # federated BCE across the three sites, over TLS, and its accuracy against the reference
    assert re.search(r"federated BCE \(secure, TLS\) over 3 sites", r.stdout), r.stdout
    fed = re.search(r"whole federation vs reference: H=(\S+) ARI=(\S+) NMI=(\S+)", r.stdout)
    assert fed and float(fed.group(2)) > 0.8, r.stdout
    started, ports = _assert_nothing_left(run_dir)
    assert "s3" in {name for name, _ in started}
    # each site's checkpoint is on its own workers, below their working directory; nothing elsewhere
    assert all((run_dir / "work" / "site-state" / site).is_dir() for site in SITES)
    assert list(cwd.iterdir()) == []
    assert len(started) == 2 + 1 + len(SITES)  # s3, scheduler, one plain worker, one per site
    assert len(ports) == 2  # the scheduler and S3


def test_failed_start_stops_what_started(tmp_path):
    # a CA without the coordinator's certificate: S3 starts, then the scheduler cannot
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "ca.pem").write_text("not a certificate\n")
    run_dir = tmp_path / "run"
    r = subprocess.run(
        [str(DEPLOY / "local" / "cluster.sh"), "start"],
        env=_env(RUN_DIR=run_dir, CERT_DIR=certs, SITES="", N_WORKERS=1, TIMEOUT=60),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode != 0
    assert "start failed" in r.stderr
    started, _ = _assert_nothing_left(run_dir)
    assert "s3" in {name for name, _ in started}
    # stop on a stopped run directory is harmless
    r = subprocess.run(
        [str(DEPLOY / "local" / "cluster.sh"), "stop"],
        env=_env(RUN_DIR=run_dir),
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 0


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


def test_every_subcommand_a_recipe_calls_exists():
    ours = _subcommands(_help(sys.executable, "-m", "ensemble_dask.cli"), argparse_style=True)
    dask = _subcommands(_help(str(BIN / "dask")), argparse_style=False)
    called = {"ensemble-dask": set(), "dask": set()}
    for path in _recipe_files():
        text = path.read_text()
        # command lines in scripts and in comments: `ensemble-dask SUB ...` at the start of a command
        for line in text.splitlines():
            for segment in re.split(r"&&|\|\||;|\||\$\(|\(", line.strip().lstrip("#").strip()):
                words = segment.split()
                if len(words) > 1 and words[0] in called and re.fullmatch(r"[a-z][a-z-]*", words[1]):
                    called[words[0]].add(words[1])
        # YAML argument lists: [dask, scheduler, ...]
        for doc in yaml.safe_load_all(text) if path.suffix == ".yaml" else ():
            for args in _command_lists(doc):
                if len(args) > 1 and args[0] in called:
                    called[args[0]].add(args[1])
    assert called["ensemble-dask"] >= {"run", "federated", "split-sites", "certs"}
    assert called["ensemble-dask"] <= ours, called["ensemble-dask"] - ours
    assert {"scheduler", "worker"} <= called["dask"] <= dask, called["dask"] - dask


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
    assert {"dask", "distributed"} <= set(pins)
    assert pins["dask"] == pins["distributed"]  # released together
    for name, version in pins.items():
        if name in wanted:
            assert wanted[name].specifier.contains(version), f"{name}=={version} vs {wanted[name]}"


# --------------------------------------------------------------------------- Compose


def _dockerfile():
    return (DEPLOY / "compose" / "Dockerfile").read_text()


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


def _compose():
    return yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())


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
    bad["services"]["scheduler"]["healthchek"] = bad["services"]["scheduler"].pop("healthcheck")
    assert list(validator.iter_errors(bad))  # the schema does catch a misspelt key


def test_compose_services_sites_secrets_and_health(tmp_path):
    doc = _compose()
    services = doc["services"]
    dask_services = {n: s for n, s in services.items() if n != "minio"}
    images = {s["image"] for s in dask_services.values()}
    assert images == {"ensemble-dask:0.1.0"}  # one image: the same dask everywhere
    assert all(s["build"]["dockerfile"] == "deploy/compose/Dockerfile" for s in dask_services.values())
    for name in ["scheduler", "worker", *SITES, "minio"]:
        assert "test" in services[name]["healthcheck"], name
    for site in SITES:
        args = services[site]["command"]
        assert f"--resources={site}=1" in args and f"--site-name={site}" in args
        assert "tls://scheduler:8786" in args
        mounted = {s["source"] for s in services[site]["secrets"]}
        assert f"{site}-key" in mounted and f"{site}-mask-key" in mounted
        for other in set(SITES) - {site}:  # no other site's private keys
            assert not mounted & {f"{other}-key", f"{other}-mask-key"}
    submit = services["submit"]
    assert submit["restart"] == "no" and submit["environment"]["SCHEDULER"] == "tls://scheduler:8786"
    assert all(v["condition"] == "service_healthy" for v in submit["depends_on"].values())
    assert set(doc["volumes"]) >= {"minio-data"}
    # every secret file is one that `ensemble-dask certs` writes
    from ensemble_dask.federated.certs import make_certs

    make_certs(tmp_path, ["coordinator", *SITES])
    for secret in doc["secrets"].values():
        assert (tmp_path / Path(secret["file"]).relative_to("certs")).exists(), secret["file"]
    # the site workers' preload options are those of ensemble_dask.federated.site
    from ensemble_dask.federated import site

    options = {o for p in site.dask_setup.params for o in p.opts}
    for name in SITES:
        args = services[name]["command"]
        preload = args[args.index("--preload=ensemble_dask.federated.site") + 1 :]
        assert {a.split("=")[0] for a in preload} <= options


# --------------------------------------------------------------------------- Kubernetes


def _k8s_docs():
    docs = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [(path.name, d) for d in yaml.safe_load_all(path.read_text()) if d]
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
    assert sorted(kinds) == ["DaskAutoscaler", "DaskCluster"] + ["DaskWorkerGroup"] * len(SITES)


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
    assert {"Job", "Deployment", "Service", "PersistentVolumeClaim", "NetworkPolicy"} <= set(kinds)


def test_kubernetes_recipe_is_consistent():
    docs = {(d["kind"], d["metadata"]["name"]): d for _, d in _k8s_docs()}
    cluster = docs[("DaskCluster", "ensemble-dask")]
    address = "tls://ensemble-dask-scheduler:8786"  # the operator names the service CLUSTER-scheduler
    job = docs[("Job", "ensemble-dask-demo")]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in job["env"]}
    assert env["SCHEDULER"] == address and env["SITES"] == ",".join(SITES)
    assert job["command"] == ["bash", "/opt/ensemble-dask/deploy/submit.sh"]
    assert "deploy/submit.sh" in _dockerfile()
    images = {c["image"] for _, d in _k8s_docs() for c in _containers(d)}
    assert images - {"minio/minio:RELEASE.2025-04-22T22-12-26Z"} == {"ensemble-dask:0.1.0"}
    assert _compose()["services"]["minio"]["image"] in images  # the same MinIO as Compose
    secrets_script = (DEPLOY / "kubernetes" / "make-secrets.sh").read_text()
    for site in SITES:
        group = docs[("DaskWorkerGroup", f"ensemble-dask-{site}")]
        assert group["spec"]["cluster"] == cluster["metadata"]["name"]
        (container,) = group["spec"]["worker"]["spec"]["containers"]
        assert address in container["args"] and f"--resources={site}=1" in container["args"]
        assert container["resources"]["requests"]["memory"] and container["resources"]["limits"]["memory"]
        secret = next(
            v["secret"]["secretName"] for v in group["spec"]["worker"]["spec"]["volumes"] if "secret" in v
        )
        assert secret == f"ensemble-dask-{site}" and '"ensemble-dask-$s"' in secrets_script
    for container in _containers(cluster):
        assert container["resources"]["requests"]["cpu"]
    assert "ensemble-dask-coordinator" in secrets_script and "ensemble-dask-pins" in secrets_script
    kustomization = yaml.safe_load((DEPLOY / "kubernetes" / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        assert (DEPLOY / "kubernetes" / resource).exists()
    autoscaler = docs[("DaskAutoscaler", "ensemble-dask")]
    assert autoscaler["spec"]["cluster"] == "ensemble-dask"


def _containers(doc):
    spec = doc.get("spec", {})
    pods = []
    if doc["kind"] in ("Deployment", "Job"):
        pods.append(spec["template"]["spec"])
    for part in ("scheduler", "worker"):
        if isinstance(spec.get(part), dict) and "spec" in spec[part]:
            pods.append(spec[part]["spec"])
    return [c for pod in pods for c in pod["containers"]]


def test_shell_scripts_parse():
    for path in DEPLOY.rglob("*.sh"):
        r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert r.returncode == 0, (path, r.stderr)
        assert os.access(path, os.X_OK), f"{path} is not executable"


def test_tls_scheduler_without_client_credentials_is_a_clear_error(tmp_path):
    from ensemble_dask import InputError
    from ensemble_dask.parallel import dask_client

    run_dir = tmp_path / "run"
    env = _env(RUN_DIR=run_dir, S3=0, SITES="", N_WORKERS=0)
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
    _assert_nothing_left(run_dir)


def test_plain_tcp_cluster_still_masks_the_sites(tmp_path):
    """``TLS=0``: the site workers still load masking keys, so federated BCE runs in secure mode over plain
    TCP once the workflow says ``insecure: true`` (the pins from ``CERT_DIR`` of env.sh)."""

    run_dir = tmp_path / "run"
    env = _env(RUN_DIR=run_dir, TLS=0, S3=0, SITES="site-a,site-b", N_WORKERS=0)
    script = str(DEPLOY / "local" / "cluster.sh")
    r = subprocess.run([script, "start"], env=env, capture_output=True, text=True, timeout=300)
    try:
        assert r.returncode == 0, r.stderr
        env_sh = (run_dir / "env.sh").read_text()
        address = re.search(r"SCHEDULER=(\S+)", env_sh).group(1)
        assert address.startswith("tcp://127.0.0.1:") and "DASK_DISTRIBUTED__COMM__TLS" not in env_sh
        cert_dir = re.search(r"CERT_DIR=(\S+)", env_sh).group(1)
        sites = random_sites(tmp_path, (40, 5))
        spec = {
            "store": str(tmp_path / "coordinator.zarr"),
            "federated": {"n_clusters": 2, "tol": 0.01, "insecure": True, "certs": cert_dir, "sites": sites},
        }
        (tmp_path / "wf.yaml").write_text(yaml.safe_dump(spec))
        fed = subprocess.run(
            [sys.executable, "-m", "ensemble_dask.cli", "federated", str(tmp_path / "wf.yaml"),
             "--scheduler", address, "--no-progress"],
            env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert fed.returncode == 0, fed.stderr
        assert "federated BCE (secure, no TLS) over 2 sites (80 rows)" in fed.stdout
    finally:
        subprocess.run([script, "stop"], env=env, capture_output=True, timeout=120)
    _assert_nothing_left(run_dir)

"""deploy/kubernetes, rendered without a cluster or a kustomize binary (tests/ops/kustomize.py): every object
of the base and of the example overlay validates against the schemas of Kubernetes K8S_VERSION
(kubernetes-validate, strict: no unknown field), the two custom resources (KEDA's ScaledObject, Prometheus
Operator's ServiceMonitor) against a schema of the fields used here, and each container's command exists in
the project: its manage.py command and options, the worker's options, Celery's and gunicorn's command
lines, the probe paths, the environment variables and the dispatcher's ports."""

from __future__ import annotations

import ast
import base64
import re
import shutil
import types
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.ops.kustomize import KustomizeError, render, strategic_merge
from tests.support import PROJECT_DIR

K8S_VERSION = "1.33.0"
DEPLOY = PROJECT_DIR / "deploy" / "kubernetes"
OVERLAY = DEPLOY / "overlays" / "example"
IMAGE = "corpus-conversion-service"
# The worker process's own memory beside its conversions (deploy/kubernetes/base/latexml-worker.yaml).
WORKER_OVERHEAD_MI = 512
# The gunicorn processes' memory beside POST /convert's conversions (deploy/kubernetes/base/web.yaml).
WEB_OVERHEAD_MI = 1024
SANDBOXED = {"ccs-web", "ccs-latexml-worker"}  # they run latexmlc in bubblewrap
# The seccomp profile of the pods that run bubblewrap, as the nodes' kubelets hold it (docs/deploy.md).
SECCOMP_PROFILE = "ccs/seccomp-bwrap.json"

_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}, "labels": _STRING_MAP},
    "additionalProperties": False,
}
# The fields of the custom resources used here, as their CRDs (keda.sh/v1alpha1, monitoring.coreos.com/v1)
# define them; anything else is refused, so a typo cannot pass unnoticed.
CUSTOM_SCHEMAS = {
    ("keda.sh/v1alpha1", "ScaledObject"): {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": "keda.sh/v1alpha1"},
            "kind": {"const": "ScaledObject"},
            "metadata": _METADATA,
            "spec": {
                "type": "object",
                "required": ["scaleTargetRef", "triggers"],
                "additionalProperties": False,
                "properties": {
                    "scaleTargetRef": {
                        "type": "object",
                        "required": ["name"],
                        "additionalProperties": False,
                        "properties": {"name": {"type": "string"}, "kind": {"type": "string"}},
                    },
                    "minReplicaCount": {"type": "integer", "minimum": 0},
                    "maxReplicaCount": {"type": "integer", "minimum": 1},
                    "pollingInterval": {"type": "integer", "minimum": 1},
                    "cooldownPeriod": {"type": "integer", "minimum": 0},
                    "triggers": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["type", "metadata"],
                            "additionalProperties": False,
                            "properties": {
                                "type": {"const": "prometheus"},
                                "metadata": {
                                    "type": "object",
                                    "required": ["serverAddress", "query", "threshold"],
                                    "additionalProperties": False,
                                    "properties": {
                                        key: {"type": "string"}
                                        for key in ("serverAddress", "query", "threshold", "activationThreshold")
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
    ("monitoring.coreos.com/v1", "ServiceMonitor"): {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": "monitoring.coreos.com/v1"},
            "kind": {"const": "ServiceMonitor"},
            "metadata": _METADATA,
            "spec": {
                "type": "object",
                "required": ["selector", "endpoints"],
                "additionalProperties": False,
                "properties": {
                    "selector": {
                        "type": "object",
                        "required": ["matchLabels"],
                        "additionalProperties": False,
                        "properties": {"matchLabels": _STRING_MAP},
                    },
                    "endpoints": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["port", "path"],
                            "additionalProperties": False,
                            "properties": {
                                "port": {"type": "string"},
                                "path": {"type": "string"},
                                "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                                "params": {
                                    "type": "object",
                                    "additionalProperties": {"type": "array", "items": {"type": "string"}},
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, list[dict]]:
    """The rendered base and overlay; the overlay's secrets.env is its example (the real one is not in git)."""
    copy = tmp_path_factory.mktemp("deploy") / "kubernetes"
    shutil.copytree(DEPLOY, copy, ignore=shutil.ignore_patterns("secrets.env"))
    overlay = copy / "overlays" / "example"
    shutil.copy(overlay / "secrets.env.example", overlay / "secrets.env")
    return {"base": render(copy / "base"), "overlay": render(overlay)}


def _named(objects: list[dict], kind: str, name: str) -> dict:
    (found,) = [obj for obj in objects if obj["kind"] == kind and obj["metadata"]["name"] == name]
    return found


def _pods(objects: list[dict]) -> list[tuple[str, dict]]:
    return [
        (obj["metadata"]["name"], obj["spec"]["template"]["spec"])
        for obj in objects
        if "template" in obj.get("spec", {})
    ]


def _containers(objects: list[dict]) -> list[tuple[str, dict, dict]]:
    return [
        (name, pod, container)
        for name, pod in _pods(objects)
        for container in pod.get("initContainers", []) + pod["containers"]
    ]


def _mebibytes(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}
    match = re.fullmatch(r"([0-9.]+)(Ki|Mi|Gi|Ti)?", str(quantity))
    assert match, f"a quantity in binary units is expected, not {quantity}"
    return float(match.group(1)) * units.get(match.group(2) or "", 1 / (1024 * 1024))


def _worker_args(container: dict):
    from conversion.worker import argument_parser

    command = container["command"]
    assert command[:3] == ["python", "-m", "conversion.worker"], command
    return argument_parser().parse_args(command[3:])


def _config(objects: list[dict]) -> dict[str, str]:
    return _named(objects, "ConfigMap", "ccs-config")["data"]


# --- the renderer itself ---


def _tree(root: Path, files: dict[str, object]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = content if isinstance(content, str) else yaml.safe_dump_all(content)
        path.write_text(text)
    return root


DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "app"},
    "spec": {
        "replicas": 1,
        "template": {
            "spec": {
                "containers": [
                    {"name": "a", "image": "img:1", "command": ["x", "y"], "env": [{"name": "K", "value": "1"}]},
                    {"name": "b", "image": "other/img:1"},
                ]
            }
        },
    },
}


def test_the_renderer_applies_namespace_labels_images_replicas_secrets_and_patches(tmp_path):
    base = {"resources": ["app.yaml"], "labels": [{"pairs": {"part": "p"}, "includeSelectors": False}]}
    patch = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "app"},
        "spec": {"template": {"spec": {"containers": [{"name": "a", "command": ["z"], "env": [{"name": "L"}]}]}}},
    }
    overlay = {
        "namespace": "ns",
        "resources": ["../base"],
        "images": [{"name": "img", "newName": "reg/img", "newTag": "2"}],
        "replicas": [{"name": "app", "count": 3}],
        "secretGenerator": [{"name": "s", "envs": ["s.env"]}],
        "generatorOptions": {"disableNameSuffixHash": True},
        "patches": [{"path": "patch.yaml"}],
    }
    _tree(tmp_path, {"base/kustomization.yaml": [base], "base/app.yaml": [DEPLOYMENT]})
    _tree(tmp_path, {"o/kustomization.yaml": [overlay], "o/patch.yaml": [patch], "o/s.env": "# c\nA=b=c\n"})
    deployment, secret = render(tmp_path / "o")
    assert deployment["metadata"] == {"name": "app", "namespace": "ns", "labels": {"part": "p"}}
    assert deployment["spec"]["replicas"] == 3
    first, second = deployment["spec"]["template"]["spec"]["containers"]
    env = [{"name": "K", "value": "1"}, {"name": "L"}]
    assert first == {"name": "a", "image": "reg/img:2", "command": ["z"], "env": env}
    assert second["image"] == "other/img:1"
    assert secret["metadata"] == {"name": "s", "namespace": "ns"}
    assert base64.b64decode(secret["data"]["A"]).decode() == "b=c"


def test_the_renderer_refuses_what_it_would_render_differently_from_kustomize(tmp_path):
    _tree(tmp_path, {"a/kustomization.yaml": [{"resources": [], "commonLabels": {"a": "b"}}]})
    with pytest.raises(KustomizeError, match="commonLabels"):
        render(tmp_path / "a")
    with pytest.raises(KustomizeError, match="tolerations"):
        strategic_merge({"tolerations": [{"key": "a"}]}, {"tolerations": [{"key": "b"}]}, built_in=True)
    # A custom resource's lists are replaced, as kustomize merges them as JSON.
    assert strategic_merge({"l": [{"a": 1}]}, {"l": [{"b": 2}]}, built_in=False) == {"l": [{"b": 2}]}
    _tree(tmp_path, {"b/kustomization.yaml": [{"resources": ["d.yaml"], "patches": [{"path": "p.yaml"}]}]})
    _tree(tmp_path, {"b/d.yaml": [DEPLOYMENT], "b/p.yaml": [{**DEPLOYMENT, "metadata": {"name": "nope"}}]})
    with pytest.raises(KustomizeError, match="nope"):
        render(tmp_path / "b")


# --- the manifests against the Kubernetes schemas ---


@pytest.mark.parametrize("tree", ["base", "overlay"])
def test_every_object_validates_against_the_schemas_of_a_named_kubernetes_version(trees, tree):
    kinds = set()
    for obj in trees[tree]:
        custom = CUSTOM_SCHEMAS.get((obj["apiVersion"], obj["kind"]))
        if custom is not None:
            jsonschema.validate(obj, custom)
        else:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        kinds.add(obj["kind"])
    assert {"Deployment", "Service", "Job", "ConfigMap", "PersistentVolumeClaim", "ScaledObject"} <= kinds
    assert {"ServiceMonitor"} <= kinds


def test_the_validation_refuses_an_unknown_field_and_an_unknown_kind(trees):
    web = _named(trees["base"], "Deployment", "ccs-web")
    broken = strategic_merge(web, {"spec": {"replica": 2}}, built_in=True)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)
    scaled = _named(trees["base"], "ScaledObject", "ccs-latexml-worker")
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate(scaled, K8S_VERSION, strict=True)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(strategic_merge(scaled, {"spec": {"minReplicas": 0}}, built_in=False), CUSTOM_SCHEMAS[
            ("keda.sh/v1alpha1", "ScaledObject")
        ])  # fmt: skip


def test_the_overlay_sets_the_image_namespace_and_secret(trees):
    objects = trees["overlay"]
    assert {obj["metadata"].get("namespace") for obj in objects if obj["kind"] != "Namespace"} == {"ccs"}
    images = {container["image"] for _, _, container in _containers(objects)}
    assert images == {"registry.example.org/ccs/corpus-conversion-service:0.6.0"}
    assert {container["image"] for _, _, container in _containers(trees["base"])} == {IMAGE}
    secret = _named(objects, "Secret", "ccs-secrets")
    assert set(secret["data"]) == {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"}
    assert all("CHANGE-ME" in base64.b64decode(value).decode() for value in secret["data"].values())
    assert "secrets.env" in (OVERLAY / ".gitignore").read_text().split()


def test_the_overlays_host_is_the_one_its_csrf_check_and_passkeys_trust(trees):
    objects = trees["overlay"]
    (host,) = {rule["host"] for rule in _named(objects, "Ingress", "ccs-web")["spec"]["rules"]}
    config = _config(objects)
    assert config["CSRF_TRUSTED_ORIGINS"] == f"https://{host}"
    assert config["PASSKEY_RP_ID"] == host
    assert config["PASSKEY_ORIGINS"].split(",") == [f"https://{host}"]


# --- what runs once, and how much ---


@pytest.mark.parametrize("tree", ["base", "overlay"])
@pytest.mark.parametrize("name", ["ccs-celery-beat", "ccs-dispatcher"])
def test_beat_and_the_dispatcher_run_exactly_once_even_during_a_rollout(trees, tree, name):
    deployment = _named(trees[tree], "Deployment", name)
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


@pytest.mark.parametrize("tree", ["base", "overlay"])
def test_the_worker_memory_holds_its_conversions_and_the_governor_floor(trees, tree):
    workers = [(name, pod, c) for name, pod, c in _containers(trees[tree]) if "conversion.worker" in c["command"]]
    assert workers
    for name, pod, container in workers:
        args = _worker_args(container)
        assert isinstance(args.concurrency, int), f"{name}: a fixed --concurrency, so requests can be sized"
        assert args.memory_floor_mb > 0, f"{name}: the governor is off"
        resources = container["resources"]
        limit = _mebibytes(resources["limits"]["memory"])
        needed = args.concurrency * args.memory_mb + args.memory_floor_mb + WORKER_OVERHEAD_MI
        assert limit >= needed, f"{name}: {limit} Mi < {args.concurrency} x {args.memory_mb} + floor + worker"
        assert resources["requests"]["memory"] == resources["limits"]["memory"], name
        assert float(resources["requests"]["cpu"]) == args.concurrency, name
        (tmp,) = [volume for volume in pod["volumes"] if volume["name"] == "tmp"]
        assert _mebibytes(tmp["emptyDir"]["sizeLimit"]) >= args.concurrency * args.disk_mb, name
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]


@pytest.mark.parametrize("tree", ["base", "overlay"])
def test_web_memory_holds_its_convert_slots(trees, tree):
    web = _named(trees[tree], "Deployment", "ccs-web")["spec"]["template"]["spec"]["containers"][0]
    env = {item["name"]: item["value"] for item in web["env"]}
    needed = int(env["CONVERT_CONCURRENCY"]) * int(env["CONVERSION_MEMORY_MB"]) + WEB_OVERHEAD_MI
    assert _mebibytes(web["resources"]["limits"]["memory"]) >= needed


# --- volumes and the sandbox ---


@pytest.mark.parametrize("tree", ["base", "overlay"])
def test_corpora_are_read_only_everywhere_and_the_latexml_workers_mount_no_claim(trees, tree):
    claims_of = {}
    for name, pod in _pods(trees[tree]):
        claims = {v["name"]: v["persistentVolumeClaim"] for v in pod.get("volumes", []) if "persistentVolumeClaim" in v}
        claims_of[name] = claims
        for volume, claim in claims.items():
            mounts = [m for c in pod["containers"] for m in c.get("volumeMounts", []) if m["name"] == volume]
            assert mounts, f"{name}: {volume} is not mounted"
            if claim["claimName"] == "ccs-corpora":
                assert claim.get("readOnly") is True, name
                assert all(mount.get("readOnly") is True for mount in mounts), f"{name}: corpora writable"
    assert claims_of["ccs-latexml-worker"] == {}
    assert {c["claimName"] for c in claims_of["ccs-dispatcher"].values()} == {"ccs-corpora", "ccs-results"}
    pvcs = {obj["metadata"]["name"] for obj in trees[tree] if obj["kind"] == "PersistentVolumeClaim"}
    assert pvcs == {"ccs-corpora", "ccs-results", "ccs-exports"}


def _image_uid() -> int:
    text = (PROJECT_DIR / "Dockerfile").read_text()
    return int(re.search(r"useradd [^\n]*--uid (\d+)", text).group(1))


@pytest.mark.parametrize("tree", ["base", "overlay"])
def test_every_pod_runs_as_the_image_user_with_no_capabilities(trees, tree):
    for name, pod, container in _containers(trees[tree]):
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] == _image_uid(), name
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False, name
        assert context["capabilities"] == {"drop": ["ALL"]}, name
        assert not context.get("privileged"), name


@pytest.mark.parametrize("tree", ["base", "overlay"])
def test_only_the_pods_that_run_bubblewrap_get_what_it_needs(trees, tree):
    for name, pod in _pods(trees[tree]):
        context = pod["securityContext"]
        if name in SANDBOXED:
            # bwrap's own user namespace: a seccomp profile that lets it unshare and mount, AppArmor that lets it
            # mount, and no /proc of its own (the runtime's masked paths refuse one), in every container.
            assert context["seccompProfile"] == {"type": "Localhost", "localhostProfile": SECCOMP_PROFILE}, name
            assert context["appArmorProfile"] == {"type": "Unconfined"}, name
            for container in pod["containers"]:
                env = {item["name"]: item.get("value") for item in container.get("env", [])}
                assert env.get("CONVERSION_SANDBOX", "bwrap") == "bwrap", name
                assert env.get("CONVERSION_SANDBOX_PROC") == "none", (name, container["name"])
        else:
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, name
        # No pod needs a user namespace of its own or an unmasked /proc (clusters without them run these).
        assert "hostUsers" not in pod, name
        assert all("procMount" not in c["securityContext"] for c in pod["containers"]), name
    if tree == "overlay":  # Pod Security's baseline level refuses those settings
        namespace = _named(trees[tree], "Namespace", "ccs")
        assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


# --- the commands exist in the project ---


def _manage_py(argv: list[str]) -> None:
    from django.core.management import CommandError, get_commands, load_command_class

    assert argv[:2] == ["python", "manage.py"], argv
    name, *options = argv[2:]
    commands = get_commands()
    assert name in commands, f"manage.py has no command {name}"
    try:
        load_command_class(commands[name], name).create_parser("manage.py", name).parse_args(options)
    except CommandError as exc:  # what Django's parser raises for a bad option outside a command line
        pytest.fail(f"manage.py {name}: {exc}")


def _celery(argv: list[str]) -> None:
    import click
    from celery.bin.celery import celery as cli

    from config.celery import app

    assert argv[:3] == ["celery", "-A", "config"], argv
    name, *options = argv[3:]
    assert name in cli.commands, f"celery has no command {name}"
    try:
        cli.commands[name].make_context(name, list(options), obj=types.SimpleNamespace(app=app))
    except click.UsageError as exc:
        pytest.fail(f"celery {name}: {exc}")


def _gunicorn(argv: list[str]) -> None:
    from django.utils.module_loading import import_string
    from gunicorn.config import Config

    assert argv[0] == "gunicorn"
    parsed = Config().parser().parse_args(argv[1:])
    (application,) = parsed.args
    module, attribute = application.split(":")
    import_string(f"{module}.{attribute}")
    import_string(parsed.logger_class)
    assert parsed.worker_class == "gthread"


def _check_command(argv: list[str]) -> None:
    if argv[:2] == ["python", "manage.py"]:
        _manage_py(argv)
    elif argv[:3] == ["python", "-m", "conversion.worker"]:
        _worker_args({"command": argv})
    elif argv[0] == "celery":
        _celery(argv)
    elif argv[0] == "gunicorn":
        _gunicorn(argv)
    else:
        pytest.fail(f"a command this test does not know: {argv}")


@pytest.mark.parametrize("tree", ["base", "overlay"])
def test_every_container_command_exists_with_its_options(trees, tree):
    checked = set()
    for name, _, container in _containers(trees[tree]):
        assert "args" not in container, f"{name}: the whole command line is in `command`"
        _check_command(container["command"])
        checked.add(" ".join(container["command"][:2]))
    assert checked == {"python manage.py", "python -m", "celery -A", "gunicorn config.wsgi:application"}


@pytest.mark.parametrize(
    "argv",
    [
        ["python", "manage.py", "dispatch"],
        ["python", "manage.py", "migrate", "--no-input-please"],
        ["python", "-m", "conversion.worker", "--ventilator", "tcp://a:1", "--sink", "tcp://a:2", "--memory", "1"],
        ["celery", "-A", "config", "workers"],
        ["celery", "-A", "config", "beat", "--concurrency", "2"],
        ["gunicorn", "config.wsgi:app", "--worker-class", "gthread"],
    ],
)
def test_the_command_check_refuses_a_wrong_command_or_option(argv):
    with pytest.raises((AssertionError, SystemExit, ImportError, pytest.fail.Exception)):
        _check_command(argv)


def _settings_variables() -> set[str]:
    """Every environment variable the project reads: the declared keys (config/keys.py), env_* calls anywhere
    else, and os.environ."""
    from config.keys import DECLARED

    names = {key.env for key in DECLARED.values()}
    for path in PROJECT_DIR.glob("[a-z]*/**/*.py"):
        if path.parts[len(PROJECT_DIR.parts)] in ("tests", "bench", "scripts"):
            continue
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            called = isinstance(node, ast.Call) and getattr(node.func, "id", "").startswith("env_") and node.args
            if called and isinstance(node.args[0], ast.Constant):
                names.add(node.args[0].value)
        names |= set(re.findall(r"os\.environ(?:\.get)?[\[(]\"([A-Z_]+)\"", source))
    return names


@pytest.mark.parametrize("tree", ["base", "overlay"])
def test_every_environment_variable_given_is_one_the_project_reads(trees, tree):
    known = _settings_variables()
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "CORPUS_ROOTS", "CONVERSION_SANDBOX"} <= known
    given = set(_config(trees[tree]))
    given |= {item["name"] for _, _, container in _containers(trees[tree]) for item in container.get("env", [])}
    secrets = [obj for obj in trees[tree] if obj["kind"] == "Secret"]
    given |= {key for secret in secrets for key in secret["data"]}
    assert given - known == set()
    referenced = {
        ref[kind]["name"]
        for _, _, container in _containers(trees[tree])
        for ref in container.get("envFrom", [])
        for kind in ("configMapRef", "secretRef")
        if kind in ref
    }
    assert referenced <= {"ccs-config", "ccs-secrets"}


@pytest.mark.parametrize("tree", ["base", "overlay"])
def test_the_dispatcher_service_ports_and_the_workers_addresses_agree(trees, tree):
    config = _config(trees[tree])
    ports = {"ventilator": int(config["DISPATCHER_VENTILATOR_PORT"]), "sink": int(config["DISPATCHER_SINK_PORT"])}
    pod = _named(trees[tree], "Deployment", "ccs-dispatcher")["spec"]["template"]["spec"]
    dispatcher = pod["containers"][0]
    assert {p["name"]: p["containerPort"] for p in dispatcher["ports"]} == ports
    # Reserved in the pod: no outgoing connection of its own takes one of them as its ephemeral port.
    reserved = {"name": "net.ipv4.ip_local_reserved_ports", "value": f"{ports['ventilator']},{ports['sink']}"}
    assert pod["securityContext"]["sysctls"] == [reserved]
    assert {"name": "DISPATCHER_BIND", "value": "0.0.0.0"} in dispatcher["env"]  # noqa: S104
    service = _named(trees[tree], "Service", config["DISPATCHER_HOST"])
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == ports
    assert service["spec"]["selector"].items() <= _template_labels(trees[tree], "ccs-dispatcher").items()
    for _, _, container in _containers(trees[tree]):
        if "conversion.worker" in container["command"]:
            args = _worker_args(container)
            assert args.ventilator == f"tcp://{config['DISPATCHER_HOST']}:{ports['ventilator']}"
            assert args.sink == f"tcp://{config['DISPATCHER_HOST']}:{ports['sink']}"


def _template_labels(objects: list[dict], deployment: str) -> dict:
    return _named(objects, "Deployment", deployment)["spec"]["template"]["metadata"]["labels"]


# --- probes, metrics and scaling ---


@pytest.mark.parametrize("tree", ["base", "overlay"])
def test_web_probes_and_the_service_monitor_reach_real_views(trees, tree):
    from django.urls import resolve

    from ops import api

    web = _named(trees[tree], "Deployment", "ccs-web")["spec"]["template"]["spec"]["containers"][0]
    port_names = {port["name"] for port in web["ports"]}
    readiness = web["readinessProbe"]["httpGet"]
    assert readiness["port"] in port_names
    assert resolve(readiness["path"]).func.view_class is api.HealthzApi
    service = _named(trees[tree], "Service", "ccs-web")
    assert service["spec"]["selector"].items() <= _template_labels(trees[tree], "ccs-web").items()
    monitor = _named(trees[tree], "ServiceMonitor", "ccs-web")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
        assert resolve(endpoint["path"]).func is api.metrics_view
    if tree == "overlay":  # /metrics wants a token; the overlay is where it is set
        assert all(endpoint["params"]["token"] for endpoint in monitor["spec"]["endpoints"])


@pytest.mark.parametrize("tree", ["base", "overlay"])
def test_keda_scales_the_worker_deployment_on_its_service_backlog(trees, tree):
    from ops.metrics import METRIC_NAMES

    scaled = _named(trees[tree], "ScaledObject", "ccs-latexml-worker")
    target = _named(trees[tree], "Deployment", scaled["spec"]["scaleTargetRef"]["name"])
    assert "replicas" not in target["spec"], "KEDA sets the replicas; a fixed count would fight it on each apply"
    (container,) = target["spec"]["template"]["spec"]["containers"]
    (service,) = _worker_args(container).service  # the one service whose backlog scales it
    (trigger,) = scaled["spec"]["triggers"]
    assert "ccs_backlog_tasks" in METRIC_NAMES
    assert trigger["metadata"]["query"] == f'max(ccs_backlog_tasks{{service="{service}"}})'
    assert int(trigger["metadata"]["threshold"]) > 0
    assert scaled["spec"]["maxReplicaCount"] >= scaled["spec"].get("minReplicaCount", 1)

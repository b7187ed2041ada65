"""docker-compose.yml, the Dockerfile, .dockerignore and the Kubernetes workers, read as Docker and kubectl
would read them: every long-running service restarts, every volume is mounted where the image has a
directory its user owns, health checks back every `service_healthy`, the services that run bubblewrap get
what it needs and no more, the compose and Kubernetes workers agree, and the image takes no secrets or data
from the checkout. `make deploy-check` (deploy/check.py) builds and runs them for real."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from pathlib import PurePosixPath

import pytest
import yaml

from tests.support import PROJECT_DIR

RESTARTING = {"always", "unless-stopped", "on-failure"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((PROJECT_DIR / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) of each Dockerfile instruction, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (PROJECT_DIR / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def _run_commands(dockerfile: list[tuple[str, str]]) -> list[list[str]]:
    """Every shell command of the RUN instructions, as argument lists."""
    commands = []
    for instruction, arguments in dockerfile:
        if instruction == "RUN":
            commands += [shlex.split(part) for part in re.split(r"&&|;", arguments) if part.strip()]
    return commands


def _image_user(dockerfile: list[tuple[str, str]]) -> str:
    users = [arguments.split(":")[0] for instruction, arguments in dockerfile if instruction == "USER"]
    assert users, "the image must not run as root: the Dockerfile needs a USER"
    return users[-1]


def _one_shot(compose: dict) -> set[str]:
    """Services others wait to see completed: they run once (migrations), the rest run for good."""
    return {
        name
        for service in compose["services"].values()
        for name, condition in (service.get("depends_on") or {}).items()
        if isinstance(condition, dict) and condition.get("condition") == "service_completed_successfully"
    }


def _own_image(service: dict) -> bool:
    return "build" in service


def test_every_long_running_service_restarts_and_only_one_shot_services_do_not(compose):
    one_shot = _one_shot(compose)
    assert one_shot == {"migrate"}
    for name, service in compose["services"].items():
        restart = str(service.get("restart", "no")).split(":")[0]
        if name in one_shot:
            assert restart == "no", name
        else:
            assert restart in RESTARTING, f"{name} has no restart policy: a crash (a dead sink) would end it for good"


def test_redis_and_postgres_have_health_checks_and_every_service_healthy_wait_has_one(compose):
    services = compose["services"]
    assert "redis-cli" in services["redis"]["healthcheck"]["test"]
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"]
    for name, service in services.items():
        for dependency, condition in (service.get("depends_on") or {}).items():
            if condition.get("condition") == "service_healthy":
                assert "healthcheck" in services[dependency], f"{name} waits for {dependency}, which has no check"


def test_the_workers_start_after_a_healthy_dispatcher_and_the_apps_after_a_healthy_broker(compose):
    services = compose["services"]
    assert services["latexml-worker"]["depends_on"]["dispatcher"] == {"condition": "service_healthy"}
    assert services["migrate"]["depends_on"]["redis"] == {"condition": "service_healthy"}


def test_every_volume_is_mounted_on_a_directory_the_image_creates_for_its_user(compose, dockerfile):
    user = _image_user(dockerfile)
    created: set[PurePosixPath] = set()
    owned: set[PurePosixPath] = set()  # chowned recursively to the image's user
    for command in _run_commands(dockerfile):
        if command[:1] == ["mkdir"]:
            created |= {PurePosixPath(arg) for arg in command[1:] if not arg.startswith("-")}
        if command[:1] == ["chown"] and "-R" in command:
            owner, *paths = [arg for arg in command[1:] if not arg.startswith("-")]
            if owner.split(":")[0] == user:
                owned |= {PurePosixPath(path) for path in paths}
    mounts = [
        (name, PurePosixPath(volume.split(":")[1]))
        for name, service in compose["services"].items()
        if _own_image(service)
        for volume in service.get("volumes", [])
    ]
    assert mounts
    for name, target in mounts:
        assert target in created, f"{name}: {target} does not exist in the image (Docker would create it for root)"
        assert any(target == path or path in target.parents for path in owned), f"{name}: {target} is not {user}'s"


def test_every_named_volume_is_declared(compose):
    used = {
        volume.split(":")[0]
        for service in compose["services"].values()
        for volume in service.get("volumes", [])
        if not volume.startswith((".", "/"))
    }
    assert used == set(compose["volumes"])


def test_the_image_installs_the_conversion_environment_make_run_installs_and_runs_as_its_own_user(dockerfile):
    # One list of packages for `make run`, CI and the image: scripts/system-packages, copied in and run.
    copied = {
        arguments.split()[-1]: arguments.split()[0] for instruction, arguments in dockerfile if instruction == "COPY"
    }
    installer = next(target for target, source in copied.items() if source == "scripts/system-packages")
    assert any(command[0] in (installer, PurePosixPath(installer).name) for command in _run_commands(dockerfile))
    script = (PROJECT_DIR / "scripts/system-packages").read_text()
    listed = re.search(r"WORKER_PACKAGES=\(([^)]*)\)", script)
    assert listed is not None
    packages = set(listed.group(1).split())
    assert {"latexml", "bubblewrap", "imagemagick", "ghostscript", "texlive-latex-extra"} <= packages
    assert _image_user(dockerfile) not in ("root", "0")


@pytest.mark.parametrize(
    "path", ["var/secret_key", "var/pgdata/PG_VERSION", ".venv/bin/python", ".git/HEAD", "config/__pycache__/a.pyc"]
)
def test_dockerignore_keeps_secrets_data_the_virtualenv_and_git_out_of_the_image(path):
    patterns = [
        line.strip()
        for line in (PROJECT_DIR / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert not [p for p in patterns if p.startswith("!")], "no exceptions: they could let a secret back in"

    def excluded(candidate: str) -> bool:
        # Docker's rule: a pattern excludes the paths it matches and everything under them.
        parts = candidate.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        return any(
            fnmatch.fnmatch(prefix, p.strip("/")) or fnmatch.fnmatch(prefix, p.strip("/").removeprefix("**/"))
            for p in patterns
            for prefix in prefixes
        )

    assert excluded(path)
    assert not excluded("manage.py") and not excluded("config/settings.py")


def _gunicorn_commands(compose: dict, dockerfile: list[tuple[str, str]]) -> list[list[str]]:

    commands = [
        service["command"] for service in compose["services"].values() if "gunicorn" in service.get("command", [])
    ]
    commands += [json.loads(arguments) for instruction, arguments in dockerfile if instruction == "CMD"]
    return [command for command in commands if "gunicorn" in command]


def test_every_gunicorn_masks_tokens_and_runs_threaded_workers(compose, dockerfile):
    commands = _gunicorn_commands(compose, dockerfile)
    assert len(commands) == 2  # the web service and the image's default command
    for command in commands:
        assert command[command.index("--logger-class") + 1] == "config.gunicorn.TokenMaskingLogger"
        assert command[command.index("--worker-class") + 1] == "gthread"


SANDBOXED = ("web", "convert-engine", "latexml-worker")  # they run latexmlc in bubblewrap
SECCOMP = "deploy/docker/seccomp-bwrap.json"
# What bwrap calls to make its namespaces and mounts: the profile must let them through.
BWRAP_SYSCALLS = {"unshare", "clone", "clone3", "mount", "umount2", "pivot_root", "setns", "prctl"}


def test_the_services_that_convert_get_what_bubblewrap_needs_and_no_more(compose):
    # Docker's default seccomp profile refuses bwrap's user namespaces; ours allows them. AppArmor's default
    # profile denies mount. No capability and no privilege escalation; no /proc of the sandbox's own, since
    # Docker's masked /proc paths refuse it (docs/decisions/container-sandbox.md).
    for name in SANDBOXED:
        service = compose["services"][name]
        options = set(service.get("security_opt", []))
        assert {f"seccomp={SECCOMP}", "apparmor=unconfined", "no-new-privileges:true"} <= options, name
        assert not {"seccomp=unconfined", "systempaths=unconfined"} & options, name
        assert service["cap_drop"] == ["ALL"], name
        assert not service.get("privileged"), name
        assert service["environment"].get("CONVERSION_SANDBOX", "bwrap") == "bwrap", name
        assert service["environment"]["CONVERSION_SANDBOX_PROC"] == "none", name
    for name, service in compose["services"].items():
        if name not in SANDBOXED:
            assert not any(option.startswith("seccomp") for option in service.get("security_opt", [])), name


def test_the_seccomp_profile_lets_bubblewrap_through_and_refuses_what_no_conversion_needs():
    profile = json.loads((PROJECT_DIR / SECCOMP).read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    denied = {name for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ERRNO" for name in rule["names"]}
    assert not denied & BWRAP_SYSCALLS
    assert {"keyctl", "bpf", "ptrace", "kexec_load", "init_module", "io_uring_setup", "perf_event_open"} <= denied
    # A denylist must cover the 32-bit ABIs too, or a 32-bit call of the same syscall would pass.
    arches = {entry["architecture"]: set(entry["subArchitectures"]) for entry in profile["archMap"]}
    assert arches["SCMP_ARCH_X86_64"] == {"SCMP_ARCH_X86", "SCMP_ARCH_X32"}


def _k8s_worker() -> dict:
    documents = yaml.safe_load_all((PROJECT_DIR / "deploy/kubernetes/base/latexml-worker.yaml").read_text())
    return next(doc for doc in documents if doc["kind"] == "Deployment")["spec"]["template"]["spec"]


def test_the_compose_and_kubernetes_workers_run_the_same_image_command_and_security_settings(compose):
    service = compose["services"]["latexml-worker"]
    pod = _k8s_worker()
    (container,) = pod["containers"]
    # The image: the same repository (compose's tag can be set with CCS_IMAGE; kustomize sets the cluster's).
    compose_image = re.sub(r"\$\{CCS_IMAGE:-([^}]*)\}", r"\1", service["image"]).split(":")[0]
    assert compose_image == container["image"]
    # The command: the same, the dispatcher's host named as each network names it.
    assert [arg.replace("tcp://dispatcher:", "tcp://ccs-dispatcher:") for arg in service["command"]] == container[
        "command"
    ]
    uid, gid = (int(part) for part in service["user"].split(":"))
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (uid, gid)
    profile = pod["securityContext"]["seccompProfile"]
    assert f"seccomp={SECCOMP}" in service["security_opt"]
    assert profile == {"type": "Localhost", "localhostProfile": "ccs/" + PurePosixPath(SECCOMP).name}
    assert "apparmor=unconfined" in service["security_opt"]
    assert pod["securityContext"]["appArmorProfile"] == {"type": "Unconfined"}
    context = container["securityContext"]
    assert context["capabilities"] == {"drop": service["cap_drop"]}
    assert context["allowPrivilegeEscalation"] is ("no-new-privileges:true" not in service["security_opt"])
    assert context["readOnlyRootFilesystem"] is service["read_only"]
    env = {item["name"]: item["value"] for item in container.get("env", [])}
    assert env == service["environment"]
    # No database, no secret: neither holds any.
    assert "envFrom" not in container


def test_the_dispatcher_ports_are_reserved_from_the_containers_ephemeral_ports(compose):
    """They lie in Linux's ephemeral range: an outgoing connection of the container could take one as its own
    port and keep the dispatcher from binding it (config/ports.py)."""
    dispatcher = compose["services"]["dispatcher"]
    published = sorted(int(mapping.split(":")[-1]) for mapping in dispatcher["ports"])
    assert dispatcher["sysctls"] == {"net.ipv4.ip_local_reserved_ports": ",".join(map(str, published))}


def test_the_image_has_a_health_check_and_every_other_role_its_own_or_none_on_purpose(compose, dockerfile):
    assert any(instruction == "HEALTHCHECK" and "/healthz" in arguments for instruction, arguments in dockerfile)
    for name, service in compose["services"].items():
        if service.get("image", "").startswith("${CCS_IMAGE") and name != "web":
            # The image's check asks the web server, which only web runs.
            assert "healthcheck" in service, f"{name} would inherit the web server's health check"


def test_every_upstream_image_has_a_stand_in_of_the_same_version_for_machines_without_a_registry(compose, dockerfile):
    """deploy/check.py builds these where no registry answers: the same Debian release and major versions."""
    (base,) = [arguments for instruction, arguments in dockerfile if instruction == "FROM"]
    assert base == "debian:bookworm-slim"
    for name in ("postgres", "redis"):
        tag = compose["services"][name]["image"]
        standin = (PROJECT_DIR / "deploy/docker/standins" / name / "Dockerfile").read_text()
        assert f"stand-in for the official {tag} image" in standin
        assert f"FROM {base}" in standin
        assert tag.endswith("-bookworm")

"""A small renderer of the kustomize fields deploy/kubernetes uses, so the tests render the base and the
overlay without a kustomize binary (CI has none). It takes `resources` (files and directories holding a
kustomization), `namespace`, `labels` (without selectors), `images`, `replicas`, `secretGenerator` from
env files with `disableNameSuffixHash`, and `patches` given by path as strategic merges. Any other field,
and any list in a patch it does not know how to merge, is refused rather than rendered differently from
kustomize: an overlay that needs more needs this renderer to learn it first (tests/ops/test_kubernetes.py
checks the renderer itself on small trees)."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import yaml

KUSTOMIZATION_FIELDS = {
    "apiVersion", "kind", "resources", "namespace", "labels", "images", "replicas", "secretGenerator",
    "generatorOptions", "patches",
}  # fmt: skip
# The merge keys of the lists of built-in kinds that the patches may touch (Kubernetes' patchMergeKey).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
}
# Lists of built-in kinds replaced whole by a patch, as a strategic merge does with atomic lists.
ATOMIC_LISTS = {"command", "args", "accessModes", "drop", "add", "hosts"}
CLUSTER_SCOPED = {"Namespace", "PersistentVolume", "StorageClass", "ClusterRole", "ClusterRoleBinding"}
BUILT_IN_GROUPS = {"v1", "apps/v1", "batch/v1", "networking.k8s.io/v1", "policy/v1", "autoscaling/v2"}


class KustomizeError(ValueError):
    pass


def render(directory: Path) -> list[dict[str, Any]]:
    """The objects `kustomize build directory` gives, for the fields this renderer takes."""
    directory = Path(directory)
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kustomization) - KUSTOMIZATION_FIELDS
    if unknown:
        raise KustomizeError(f"{directory}: fields this renderer does not take: {', '.join(sorted(unknown))}")
    objects: list[dict[str, Any]] = []
    for entry in kustomization.get("resources", []):
        path = (directory / entry).resolve()
        objects += render(path) if path.is_dir() else _documents(path)
    objects += _secrets(directory, kustomization)
    _unique(objects)
    for patch in kustomization.get("patches", []):
        if set(patch) != {"path"}:
            raise KustomizeError(f"{directory}: only patches given by path are taken, not {patch}")
        for document in _documents(directory / patch["path"]):
            target = _find(objects, document["kind"], document["metadata"]["name"])
            merged = strategic_merge(target, document, built_in=target["apiVersion"] in BUILT_IN_GROUPS)
            target.clear()
            target.update(merged)
    for label in kustomization.get("labels", []):
        if label.get("includeSelectors", False) or label.get("includeTemplates", False):
            raise KustomizeError("labels: only includeSelectors and includeTemplates false are taken")
        for obj in objects:
            obj["metadata"].setdefault("labels", {}).update(label["pairs"])
    if "namespace" in kustomization:
        for obj in objects:
            if obj["kind"] not in CLUSTER_SCOPED:
                obj["metadata"]["namespace"] = kustomization["namespace"]
    for image in kustomization.get("images", []):
        _set_image(objects, image)
    for replica in kustomization.get("replicas", []):
        _find(objects, None, replica["name"])["spec"]["replicas"] = replica["count"]
    return objects


def strategic_merge(target: Any, patch: Any, *, built_in: bool, field: str = "") -> Any:
    """`patch` merged into a copy of `target`: maps key by key, the lists of MERGE_KEYS item by item on
    their key; other lists are replaced (atomic lists of built-in kinds, and every list of a custom
    resource, which kustomize merges as JSON)."""
    if isinstance(patch, dict) and isinstance(target, dict):
        merged = copy.deepcopy(target)
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            elif key in merged:
                merged[key] = strategic_merge(merged[key], value, built_in=built_in, field=key)
            else:
                merged[key] = copy.deepcopy(value)
        return merged
    if isinstance(patch, list) and isinstance(target, list) and built_in and field in MERGE_KEYS:
        key = MERGE_KEYS[field]
        merged_list = copy.deepcopy(target)
        for item in patch:
            match = next((i for i, old in enumerate(merged_list) if old.get(key) == item.get(key)), None)
            if match is None:
                merged_list.append(copy.deepcopy(item))
            else:
                merged_list[match] = strategic_merge(merged_list[match], item, built_in=built_in)
        return merged_list
    if isinstance(patch, list) and built_in and field not in ATOMIC_LISTS:
        raise KustomizeError(f"the renderer does not know how a strategic merge treats the list {field!r}")
    return copy.deepcopy(patch)


def _documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def _secrets(directory: Path, kustomization: dict) -> list[dict[str, Any]]:
    generators = kustomization.get("secretGenerator", [])
    if generators and not kustomization.get("generatorOptions", {}).get("disableNameSuffixHash"):
        raise KustomizeError("secretGenerator: only names without a hash suffix (disableNameSuffixHash) are taken")
    secrets = []
    for generator in generators:
        if set(generator) - {"name", "envs", "type"}:
            raise KustomizeError(f"secretGenerator: only name, envs and type are taken, not {generator}")
        data: dict[str, str] = {}
        for env_file in generator.get("envs", []):
            for line in (directory / env_file).read_text().splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    name, _, value = line.partition("=")
                    data[name.strip()] = base64.b64encode(value.encode()).decode()
        secrets.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": generator["name"]},
                "type": generator.get("type", "Opaque"),
                "data": data,
            }
        )
    return secrets


def _unique(objects: list[dict[str, Any]]) -> None:
    seen = set()
    for obj in objects:
        key = (obj["kind"], obj["metadata"]["name"])
        if key in seen:
            raise KustomizeError(f"{key[0]} {key[1]} is defined twice")
        seen.add(key)


def _find(objects: list[dict[str, Any]], kind: str | None, name: str) -> dict[str, Any]:
    found = [
        obj
        for obj in objects
        if obj["metadata"]["name"] == name and (obj["kind"] == kind if kind else "replicas" in _spec_keys(obj))
    ]
    if len(found) != 1:
        raise KustomizeError(f"no single {kind or 'scalable object'} named {name} to change")
    return found[0]


def _spec_keys(obj: dict[str, Any]) -> set[str]:
    return set(obj.get("spec", {})) | ({"replicas"} if obj["kind"] in ("Deployment", "StatefulSet") else set())


def _set_image(objects: list[dict[str, Any]], image: dict[str, str]) -> None:
    for obj in objects:
        pod = obj.get("spec", {}).get("template", {}).get("spec", {})
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            name = container["image"].split("@")[0]
            name = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
            if name == image["name"]:
                container["image"] = f"{image.get('newName', name)}:{image['newTag']}"

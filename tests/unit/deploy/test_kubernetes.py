"""deploy/k8s, checked offline (no cluster runs here): every overlay renders with `kubectl
kustomize`, every object is valid against the Kubernetes schemas (`kubernetes-validate`), and
the rules the README promises hold: nothing runs as root or privileged, every container has
probes and limits, engines answer only the gateway (and Prometheus), and the images are the
ones the compose file builds or names."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from system1.core.config import load_config

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "deploy" / "k8s"
TARGETS = ["base", "overlays/gpu", "overlays/prometheus", "overlays/ingress"]
KUBERNETES_VERSION = "1.33.0"


def render(target: str) -> list[dict]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is missing: it renders deploy/k8s (apt install kubectl, or kubectl from the Kubernetes project)")
    done = subprocess.run([kubectl, "kustomize", str(K8S / target)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def pods(objects: list[dict]) -> list[dict]:
    return [o for o in objects if o["kind"] == "Deployment"]


@pytest.fixture(scope="module", params=TARGETS)
def rendered(request) -> tuple[str, list[dict]]:
    return request.param, render(request.param)


def test_every_object_is_valid_against_the_kubernetes_schemas(rendered):
    _, objects = rendered
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_nothing_runs_as_root_or_privileged_and_every_container_has_probes_and_limits(rendered):
    target, objects = rendered
    assert pods(objects), target
    for deployment in pods(objects):
        spec = deployment["spec"]["template"]["spec"]
        where = f"{target}: {deployment['metadata']['name']}"
        assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0, where
        assert spec.get("automountServiceAccountToken") is False, where
        assert not spec.get("hostNetwork") and not spec.get("hostPID"), where
        for container in spec["containers"]:
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False and not security.get("privileged"), where
            assert security["capabilities"]["drop"] == ["ALL"], where
            assert container["livenessProbe"] and container["readinessProbe"], where
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(container["resources"][kind]), where


def test_engines_answer_only_the_gateway_and_prometheus(rendered):
    target, objects = rendered
    engines = [d for d in pods(objects) if d["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component") == "engine"]
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"
                and o["spec"]["podSelector"].get("matchLabels") == {"app.kubernetes.io/component": "engine"}]
    assert engines and policies, target
    allowed = {peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"]
               for policy in policies for rule in policy["spec"]["ingress"] for peer in rule["from"]}
    assert allowed <= {"gateway", "metrics"} and "gateway" in allowed, allowed
    assert all(policy["spec"]["policyTypes"] == ["Ingress"] for policy in policies)


def test_images_are_the_ones_the_compose_files_build_or_name(rendered):
    target, objects = rendered
    compose = (ROOT / "compose.yaml").read_text() + (ROOT / "compose.gpu.yaml").read_text()
    named = set(re.findall(r"image: (\S+)", compose))
    for deployment in pods(objects):
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            image = container["image"]
            built = image.replace(":dev", ":${TAG:-dev}")
            assert image in named or built in named, f"{target}: {image} is not an image of the compose stack"


def test_the_gateways_config_in_each_overlay_loads_without_errors(rendered, tmp_path):
    target, objects = rendered
    [config] = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("gateway-config")]
    path = tmp_path / "config.toml"
    path.write_text(config["data"]["config.toml"])
    loaded = load_config({"SYSTEM1_CONFIG": str(path), "SYSTEM1_INSTALL_DIR": str(tmp_path / "state")})
    assert loaded.errors == [], loaded.errors
    systemone = tomllib.loads(config["data"]["config.toml"])["providers"]["systemone"]
    assert systemone["endpoint"] == "http://systemone:8790"  # the engine's Service, as in the compose stack

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
TARGETS = ["base", "overlays/gpu", "overlays/prometheus", "overlays/ingress", "overlays/replicas"]
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


def gateway_of(objects: list[dict]) -> dict:
    [deployment] = [d for d in pods(objects) if d["metadata"]["name"] == "gateway"]
    return deployment


def env_of(container: dict) -> dict[str, str]:
    """The container's literal environment (values from Secrets left out)."""
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def test_the_gateways_config_in_each_overlay_loads_without_errors(rendered, tmp_path):
    target, objects = rendered
    [config] = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("gateway-config")]
    path = tmp_path / "config.toml"
    path.write_text(config["data"]["config.toml"])
    [container] = gateway_of(objects)["spec"]["template"]["spec"]["containers"]
    settings = {k: v for k, v in env_of(container).items() if k.startswith("SYSTEM1_") and k not in ("SYSTEM1_CONFIG", "SYSTEM1_INSTALL_DIR")}
    loaded = load_config({**settings, "SYSTEM1_CONFIG": str(path), "SYSTEM1_INSTALL_DIR": str(tmp_path / "state")})
    assert loaded.errors == [], loaded.errors
    systemone = tomllib.loads(config["data"]["config.toml"])["providers"]["systemone"]
    assert systemone["endpoint"] == "http://systemone:8790"  # the engine's Service, as in the compose stack


def test_one_replica_owns_its_state_claim_and_several_share_only_read_only_learned_files(rendered):
    """One replica: the state claim is ReadWriteOnce, so a rollout stops the old pod first.
    Several: no claim at all, state per pod, the learned files from one read-only ConfigMap
    folder that [service] learned_dir names, a client kept on one replica, and a drain that
    takes one replica at a time."""
    target, objects = rendered
    deployment = gateway_of(objects)
    spec = deployment["spec"]["template"]["spec"]
    [container] = spec["containers"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    claims = [o for o in objects if o["kind"] == "PersistentVolumeClaim" and o["metadata"]["name"] == "gateway-state"]
    if deployment["spec"].get("replicas", 1) == 1:
        assert deployment["spec"]["strategy"]["type"] == "Recreate" and claims, target
        assert volumes["state"]["persistentVolumeClaim"]["claimName"] == "gateway-state"
        return
    assert not claims and not any("persistentVolumeClaim" in v for v in volumes.values()), target
    assert "emptyDir" in volumes["state"] and mounts["state"]["mountPath"] == env_of(container)["SYSTEM1_INSTALL_DIR"]
    learned = env_of(container)["SYSTEM1_SERVICE_LEARNED_DIR"]
    [shared] = [m for m in container["volumeMounts"] if m["mountPath"] == learned]
    assert shared["readOnly"] is True and "configMap" in volumes[shared["name"]]
    paths = {item["path"] for item in volumes[shared["name"]]["configMap"]["items"]}
    assert paths == {"calibration.json", "heads.json", "router/skills.json"}  # where the gateway reads them
    [service] = [o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == "gateway"]
    assert service["spec"]["sessionAffinity"] == "ClientIP"
    [budget] = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    assert budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert budget["spec"]["minAvailable"] < deployment["spec"]["replicas"]


def test_the_learned_files_the_replicas_mount_are_where_the_gateway_reads_them(tmp_path):
    from system1.core.calibration import LOCAL_FITS_NAME
    from system1.core.heads import LOCAL_HEADS_NAME
    from system1.router.skills import skills_path

    [container] = gateway_of(render("overlays/replicas"))["spec"]["template"]["spec"]["containers"]
    learned = env_of(container)["SYSTEM1_SERVICE_LEARNED_DIR"]
    loaded = load_config({"SYSTEM1_SERVICE_LEARNED_DIR": learned, "SYSTEM1_INSTALL_DIR": str(tmp_path)})
    expected = {str(Path(learned) / p) for p in ("calibration.json", "heads.json", "router/skills.json")}
    assert {str(loaded.learned_dir / LOCAL_FITS_NAME), str(loaded.learned_dir / LOCAL_HEADS_NAME),
            str(skills_path(loaded.settings.router, loaded.learned_dir))} == expected


def test_the_readmes_mcp_commands_name_what_the_manifests_define():
    """No cluster runs here: the commands the README gives for MCP from a laptop are checked
    against the rendered base (the relay they reach is tested through `docker exec` in the stack
    tier, and /mcp over HTTP in the unit tier)."""
    readme = (K8S / "README.md").read_text(encoding="utf-8")
    exec_line = re.search(r"kubectl exec -i -n (\S+) deploy/(\S+) -- env SYSTEM1_CLIENT=\$USER system1 mcp", readme)
    forward = re.search(r"kubectl -n (\S+) port-forward svc/(\S+) (\d+):(\d+)", readme)
    assert exec_line and forward, "the README gives both MCP entries"
    objects = render("base")
    namespace = next(o["metadata"]["name"] for o in objects if o["kind"] == "Namespace")
    assert exec_line[1] == forward[1] == namespace
    deployment = gateway_of(objects)
    assert exec_line[2] == deployment["metadata"]["name"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"].startswith("system1/gateway:")  # the image whose `system1 mcp` the stack tier runs
    [service] = [o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == forward[2]]
    assert int(forward[4]) in {p["port"] for p in service["spec"]["ports"]}

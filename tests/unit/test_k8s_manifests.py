"""The Kubernetes manifests (ops/k8s), checked offline: every object against the Kubernetes
schemas (kubernetes-validate, strict: unknown fields fail), and the product's own rules that
no schema knows: probes on the health routes, secrets only by reference, no database exposed,
nothing running as root."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

K8S = Path(__file__).resolve().parents[2] / "ops" / "k8s"
VERSIONS = ("1.30.0", "1.37.0")  # the oldest supported release we name, and the newest
SECRET_VARS = {"DATABASE_URL", "DATABASE_URL_READ", "POSTGRES_PASSWORD", "FACTBANK_METRICS_TOKEN"}


def _objects() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        out += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return out


OBJECTS = _objects()


def _pod_spec(obj: dict) -> dict | None:
    kind = obj["kind"]
    if kind in ("Deployment", "StatefulSet", "Job"):
        return obj["spec"]["template"]["spec"]
    if kind == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return None


def _name(obj: dict) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def test_kustomization_lists_every_file_and_nothing_else():
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("obj", [o for _, o in OBJECTS], ids=[_name(o) for _, o in OBJECTS])
def test_every_object_is_valid_against_the_kubernetes_schema(obj, version):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        pytest.fail(f"{_name(obj)} against Kubernetes {version}: {exc}")


def test_the_schema_check_can_fail():
    """The validator is not a rubber stamp: a typo'd field and a wrong type are refused."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    deployment = next(o for _, o in OBJECTS if _name(o) == "Deployment/ingest")
    bad = yaml.safe_load(yaml.safe_dump(deployment))
    bad["spec"]["replica"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSIONS[-1], strict=True)
    bad = yaml.safe_load(yaml.safe_dump(deployment))
    bad["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSIONS[-1], strict=True)


def test_every_long_running_container_has_readiness_and_liveness_probes():
    for _, obj in OBJECTS:
        if obj["kind"] not in ("Deployment", "StatefulSet"):
            continue
        for c in _pod_spec(obj)["containers"]:
            assert "readinessProbe" in c and "livenessProbe" in c, _name(obj)


def test_the_services_probe_their_health_routes_and_run_the_service_they_name():
    for name, port in (("ingest", 8701), ("recall", 8702), ("worker", 8703)):
        obj = next(o for _, o in OBJECTS if _name(o) == f"Deployment/{name}")
        (c,) = _pod_spec(obj)["containers"]
        assert c["args"] == ["serve", name, "--port", str(port)]
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert c["ports"][0]["containerPort"] == port


def test_secrets_come_only_from_the_cluster_secret_store():
    assert not [o for _, o in OBJECTS if o["kind"] == "Secret"], "no Secret objects in the repo"
    for _, obj in OBJECTS:
        spec = _pod_spec(obj)
        if spec is None:
            continue
        for c in spec["containers"]:
            for env in c.get("env", []):
                if env["name"] in SECRET_VARS:
                    assert "value" not in env, (_name(obj), env["name"])
                    assert env["valueFrom"]["secretKeyRef"]["name"] == "factbank-db"
    config = next(o for _, o in OBJECTS if o["kind"] == "ConfigMap")
    assert not SECRET_VARS & set(config["data"])


def test_no_database_is_exposed():
    """Postgres and Redis: ClusterIP services only, each behind a NetworkPolicy that admits
    the factbank pods alone; no service anywhere is a NodePort or LoadBalancer."""
    for _, obj in OBJECTS:
        if obj["kind"] == "Service":
            assert obj["spec"].get("type", "ClusterIP") == "ClusterIP", _name(obj)
    policies = {o["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"]: o
                for _, o in OBJECTS if o["kind"] == "NetworkPolicy"}
    for db in ("postgres", "redis"):
        (rule,) = policies[db]["spec"]["ingress"]
        assert rule["from"] == [
            {"podSelector": {"matchLabels": {"factbank.dev/database-client": "true"}}}]
    clients = {_name(o) for _, o in OBJECTS
               if (s := _pod_spec(o)) is not None
               and any(e.get("name") == "DATABASE_URL" for c in s["containers"]
                       for e in c.get("env", []))}
    labelled = set()
    for _, obj in OBJECTS:
        tpl = (obj["spec"]["jobTemplate"]["spec"]["template"] if obj["kind"] == "CronJob"
               else obj["spec"].get("template") if "spec" in obj else None)
        if tpl and tpl["metadata"]["labels"].get("factbank.dev/database-client") == "true":
            labelled.add(_name(obj))
    assert clients == labelled  # every pod that needs the database may reach it, no other


def test_nothing_runs_as_root_or_escalates():
    for _, obj in OBJECTS:
        spec = _pod_spec(obj)
        if spec is None:
            continue
        assert spec["securityContext"]["runAsNonRoot"] is True, _name(obj)
        for c in spec["containers"]:
            assert c["securityContext"]["allowPrivilegeEscalation"] is False, _name(obj)
            assert c["securityContext"]["capabilities"]["drop"] == ["ALL"], _name(obj)


def test_migrations_run_as_a_job_and_backups_as_a_cronjob():
    kinds = {_name(o): o for _, o in OBJECTS}
    (c,) = _pod_spec(kinds["Job/factbank-migrate"])["containers"]
    assert c["args"] == ["migrate"]
    cron = kinds["CronJob/factbank-backup"]
    (c,) = _pod_spec(cron)["containers"]
    assert c["command"] == ["/opt/factbank/ops/backup"]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"

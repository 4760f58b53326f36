"""docker-compose.yml and Dockerfile, checked offline (no Docker engine needed)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from streammetrics.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
CHECK_JSONSCHEMA = Path(sys.executable).with_name("check-jsonschema")
yaml = pytest.importorskip("ruamel.yaml", reason="ruamel.yaml (a check-jsonschema dependency) parses the compose file")


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    if not CHECK_JSONSCHEMA.exists():
        pytest.skip(f"check-jsonschema is not installed next to {sys.executable}")
    return subprocess.run([str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.compose-spec", str(path)],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.YAML(typ="safe").load(COMPOSE.read_text())


def test_compose_file_matches_the_compose_spec():
    result = validate(COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_check_rejects_a_broken_compose_file(tmp_path):
    broken = tmp_path / "docker-compose.yml"
    broken.write_text("services:\n  kafka:\n    image: apache/kafka:3.9.1\n    depends_on: 5\n    ports: {a: b}\n")
    result = validate(broken)
    assert result.returncode != 0 and "depends_on" in result.stdout + result.stderr


def test_kafka_is_a_single_kraft_node_reachable_as_kafka_9092(compose):
    kafka = compose["services"]["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    env = kafka["environment"]
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{env['KAFKA_NODE_ID']}@kafka:9093"
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"].split(",")
    assert "PLAINTEXT://:9092" in env["KAFKA_LISTENERS"].split(",")
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == 1
    assert "kafka:9092" in " ".join(kafka["healthcheck"]["test"])
    assert "kafka-data:/var/lib/kafka/data" in kafka["volumes"] and env["KAFKA_LOG_DIRS"] == "/var/lib/kafka/data"


def test_topics_job_waits_for_kafka_and_creates_the_service_topics(compose):
    topics = compose["services"]["topics"]
    assert topics["depends_on"] == {"kafka": {"condition": "service_healthy"}}
    script = topics["command"][0]
    created = dict(re.findall(r"^create --topic (\S+)(.*)$", script, re.MULTILINE))
    assert set(created) == {"predictions", "snapshots", "predictions-dlq", "alerts",
                            "streammetrics-predictions-changelog", "streammetrics-predictions-partials",
                            "streammetrics-predictions-merge-changelog"}
    assert "cleanup.policy=compact" in created["snapshots"] and "cleanup.policy=compact" in created["alerts"]
    assert "cleanup.policy=delete" in script  # internal topics: chunked checkpoints must not be compacted
    assert "$$@" in script, "a literal $@ must be escaped from compose interpolation"


def test_service_runs_two_replicas_without_a_shared_volume(compose):
    service = compose["services"]["streammetrics"]
    assert service["build"] == "."
    assert service["command"] == [
        "consume", "--bootstrap-servers", "kafka:9092", "--topic", "predictions",
        "--output-topic", "snapshots", "--dlq-topic", "predictions-dlq",
        "--partitioning", "any", "--metrics-port", "9108",
        "--alerts", "/etc/streammetrics/alerts.yaml", "--alerts-topic", "alerts",
    ]
    assert service["depends_on"] == {"topics": {"condition": "service_completed_successfully"}}
    assert service["deploy"]["replicas"] == 2
    # state lives in Kafka: the only volume is the read-only rules file
    assert service["volumes"] == ["./deploy/alerts.yaml:/etc/streammetrics/alerts.yaml:ro"]
    assert "state" not in compose["volumes"]
    assert "9108-9109:9108" in service["ports"]
    assert "9108/healthz" in " ".join(service["healthcheck"]["test"])


def test_demo_producer_only_produces_into_kafka(compose):
    demo = compose["services"]["demo-producer"]
    assert demo["command"] == ["demo", "--bootstrap-servers", "kafka:9092", "--produce-only"]
    assert demo["image"] == compose["services"]["streammetrics"]["image"]
    assert demo["depends_on"]["topics"] == {"condition": "service_completed_successfully"}


@pytest.mark.parametrize("service", ["streammetrics", "demo-producer"])
def test_compose_commands_are_valid_cli_invocations(compose, service):
    command = compose["services"][service]["command"]
    try:
        args = build_parser().parse_args(command)
    except SystemExit as exc:
        pytest.fail(f"`streammetrics {' '.join(command)}` is rejected by the CLI (exit {exc.code})")
    assert args.bootstrap_servers == "kafka:9092"


def test_dockerfile_installs_the_kafka_extra_as_a_non_root_user():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim$", dockerfile, re.MULTILINE)
    extras = re.search(r'pip install "\.\[([a-z,]+)\]"', dockerfile)
    assert extras is not None and "kafka" in extras.group(1).split(",")
    users = re.findall(r"^USER (\S+)$", dockerfile, re.MULTILINE)
    assert users and users[-1] not in {"root", "0"}
    assert re.search(r'^ENTRYPOINT \["streammetrics"\]$', dockerfile, re.MULTILINE)
    assert re.search(r"chown \S+ /state", dockerfile), "the state volume must be writable by the user"


def test_dockerfile_copies_only_what_exists_and_is_not_ignored():
    dockerfile = (ROOT / "Dockerfile").read_text()
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    for line in re.findall(r"^COPY (.+)$", dockerfile, re.MULTILINE):
        for source in line.split()[:-1]:
            assert (ROOT / source).exists(), f"Dockerfile copies {source}, which does not exist"
            assert source not in ignored, f"Dockerfile copies {source}, which .dockerignore excludes"


def test_prometheus_and_grafana_are_provisioned_from_the_repository(compose):
    prometheus, grafana = compose["services"]["prometheus"], compose["services"]["grafana"]
    assert "./deploy/prometheus:/etc/prometheus:ro" in prometheus["volumes"]
    config = yaml.YAML(typ="safe").load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    assert config["scrape_configs"][0]["dns_sd_configs"][0] == {"names": ["streammetrics"], "type": "A",
                                                                "port": 9108}
    for mount in grafana["volumes"]:
        source = mount.split(":")[0]
        assert (ROOT / source).is_dir(), mount
    datasource = yaml.YAML(typ="safe").load(
        (ROOT / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())["datasources"][0]
    assert datasource["url"] == "http://prometheus:9090" and datasource["uid"] == "prometheus"


def test_the_generated_deploy_files_are_current():
    import importlib.util

    from streammetrics.integrations.alertmanager import prometheus_rules
    from streammetrics.stream.alerting import load_rules_file, parse_rules

    rules, _ = load_rules_file(str(ROOT / "deploy" / "alerts.yaml"))
    assert (ROOT / "deploy/prometheus/alerts.yml").read_text() == prometheus_rules(parse_rules(rules)), (
        "run: streammetrics alert-rules --alerts deploy/alerts.yaml -o deploy/prometheus/alerts.yml")
    spec = importlib.util.spec_from_file_location("make_dashboard", ROOT / "deploy/grafana/make_dashboard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.OUT.read_text() == module.render(), "run: python deploy/grafana/make_dashboard.py"


def test_the_dashboard_and_rule_file_query_series_the_service_exports():
    pytest.importorskip("prometheus_client")
    from consumers.observability import prometheus_doc

    exported = set(re.findall(r"`([a-z_]+)`", prometheus_doc()))
    queried = set()
    for path in ("deploy/grafana/dashboards/streammetrics.json", "deploy/prometheus/alerts.yml"):
        queried |= set(re.findall(r"\b((?:streammetrics|process|python)_[a-z_]+)\b", (ROOT / path).read_text()))
    queried.discard("streammetrics_rule")  # a label of the generated rules, not a series
    assert queried and queried <= exported, sorted(queried - exported)

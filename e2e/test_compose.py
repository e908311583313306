"""docker-compose.yaml, checked without Docker (none runs here).

The file is validated against the Compose Specification's JSON schema, kept in
deploy/compose/compose-spec.json (see deploy/compose/README.md for its commit), and the
promises a user relies on are checked: the brokers have the properties
`strom-dev-cluster --brokers 3` writes (rendered here by strom.config.dev_cluster, with
container hostnames) plus an EXTERNAL listener for the host, Strom itself accepts them,
Prometheus scrapes every broker's metrics listener, every published port is unique and
named in the README, the bind-mounted files exist and Grafana loads the dashboards folder.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs; used through two calls
import pytest
import yaml
from strom.config import dev_cluster, loading

REPO = Path(__file__).resolve().parents[1]
COMPOSE_FILE = REPO / "docker-compose.yaml"
SCHEMA_FILE = REPO / "deploy" / "compose" / "compose-spec.json"
README = REPO / "README.md"
README_SECTION = "## A cluster with Prometheus and Grafana: docker compose"

BROKERS = ("broker-1", "broker-2", "broker-3")
BROKER_DATA_DIR = PurePosixPath("/var/lib/strom")  # the image's VOLUME
EXTERNAL_LISTENER = "EXTERNAL"
EXTERNAL_PORT_OFFSET = 10000  # broker-N's EXTERNAL port: its client port + 10000
PROMETHEUS_CONTAINER_PORT = 9090


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def _service(compose: dict[str, Any], name: str) -> dict[str, Any]:
    service = compose["services"][name]
    assert isinstance(service, dict)
    return service


def dev_cluster_nodes(cluster_id: str) -> list[dev_cluster.DevNode]:
    """What strom-dev-cluster writes for three nodes, with the containers' hostnames."""
    return dev_cluster.render_dev_cluster(
        len(BROKERS), Path(BROKER_DATA_DIR), cluster_id=cluster_id, hosts=BROKERS
    )


def external_port(node: dev_cluster.DevNode) -> int:
    return node.client_port + EXTERNAL_PORT_OFFSET


def compose_broker_settings(node: dev_cluster.DevNode) -> dict[str, str]:
    """The dev cluster's properties for a node, plus the listener clients on the host use:
    bound on every interface, advertised as localhost:<the port published for it>."""
    settings = dict(node.settings)
    port = external_port(node)
    settings["listeners"] += f",{EXTERNAL_LISTENER}://0.0.0.0:{port}"
    settings["advertised.listeners"] += f",{EXTERNAL_LISTENER}://localhost:{port}"
    settings["listener.security.protocol.map"] += f",{EXTERNAL_LISTENER}:PLAINTEXT"
    return settings


def _shared_cluster_id(compose: dict[str, Any]) -> str:
    ids = {_service(compose, name)["environment"]["STROM_CLUSTER_ID"] for name in BROKERS}
    assert len(ids) == 1, f"the brokers disagree on cluster.id: {ids}"
    cluster_id = ids.pop()
    assert isinstance(cluster_id, str)
    return cluster_id


def _published_ports(service: dict[str, Any]) -> list[tuple[int, int]]:
    """(host port, container port) of each entry of `ports`."""
    result = []
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            result.append((int(entry["published"]), int(entry["target"])))
        else:
            match = re.fullmatch(r"(\d+):(\d+)", str(entry))
            assert match, f"ports entry {entry!r}: expected HOST:CONTAINER"
            result.append((int(match[1]), int(match[2])))
    return result


def _bind_mounts(service: dict[str, Any]) -> dict[str, str]:
    """{target: source} of a service's bind mounts (long syntax; sources relative to REPO)."""
    return {
        volume["target"]: volume["source"]
        for volume in service.get("volumes", [])
        if isinstance(volume, dict) and volume.get("type") == "bind"
    }


def _readme_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.find(f"\n{README_SECTION}\n")
    assert start >= 0, f"README.md has no section {README_SECTION!r}"
    end = text.find("\n## ", start + len(README_SECTION) + 1)
    return text[start : len(text) if end < 0 else end]


def test_the_file_is_valid_against_the_compose_specification(compose: dict[str, Any]) -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    # it names draft 07 without the trailing '#' jsonschema looks the draft up by
    assert schema["$schema"].rstrip("#") == "https://json-schema.org/draft-07/schema"
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    errors = [
        f"{'/'.join(map(str, error.absolute_path)) or '<top>'}: {error.message}"
        for error in validator.iter_errors(compose)
    ]
    assert errors == []
    # the schema is strict enough to catch a typo (so the check above means something)
    broken = copy.deepcopy(compose)
    broken["services"]["broker-1"]["enviroment"] = broken["services"]["broker-1"]["environment"]
    assert not validator.is_valid(broken)


def test_brokers_have_the_dev_cluster_properties_with_container_hostnames(
    compose: dict[str, Any],
) -> None:
    for node in dev_cluster_nodes(_shared_cluster_id(compose)):
        name = BROKERS[node.node_id - 1]
        environment = _service(compose, name)["environment"]
        expected = {
            loading.env_var_name(key): value for key, value in compose_broker_settings(node).items()
        }
        paste = "\n".join(f'      {key}: "{value}"' for key, value in expected.items())
        assert environment == expected, f"{name}'s environment should be:\n{paste}"
        # Strom accepts them, and tells clients on the host to come back to localhost
        config = loading.load_broker_config(environ=environment)
        assert config.node_id == node.node_id
        advertised = {listener.name: listener for listener in config.advertised_listeners}
        assert (advertised[EXTERNAL_LISTENER].host, advertised[EXTERNAL_LISTENER].port) == (
            "localhost",
            external_port(node),
        )
        assert config.inter_broker_listener_name == dev_cluster.LISTENER_NAME


def test_brokers_run_the_broker_image_with_a_volume_each(compose: dict[str, Any]) -> None:
    dockerfile = (REPO / "broker-image" / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r'^ENTRYPOINT \["strom-server"\]$', dockerfile, re.MULTILINE)
    image_variables = set(re.findall(r"\b(STROM_[A-Z_]+)=", dockerfile))
    assert image_variables, "the Dockerfile sets no STROM_ variable: has it changed?"
    volumes = []
    for node in dev_cluster_nodes(_shared_cluster_id(compose)):
        name = BROKERS[node.node_id - 1]
        service = _service(compose, name)
        assert service["build"] == {"context": ".", "dockerfile": "broker-image/Dockerfile"}
        assert service["hostname"] == name
        # the image's defaults (one listener on :9092, ...) must not leak into a node
        assert image_variables <= set(service["environment"])
        [volume] = service["volumes"]
        source, _, target = volume.partition(":")
        assert target == str(BROKER_DATA_DIR)
        assert PurePosixPath(node.log_dir).is_relative_to(BROKER_DATA_DIR)
        assert source in compose["volumes"]
        volumes.append(source)
        probe = f"http://{node.host}:{node.metrics_port}/readyz"
        assert probe in " ".join(service["healthcheck"]["test"])
    assert len(set(volumes)) == len(BROKERS), f"brokers share a volume: {volumes}"


def test_prometheus_scrapes_every_broker_and_loads_the_rules(compose: dict[str, Any]) -> None:
    service = _service(compose, "prometheus")
    mounts = _bind_mounts(service)
    config_source = mounts["/etc/prometheus/prometheus.yml"]
    config = yaml.safe_load((REPO / config_source).read_text(encoding="utf-8"))
    targets = {
        target
        for job in config["scrape_configs"]
        if job.get("metrics_path", "/metrics") == "/metrics"
        for static in job["static_configs"]
        for target in static["targets"]
    }
    expected = {
        f"{node.host}:{node.metrics_port}"
        for node in dev_cluster_nodes(_shared_cluster_id(compose))
    }
    assert targets == expected
    assert config["rule_files"] == ["/etc/prometheus/rules/strom-rules.yaml"]
    assert mounts["/etc/prometheus/rules/strom-rules.yaml"] == (
        "./charts/strom/rules/strom-rules.yaml"
    )
    assert re.fullmatch(r"prom/prometheus:v\d+\.\d+\.\d+", service["image"])
    assert (PROMETHEUS_CONTAINER_PORT, PROMETHEUS_CONTAINER_PORT) in _published_ports(service)


def test_grafana_is_provisioned_with_prometheus_and_the_dashboards_folder(
    compose: dict[str, Any],
) -> None:
    service = _service(compose, "grafana")
    assert re.fullmatch(r"grafana/grafana:\d+\.\d+\.\d+", service["image"])
    assert service["environment"]["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert service["environment"]["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    mounts = _bind_mounts(service)
    provisioning = {
        kind: yaml.safe_load((REPO / source).read_text(encoding="utf-8"))
        for target, source in mounts.items()
        for kind in ("datasources", "dashboards")
        if target.startswith(f"/etc/grafana/provisioning/{kind}/")
    }
    [datasource] = provisioning["datasources"]["datasources"]
    assert datasource["type"] == "prometheus"
    assert datasource["url"] == f"http://prometheus:{PROMETHEUS_CONTAINER_PORT}"
    [provider] = provisioning["dashboards"]["providers"]
    dashboards_target = provider["options"]["path"]
    assert mounts[dashboards_target] == "./charts/strom/dashboards"
    # every panel finds that data source: by its uid, or through a data-source variable
    # that picks Grafana's default Prometheus
    for path in sorted((REPO / "charts" / "strom" / "dashboards").glob("*.json")):
        dashboard = json.loads(path.read_text(encoding="utf-8"))
        variables = {
            f"${{{variable['name']}}}"
            for variable in dashboard.get("templating", {}).get("list", [])
            if variable["type"] == "datasource" and variable["query"] == datasource["type"]
        }
        used = set(re.findall(r'"datasource": \{[^}]*"uid": "([^"]+)"', path.read_text()))
        assert used <= variables | {datasource["uid"]}, f"{path.name}: data sources {used}"


def test_published_ports_are_unique_and_documented(compose: dict[str, Any]) -> None:
    published = [
        host_port
        for service in compose["services"].values()
        for host_port, _ in _published_ports(service)
    ]
    assert len(published) == len(set(published)), f"a host port is published twice: {published}"
    nodes = dev_cluster_nodes(_shared_cluster_id(compose))
    for node in nodes:
        service = _service(compose, BROKERS[node.node_id - 1])
        assert _published_ports(service) == [(external_port(node), external_port(node))]
    section = _readme_section()
    for port in published:
        assert re.search(rf"\b{port}\b", section), f"README's section does not name port {port}"
    bootstrap = ",".join(f"localhost:{external_port(node)}" for node in nodes)
    for text in ("docker compose up", "docker compose down -v", bootstrap):
        assert text in section


def test_bind_mounted_files_exist(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for target, source in _bind_mounts(service).items():
            assert (REPO / source).exists(), f"{name}: {source} (mounted at {target}) is missing"
    dashboards = REPO / "charts" / "strom" / "dashboards"
    assert list(dashboards.glob("*.json")), f"{dashboards} has no dashboard"

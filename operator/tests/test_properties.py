"""Each node's server.properties: what it sets, that the broker's own loader takes it for a
voter and for an observer, and that three strom-server processes started from the files
form a cluster."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from strom.client import admin as client_admin
from strom.config import broker as broker_config
from strom.config import loading
from strom_operator.reconcile import model, properties, spec

E2E_DIR = Path(__file__).resolve().parents[2] / "e2e"
UID = "0b5e7c1a-3f52-4d2a-9c07-6a8f1e2d4b39"


def cluster(**fields: Any) -> model.ClusterSpec:
    return spec.parse_cluster(
        {
            "metadata": {"name": "events", "namespace": "prod", "uid": UID, "generation": 1},
            "spec": fields,
        }
    )


def load(tmp_path: Path, text: str, *overrides: str) -> broker_config.BrokerConfig:
    """The file loaded as strom-server loads it (its argv's file and --override's), with
    the advertised listener the pod's command adds."""
    path = tmp_path / "broker.properties"
    path.write_text(text)
    return loading.load_broker_config(
        path, ["advertised.listeners=PLAINTEXT://10.1.2.3:9092", *overrides], environ={}
    )


def test_a_voter_node_loads_as_broker_and_controller(tmp_path: Path) -> None:
    five = cluster(brokers=5, config={"num.partitions": 6})

    config = load(tmp_path, properties.broker_properties(five, 1))

    assert config.node_id == 1
    assert config.process_roles == ["broker", "controller"]
    assert config.cluster_id == spec.cluster_id(UID)
    quorum = config.quorum
    assert quorum.is_controller and quorum.is_broker and quorum.static_voters
    assert [(v.node_id, v.host, v.port) for v in quorum.voters] == [
        (i, f"events-broker-{i}.events-brokers.prod.svc", 9093) for i in range(3)
    ]
    assert [str(x) for x in config.listeners] == ["PLAINTEXT://:9092", "CONTROLLER://:9093"]
    assert [str(x) for x in config.advertised_listeners] == ["PLAINTEXT://10.1.2.3:9092"]
    assert config.inter_broker_listener_name == "PLAINTEXT"
    assert [str(d) for d in config.log_dirs] == ["/var/lib/strom/data"]
    assert config.metrics_listener == ("0.0.0.0", 9404)
    assert config.num_partitions == 6
    assert config.warnings() == []


def test_an_observer_node_loads_as_a_broker_only(tmp_path: Path) -> None:
    five = cluster(brokers=5)

    config = load(tmp_path, properties.broker_properties(five, 4))

    assert config.node_id == 4
    assert config.process_roles == ["broker"]
    assert not config.quorum.is_controller and config.quorum.static_voters
    assert config.quorum.voter_ids == (0, 1, 2)
    assert [str(x) for x in config.listeners] == ["PLAINTEXT://:9092"]
    assert config.warnings() == []  # not a copied file that "joins as a broker"


def test_several_listeners_and_the_rack_from_the_pods_command(tmp_path: Path) -> None:
    two = cluster(
        brokers=2,
        listeners=[{"name": "INTERNAL", "port": 9095}, {"name": "CLIENTS", "port": 9096}],
        rack={"topologyKey": "topology.kubernetes.io/zone"},
    )
    text = properties.broker_properties(two, 0)
    advertised = properties.advertised_listeners(two, "10.1.2.3")

    path = tmp_path / "broker.properties"
    path.write_text(text)
    config = loading.load_broker_config(
        path, [f"advertised.listeners={advertised}", "broker.rack=eu-west-1a"], environ={}
    )

    assert [str(x) for x in config.listeners] == [
        "INTERNAL://:9095",
        "CLIENTS://:9096",
        "CONTROLLER://:9093",
    ]
    assert [str(x) for x in config.advertised_listeners] == [
        "INTERNAL://10.1.2.3:9095",
        "CLIENTS://10.1.2.3:9096",
    ]
    assert config.inter_broker_listener_name == "INTERNAL"
    assert config.broker_rack == "eu-west-1a"
    assert config.quorum.voter_ids == (0, 1)


@pytest.mark.parametrize(
    ("brokers", "replication", "min_isr"),
    [(1, "1", "1"), (2, "2", "2"), (3, "3", "2"), (6, "3", "2")],
)
def test_replication_defaults_scale_with_the_cluster(
    tmp_path: Path, brokers: int, replication: str, min_isr: str
) -> None:
    config = load(tmp_path, properties.broker_properties(cluster(brokers=brokers), 0))

    assert config.rendered("default.replication.factor") == replication
    assert config.rendered("offsets.topic.replication.factor") == replication
    assert config.rendered("transaction.state.log.replication.factor") == replication
    assert config.rendered("min.insync.replicas") == min_isr
    assert config.rendered("transaction.state.log.min.isr") == min_isr


def test_the_users_config_wins_over_the_scaled_defaults(tmp_path: Path) -> None:
    custom = cluster(config={"min.insync.replicas": 1, "default.replication.factor": 2})

    config = load(tmp_path, properties.broker_properties(custom, 0))

    assert config.min_insync_replicas == 1
    assert config.default_replication_factor == 2


def test_values_are_escaped_for_the_properties_format(tmp_path: Path) -> None:
    odd = cluster(config={"sasl.kerberos.service.name": "C:\\kafka\\new"})

    config = load(tmp_path, properties.broker_properties(odd, 0))

    assert config.rendered("sasl.kerberos.service.name") == "C:\\kafka\\new"


def test_the_file_says_it_is_generated() -> None:
    text = properties.broker_properties(cluster(brokers=4), 3)

    assert text.startswith(
        "# Generated by strom-operator for KafkaCluster prod/events: node 3, broker only"
    )
    assert "advertised.listeners" not in text.replace("# advertised.listeners", "")


# --- the files run: three strom-server processes --------------------------------------


@pytest.fixture
def e2e_helpers() -> Iterator[None]:
    sys.path.insert(0, str(E2E_DIR))
    try:
        yield
    finally:
        sys.path.remove(str(E2E_DIR))


def test_three_nodes_started_from_their_files_form_one_cluster(
    tmp_path: Path, e2e_helpers: None
) -> None:
    """Two voters and an observer on loopback ports: the files as the operator writes
    them, with the listeners a pod would have moved to free ports (the pod's command
    overrides advertised.listeners the same way)."""
    from strom_process import StromProcess, free_port, server_command

    three = cluster(brokers=3, controllers=2)
    controller_ports = {i: free_port() for i in range(three.controllers)}
    endpoints = {i: ("127.0.0.1", port) for i, port in controller_ports.items()}
    nodes = []
    for broker_id in range(three.brokers):
        text = properties.broker_properties(three, broker_id, voter_endpoints=endpoints)
        path = tmp_path / properties.properties_file(broker_id)
        path.write_text(text)
        port = free_port()
        listeners = f"PLAINTEXT://127.0.0.1:{port}"
        if broker_id in controller_ports:
            listeners += f",CONTROLLER://127.0.0.1:{controller_ports[broker_id]}"
        overrides = {
            "listeners": listeners,
            "advertised.listeners": properties.advertised_listeners(three, "127.0.0.1").replace(
                ":9092", f":{port}"
            ),
        }
        nodes.append(
            StromProcess(
                tmp_path / f"node-{broker_id}",
                command=[*server_command(), str(path)],
                overrides=overrides,
                port=port,
            )
        )
    try:
        for node in nodes:
            node.launch()
        for node in nodes:
            node.wait_ready()
        admin = client_admin.Admin(nodes[2].bootstrap, timeout=30.0)
        quorum = admin.describe_metadata_quorum()
        info = admin.cluster()
    finally:
        # all at once: a voter left alone waits for the quorum it lost before it stops
        for node in nodes:
            if node.proc is not None and node.running:
                node.proc.send_signal(signal.SIGTERM)
        for node in nodes:
            node.stop()

    assert sorted(v.id for v in quorum.voters) == [0, 1]
    assert quorum.leader_id in (0, 1)
    assert [o.id for o in quorum.observers] == [2]
    assert info.cluster_id == spec.cluster_id(UID)
    assert sorted(node.id for node in info.nodes) == [0, 1, 2]

"""The property files of a local cluster (`strom-dev-cluster`): each loads and validates,
and all agree on the voters and the cluster id."""

from __future__ import annotations

from pathlib import Path

import pytest
from strom.config import broker, dev_cluster, loading
from strom.config.quorum import QuorumSettings, Voter


def _write_and_load(nodes: list[dev_cluster.DevNode], tmp_path: Path) -> list[broker.BrokerConfig]:
    configs = []
    for node in nodes:
        path = tmp_path / node.file_name
        path.write_text(node.text)
        configs.append(loading.load_broker_config(path, [], {}))
    return configs


def test_dev_cluster_files_load_and_agree_on_the_quorum(tmp_path: Path) -> None:
    nodes = dev_cluster.render_dev_cluster(
        3, tmp_path / "data", 9092, cluster_id="AbCdEfGhIjKlMnOpQrStUv"
    )
    configs = _write_and_load(nodes, tmp_path)
    quorums: list[QuorumSettings] = [config.quorum for config in configs]
    expected = (
        Voter(1, "localhost", 9095),
        Voter(2, "localhost", 9096),
        Voter(3, "localhost", 9097),
    )
    assert all(quorum.voters == expected for quorum in quorums)
    assert [quorum.node_id for quorum in quorums] == [1, 2, 3]
    assert all(q.static_voters and q.is_voter and not q.is_single_node for q in quorums)
    assert [[str(x) for x in c.client_listeners] for c in configs] == [
        ["PLAINTEXT://localhost:9092"],
        ["PLAINTEXT://localhost:9093"],
        ["PLAINTEXT://localhost:9094"],
    ]
    assert [c.controller_listeners[0].port for c in configs] == [9095, 9096, 9097]
    assert [c.log_dirs for c in configs] == [[tmp_path / "data" / f"node-{i}"] for i in (1, 2, 3)]
    assert {c.cluster_id for c in configs} == {"AbCdEfGhIjKlMnOpQrStUv"}
    assert [c.metrics_listener for c in configs] == [("localhost", p) for p in (9404, 9405, 9406)]
    assert [c.default_replication_factor for c in configs] == [3, 3, 3]
    assert [c.offsets_topic_replication_factor for c in configs] == [3, 3, 3]
    assert [n.file_name for n in nodes] == [f"node-{i}.properties" for i in (1, 2, 3)]
    ports = [p for c in configs for p in [x.port for x in c.listeners]]
    assert len(set(ports)) == len(ports) == 6


def test_a_one_node_dev_cluster_is_a_quorum_of_one(tmp_path: Path) -> None:
    (config,) = _write_and_load(
        dev_cluster.render_dev_cluster(1, tmp_path, 19092, cluster_id=dev_cluster.new_cluster_id()),
        tmp_path,
    )
    assert config.quorum.is_single_node and config.quorum.voters == (Voter(1, "localhost", 19093),)
    assert config.default_replication_factor == 1


def test_dev_cluster_paths_survive_the_properties_format(tmp_path: Path) -> None:
    data_dir = tmp_path / "a dir with \\ and : in it"
    (node,) = dev_cluster.render_dev_cluster(1, data_dir, cluster_id="x", metrics_base_port=None)
    (config,) = _write_and_load([node], tmp_path)
    assert config.log_dirs == [data_dir / "node-1"]
    assert config.metrics_listener is None


def test_new_cluster_ids_are_kafka_shaped() -> None:
    first, second = dev_cluster.new_cluster_id(), dev_cluster.new_cluster_id()
    assert first != second and len(first) == 22
    broker.BrokerConfig({"cluster.id": first})  # valid as cluster.id


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"brokers": 0}, "brokers must be at least 1"),
        ({"brokers": 3, "base_port": 65534}, "base port 65534"),
        ({"brokers": 3, "controller_base_port": 9093}, "port ranges overlap"),
        ({"brokers": 3, "metrics_base_port": 9094}, "port ranges overlap"),
        ({"brokers": 2, "replication_factor": 3}, "replication factor must be between 1 and 2"),
    ],
)
def test_dev_cluster_refuses_impossible_layouts(
    tmp_path: Path, kwargs: dict[str, int], expected: str
) -> None:
    brokers = kwargs.pop("brokers")
    with pytest.raises(ValueError, match=expected):
        dev_cluster.render_dev_cluster(brokers, tmp_path, cluster_id="x", **kwargs)  # type: ignore[arg-type]

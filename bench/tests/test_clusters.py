"""The C2 cluster set-up and its figures: pure parts, no broker starts here."""

from pathlib import Path

import pytest
from strom_bench import brokers, clusters, figures, java_tools, plan, process_groups, report


def test_quorum_voters_number_the_nodes_from_one() -> None:
    assert brokers.kafka_quorum_voters([9001]) == "1@127.0.0.1:9001"
    assert (
        brokers.kafka_quorum_voters([9001, 9002, 9003])
        == "1@127.0.0.1:9001,2@127.0.0.1:9002,3@127.0.0.1:9003"
    )


def test_cluster_node_properties() -> None:
    voters = brokers.kafka_quorum_voters([9101, 9102, 9103])
    props = brokers.kafka_server_properties(
        9092, 9102, Path("/d/node2"), 1 << 30, node_id=2, voters=voters
    )
    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "2"
    assert props["controller.quorum.voters"] == voters
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9102"
    assert props["log.dirs"] == "/d/node2"
    # the single node keeps its own one-voter quorum
    single = brokers.kafka_server_properties(9092, 9093, Path("/d"), 1 << 30)
    assert single["node.id"] == "1"
    assert single["controller.quorum.voters"] == "1@127.0.0.1:9093"


def test_kafka_cluster_nodes_have_their_own_ports_dirs_and_ids(tmp_path: Path) -> None:
    templates = clusters.kafka_cluster_templates(tmp_path / "formatted")
    assert [t.name for t in templates] == ["node1", "node2", "node3"]
    with process_groups.ProcessGroups() as groups:
        cluster = clusters.kafka_cluster(groups, tmp_path / "c2", 1 << 30, templates)
    assert cluster.kind == brokers.KAFKA
    assert cluster.size == clusters.KAFKA_CLUSTER_BROKERS == 3
    nodes = [node for node in cluster.nodes if isinstance(node, brokers.KafkaBroker)]
    assert len(nodes) == 3
    assert [n.properties["node.id"] for n in nodes] == ["1", "2", "3"]
    assert len({n.properties["controller.quorum.voters"] for n in nodes}) == 1
    voters = nodes[0].properties["controller.quorum.voters"]
    assert voters == brokers.kafka_quorum_voters([n.controller_port for n in nodes])
    ports = {n.port for n in nodes} | {n.controller_port for n in nodes}
    assert len(ports) == 6
    assert len({n.data_dir for n in nodes}) == 3
    assert [n.formatted_template for n in nodes] == templates
    assert all(n.jvm_options == brokers.KAFKA_CLUSTER_JVM_OPTIONS for n in nodes)
    assert "-Xmx512M" in brokers.KAFKA_CLUSTER_JVM_OPTIONS
    assert cluster.bootstrap == ",".join(f"127.0.0.1:{n.port}" for n in nodes)


def test_strom_side_is_a_three_node_quorum_like_kafkas(tmp_path: Path) -> None:
    assert clusters.STROM_CLUSTER is clusters.three_strom_brokers
    with process_groups.ProcessGroups() as groups:
        cluster = clusters.STROM_CLUSTER(groups, tmp_path / "c2", 1 << 30, None)
    assert cluster.kind == brokers.STROM
    assert cluster.size == clusters.KAFKA_CLUSTER_BROKERS == 3
    assert isinstance(cluster, clusters.NodesCluster)
    nodes = [node for node in cluster.nodes if isinstance(node, brokers.StromBroker)]
    assert len(nodes) == 3
    settings = [n.overrides for n in nodes]
    assert [s["node.id"] for s in settings] == ["1", "2", "3"]
    assert all(s["process.roles"] == "broker,controller" for s in settings)
    assert all(s["controller.listener.names"] == "CONTROLLER" for s in settings)
    assert all(
        s["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        for s in settings
    )
    assert len({s["controller.quorum.voters"] for s in settings}) == 1
    assert len({s["cluster.id"] for s in settings}) == 1
    assert len(settings[0]["cluster.id"]) == 22
    controller_ports = [int(s["listeners"].rsplit(":", 1)[1]) for s in settings]
    assert settings[0]["controller.quorum.voters"] == brokers.kafka_quorum_voters(controller_ports)
    for node, s in zip(nodes, settings, strict=True):
        assert s["listeners"].startswith(f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://")
        assert s["advertised.listeners"] == f"PLAINTEXT://127.0.0.1:{node.port}"
        assert s["log.dirs"] == str(node.data_dir)
        assert s["metrics.listener"] == f"http://127.0.0.1:{node.metrics_port}"
    ports = {n.port for n in nodes} | {n.metrics_port for n in nodes} | set(controller_ports)
    assert len(ports) == 9  # every port its own, though all are chosen before any bind
    assert len({n.data_dir for n in nodes}) == 3
    assert cluster.bootstrap == ",".join(f"127.0.0.1:{n.port}" for n in nodes)


def test_p2_and_f1_clusters_get_the_same_replication_settings_on_both_sides(
    tmp_path: Path,
) -> None:
    settings = plan.FULL.replication_settings()
    assert settings == {
        "min.insync.replicas": "2",
        "broker.session.timeout.ms": "1000",
        "broker.heartbeat.interval.ms": "250",
    }
    templates = clusters.kafka_cluster_templates(tmp_path / "formatted")
    with process_groups.ProcessGroups() as groups:
        kafka = clusters.kafka_cluster(groups, tmp_path / "k", 1 << 30, templates, settings)
        strom = clusters.STROM_CLUSTER(groups, tmp_path / "s", 1 << 30, settings)
    for node_id in (1, 2, 3):
        kafka_node, strom_node = kafka.node(node_id), strom.node(node_id)
        assert isinstance(kafka_node, brokers.KafkaBroker)
        assert isinstance(strom_node, brokers.StromBroker)
        assert kafka_node.properties["node.id"] == strom_node.overrides["node.id"] == str(node_id)
        assert kafka_node.properties.items() >= settings.items()
        assert strom_node.overrides.items() >= settings.items()
    # C2's clusters keep the brokers' defaults
    with process_groups.ProcessGroups() as groups:
        c2 = clusters.STROM_CLUSTER(groups, tmp_path / "c2", 1 << 30, None)
    c2_node = c2.node(1)
    assert isinstance(c2_node, brokers.StromBroker)
    assert "broker.session.timeout.ms" not in c2_node.overrides


def test_a_single_strom_broker_has_no_quorum_settings(tmp_path: Path) -> None:
    with process_groups.ProcessGroups() as groups:
        node = brokers.StromBroker(groups, tmp_path, 1 << 30)
    assert node.overrides["node.id"] == "1"
    assert "controller.quorum.voters" not in node.overrides
    assert "process.roles" not in node.overrides


def test_free_ports_are_never_handed_out_twice() -> None:
    ports = [process_groups.free_port() for _ in range(50)]
    assert len(set(ports)) == 50


def test_c2_figure_ids_match_the_specs() -> None:
    from strom_bench import workloads

    full = plan.FULL
    small = workloads.c2_figure_id(full.c2_topics, full.c2_topic_partitions)
    big = workloads.c2_figure_id(1, full.c2_big_partitions)
    assert (small, big) == ("C2-100x10", "C2-10k")
    for figure_id in (small, big):
        spec = figures.SPECS_BY_ID[figure_id]
        assert (spec.unit, spec.better, str(spec.target)) == ("s", figures.LOWER, "<= 1")
    # one request per 5,000 partitions: Kafka refuses a topic of 10,000 in one request
    assert full.c2_rounds >= 3
    assert full.c2_partitions_per_request < full.c2_big_partitions <= 10_000
    assert full.c2_topics * full.c2_topic_partitions <= full.c2_partitions_per_request * 2


def _c2_rounds() -> dict[str, list[dict[str, float]]]:
    return {
        "strom": [{"C2-100x10": 0.5, "C2-10k": 4.0}, {"C2-100x10": 0.7, "C2-10k": 5.0}],
        "kafka": [{"C2-100x10": 1.0, "C2-10k": 10.0}, {"C2-100x10": 1.0, "C2-10k": 20.0}],
    }


def test_c2_figures_are_judged() -> None:
    results = figures.build_figures(_c2_rounds())
    by_id = {f.spec.id: f for f in results}
    c2 = by_id["C2-100x10"]
    assert c2.ratio == 0.6
    assert c2.meets_target is True
    data = c2.to_json()
    assert data["meets_target"] is True
    assert data["ratio"] == 0.6
    assert "note" not in data
    rows = {
        line.split(" | ")[0].removeprefix("| "): line
        for line in report.markdown_table(results).splitlines()[2:]
    }
    assert rows["C2-100x10"] == (
        "| C2-100x10 | s | 0.600 (0.500-0.700) | 1.00 (1.00-1.00) | 0.60 | lower | <= 1: met |"
    )
    assert rows["C2-10k"].startswith("| C2-10k | s | 4.50 (4.00-5.00) | 15.0 (10.0-20.0) | 0.30 |")
    assert report.target_cell(by_id["C2-10k"]) == "<= 1: met"


def test_a_slower_strom_cluster_misses_the_target() -> None:
    rounds = {"strom": [{"C2-10k": 12.0}], "kafka": [{"C2-10k": 10.0}]}
    by_id = {f.spec.id: f for f in figures.build_figures(rounds)}
    assert by_id["C2-10k"].meets_target is False
    assert report.target_cell(by_id["C2-10k"]) == "<= 1: missed"


def test_create_topics_timing_json_line() -> None:
    result = java_tools.parse_create_topics_result(
        "[main] WARN something\n"
        '{"brokers": 3, "topics": 1, "partitions_per_topic": 10000, "partitions": 10000, '
        '"replication_factor": 1, "requests": 2, "describe_polls": 7, "create_ms": 712.523, '
        '"leaders_ms": 1247.230, "total_ms": 1959.753}\n'
    )
    assert (result.brokers, result.topics, result.partitions) == (3, 1, 10_000)
    assert (result.requests, result.describe_polls) == (2, 7)
    assert (result.create_ms, result.leaders_ms, result.total_ms) == (712.523, 1247.23, 1959.753)
    assert result.total_s == pytest.approx(1.959753)


def test_a_tool_watching_a_cluster_stops_when_any_node_exits(tmp_path: Path) -> None:
    with process_groups.ProcessGroups() as groups:
        alive = groups.spawn(["sleep", "30"], stdout=tmp_path / "alive")
        dead = groups.spawn(["sh", "-c", "exit 0"], stdout=tmp_path / "dead")
        tools = java_tools.JavaTools(groups, tmp_path / "tools")
        try:
            tools.run("tool", ["sleep", "30"], 20, [alive, dead])
        except process_groups.BrokerExited:
            pass
        else:
            raise AssertionError("expected BrokerExited")
        assert alive.poll() is None  # only the tool is stopped; the harness stops the nodes

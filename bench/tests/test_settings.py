import base64
from pathlib import Path

from strom_bench import brokers, memory, plan


def test_both_brokers_get_the_same_storage_settings() -> None:
    log_dir = Path("/data/x")
    kafka = brokers.kafka_server_properties(9092, 9093, log_dir, 12345)
    strom = brokers.strom_overrides(9094, 9404, log_dir, 12345)
    for key in ("log.dirs", "log.segment.bytes", "num.partitions", "node.id"):
        assert kafka[key] == strom[key], key
    assert not any(key.startswith("log.flush") for key in (*kafka, *strom))


def test_kafka_is_a_single_combined_kraft_node_on_loopback() -> None:
    props = brokers.kafka_server_properties(9092, 9093, Path("/d"), 1 << 30)
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["offsets.topic.replication.factor"] == "1"
    text = brokers.properties_text({"a.b": "1", "c": "x y"})
    assert text == "a.b=1\nc=x y\n"


def test_kafka_cluster_id_is_sixteen_bytes_base64url() -> None:
    cluster_id = brokers.kafka_cluster_id()
    assert len(cluster_id) == 22
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16


def test_plans_follow_the_issue() -> None:
    for mode in ("quick", "full"):
        p = plan.PLANS[mode]
        assert p.rounds >= 3
        assert p.producer_properties == ("acks=1", "batch.size=65536", "linger.ms=5")
        assert p.p1_partitions == 6
        assert (p.l1_rate, p.l1_record_size) == (5000, 1024)
        assert p.m1_partitions == 1000
        assert p.l1_warmup_s < p.l1_duration_s
    assert plan.FULL.c1_bytes == 1 << 30
    # C2: the full run measures both figures in 3 rounds; quick, 100 x 10 once (its budget)
    assert (plan.FULL.c2_rounds, plan.FULL.c2_big_partitions) == (3, 10_000)
    assert (plan.QUICK.c2_rounds, plan.QUICK.c2_big_partitions) == (1, 0)
    assert plan.PROFILE.c2_rounds == 0
    assert plan.QUICK.warmup_records(40_000) == 8_000
    # P2 as P1-1KiB but acks=all; F1: 10 trials in the full run; both full-mode only
    assert plan.FULL.p2_records == plan.FULL.p1_records_1kib
    assert plan.FULL.p2_producer_properties == ("acks=all", "batch.size=65536", "linger.ms=5")
    assert (plan.FULL.p2_rounds, plan.FULL.f1_rounds, plan.FULL.f1_trials) == (3, 1, 10)
    assert (plan.QUICK.p2_rounds, plan.QUICK.f1_rounds, plan.QUICK.f1_trials) == (0, 0, 3)


def test_parse_vm_rss() -> None:
    status = "Name:\tjava\nVmPeak:\t 9000 kB\nVmRSS:\t  388296 kB\nThreads:\t40\n"
    assert memory.parse_vm_rss(status) == 388296 * 1024


def test_peak_rss_sampler_on_this_process() -> None:
    import os

    with memory.PeakRssSampler(os.getpid(), interval_s=0.01) as sampler:
        ballast = bytearray(8 * memory.MIB)
    assert len(ballast) == 8 * memory.MIB
    assert sampler.peak_mib >= memory.rss_mib(os.getpid()) - 8
    assert sampler.peak_mib > 1

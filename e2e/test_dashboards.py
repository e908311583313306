"""The Grafana dashboards and the alert rules (issue 17) against Debian's Prometheus.

A 3-broker dev cluster (StromCluster) runs a produce/consume load with one consumer group
that keeps up and one that lags; Debian's Prometheus (deploy/prometheus/install.sh, `make
prometheus`) scrapes the three metrics listeners every second and evaluates
charts/strom/rules/strom-rules.yaml with every `for:` cut to 2 s. A broker is killed:
StromBrokerDown, StromUnderReplicatedPartitions and StromUnderMinIsrPartitions fire, and
resolve once it is back. Then every panel query of charts/strom/dashboards/ is evaluated
over the test's window through the HTTP API: each returns data, except the panels listed in
EMPTY_HERE with the reason. `promtool check rules` checks the rules file, and parses every
panel query offline. The metric names the panels use are checked against what exists: the
brokers' from Prometheus, the operator's from its registry, Spark's from pyspark's jar.

DASHBOARDS_PREVIEW_DIR=<dir> also renders each dashboard into <dir>/<name>.png from the
test's Prometheus (`make dashboards-preview`; matplotlib from bench/requirements.lock). Not
STROM_*: the brokers this test starts read STROM_<KEY> variables as their settings.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from strom_cluster import StromCluster
from strom_process import free_port
from waiting import wait_until

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY / "deploy"))
import dashboards_preview as dashboards  # noqa: E402

pytestmark = pytest.mark.timeout(240)

RULES_FILE = REPOSITORY / "charts" / "strom" / "rules" / "strom-rules.yaml"
INSTALLER = REPOSITORY / "deploy" / "prometheus" / "install.sh"
SCRAPE_S = 1
# Grafana's $__rate_interval is at least 4 scrape intervals
RATE_INTERVAL = "10s"
RULE_FOR = "2s"
DEADLINE_S = 60
# fence a dead broker (and drop it from the ISRs) within seconds, as test_replication does
FAST_FENCING = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
}
LOAD_TOPIC = "dashboards-load"
STRICT_TOPIC = "dashboards-strict"  # min.insync.replicas=3: under min ISR with a broker down
LAGGING_GROUP = "dashboards-lagging"
KEEPING_UP_GROUP = "dashboards-keeping-up"
TXN_TOPIC = "dashboards-transactional"
TRANSACTIONAL_ID = "dashboards-transactions"
TRANSACTIONS = 50  # committed back to back, before the broker is killed
WHILE_DOWN = ("StromBrokerDown", "StromUnderReplicatedPartitions", "StromUnderMinIsrPartitions")

# Panels that return no data over a dev cluster, and why. A whole dashboard by its file's
# stem, one panel by (stem, title).
EMPTY_HERE: dict[str | tuple[str, str], str] = {
    "operator": "no operator runs here: its metrics come from strom-operator's /metrics",
    "spark-jobs": "no Spark driver runs here: its metrics come from the driver's UI port",
    ("cluster-overview", "Request errors"): "empty when idle: no request may have failed",
    ("broker-internals", "Request errors by API and error"): "empty when idle: as above",
    ("broker-internals", "Storage errors"): "only after an append failed on a disk error",
    ("broker-internals", "Protocol errors"): "only after a client sent bytes that are no request",
    ("broker-internals", "Throttled replication"): "only while a replication throttle is set",
}


def prometheus_bin() -> Path:
    found = subprocess.run(
        ["bash", str(INSTALLER), "--print"], capture_output=True, text=True, check=True
    ).stdout.strip()
    folder = Path(found)
    if not (folder / "prometheus").exists():
        pytest.skip("Debian's Prometheus is not unpacked: run `make prometheus`")
    return folder


def test_promtool_checks_the_rules_and_every_panel_query(tmp_path: Path) -> None:
    promtool = str(prometheus_bin() / "promtool")
    checked = subprocess.run(
        [promtool, "check", "rules", str(RULES_FILE)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout
    # promtool parses PromQL offline only in rule files: every panel query as a recording rule
    queries = [
        {"record": f"panel:{n}", "expr": dashboards.expand(query.expr, RATE_INTERVAL)}
        for n, query in enumerate(q for panel in all_panels() for q in panel.queries)
    ]
    as_rules = tmp_path / "panels.yaml"
    as_rules.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": queries}]}))
    parsed = subprocess.run(
        [promtool, "check", "rules", str(as_rules)], capture_output=True, text=True
    )
    assert parsed.returncode == 0, parsed.stdout + parsed.stderr


def all_panels() -> list[dashboards.Panel]:
    return [
        panel
        for stem, board in dashboards.load_dashboards().items()
        for panel in dashboards.panels(stem, board)
    ]


def test_dashboards_are_well_formed() -> None:
    """What Grafana's sidecar and provisioning rely on: unique uids, a datasource variable
    that every query goes through, and a query in every panel."""
    boards = dashboards.load_dashboards()
    assert set(boards) == {
        "cluster-overview",
        "topics-and-consumer-lag",
        "broker-internals",
        "operator",
        "spark-jobs",
    }
    uids = [board["uid"] for board in boards.values()]
    assert len(set(uids)) == len(uids)
    for stem, board in boards.items():
        variables = {v["name"]: v for v in board["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource", stem
        for panel in dashboards.panels(stem, board):
            assert panel.queries, f"{stem}: {panel.title} has no query"
    for panel_json in (
        p for board in boards.values() for p in board["panels"] if p["type"] != "row"
    ):
        for target in panel_json["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel_json["title"]


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (PromQL functions and keywords left out)."""
    without_strings = re.sub(r'"[^"]*"', '""', expr)
    words = set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b(?=\s*[{\[)\s]|$)", without_strings))
    return {w for w in words if w.startswith(("strom_", "process_", "metrics_executor_"))}


def exposed_names(text: str) -> set[str]:
    """The metric names a /metrics page (Prometheus text format) declares or samples."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.add(name)
            if kind == "histogram":
                names |= {name + "_bucket", name + "_sum", name + "_count"}
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def operator_metric_names() -> set[str]:
    from strom_operator import metrics as operator_metrics

    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    names = set()
    for family in operator_metrics.REGISTRY.collect():
        names |= {sample.name for sample in family.samples}
        names |= {family.name + suffix for suffix in suffixes.get(family.type, ())}
    return names


SPARK_UNIT_SUFFIXES = ("_seconds_total", "_bytes_total", "_total", "_bytes")


def spark_executor_metric_names_exist(names: set[str]) -> list[str]:
    """The metrics_executor_* names not in pyspark's Spark: PrometheusResource writes
    metrics_executor_<field><unit suffix>, so both parts must be in its class."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    (core,) = jars.glob("spark-core_*.jar")
    with zipfile.ZipFile(core) as jar:
        code = jar.read("org/apache/spark/status/api/v1/PrometheusResource.class")
    missing = []
    for name in names:
        field = name.removeprefix("metrics_executor_")
        suffix = next((s for s in SPARK_UNIT_SUFFIXES if field.endswith(s)), "")
        base = field.removesuffix(suffix)
        if base.encode() not in code or suffix.encode() not in code:
            missing.append(name)
    return missing


def test_operator_and_spark_panels_use_metrics_that_exist() -> None:
    """Those panels cannot get data here: their metric names are checked at the source."""
    operator_names = operator_metric_names()
    spark_names: set[str] = set()
    for panel in all_panels():
        if panel.dashboard not in ("operator", "spark-jobs"):
            continue
        for query in panel.queries:
            for name in metric_names(query.expr):
                if name.startswith("metrics_executor_"):
                    spark_names.add(name)
                else:
                    assert name in operator_names, f"{panel.title}: {name} is not exported"
    assert spark_names, "the Spark dashboard reads the executors' endpoint"
    assert spark_executor_metric_names_exist(spark_names) == []


# --- over a dev cluster ---------------------------------------------------------------


class PrometheusServer:
    """Debian's prometheus as a process: a generated config, its data in a tmp folder."""

    def __init__(self, binary: Path, root: Path, targets: list[str], rules: Path) -> None:
        self.root = root
        self.port = free_port()
        self.api = dashboards.Prometheus(f"http://127.0.0.1:{self.port}")
        config = {
            "global": {"scrape_interval": f"{SCRAPE_S}s", "evaluation_interval": f"{SCRAPE_S}s"},
            "rule_files": [str(rules)],
            "scrape_configs": [
                {
                    "job_name": "strom",
                    "scrape_timeout": f"{SCRAPE_S}s",
                    "static_configs": [{"targets": targets}],
                }
            ],
        }
        root.mkdir(parents=True, exist_ok=True)
        (root / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.argv = [
            str(binary / "prometheus"),
            f"--config.file={root / 'prometheus.yml'}",
            f"--storage.tsdb.path={root / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        self.log = root / "prometheus.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=log, cwd=self.root)
        wait_until(self._ready, DEADLINE_S, lambda: f"prometheus ready\n{self.log_tail()}")

    def _ready(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, self.log_tail()
        ready = f"{self.api.url}/-/ready"
        with contextlib.suppress(OSError), urllib.request.urlopen(ready, timeout=1) as answer:
            return bool(answer.status == 200)
        return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


def rules_with_short_for(root: Path) -> Path:
    """The rules file with every `for:` at RULE_FOR: the same expressions, fired in seconds."""
    rules = yaml.safe_load(RULES_FILE.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = RULE_FOR
    path = root / "strom-rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    return path


class Load:
    """A producer at ~100 records/s, a consumer group that keeps up and one that reads ~10
    records/s and so lags more and more, and a transactional producer that commits
    TRANSACTIONS transactions back to back: each in a thread of its own."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self.transactions_done = threading.Event()
        self.threads = [
            threading.Thread(target=self._guard(run), daemon=True)
            for run in (self._produce, self._keep_up, self._lag, self._transact)
        ]

    def _guard(self, run: Callable[[], None]) -> Callable[[], None]:
        def guarded() -> None:
            try:
                run()
            except Exception as error:
                self.errors.append(f"{run.__name__}: {error!r}")

        return guarded

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(30)
        assert not any(thread.is_alive() for thread in self.threads), "a load thread hangs"
        assert self.errors == []

    def _produce(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5})
        n = 0
        while not self.stopping.is_set():
            for _ in range(5):
                producer.produce(LOAD_TOPIC, value=b"record %d" % n)
                n += 1
            producer.poll(0)
            self.stopping.wait(0.05)  # the pace of the load, not a wait for a condition
        producer.flush(10)

    def _transact(self) -> None:
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "transactional.id": TRANSACTIONAL_ID}
        )
        producer.init_transactions(30)
        for n in range(TRANSACTIONS):
            if self.stopping.is_set():
                break
            producer.begin_transaction()
            for i in range(5):
                producer.produce(TXN_TOPIC, value=b"transaction %d record %d" % (n, i))
            producer.commit_transaction(30)
        self.transactions_done.set()

    def _consumer(self, group: str, **settings: Any) -> Consumer:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                **settings,
            }
        )
        consumer.subscribe([LOAD_TOPIC])
        return consumer

    def _keep_up(self) -> None:
        consumer = self._consumer(KEEPING_UP_GROUP, **{"auto.commit.interval.ms": 1000})
        while not self.stopping.is_set():
            consumer.consume(500, 0.2)
        consumer.close()

    def _lag(self) -> None:
        consumer = self._consumer(LAGGING_GROUP, **{"enable.auto.commit": False})
        read = 0
        while not self.stopping.is_set():
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                read += 1
                if read % 5 == 0:
                    consumer.commit(asynchronous=True)
                self.stopping.wait(0.1)  # ~10 records/s: slower than the producer
        consumer.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[StromCluster]:
    with StromCluster(tmp_path / "cluster", overrides=FAST_FENCING).started() as made:
        yield made


@pytest.fixture
def prometheus(tmp_path: Path, cluster: StromCluster) -> Iterator[PrometheusServer]:
    targets = [f"{node.host}:{node.metrics_port}" for node in cluster.nodes.values()]
    server = PrometheusServer(
        prometheus_bin(), tmp_path / "prometheus", targets, rules_with_short_for(tmp_path)
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def firing(prometheus: PrometheusServer) -> set[str]:
    return {
        alert["labels"]["alertname"]
        for alert in prometheus.api.alerts()
        if alert["state"] == "firing"
    }


def create_topics(cluster: StromCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topics = [
        NewTopic(LOAD_TOPIC, 3, 3),
        NewTopic(TXN_TOPIC, 3, 3),
        NewTopic(STRICT_TOPIC, 1, 3, config={"min.insync.replicas": "3"}),
    ]
    for future in admin.create_topics(topics, request_timeout=30).values():
        future.result(30)


def test_panels_and_alerts_over_a_dev_cluster(
    cluster: StromCluster, prometheus: PrometheusServer
) -> None:
    started = time.time()
    api = prometheus.api
    wait_until(
        lambda: sum(t["health"] == "up" for t in api.targets()) == 3,
        DEADLINE_S,
        lambda: f"Prometheus scrapes the 3 brokers: {api.targets()}",
    )
    create_topics(cluster)
    load = Load(cluster.bootstrap)
    load.start()
    try:
        wait_until(
            lambda: api.query(f'sum(strom_consumer_group_lag{{group="{LAGGING_GROUP}"}}) > 100'),
            DEADLINE_S,
            f"group {LAGGING_GROUP} lags",
        )
        # (the group that keeps up may fire it too here, its lag a sawtooth between
        # commits: the rule's `for: 10m` is what tells the two apart, not tested here)
        wait_until(
            lambda: api.query(
                f'ALERTS{{alertname="StromConsumerLagGrowing", alertstate="firing", '
                f'group="{LAGGING_GROUP}"}}'
            ),
            DEADLINE_S,
            lambda: f"StromConsumerLagGrowing fires for {LAGGING_GROUP}: {api.alerts()}",
        )
        assert firing(prometheus).isdisjoint(WHILE_DOWN)
        # the transactions were committed: the coordinator shows the id as CompleteCommit
        wait_until(load.transactions_done.is_set, DEADLINE_S, lambda: f"{load.errors}")
        wait_until(
            lambda: api.query(
                'strom_transactional_ids{state="CompleteCommit"} == 1'
                " and on() (sum(strom_txn_adds_held_ran_out_total) == 0)"
            ),
            DEADLINE_S,
            lambda: f"{TRANSACTIONAL_ID} CompleteCommit: {api.query('strom_transactional_ids')}",
        )

        # a broker that is not the active controller goes down
        (controller,) = api.query("strom_active_controller == 1")
        victim = next(
            node_id
            for node_id, node in cluster.nodes.items()
            if f"{node.host}:{node.metrics_port}" != controller.labels["instance"]
        )
        cluster.nodes[victim].kill()
        wait_until(
            lambda: firing(prometheus).issuperset(WHILE_DOWN),
            DEADLINE_S,
            lambda: f"{WHILE_DOWN} fire with broker {victim} down; firing: {firing(prometheus)}",
        )
        (down,) = api.query('ALERTS{alertname="StromBrokerDown", alertstate="firing"}')
        assert down.labels["job"] == "strom"

        cluster.nodes[victim].start()
        wait_until(
            lambda: firing(prometheus).isdisjoint(WHILE_DOWN),
            DEADLINE_S,
            lambda: f"{WHILE_DOWN} resolve with broker {victim} back: {firing(prometheus)}",
        )
    finally:
        load.stop()

    # every rule loaded and evaluated without an error
    rules = [rule for group in api.rule_groups() for rule in group["rules"]]
    in_file = [
        r["alert"] for g in yaml.safe_load(RULES_FILE.read_text())["groups"] for r in g["rules"]
    ]
    assert sorted(rule["name"] for rule in rules) == sorted(in_file)
    assert [(r["name"], r["lastError"]) for r in rules if r["health"] != "ok"] == []

    ended = time.time()
    empty = []
    for panel in all_panels():
        results = dashboards.evaluate(api, panel, started, ended, RATE_INTERVAL)
        if not any(results):
            empty.append((panel.dashboard, panel.title))
    unexplained = [p for p in empty if p not in EMPTY_HERE and p[0] not in EMPTY_HERE]
    assert unexplained == [], f"panels without data: {unexplained}"

    # the brokers' dashboards select only metrics the brokers export (a labelled counter
    # nothing has counted yet is in /metrics only by its TYPE line)
    with urllib.request.urlopen(f"{cluster.nodes[victim].metrics_url}/metrics") as answer:
        exported = exposed_names(answer.read().decode())
    for panel in all_panels():
        if panel.dashboard in ("operator", "spark-jobs"):
            continue
        for query in panel.queries:
            assert metric_names(query.expr) <= exported, f"{panel.dashboard}: {panel.title}"

    preview = os.environ.get("DASHBOARDS_PREVIEW_DIR")
    if preview:
        dashboards.render_all(api, started, ended, RATE_INTERVAL, Path(preview).resolve())

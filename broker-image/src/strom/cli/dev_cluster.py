"""strom-dev-cluster --brokers N [--data-dir D] [--base-port P] [--netns]: N combined
broker/controller nodes on this machine until Ctrl-C or SIGTERM.

Writes D/node-<i>.properties (strom.config.dev_cluster; kept on the next run, with the
cluster id), starts `strom-server D/node-<i>.properties` for every node (output appended
to D/node-<i>.log), prints the bootstrap servers, waits for all nodes at once and
supervises them (strom.devtools.dev_cluster). With --netns (root only) each node runs in
its own network namespace with its own address on a private bridge
(strom.devtools.netns), for partition tests. Needs only the base install, no client.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from strom.config import dev_cluster as rendering
from strom.devtools import dev_cluster as supervisor
from strom.devtools import netns

PROG = "strom-dev-cluster"
EXIT_OK = 0
EXIT_FAILED = 1  # a node did not stop cleanly, or died while the cluster ran
EXIT_USAGE = 2
DEFAULT_DATA_DIR = Path(".strom-dev-cluster")
DEFAULT_READY_TIMEOUT_S = 60.0
DEFAULT_STOP_TIMEOUT_S = 30.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run N Strom nodes (broker and controller each) on this machine, "
        "with one property file per node in the data dir. Ctrl-C or SIGTERM stops them all.",
    )
    parser.add_argument("--brokers", type=int, required=True, metavar="N", help="node count")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        metavar="D",
        help=f"property files, logs and node data (default ./{DEFAULT_DATA_DIR}); "
        "a second run on the same dir keeps its files and cluster id",
    )
    parser.add_argument(
        "--base-port",
        type=int,
        default=rendering.DEFAULT_BASE_PORT,
        metavar="P",
        help="client port of node 1; node i listens on P+i-1 (default %(default)s)",
    )
    parser.add_argument(
        "--controller-base-port",
        type=int,
        metavar="C",
        help="controller port of node 1 (default: right after the client ports, P+N)",
    )
    metrics = parser.add_mutually_exclusive_group()
    metrics.add_argument(
        "--metrics-base-port",
        type=int,
        default=rendering.DEFAULT_METRICS_BASE_PORT,
        metavar="M",
        help="metrics/probes port of node 1 (default %(default)s)",
    )
    metrics.add_argument(
        "--no-metrics",
        action="store_true",
        help="no HTTP endpoint (readiness is then the client port accepting)",
    )
    parser.add_argument(
        "--replication-factor",
        type=int,
        metavar="R",
        help="default.replication.factor and the internal topics' (default min(3, N))",
    )
    parser.add_argument(
        "--netns",
        action="store_true",
        help="each node in its own network namespace and address (needs root and iproute2)",
    )
    parser.add_argument(
        "--rewrite",
        action="store_true",
        help="rewrite property files that disagree with these options (keeps the cluster id)",
    )
    parser.add_argument(
        "--ready-timeout",
        type=float,
        default=DEFAULT_READY_TIMEOUT_S,
        metavar="S",
        help="seconds to wait for every node before saying which are not ready "
        "(they keep running; default %(default)s)",
    )
    parser.add_argument(
        "--stop-timeout",
        type=float,
        default=DEFAULT_STOP_TIMEOUT_S,
        metavar="S",
        help="seconds between SIGTERM and SIGKILL when stopping (default %(default)s)",
    )
    return parser


@contextlib.contextmanager
def _hosts(count: int, enabled: bool) -> Iterator[netns.Hosts | None]:
    if not enabled:
        yield None
        return
    with netns.Hosts(count) as hosts:
        yield hosts


def _netns_refusal() -> str | None:
    if os.geteuid() != 0:
        return "--netns needs root (it creates network namespaces, veths and a bridge)"
    return netns.unavailable_reason()


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    arguments = parser.parse_args(argv)
    if arguments.brokers < 1:
        parser.error(f"--brokers must be at least 1, got {arguments.brokers}")
    if arguments.ready_timeout <= 0 or arguments.stop_timeout <= 0:
        parser.error("--ready-timeout and --stop-timeout must be positive")
    if arguments.netns:
        reason = _netns_refusal()
        if reason is not None:
            print(f"{PROG}: {reason}", file=sys.stderr)
            return EXIT_USAGE
    data_dir: Path = arguments.data_dir.absolute()
    try:
        with _hosts(arguments.brokers, arguments.netns) as hosts:
            return _run(arguments, data_dir, hosts)
    except supervisor.DevClusterError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return EXIT_USAGE


def _run(arguments: argparse.Namespace, data_dir: Path, hosts: netns.Hosts | None) -> int:
    cluster_id = supervisor.existing_cluster_id(data_dir)
    reused = cluster_id is not None
    try:
        nodes = rendering.render_dev_cluster(
            arguments.brokers,
            data_dir,
            arguments.base_port,
            cluster_id=cluster_id or rendering.new_cluster_id(),
            hosts=None if hosts is None else [str(h.address) for h in hosts],
            controller_base_port=arguments.controller_base_port,
            metrics_base_port=None if arguments.no_metrics else arguments.metrics_base_port,
            replication_factor=arguments.replication_factor,
        )
    except ValueError as error:
        raise supervisor.DevClusterError(str(error)) from error
    # Files that disagree with the options are refused first (that answer must not depend
    # on which ports other programs hold right now), and nothing is written before the
    # ports are known to be free.
    supervisor.plan_property_files(nodes, data_dir, rewrite=arguments.rewrite)
    if hosts is None:
        supervisor.check_ports_free(nodes)
    files = supervisor.write_property_files(nodes, data_dir, rewrite=arguments.rewrite)
    cluster = supervisor.DevCluster(
        nodes, data_dir, wraps=None if hosts is None else [h.prefix for h in hosts]
    )
    say = cluster.say
    cid = nodes[0].settings["cluster.id"]
    kept = "kept" if reused else "new"
    say(f"{PROG}: {len(nodes)} node(s), cluster id {cid} ({kept}), data in {data_dir}")
    for line in files:
        say(f"  {line}")
    if hosts is not None:
        for host, node in zip(hosts, nodes, strict=True):
            say(f"  node {node.node_id}: network namespace {host.netns}, address {host.address}")
    say(
        "by hand, the same cluster is one of these per node:"
        if hosts is None
        else "a node restarted by hand (while this runs and holds the namespaces):"
    )
    for process in cluster.processes:
        say(f"  {process.restart_command()}")

    previous = {s: signal.signal(s, cluster.request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            cluster.start()
            say(f"bootstrap servers: {cluster.bootstrap}")
            cluster.supervise(arguments.ready_timeout)
        except OSError as error:  # e.g. strom-server missing: stop the nodes already started
            say(f"{PROG}: cannot start a node: {error}")
            cluster.unexpected_exits += 1
        finally:
            statuses = cluster.stop(arguments.stop_timeout)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    clean = all(rc == 0 for rc in statuses.values()) and cluster.unexpected_exits == 0
    say("all nodes stopped cleanly" if clean else "not every node stopped cleanly")
    return EXIT_OK if clean else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())

"""kafka-consumer-groups.sh (Kafka's ConsumerGroupCommand from the tools jar) run through
the Java peers, and the tables it prints."""

from __future__ import annotations

from java_peers import JavaPeers

CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def consumer_groups(java_peers: JavaPeers, bootstrap: str, *args: str) -> str:
    done = java_peers.run(
        CONSUMER_GROUP_COMMAND, "--bootstrap-server", bootstrap, *args, timeout=90
    )
    return done.stdout + done.stderr


def table(output: str, group: str, first_column: str = "GROUP") -> list[dict[str, str]]:
    """Rows of `group` in a whitespace-aligned table printed by the tool, keyed by its
    header."""
    lines = [line.split() for line in output.splitlines() if line.strip()]
    header_at = next(i for i, cells in enumerate(lines) if cells[:1] == [first_column])
    header = lines[header_at]
    rows = []
    for cells in lines[header_at + 1 :]:
        if len(cells) != len(header) or cells[0] != group:
            continue
        rows.append(dict(zip(header, cells, strict=True)))
    return rows

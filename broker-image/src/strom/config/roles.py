"""A copy of the first node's server.properties joins its cluster as a broker.

Kafka's walk-through for more brokers on one machine copies config/server.properties and
changes node.id (broker.id), listeners and log.dirs. The copy still says
process.roles=broker,controller, but its listeners no longer carry the controller
listener and its id is not among the controller.quorum.voters: Kafka refuses such a file
(a controller must be a voter). Strom reads it as what the user meant, a broker that
joins the quorum the voters name, and says so in one line at start (`BrokerConfig.warnings`).
A node that is a voter, or that still listens on a controller listener, is never changed.
"""

from __future__ import annotations

from collections.abc import Sequence


def listener_names(listeners: str) -> set[str]:
    """The NAMEs of a raw `listeners` value (upper-cased, as Kafka normalises them)."""
    return {
        item.partition("://")[0].strip().upper() for item in listeners.split(",") if "://" in item
    }


def joins_as_broker(
    roles: Sequence[str],
    node_id: int,
    voter_ids: Sequence[int],
    controller_listener_names: Sequence[str],
    listeners: str,
) -> bool:
    """Whether a broker,controller node is a copy that should run as a broker only."""
    return (
        set(roles) == {"broker", "controller"}
        and bool(voter_ids)
        and node_id not in voter_ids
        and bool(controller_listener_names)
        and not {name.upper() for name in controller_listener_names} & listener_names(listeners)
    )


def joining_note(node_id: int, voters: Sequence[str]) -> str:
    return (
        f"process.roles=broker,controller, but node.id={node_id} is not one of the"
        f" controller.quorum.voters ({','.join(voters)}) and listeners has no controller"
        " listener: running as a broker only (process.roles=broker) that joins that quorum"
    )

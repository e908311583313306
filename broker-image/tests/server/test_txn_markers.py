"""Transaction markers on their way to the partitions (server/txn_markers.py): LocalMarkers
appends them to the partitions this broker leads (real replication Partitions over real
logs) and ends the producer's pending offsets in `__consumer_offsets`; MarkerSender
groups a round by the partitions' leaders, writes the local ones and sends the others
WriteTxnMarkers v1 (a fake channel). Then TxnPlacement (server/txn_placement.py): which
`__transaction_state` partitions the coordinator loads and unloads as leaderships and
their epochs move, and the whole way round with the real coordinator."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName
from kio.schema.write_txn_markers.v1 import response as markers_response
from kio.static.primitive import i32
from strom.cluster import delta as deltas
from strom.cluster import image as images
from strom.cluster import topics
from strom.coordinator import group as group_model
from strom.coordinator import groups, offsets_log, transactions, txn_records
from strom.coordinator.transactions import MarkerRequest
from strom.coordinator.txn_states import TransactionVersion
from strom.network import channel as channels
from strom.network import errors as network_errors
from strom.protocol import apis, outbound
from strom.records import batches, control
from strom.replication import outcomes, replica_manager
from strom.replication import partition as partitions
from strom.server import txn_markers, txn_placement
from strom.server.handlers import producing
from strom.storage import log_config, partition_log

E = ErrorCode
NOW = 1_700_000_000_000
ME, OTHER, THIRD = 1, 2, 3
PID = 901
COMMITTED = outcomes.Isolation.READ_COMMITTED
OFFSETS = topics.OFFSETS_TOPIC
TopicPartition = tuple[str, int]


# The cluster as this broker sees it ---------------------------------------------------------


def partition_image(index: int, leader: int, leader_epoch: int = 2) -> images.PartitionImage:
    replicas = tuple(sorted({ME, leader})) if leader >= 0 else (ME,)
    return images.PartitionImage(index, replicas, replicas, leader, leader_epoch, 0)


def topic_image(name: str, leaders: Mapping[int, int], epoch: int = 2) -> images.TopicImage:
    return images.TopicImage(
        name,
        uuid.uuid5(uuid.NAMESPACE_DNS, name),
        {index: partition_image(index, leader, epoch) for index, leader in leaders.items()},
    )


def cluster(*topic_images: images.TopicImage) -> images.MetadataImage:
    return images.MetadataImage("cluster", topics={t.name: t for t in topic_images})


class Replicas:
    """The replica manager's lookup, over the Partitions a test opened."""

    def __init__(self) -> None:
        self.partitions: dict[TopicPartition, partitions.Partition] = {}

    def partition(self, topic: str, index: int) -> partitions.Partition | None:
        return self.partitions.get((topic, index))


class Broker:
    """Node ME: real partitions in tmp_path, a group coordinator over its own
    `__consumer_offsets`-0, LocalMarkers and a MarkerSender on a fake channel."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.logs: list[partition_log.PartitionLog] = []
        self.replicas = Replicas()
        self.image = cluster(
            topic_image("t", {0: ME, 1: OTHER, 2: THIRD, 3: ME}),
            topic_image("u", {0: OTHER}),
            topic_image(OFFSETS, {0: ME}),
        )
        self.min_isr: dict[str, int] = {}
        self.open("t", 0, leader=ME)
        self.offsets_partition = self.open(OFFSETS, 0, leader=ME)
        self.groups = groups.GroupCoordinator(
            group_model.CoordinatorConfig(), self.store_over(self.offsets_partition)
        )
        self.local = txn_markers.LocalMarkers(
            cast(replica_manager.ReplicaManager, self.replicas),
            self.groups,
            lambda: self.image,
            lambda topic: self.min_isr.get(topic, 1),
            lambda: NOW,
        )
        self.channel = FakeChannel()
        self.sender = txn_markers.MarkerSender(
            ME, self.local, cast(channels.Channel, self.channel), lambda: self.image
        )

    def open(self, topic: str, index: int, *, leader: int) -> partitions.Partition:
        log = partition_log.PartitionLog.open(
            self.tmp_path / f"{topic}-{index}", log_config.LogConfig(), lambda: NOW
        )
        self.logs.append(log)
        partition = partitions.Partition(topic, index, log, ME, partition_image(index, leader))
        self.replicas.partitions[(topic, index)] = partition
        return partition

    def store_over(
        self, partition: partitions.Partition, topic: str = OFFSETS
    ) -> offsets_log.PartitionsOffsetsLog:
        """A coordinator's store over a real partition, as the broker builds it."""

        async def append(
            index: int, data: bytearray, headers: list[batches.BatchHeader], now: int
        ) -> None:
            outcome = await partition.append_records(data, headers, now)
            if outcome.error is not None:
                raise offsets_log.StoreFailed(
                    outcome.message or outcome.error.value,
                    producing.APPEND_ERROR_CODES[outcome.error],
                )

        return offsets_log.PartitionsOffsetsLog(
            topic=topic,
            partition_count=lambda: 1,
            create=lambda: 1,
            append_batch=append,
            read_chunks=lambda index: partition.log.committed_chunks(to_log_end=True),
        )

    def partition(self, topic: str, index: int) -> partitions.Partition:
        found = self.replicas.partition(topic, index)
        assert found is not None
        return found

    def close(self) -> None:
        for log in self.logs:
            log.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    node = Broker(tmp_path)
    yield node
    node.close()


class FakeChannel:
    """Other brokers: each answers its WriteTxnMarkers with `errors` (NONE by default),
    leaving out the partitions in `omit`; a node in `down` cannot be reached."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, Any, int | None]] = []
        self.errors: dict[TopicPartition, ErrorCode] = {}
        self.omit: set[TopicPartition] = set()
        self.down: set[int] = set()

    async def send(
        self,
        node_id: int,
        request: Any,
        *,
        api_version: int | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        self.sent.append((node_id, request, api_version))
        if node_id in self.down:
            raise network_errors.Disconnected(f"node {node_id} is down")
        assert isinstance(request, outbound.Draft) and api_version is not None
        built = request.at(api_version)  # what goes on the wire
        return markers_response.WriteTxnMarkersResponse(
            markers=tuple(
                markers_response.WritableTxnMarkerResult(
                    producer_id=ProducerId(marker.producer_id),
                    topics=tuple(
                        markers_response.WritableTxnMarkerTopicResult(
                            name=TopicName(topic.name),
                            partitions=tuple(
                                markers_response.WritableTxnMarkerPartitionResult(
                                    partition_index=i32(index),
                                    error_code=self.errors.get((topic.name, index), E.none),
                                )
                                for index in topic.partition_indexes
                                if (topic.name, index) not in self.omit
                            ),
                        )
                        for topic in marker.topics
                    ),
                )
                for marker in built.markers
            )
        )

    async def close(self) -> None:
        pass

    def wire(self, node_id: int) -> list[Any]:
        """The WriteTxnMarkers requests sent to a node, at their version."""
        return [request.at(version) for node, request, version in self.sent if node == node_id]


async def send(
    partition: partitions.Partition, producer_id: int = PID, epoch: int = 0, sequence: int = 0
) -> None:
    data = bytearray(
        batches.build_batch(
            [(b"k", b"v", [], NOW)],
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=sequence,
            is_transactional=True,
        )
    )
    outcome = await partition.append_records(data, list(batches.iter_batches(data)), NOW)
    assert outcome.error is None, outcome


def last_marker(partition: partitions.Partition) -> tuple[int, int, control.EndTxnMarker]:
    """(producer id, producer epoch, marker) of the partition's last batch, a marker."""
    data = b"".join(partition.log.committed_chunks(to_log_end=True))
    header = list(batches.iter_batches(data))[-1]
    assert header.is_control
    marker = control.parse_end_txn_marker(memoryview(data)[header.position :])
    assert marker is not None
    return header.producer_id, header.producer_epoch, marker


def request(
    *partitions_: TopicPartition, commit: bool = True, epoch: int = 0, coordinator_epoch: int = 5
) -> MarkerRequest:
    return MarkerRequest(
        PID, epoch, commit, coordinator_epoch, TransactionVersion.TV_0, frozenset(partitions_)
    )


# LocalMarkers -----------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
async def test_a_local_marker_ends_the_transaction_in_the_partition(
    broker: Broker, commit: bool
) -> None:
    t0 = broker.partition("t", 0)
    await send(t0)
    assert t0.read(0, 1 << 20, isolation=COMMITTED).last_stable_offset == 0
    answers = await broker.local.write(PID, 0, commit, 5, [("t", 0)])
    assert answers == {("t", 0): E.none}
    assert last_marker(t0) == (PID, 0, control.EndTxnMarker(commit, 5))
    read = t0.read(0, 1 << 20, isolation=COMMITTED)
    assert read.last_stable_offset == 2 == t0.log_end_offset
    assert read.aborted_transactions == (() if commit else ((PID, 0),))


async def test_local_markers_answer_each_partitions_error(broker: Broker) -> None:
    follower = broker.open("t", 3, leader=OTHER)  # the image is behind: not leader here
    assert follower is broker.partition("t", 3)
    answers = await broker.local.write(PID, 0, True, 5, [("t", 0), ("t", 3), ("t", 1), ("gone", 0)])
    assert answers == {
        ("t", 0): E.none,
        ("t", 3): E.not_leader_or_follower,
        ("t", 1): E.not_leader_or_follower,  # in the image, not hosted here
        ("gone", 0): E.unknown_topic_or_partition,
    }


async def test_local_markers_refuse_older_producer_and_coordinator_epochs(
    broker: Broker,
) -> None:
    t0 = broker.partition("t", 0)
    await send(t0, epoch=1)
    assert await broker.local.write(PID, 0, True, 5, [("t", 0)]) == {
        ("t", 0): E.invalid_producer_epoch
    }
    assert await broker.local.write(PID, 1, True, 5, [("t", 0)]) == {("t", 0): E.none}
    await send(t0, epoch=1, sequence=1)
    assert await broker.local.write(PID, 1, False, 4, [("t", 0)]) == {
        ("t", 0): E.transaction_coordinator_fenced
    }
    assert t0.read(0, 1 << 20, isolation=COMMITTED).last_stable_offset == 2


async def test_local_markers_honour_the_topics_min_insync_replicas(broker: Broker) -> None:
    t0 = broker.partition("t", 0)
    await send(t0)
    broker.min_isr["t"] = 2
    assert await broker.local.write(PID, 0, True, 5, [("t", 0)]) == {
        ("t", 0): E.not_enough_replicas
    }
    assert t0.log_end_offset == 1


async def txn_offset_commit(broker: Broker, offset: int = 10) -> None:
    answer = await broker.groups.commit_transactional_offsets(
        group_id="g",
        producer_id=PID,
        producer_epoch=0,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        offsets=[("t", 0, offset, -1, "")],
        now_ms=NOW,
    )
    assert answer == {("t", 0): E.none}


def committed(coordinator: groups.GroupCoordinator) -> int | None:
    fetched = coordinator.fetch_offsets("g", [("t", 0)])
    assert isinstance(fetched, dict)
    found = fetched[("t", 0)]
    return None if found is None else found.offset


@pytest.mark.parametrize("commit", [True, False])
async def test_a_marker_in_consumer_offsets_ends_the_pending_offset_commits(
    broker: Broker, commit: bool
) -> None:
    await txn_offset_commit(broker)
    assert committed(broker.groups) is None
    assert broker.groups.groups["g"].has_pending_offset(("t", 0))
    answers = await broker.local.write(PID, 0, commit, 5, [(OFFSETS, 0)])
    assert answers == {(OFFSETS, 0): E.none}
    assert committed(broker.groups) == (10 if commit else None)
    assert not broker.groups.groups["g"].has_pending_offset(("t", 0))
    # the partition's log says the same to the next coordinator
    successor = groups.GroupCoordinator(
        group_model.CoordinatorConfig(), broker.store_over(broker.offsets_partition)
    )
    successor.load([0], NOW)
    assert committed(successor) == (10 if commit else None)
    assert "g" in successor.groups or not commit


async def test_a_refused_marker_leaves_the_offsets_pending(broker: Broker) -> None:
    await txn_offset_commit(broker)
    broker.min_isr[OFFSETS] = 3
    answers = await broker.local.write(PID, 0, True, 5, [(OFFSETS, 0)])
    assert answers == {(OFFSETS, 0): E.not_enough_replicas}
    assert committed(broker.groups) is None
    assert broker.groups.groups["g"].has_pending_offset(("t", 0))


# MarkerSender -----------------------------------------------------------------------------


async def test_the_sender_groups_partitions_by_leader_and_writes_local_ones_itself(
    broker: Broker,
) -> None:
    await send(broker.partition("t", 0))
    answers = await broker.sender(
        request(("t", 0), ("t", 1), ("t", 2), ("u", 0), commit=True, epoch=0, coordinator_epoch=6)
    )
    assert answers == {("t", 0): E.none, ("t", 1): E.none, ("t", 2): E.none, ("u", 0): E.none}
    assert last_marker(broker.partition("t", 0)) == (PID, 0, control.EndTxnMarker(True, 6))
    assert sorted(node for node, _, _ in broker.channel.sent) == [OTHER, THIRD]
    assert {version for _, _, version in broker.channel.sent} == {1}
    [to_other] = broker.channel.wire(OTHER)
    assert type(to_other).__api_key__ == apis.ApiKey.WRITE_TXN_MARKERS
    [marker] = to_other.markers
    assert (
        marker.producer_id,
        marker.producer_epoch,
        marker.transaction_result,
        marker.coordinator_epoch,
    ) == (PID, 0, True, 6)
    assert {(str(t.name), tuple(t.partition_indexes)) for t in marker.topics} == {
        ("t", (1,)),
        ("u", (0,)),
    }
    [to_third] = broker.channel.wire(THIRD)
    assert [(str(t.name), tuple(t.partition_indexes)) for t in to_third.markers[0].topics] == [
        ("t", (2,))
    ]


async def test_the_sender_passes_on_each_remote_partitions_error(broker: Broker) -> None:
    broker.channel.errors[("t", 1)] = E.not_enough_replicas
    broker.channel.errors[("u", 0)] = E.invalid_producer_epoch
    broker.channel.omit.add(("t", 2))
    answers = await broker.sender(request(("t", 1), ("t", 2), ("u", 0)))
    assert answers == {
        ("t", 1): E.not_enough_replicas,
        ("u", 0): E.invalid_producer_epoch,
        ("t", 2): E.unknown_server_error,  # no answer for it: sent again
    }


async def test_an_unreachable_leader_fails_only_its_partitions(broker: Broker) -> None:
    broker.channel.down.add(OTHER)
    answers = await broker.sender(request(("t", 1), ("u", 0), ("t", 2)))
    assert answers == {
        ("t", 1): E.not_leader_or_follower,
        ("u", 0): E.not_leader_or_follower,
        ("t", 2): E.none,
    }


async def test_deleted_topics_need_no_marker_and_leaderless_partitions_wait(
    broker: Broker,
) -> None:
    broker.image = cluster(
        topic_image("t", {0: ME, 1: -1}),
        topic_image(OFFSETS, {0: ME}),
    )
    answers = await broker.sender(request(("gone", 0), ("t", 1), ("t", 9)))
    assert answers == {
        ("gone", 0): E.none,
        ("t", 1): E.not_leader_or_follower,
        ("t", 9): E.not_leader_or_follower,
    }
    assert broker.channel.sent == []


async def test_a_topic_deleted_while_its_marker_was_out_needs_no_marker(
    broker: Broker,
) -> None:
    broker.channel.errors[("u", 0)] = E.unknown_topic_or_partition
    broker.channel.errors[("t", 1)] = E.unknown_topic_or_partition
    before = broker.image
    after = cluster(*(t for name, t in before.topics.items() if name != "u"))
    images_seen = itertools.chain([before], itertools.repeat(after))
    sender = txn_markers.MarkerSender(
        ME, broker.local, cast(channels.Channel, broker.channel), lambda: next(images_seen)
    )
    answers = await sender(request(("u", 0), ("t", 1)))
    assert answers == {("u", 0): E.none, ("t", 1): E.unknown_topic_or_partition}


# TxnPlacement -----------------------------------------------------------------------------


class FakeCoordinator:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int | None]] = []

    def load(self, partition: int, coordinator_epoch: int) -> int:
        self.calls.append(("load", partition, coordinator_epoch))
        return 10 + partition

    def unload(self, partition: int) -> int:
        self.calls.append(("unload", partition, None))
        return 0


def txn_topic(leaders: Mapping[int, tuple[int, int]]) -> images.TopicImage:
    """`__transaction_state` with partition -> (leader, leader epoch)."""
    return images.TopicImage(
        topics.TRANSACTIONS_TOPIC,
        uuid.uuid5(uuid.NAMESPACE_DNS, topics.TRANSACTIONS_TOPIC),
        {
            index: partition_image(index, leader, epoch)
            for index, (leader, epoch) in leaders.items()
        },
    )


def placement_with(coordinator: FakeCoordinator) -> txn_placement.TxnPlacement:
    return txn_placement.TxnPlacement(cast(transactions.TransactionCoordinator, coordinator), ME)


def publish(placement: txn_placement.TxnPlacement, image: images.MetadataImage) -> None:
    placement.publish(deltas.MetadataDelta(image), image)


def test_placement_loads_the_partitions_led_here_with_their_leader_epochs() -> None:
    coordinator = FakeCoordinator()
    placement = placement_with(coordinator)
    image = cluster(txn_topic({0: (ME, 4), 1: (OTHER, 9), 2: (ME, 6)}))
    assert placement.load(image) == 10 + 12
    assert coordinator.calls == [("load", 0, 4), ("load", 2, 6)]
    publish(placement, image)
    assert len(coordinator.calls) == 2, "nothing moved: nothing to do"


def test_placement_without_the_topic_coordinates_nothing() -> None:
    coordinator = FakeCoordinator()
    placement = placement_with(coordinator)
    assert placement.load(cluster(topic_image("t", {0: ME}))) == 0
    assert coordinator.calls == []


def test_placement_follows_gains_losses_and_leader_epoch_changes() -> None:
    coordinator = FakeCoordinator()
    placement = placement_with(coordinator)
    placement.load(cluster(txn_topic({0: (ME, 4), 1: (OTHER, 9), 2: (ME, 6)})))
    coordinator.calls.clear()
    # 0 goes away, 1 comes here, 2 stays at its epoch
    publish(placement, cluster(txn_topic({0: (OTHER, 5), 1: (ME, 10), 2: (ME, 6)})))
    assert coordinator.calls == [("unload", 0, None), ("load", 1, 10)]
    coordinator.calls.clear()
    # 2 was re-elected here (another epoch): the ids are loaded again with it
    publish(placement, cluster(txn_topic({0: (OTHER, 5), 1: (ME, 10), 2: (ME, 7)})))
    assert coordinator.calls == [("unload", 2, None), ("load", 2, 7)]
    coordinator.calls.clear()
    # the topic is gone
    publish(placement, cluster())
    assert sorted(coordinator.calls) == [("unload", 1, None), ("unload", 2, None)]


# The whole way round ----------------------------------------------------------------------


async def test_a_commit_goes_from_the_coordinator_to_local_and_remote_partitions(
    broker: Broker,
) -> None:
    """The real coordinator over a real `__transaction_state`-0, placed by TxnPlacement,
    its markers through the MarkerSender: one partition here, one on another broker."""
    state_partition = broker.open(topics.TRANSACTIONS_TOPIC, 0, leader=ME)
    store = broker.store_over(state_partition, topics.TRANSACTIONS_TOPIC)
    ids = itertools.count(7000)

    async def new_producer_id() -> int:
        return next(ids)

    def coordinator() -> transactions.TransactionCoordinator:
        return transactions.TransactionCoordinator(
            store,
            send_markers=broker.sender,
            new_producer_id=new_producer_id,
            time_ms=lambda: NOW,
            config=transactions.TxnConfig(retry_backoff_ms=0),
        )

    first = coordinator()
    placement = txn_placement.TxnPlacement(first, ME)
    placement.load(cluster(txn_topic({0: (ME, 4)})))
    assert first.loaded_partitions == {0: 4}
    init = await first.init_producer_id("app", 60_000, -1, -1)
    assert (init.error, init.producer_id, init.producer_epoch) == (E.none, 7000, 0)
    added = await first.add_partitions("app", 7000, 0, [("t", 0), ("t", 1)])
    assert added is E.none
    t0 = broker.partition("t", 0)
    await send(t0, producer_id=7000)
    assert (await first.end_txn("app", 7000, 0, True)).error is E.none
    await first.drain()
    assert last_marker(t0) == (7000, 0, control.EndTxnMarker(True, 4))
    assert t0.read(0, 1 << 20, isolation=COMMITTED).last_stable_offset == 2
    [remote] = broker.channel.wire(OTHER)
    assert (remote.markers[0].producer_id, remote.markers[0].coordinator_epoch) == (7000, 4)
    assert first.describe("app").state == "CompleteCommit"
    states = [
        None if value is None else value.state.kafka_name
        for _, value in ((key, txn_records.parse_value(value)) for key, value in store.read(0))
    ]
    assert states == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    # the leadership moves away and back (a new epoch): the log is replayed
    publish(placement, cluster(txn_topic({0: (OTHER, 5)})))
    assert first.loaded_partitions == {}
    assert first.describe("app").error is E.not_coordinator
    publish(placement, cluster(txn_topic({0: (ME, 6)})))
    assert first.loaded_partitions == {0: 6}
    assert first.describe("app").state == "CompleteCommit"
    assert (await first.init_producer_id("app", 60_000, -1, -1)).producer_epoch == 1

"""The broker's transaction coordinator and what it runs on: `__transaction_state` through
the broker's own partitions, markers written here or sent to other brokers on a channel
of their own, placement following the metadata, and the timers that abort transactions
open past their timeout and expire unused transactional ids."""

from __future__ import annotations

import contextlib
import logging

from kio.schema.errors import ErrorCode

from strom.clock import Clock
from strom.cluster import config_cache, loader, topics
from strom.coordinator import groups as group_coordinator
from strom.coordinator import offsets_log, producer_ids, transactions
from strom.network import channel as channels
from strom.network import errors as network_errors
from strom.protocol import apis, outbound
from strom.records import batches
from strom.replication import outcomes, replica_manager
from strom.server import context, coordinator_lookup, topic_entries, txn_markers, txn_placement
from strom.server.handlers import producing

log = logging.getLogger(__name__)

# AddPartitionsToTxn's first brokers' version (several transactions, verify_only)
VERIFY_VERSION = 4
# A produce waits on it: a lost coordinator is answered retriable within this
VERIFY_TIMEOUT_S = 5.0


class TransactionService:
    def __init__(
        self,
        *,
        node_id: int,
        configs: config_cache.ConfigCache,
        metadata: loader.MetadataLoader,
        replicas: replica_manager.ReplicaManager,
        groups: group_coordinator.GroupCoordinator,
        producer_id_manager: producer_ids.ProducerIdManager,
        transactions_topic: context.InternalTopic,
        broker_endpoint: channels.Resolver,
        clock: Clock,
    ) -> None:
        self._node_id = node_id
        self._metadata = metadata
        self._configs = configs
        self._replicas = replicas
        self._transactions_topic = transactions_topic
        self._clock = clock
        self.local_markers = txn_markers.LocalMarkers(
            replicas,
            groups,
            lambda: metadata.image,
            lambda topic: configs.topic(topic).min_insync_replicas,
            clock.time_ms,
        )
        self._channel = channels.TcpChannel(
            broker_endpoint,
            clock=clock,
            # shorter than request.timeout.ms: a marker round stuck on a broker cut off
            # holds its transaction prepared, and every request on its id waits
            settings=channels.ChannelSettings(
                client_id=f"broker-{node_id}-txn-markers", request_timeout_ms=10_000
            ),
        )
        self.coordinator = transactions.TransactionCoordinator(
            offsets_log.PartitionsOffsetsLog(
                topic=topics.TRANSACTIONS_TOPIC,
                partition_count=transactions_topic.partition_count,
                create=self._create_topic,
                append_batch=self._append,
                read_chunks=lambda index: replicas.log_chunks(topics.TRANSACTIONS_TOPIC, index),
            ),
            send_markers=txn_markers.MarkerSender(
                node_id, self.local_markers, self._channel, lambda: metadata.image
            ),
            new_producer_id=producer_id_manager.next_id,
            time_ms=clock.time_ms,
            config=self._txn_config,
        )
        self.placement = txn_placement.TxnPlacement(self.coordinator, node_id)

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890: are these partitions in the producer's ongoing transaction? Its
        coordinator answers, here or with AddPartitionsToTxn v4 `verify_only`."""
        coordinator = coordinator_lookup.coordinator_of(
            self._metadata.image, transactional_id, topics.TRANSACTIONS_TOPIC
        )
        if coordinator is None or coordinator < 0:  # no topic yet, or no leader
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        if coordinator == self._node_id:
            return self.coordinator.verify_partitions(
                transactional_id, producer_id, producer_epoch, partitions
            )
        draft = outbound.Draft(
            apis.ApiKey.ADD_PARTITIONS_TO_TXN,
            {
                "transactions": [
                    {
                        "transactional_id": transactional_id,
                        "producer_id": producer_id,
                        "producer_epoch": producer_epoch,
                        "verify_only": True,
                        "topics": [
                            {"name": name, "partitions": indexes}
                            for name, indexes in topic_entries.group(partitions).items()
                        ],
                    }
                ]
            },
        )
        try:
            response = await self._channel.send(
                coordinator, draft, api_version=VERIFY_VERSION, timeout_s=VERIFY_TIMEOUT_S
            )
        except network_errors.NetworkError as error:
            log.info("verifying %s with broker %d failed: %s", transactional_id, coordinator, error)
            return dict.fromkeys(partitions, ErrorCode.network_exception)
        if response.error_code != ErrorCode.none:
            return dict.fromkeys(partitions, response.error_code)
        return topic_entries.read_errors(
            partitions,
            (
                (topic.name, result.partition_index, result.partition_error_code)
                for transaction in response.results_by_transaction
                for topic in transaction.topic_results
                for result in topic.results_by_partition
            ),
        )

    def _setting(self, name: str) -> int:
        return self._configs.broker.get_int(name)

    def _txn_config(self) -> transactions.TxnConfig:
        return transactions.TxnConfig(
            max_timeout_ms=self._setting("transaction.max.timeout.ms"),
            id_expiration_ms=self._setting("transactional.id.expiration.ms"),
            add_partitions_wait_ms=self._setting("add.partitions.to.txn.retry.backoff.max.ms"),
        )

    async def _create_topic(self) -> int:
        try:
            return (await self._transactions_topic.ensure()).partition_count
        except topics.MetadataError as error:
            raise offsets_log.StoreFailed(
                f"cannot create {topics.TRANSACTIONS_TOPIC}: {error}"
            ) from error

    async def _append(
        self, index: int, data: bytearray, headers: list[batches.BatchHeader], now: int
    ) -> None:
        partition = self._replicas.partition(topics.TRANSACTIONS_TOPIC, index)
        if partition is None:
            raise offsets_log.StoreFailed(
                f"{topics.TRANSACTIONS_TOPIC}-{index} is not hosted here",
                producing.APPEND_ERROR_CODES[outcomes.AppendError.NOT_LEADER],
            )
        min_isr = self._configs.topic(topics.TRANSACTIONS_TOPIC).min_insync_replicas
        outcome = await partition.append_records(data, headers, now, min_isr)
        if outcome.error is not None:
            raise offsets_log.StoreFailed(
                outcome.message or outcome.error.value, producing.APPEND_ERROR_CODES[outcome.error]
            )

    async def run_timers(self, tick_s: float = 1.0) -> None:
        """Abort transactions open past their timeout and expire unused ids, forever."""
        now = self._clock.time_ms()
        next_abort = now + self._setting(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"
        )
        next_expiry = now + self._setting(
            "transaction.remove.expired.transaction.cleanup.interval.ms"
        )
        while True:
            await self._clock.sleep(tick_s)
            now = self._clock.time_ms()
            if now >= next_abort:
                next_abort = now + self._setting(
                    "transaction.abort.timed.out.transaction.cleanup.interval.ms"
                )
                try:
                    await self.coordinator.abort_timed_out()
                except Exception:
                    log.exception("aborting timed-out transactions failed")
            if now >= next_expiry:
                next_expiry = now + self._setting(
                    "transaction.remove.expired.transaction.cleanup.interval.ms"
                )
                try:
                    expired = await self.coordinator.expire_ids()
                except Exception:
                    log.exception("expiring transactional ids failed")
                    expired = 0
                if expired:
                    log.info("expired %d transactional id(s)", expired)

    async def close(self) -> None:
        self.coordinator.stop()
        with contextlib.suppress(network_errors.NetworkError):
            await self._channel.close()

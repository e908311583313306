"""Coordinators: consumer groups and their committed offsets, as Kafka's group-coordinator
module splits them by role.

- `states`: the group states and the table of valid transitions.
- `group`: one group and its members (what the state machine holds), no I/O.
- `rebalance` and `classic`: the classic protocol (JoinGroup, SyncGroup, Heartbeat,
  LeaveGroup, static membership, session and rebalance timeouts).
- `offsets`: committed offsets (commit, fetch, delete, expiry, a deleted topic).
- `runtime` and `offsets_records`: the only door to `__consumer_offsets`: the record
  formats, ordered asynchronous writes, replay at startup.
- `offsets_log`: the small storage interface the runtime writes through, and an adapter
  over today's partition append and read.
- The consumer protocol (KIP-848): `consumer_group` (the model: epochs, members, target
  assignment), `assignors` (uniform, range), `reconciliation` (a member's next step to its
  target), `consumer` (ConsumerGroupHeartbeat, timers), `conversion` (classic <-> consumer
  groups), `classic_members` (classic members inside a consumer group),
  `embedded_protocol` (the consumer protocol inside JoinGroup/SyncGroup) and
  `consumer_records` (its records in `__consumer_offsets`).
- `groups`: the coordinator the broker and the handlers call.
"""

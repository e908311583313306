"""The Raft core of the metadata quorum, shaped like Kafka's ``raft/`` (KRaft), sans-I/O.

`client.RaftClient` is a state machine fed messages and clock readings (``handle``,
``poll``) that returns messages to send and effects (``actions``); one small class per
election state (``states``) with guarded transitions (``quorum``); the leader's view of
its followers (``leader``); the quorum RPCs as plain data (``messages``); the log it
replicates (``log.ReplicatedLog``, in memory in ``memory_log``) and the persisted
election state (``store``). Nothing here reads the time, sleeps or touches a socket: a
driver (the broker's, or the simulation test's) does.
"""

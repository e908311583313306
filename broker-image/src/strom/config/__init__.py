"""Broker and topic configuration: Kafka property names, defaults, validation, sources.

The lowest layer: it imports nothing else from strom. `definitions` is the table of
every config; `loading` merges the properties file, `STROM_*` variables and
`--override`s into a `broker.BrokerConfig`; `quorum` is the typed view of the KRaft
metadata quorum (`BrokerConfig.quorum`); `dev_cluster` renders the property files of a
local cluster; `topics` validates topic configs and derives a topic's effective values
from the broker's.
"""

"""The broker's outbound channel to other brokers: Kafka requests over asyncio.

Raft, the replica fetchers and request forwarding send requests to other nodes through a
`channel.Channel`: one connection per destination node, reused and pipelined (requests
matched to responses by correlation id), a deadline per request, reconnection with
exponential back-off and jitter, ApiVersions negotiated once per connection. Node ids are
resolved to addresses by a callable, since addresses come from metadata and change with
it. Time comes from an injected clock and the interface is small, so simulations drive
time and tests replace the whole channel with a simulated router. Failures are typed
(`errors`). The bytes on the wire are `strom.protocol`'s; this package only moves them.
"""

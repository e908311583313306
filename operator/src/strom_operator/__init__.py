"""The Strom operator: KafkaCluster and Topic resources reconciled by kopf.

`handlers` (kopf's handlers, timers and daemons) is thin: it reads the resources and the
pods, asks the brokers through `kafka_admin` (over strom.client, the module the CLI uses),
hands both to the pure functions of `reconcile`, and carries out their plans through `k8s`
and `kafka_admin`. `main` is the `strom-operator` entrypoint. (There is no `operator`
package: that name is Python's standard module.)
"""

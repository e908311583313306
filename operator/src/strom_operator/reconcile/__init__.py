"""Pure reconcile functions: a spec and observed state in, Kubernetes objects and plans out.

No I/O, no kopf, no Kafka client here (an import-linter contract): `model` holds the
types; `spec` reads custom resources into them; `properties` and `manifests` turn a
KafkaCluster into its ConfigMap, Services, StatefulSet and PodDisruptionBudget; `rolling`
decides the next pod to restart; `balancing` and `scaling` plan leader balance, drains and
placements; `topics` the actions on one Topic; `status` the conditions.
"""

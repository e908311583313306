#!/usr/bin/env bash
# Resolves Spark's Kafka connector (spark-on-k8s/pom.xml, pinned to the pyspark of
# pyproject.toml's `spark` extra) from Maven Central into spark-on-k8s/lib/: only the jars
# that pyspark does not ship already (the connector, the token provider, kafka-clients,
# commons-pool2), so that no second copy of a jar pyspark has lands on Spark's classpath.
# Idempotent: skipped while lib/ is newer than pom.xml.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { echo "spark-on-k8s/install.sh: $*" >&2; }
# shellcheck source=../e2e/peers/java_peer.sh
source "$here/../e2e/peers/java_peer.sh"

command -v java >/dev/null || apt_install default-jdk-headless
resolve_jars "$here" -DincludeScope=runtime \
    -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2

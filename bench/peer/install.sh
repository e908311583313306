#!/usr/bin/env bash
# Installs the Apache Kafka peer the benchmarks compare Strom against:
#   - Kafka's broker, clients and tools jars (Maven Central, pinned in pom.xml) -> lib/
#   - the bench's own Java programs in src/ compiled with javac -> target/classes/
# Idempotent: each step is skipped when its output is newer than its inputs.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { echo "bench/peer/install.sh: $*" >&2; }
# shellcheck source=../../e2e/peers/java_peer.sh
source "$here/../../e2e/peers/java_peer.sh"

build_java_peer "$here"

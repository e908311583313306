#!/usr/bin/env bash
# Installs the real Kafka peers the e2e tests run against Strom:
#   - the Java kafka-clients and kafka-tools jars (Maven Central, pinned in pom.xml) -> lib/
#   - the small Java peer programs in src/ compiled with javac -> target/classes/
#   - kcat (Debian package)
# Idempotent: each step is skipped when its output is newer than its inputs.
# Usage: install.sh [java|kcat]...   (no argument: everything)
set -euo pipefail

want_java=0
want_kcat=0
if [[ $# == 0 ]]; then
    want_java=1
    want_kcat=1
fi
for part in "$@"; do
    case "$part" in
        java) want_java=1 ;;
        kcat) want_kcat=1 ;;
        *) echo "usage: $0 [java|kcat]..." >&2; exit 2 ;;
    esac
done

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { echo "e2e/peers/install.sh: $*" >&2; }
# shellcheck source=java_peer.sh
source "$here/java_peer.sh"

if [[ "$want_java" == 1 ]]; then
    build_java_peer "$here"
fi
if [[ "$want_kcat" == 1 ]] && ! command -v kcat >/dev/null; then
    apt_install kcat
fi

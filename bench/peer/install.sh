#!/usr/bin/env bash
# Installs the Apache Kafka peer the benchmarks compare Strom against:
#   - Kafka's broker, clients and tools jars (Maven Central, pinned in pom.xml) -> lib/
#   - the bench's own Java programs in src/ compiled with javac -> target/classes/
# Idempotent: each step is skipped when its output is newer than its inputs.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lib="$here/lib"
classes="$here/target/classes"
lib_stamp="$lib/.resolved"
classes_stamp="$classes/.compiled"

log() { echo "bench/peer/install.sh: $*" >&2; }

apt_install() {
    local sudo=()
    if [[ "$(id -u)" != 0 ]] && command -v sudo >/dev/null; then
        sudo=(sudo)
    fi
    log "installing Debian package(s): $*"
    export DEBIAN_FRONTEND=noninteractive
    if ! "${sudo[@]}" apt-get install -y -q "$@" >&2; then
        "${sudo[@]}" apt-get update -q >&2
        "${sudo[@]}" apt-get install -y -q "$@" >&2
    fi
}

if [[ ! -f "$lib_stamp" || "$here/pom.xml" -nt "$lib_stamp" ]]; then
    command -v mvn >/dev/null || apt_install maven
    log "resolving Kafka jars from pom.xml into lib/"
    rm -rf "$lib.tmp"
    mvn -q -B -Dstyle.color=never -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$lib.tmp"
    rm -rf "$lib"
    mv "$lib.tmp" "$lib"
    touch "$lib_stamp"
fi

need_compile=0
if [[ ! -f "$classes_stamp" || "$lib_stamp" -nt "$classes_stamp" ]]; then
    need_compile=1
else
    for src in "$here"/src/*.java; do
        if [[ "$src" -nt "$classes_stamp" ]]; then
            need_compile=1
            break
        fi
    done
fi
if [[ "$need_compile" == 1 ]]; then
    command -v javac >/dev/null || apt_install default-jdk-headless
    log "compiling src/*.java into target/classes/"
    rm -rf "$classes"
    mkdir -p "$classes"
    javac --release 17 -Xlint:all -Werror -cp "$lib/*" -d "$classes" "$here"/src/*.java
    touch "$classes_stamp"
fi

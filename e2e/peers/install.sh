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
lib="$here/lib"
classes="$here/target/classes"
lib_stamp="$lib/.resolved"
classes_stamp="$classes/.compiled"

log() { echo "e2e/peers/install.sh: $*" >&2; }

# Install Debian packages (as root, or with sudo); refresh the lists only if needed.
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

# 1. jars from Maven Central, re-resolved whenever pom.xml changes.
if [[ "$want_java" == 1 ]] && [[ ! -f "$lib_stamp" || "$here/pom.xml" -nt "$lib_stamp" ]]; then
    command -v mvn >/dev/null || apt_install maven
    log "resolving jars from pom.xml into lib/"
    rm -rf "$lib.tmp"
    mvn -q -B -Dstyle.color=never -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$lib.tmp"
    rm -rf "$lib"
    mv "$lib.tmp" "$lib"
    touch "$lib_stamp"
fi

# 2. the Java peers, recompiled when a source file or the jars changed.
need_compile=0
if [[ "$want_java" == 0 ]]; then
    :
elif [[ ! -f "$classes_stamp" || "$lib_stamp" -nt "$classes_stamp" ]]; then
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

# 3. kcat from Debian.
if [[ "$want_kcat" == 1 ]] && ! command -v kcat >/dev/null; then
    apt_install kcat
fi

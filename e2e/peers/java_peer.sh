# Shared steps of e2e/peers/install.sh and bench/peer/install.sh; source it, then call
# build_java_peer. A "Java peer" folder holds pom.xml (pinned jars from Maven Central) and
# src/*.java (small programs compiled against them). Needs `log` defined by the caller.

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

# Maven printing plain text: batch mode, no colours, and no reset escape code (ESC[0m),
# which Debian's Maven 3.8 (jansi 2) writes on exit even so unless jansi.noreset is set.
maven() {
    MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn -B -Dstyle.color=never "$@"
}

# resolve_jars DIR [MAVEN_ARG...]: the jars of DIR/pom.xml into DIR/lib/, again whenever
# pom.xml changes (DIR/lib/.resolved is the stamp); extra arguments go to Maven's
# copy-dependencies (e.g. -DincludeArtifactIds=... to take only some of them).
resolve_jars() {
    local here="$1"
    shift
    local lib="$here/lib"
    local lib_stamp="$lib/.resolved"
    if [[ -f "$lib_stamp" && ! "$here/pom.xml" -nt "$lib_stamp" ]]; then
        return 0
    fi
    command -v mvn >/dev/null || apt_install maven
    log "resolving jars from pom.xml into lib/"
    rm -rf "$lib.tmp"
    maven -q -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$lib.tmp" "$@"
    rm -rf "$lib"
    mv "$lib.tmp" "$lib"
    touch "$lib_stamp"
}

# build_java_peer DIR: the jars of DIR/pom.xml into DIR/lib/ (again whenever pom.xml
# changes), then DIR/src/*.java into DIR/target/classes/ (again whenever a source file or
# the jars change). Idempotent: each step is skipped when its output is newer than its inputs.
build_java_peer() {
    local here="$1"
    local lib="$here/lib"
    local classes="$here/target/classes"
    local lib_stamp="$lib/.resolved"
    local classes_stamp="$classes/.compiled"

    resolve_jars "$here"

    local need_compile=0
    if [[ ! -f "$classes_stamp" || "$lib_stamp" -nt "$classes_stamp" ]]; then
        need_compile=1
    else
        local src
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
}

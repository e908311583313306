#!/usr/bin/env bash
# `make kafka-tools`: Kafka's commands (kafka-topics.sh, kafka-console-producer.sh,
# connect-standalone.sh, ...) as small scripts in BIN_DIR (default: the project's
# .venv/bin), each running Apache Kafka's own main class from the jars install.sh pins in
# lib/, so a `kafka-*.sh` line of a Kafka tutorial pastes as is.
# Like Kafka's bin/kafka-run-class.sh, a script takes KAFKA_HEAP_OPTS,
# KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_LOG4J_OPTS and KAFKA_OPTS from the environment; the
# defaults are lighter than Kafka's (C1 JIT only, serial GC: short-lived tools start
# faster on a small box) and log at WARN (log4j2.xml beside this file).
# Usage: kafka_tools.sh [BIN_DIR]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin_dir="${1:-$here/../../.venv/bin}"
mkdir -p "$bin_dir"
bin_dir="$(cd "$bin_dir" && pwd)"

bash "$here/install.sh" java

# name, main class, heap (Kafka's bin/*.sh give the console tools 512M and Connect 2G)
tools=(
    "kafka-topics.sh org.apache.kafka.tools.TopicCommand -Xmx512M"
    "kafka-console-producer.sh org.apache.kafka.tools.ConsoleProducer -Xmx512M"
    "kafka-console-consumer.sh org.apache.kafka.tools.consumer.ConsoleConsumer -Xmx512M"
    "kafka-consumer-groups.sh org.apache.kafka.tools.consumer.group.ConsumerGroupCommand -Xmx512M"
    "kafka-configs.sh kafka.admin.ConfigCommand -Xmx512M"
    "kafka-get-offsets.sh org.apache.kafka.tools.GetOffsetShell -Xmx512M"
    "kafka-producer-perf-test.sh org.apache.kafka.tools.ProducerPerformance -Xmx512M"
    "kafka-consumer-perf-test.sh org.apache.kafka.tools.ConsumerPerformance -Xmx512M"
    "kafka-metadata-quorum.sh org.apache.kafka.tools.MetadataQuorumCommand -Xmx512M"
    "kafka-leader-election.sh org.apache.kafka.tools.LeaderElectionCommand -Xmx512M"
    "kafka-reassign-partitions.sh org.apache.kafka.tools.reassign.ReassignPartitionsCommand -Xmx512M"
    "kafka-log-dirs.sh org.apache.kafka.tools.LogDirsCommand -Xmx512M"
    "kafka-delete-records.sh org.apache.kafka.tools.DeleteRecordsCommand -Xmx512M"
    "kafka-broker-api-versions.sh org.apache.kafka.tools.BrokerApiVersionsCommand -Xmx512M"
    "kafka-acls.sh org.apache.kafka.tools.AclCommand -Xmx512M"
    "kafka-streams-application-reset.sh org.apache.kafka.tools.StreamsResetter -Xmx512M"
    "connect-standalone.sh org.apache.kafka.connect.cli.ConnectStandalone -Xmx1G"
    "connect-distributed.sh org.apache.kafka.connect.cli.ConnectDistributed -Xmx1G"
    "connect-mirror-maker.sh org.apache.kafka.connect.mirror.MirrorMaker -Xmx1G"
)

# Connect's own usage line is an INFO log line (so hidden at WARN): the scripts print
# Kafka's bin/connect-*.sh usage themselves, for no argument or --help (MirrorMaker's
# driver has its own -h).
declare -A usages=(
    [connect-standalone.sh]="connect-standalone.properties [connector1.properties connector2.json ...]"
    [connect-distributed.sh]="connect-distributed.properties"
    [connect-mirror-maker.sh]="mm2.properties"
)

# write_script NAME MAIN HEAP: MAIN is a class name, or empty for kafka-run-class.sh
write_script() {
    local name="$1" main="$2" heap="$3"
    local path="$bin_dir/$name"
    local usage="${usages[$name]:-}"
    {
        cat <<SCRIPT
#!/usr/bin/env bash
# $name: Apache Kafka's ${main:-main class named by the first argument} from $here/lib
# (written by e2e/peers/kafka_tools.sh: \`make kafka-tools\` writes it again).
SCRIPT
        if [[ -n "$usage" ]]; then
            cat <<SCRIPT
if [[ \$# -lt 1 ]]; then
    echo "USAGE: \$0 $usage" >&2
    exit 1
elif [[ "\$1" == --help ]]; then
    echo "USAGE: \$0 $usage"
    exit 0
fi
SCRIPT
        fi
        cat <<SCRIPT
exec "\${JAVA_HOME:+\$JAVA_HOME/bin/}java" \${KAFKA_HEAP_OPTS:-$heap} \\
    \${KAFKA_JVM_PERFORMANCE_OPTS:--XX:TieredStopAtLevel=1 -XX:+UseSerialGC} \\
    \${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$here/log4j2.xml} \${KAFKA_OPTS:-} \\
    -cp "$here/lib/*" $main "\$@"
SCRIPT
    } >"$path.tmp"
    chmod +x "$path.tmp"
    mv "$path.tmp" "$path"
}

for tool in "${tools[@]}"; do
    read -r name main heap <<<"$tool"
    write_script "$name" "$main" "$heap"
done
# Any other main class of the jars, e.g. Kafka Streams' quickstart:
# kafka-run-class.sh org.apache.kafka.streams.examples.wordcount.WordCountDemo
write_script kafka-run-class.sh "" -Xmx512M
echo "e2e/peers/kafka_tools.sh: $((${#tools[@]} + 1)) Kafka commands in $bin_dir" >&2

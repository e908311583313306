"""`make test`'s pytest run: the Kubernetes tier beside everything else, then one summary.

The Kubernetes tier (e2e/k8s: a control plane, a test kubelet and an operator driving
broker pods) spends most of its minutes waiting on pods, rolls and reassignments, so it
runs as a pytest process of its own at the same time as the rest of the suite instead of
after it. The Spark pipelines' tests (a Spark JVM each, minutes long) and librdkafka's
own test suite (mostly waiting on its clients' timeouts) go with it, so that the two runs
take about as long. Its output is kept in a file and printed when the rest is
done (so the two do not interleave), followed by one closing line that adds both runs up.
The exit status is the first failing run's.

    python e2e/run_suite.py [pytest args for both runs...]
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
K8S_TIER = "e2e/k8s"
BESIDE_THE_REST = (
    K8S_TIER,
    "e2e/test_spark_clickstream.py",
    "e2e/test_spark_enrich.py",
    "e2e/test_librdkafka_suite.py",
    "e2e/test_transactions.py",
    "e2e/test_chaos_txn.py",
)
# pytest's last line: "==== 1563 passed, 5 skipped, 2 warnings in 1500.88s (0:25:00) ===="
_SUMMARY = re.compile(r"^=*\s*\d+ (passed|failed|skipped|errors?|deselected)\b.* in [0-9.]+s\b")
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")


def counts(summary: str) -> dict[str, int]:
    """The outcome counts of pytest's closing line ("error" and "errors" as one)."""
    found: dict[str, int] = {}
    for number, outcome in _COUNT.findall(summary):
        key = "errors" if outcome.startswith("error") else outcome
        found[key] = found.get(key, 0) + int(number)
    return found


def is_summary(line: str) -> bool:
    """pytest's closing line, decorated ("=== 3 passed in 1.2s ===") or not (-q)."""
    return _SUMMARY.match(line) is not None


def last_summary(output: str) -> str:
    lines = [line for line in output.splitlines() if is_summary(line)]
    return lines[-1] if lines else ""


def main(argv: list[str]) -> int:
    # the virtualenv's pytest script, not `python -m pytest`: -m would put the project root
    # on sys.path, where operator/ would shadow the standard library's `operator`
    pytest = [str(Path(sys.executable).with_name("pytest"))]
    with tempfile.TemporaryDirectory(prefix="strom-suite-") as scratch:
        k8s_log = Path(scratch) / "k8s.log"
        with k8s_log.open("wb") as sink:
            # its own temp root and no cache writes: two pytest processes share the tree
            k8s = subprocess.Popen(
                [*pytest, *BESIDE_THE_REST, "--durations=10", "-p", "no:cacheprovider",
                 f"--basetemp={scratch}/k8s-tmp", *argv],
                cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT,
            )  # fmt: skip
            try:
                rest = subprocess.Popen(
                    [*pytest, "--durations=25", *(f"--ignore={path}" for path in BESIDE_THE_REST),
                     *argv],
                    cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                    errors="replace",
                )  # fmt: skip
                assert rest.stdout is not None
                rest_summary = ""
                for line in rest.stdout:  # streamed as it comes, the summary kept
                    sys.stdout.write(line)
                    sys.stdout.flush()
                    if is_summary(line):
                        rest_summary = line
                rest_code = rest.wait()
            finally:
                k8s_code = k8s.wait()
        k8s_output = k8s_log.read_text(errors="replace")
    print(f"\n{'=' * 25} {', '.join(BESIDE_THE_REST)}, run beside the rest {'=' * 25}", flush=True)
    print(k8s_output, end="", flush=True)
    total = counts(rest_summary)
    for outcome, number in counts(last_summary(k8s_output)).items():
        total[outcome] = total.get(outcome, 0) + number
    failed = total.get("failed", 0) + total.get("errors", 0)
    print(
        f"total: {total.get('passed', 0)} passed, {failed} failed, "
        f"{total.get('skipped', 0)} skipped",
        flush=True,
    )
    return rest_code or k8s_code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""A SparkJob's latest attempt as its objects show it, and what follows: the status to
write, the attempt to stop, the attempt to submit, when to look again. Pure.

The driver pod says how the run goes (its phase); before it exists, the submission Job
says how spark-submit went. An attempt that has ended is retried per spec.restartPolicy
with kubeflow's spark-operator rules (retry_interval), after the policy's interval counted
from when the operator first saw the end (status.terminationTime). A spec change
(metadata.generation past status.observedGeneration) stops the attempt in progress and
submits a new one, attempts counted again from 1.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Mapping
from typing import Any

from strom_operator.reconcile import model
from strom_operator.reconcile.sparkjobs import (
    APPLICATION_ID_LABEL,
    RestartPolicy,
    RestartType,
    SparkJobSpec,
)

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
# spark-submit has returned (waitAppCompletion=false) once it created the driver pod: a
# driver still unseen this long after is gone (deleted before the operator saw it).
DRIVER_GRACE = datetime.timedelta(seconds=60)


class State(enum.StrEnum):
    PENDING = "Pending"  # not submitted yet, or spark-submit still running
    SUBMITTED = "Submitted"  # the driver pod exists, not running yet
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    RETRYING = "Retrying"  # the run ended; the next attempt waits for its interval
    SUBMISSION_FAILED = "SubmissionFailed"


ENDED = (State.SUCCEEDED, State.FAILED, State.SUBMISSION_FAILED)


# --- what the attempt's objects say -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Submission:
    """An attempt's submission Job: running, done (spark-submit made the driver), failed."""

    done: bool
    failed: bool
    message: str
    completion_time: datetime.datetime | None


@dataclasses.dataclass(frozen=True)
class Driver:
    name: str
    phase: str  # the pod's phase: Pending, Running, Succeeded, Failed, Unknown
    error: str | None  # why it failed, from its container's terminated state
    application_id: str | None


def observe_submission(job: Mapping[str, Any] | None) -> Submission | None:
    if job is None:
        return None
    status = job.get("status") or {}
    done = failed = False
    message = ""
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            done = True
        elif condition.get("type") == "Failed":
            failed = True
            message = str(condition.get("message") or condition.get("reason") or "")
    return Submission(done, failed, message, parse_time(status.get("completionTime")))


def observe_driver(pod: Mapping[str, Any] | None) -> Driver | None:
    if pod is None:
        return None
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    phase = str(status.get("phase") or "Pending")
    error = None
    if phase == "Failed":
        error = _terminated(status) or str(status.get("message") or status.get("reason") or "")
        error = error or "the driver pod failed"
    app_id = (meta.get("labels") or {}).get(APPLICATION_ID_LABEL)
    return Driver(str(meta.get("name")), phase, error, str(app_id) if app_id else None)


def _terminated(status: Mapping[str, Any]) -> str | None:
    for container in status.get("containerStatuses") or []:
        ended = (container.get("state") or {}).get("terminated")
        if ended and ended.get("exitCode") != 0:
            words = [f"{container.get('name')}: {ended.get('reason') or 'Error'}"]
            words.append(f"exit code {ended.get('exitCode')}")
            if ended.get("message"):
                words.append(str(ended["message"]).strip())
            return ", ".join(words)
    return None


# --- status and the next step -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Previous:
    """The status the last pass wrote."""

    state: State | None = None
    attempts: int = 0
    attempt_number: int = 0
    submission_failures: int = 0
    observed_generation: int | None = None
    driver_pod: str | None = None
    application_id: str | None = None
    last_error: str | None = None
    last_submission_time: str | None = None
    termination_time: datetime.datetime | None = None

    @classmethod
    def from_status(cls, status: Mapping[str, Any] | None) -> Previous:
        status = status or {}
        state = status.get("state")
        generation = status.get("observedGeneration")
        return cls(
            state=State(state) if state in set(State) else None,
            attempts=int(status.get("attempts") or 0),
            attempt_number=int(status.get("attemptNumber") or 0),
            submission_failures=int(status.get("submissionFailures") or 0),
            observed_generation=int(generation) if generation is not None else None,
            driver_pod=status.get("driverPod"),
            application_id=status.get("sparkApplicationId"),
            last_error=status.get("lastError"),
            last_submission_time=status.get("lastSubmissionTime"),
            termination_time=parse_time(status.get("terminationTime")),
        )


@dataclasses.dataclass(frozen=True)
class Event:
    warning: bool
    reason: str
    message: str


@dataclasses.dataclass(frozen=True)
class Plan:
    """One pass's decisions: the status to write (every field; None clears one in the
    merge patch), the attempt whose Job and driver pod go first, the attempt to submit,
    when to look again (seconds; None: at the timer), the Events to post."""

    status: model.JsonObject
    conditions: list[model.Condition]
    delete: int | None = None
    submit: int | None = None
    requeue_after: float | None = None
    events: tuple[Event, ...] = ()


def plan(
    job: SparkJobSpec,
    previous: Previous,
    *,
    submission: Submission | None,
    driver: Driver | None,
    cluster_found: bool,
    now: datetime.datetime,
) -> Plan:
    """The first submission, a resubmission after a spec change (metadata.generation past
    status.observedGeneration: the running attempt is stopped, attempts start again at 1),
    or the latest attempt followed: its state from the driver pod (else its Job), and
    when it has ended, a retry per restartPolicy after the policy's interval."""
    changed = (
        previous.observed_generation is not None and job.generation > previous.observed_generation
    )
    if previous.attempt_number == 0 or changed:
        fresh = Previous(
            attempt_number=previous.attempt_number,
            observed_generation=previous.observed_generation,
        )
        if not changed:
            return _submit(job, fresh, now, cluster_found, delete=None, events=())
        message = f"generation {job.generation}: attempt {previous.attempt_number} stopped"
        stop = Event(False, "SpecChanged", message)
        return _submit(
            job, fresh, now, cluster_found, delete=previous.attempt_number, events=(stop,)
        )
    outcome: State
    if previous.termination_time is not None and previous.state in (*ENDED, State.RETRYING):
        # the attempt's end was seen: its outcome is kept even if its pods are cleaned up
        outcome = State.FAILED if previous.state is State.RETRYING else previous.state
        error = None
    else:
        outcome, error = _attempt_state(job, previous, submission, driver, now)
    fields = {
        "driverPod": driver.name if driver else previous.driver_pod,
        "sparkApplicationId": (driver.application_id if driver else None)
        or previous.application_id,
        "lastError": error or previous.last_error,
    }
    if outcome in ENDED:
        return _ended(job, previous, outcome, fields, cluster_found=cluster_found, now=now)
    status = _status(job, previous, outcome, fields, termination=None)
    events: tuple[Event, ...] = ()
    if outcome is not previous.state:
        events = (Event(False, outcome.value, _describe(previous, outcome, fields)),)
    return Plan(status, _conditions(outcome, False, fields), events=events)


def _ended(
    job: SparkJobSpec,
    previous: Previous,
    outcome: State,
    fields: dict[str, str | None],
    *,
    cluster_found: bool,
    now: datetime.datetime,
) -> Plan:
    """The latest attempt has ended: for good, or the next one waits for its interval, or
    is submitted now."""
    first_seen = previous.termination_time is None
    ended = previous.termination_time or now
    failures = previous.submission_failures
    if outcome is State.SUBMISSION_FAILED and first_seen:
        failures += 1
    counted = dataclasses.replace(previous, submission_failures=failures)
    events: tuple[Event, ...] = ()
    if first_seen:
        warning = outcome is not State.SUCCEEDED
        events = (Event(warning, outcome.value, _describe(previous, outcome, fields)),)
    interval = retry_interval(job.restart, outcome, counted)
    if interval is None:
        status = _status(job, counted, outcome, fields, termination=ended)
        return Plan(status, _conditions(outcome, True, fields), events=events)
    due = ended + datetime.timedelta(seconds=interval)
    if now >= due and cluster_found:
        again = dataclasses.replace(counted, last_error=fields["lastError"])
        retry = Event(False, "Retrying", f"attempt {counted.attempts + 1} after {outcome.value}")
        return _submit(
            job, again, now, True, delete=previous.attempt_number, events=(*events, retry)
        )
    waiting = State.SUBMISSION_FAILED if outcome is State.SUBMISSION_FAILED else State.RETRYING
    status = _status(job, counted, waiting, fields, termination=ended)
    if first_seen:
        message = f"attempt {counted.attempts + 1} in {interval} s"
        events = (*events, Event(False, "Retrying", message))
    # without the cluster the next attempt waits for the timer's pass that finds it
    requeue = max(0.0, (due - now).total_seconds()) if cluster_found else None
    return Plan(status, _conditions(waiting, False, fields), requeue_after=requeue, events=events)


def retry_interval(policy: RestartPolicy, outcome: State, counted: Previous) -> int | None:
    """Seconds before the next attempt after `outcome`, or None: no more attempts
    (kubeflow's spark-operator rules). Never: none. Always: after every end. OnFailure:
    after a failed run while the runs so far are at most onFailureRetries, after a failed
    submission while the failed submissions are at most onSubmissionFailureRetries."""
    if policy.type is RestartType.NEVER:
        return None
    always = policy.type is RestartType.ALWAYS
    if outcome is State.SUBMISSION_FAILED:
        if always or counted.submission_failures <= policy.on_submission_failure_retries:
            return policy.on_submission_failure_interval_s
        return None
    if outcome is State.SUCCEEDED:
        return policy.on_failure_interval_s if always else None
    runs = counted.attempts - counted.submission_failures
    if always or runs <= policy.on_failure_retries:
        return policy.on_failure_interval_s
    return None


def _attempt_state(
    job: SparkJobSpec,
    previous: Previous,
    submission: Submission | None,
    driver: Driver | None,
    now: datetime.datetime,
) -> tuple[State, str | None]:
    number = previous.attempt_number
    if driver is not None:
        state = {
            "Running": State.RUNNING,
            "Succeeded": State.SUCCEEDED,
            "Failed": State.FAILED,
        }.get(driver.phase, State.SUBMITTED)
        return state, driver.error if state is State.FAILED else None
    if previous.driver_pod == job.driver_pod(number):
        return State.FAILED, f"driver pod {previous.driver_pod} disappeared"
    if submission is None:
        return State.SUBMISSION_FAILED, f"submission Job {job.submission_job(number)} disappeared"
    if submission.failed:
        return State.SUBMISSION_FAILED, f"spark-submit failed: {submission.message}"
    if submission.done:
        ended = submission.completion_time
        if ended is not None and now - ended > DRIVER_GRACE:
            return State.FAILED, f"driver pod {job.driver_pod(number)} never appeared"
        return State.SUBMITTED, None
    return State.PENDING, None


def _submit(
    job: SparkJobSpec,
    base: Previous,
    now: datetime.datetime,
    cluster_found: bool,
    *,
    delete: int | None,
    events: tuple[Event, ...],
) -> Plan:
    fields = {"driverPod": None, "sparkApplicationId": None, "lastError": base.last_error}
    if not cluster_found:
        # observedGeneration stays: the change is carried out once the cluster exists
        fields["lastError"] = f"KafkaCluster {job.cluster} not found in {job.namespace}"
        status = _status(job, base, State.PENDING, fields, termination=None)
        status["observedGeneration"] = base.observed_generation
        return Plan(status, _conditions(State.PENDING, False, fields), delete=delete, events=events)
    number = base.attempt_number + 1
    submitted = dataclasses.replace(
        base,
        attempts=base.attempts + 1,
        attempt_number=number,
        last_submission_time=now.strftime(TIME_FORMAT),
    )
    status = _status(job, submitted, State.PENDING, fields, termination=None)
    message = f"attempt {submitted.attempts}: Job {job.submission_job(number)}"
    events = (*events, Event(False, "SubmissionJobCreated", message))
    return Plan(
        status,
        _conditions(State.PENDING, False, fields),
        delete=delete,
        submit=number,
        events=events,
    )


def _status(
    job: SparkJobSpec,
    counts: Previous,
    state: State,
    fields: Mapping[str, str | None],
    *,
    termination: datetime.datetime | None,
) -> model.JsonObject:
    return {
        "state": state.value,
        "attempts": counts.attempts,
        "attemptNumber": counts.attempt_number,
        "submissionFailures": counts.submission_failures,
        "submissionJob": job.submission_job(counts.attempt_number)
        if counts.attempt_number
        else None,
        **fields,
        "lastSubmissionTime": counts.last_submission_time,
        "terminationTime": termination.strftime(TIME_FORMAT) if termination else None,
        "observedGeneration": job.generation,
    }


def _conditions(
    state: State, final: bool, fields: Mapping[str, str | None]
) -> list[model.Condition]:
    """Running (the driver runs) and Completed (the job has ended for good)."""
    shown = fields.get("lastError") if state in ENDED else fields.get("driverPod")
    message = shown or ""
    return [
        model.Condition("Running", "True" if state is State.RUNNING else "False", state, message),
        model.Condition("Completed", "True" if final else "False", state, message),
    ]


def _describe(previous: Previous, state: State, fields: Mapping[str, str | None]) -> str:
    where = f"attempt {previous.attempts}, driver pod {fields['driverPod'] or '(none yet)'}"
    if state in (State.FAILED, State.SUBMISSION_FAILED):
        return f"{where}: {fields['lastError']}"
    return where


def parse_time(text: object) -> datetime.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)

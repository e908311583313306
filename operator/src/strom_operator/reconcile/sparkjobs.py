"""A SparkJob: its spec read and checked, the objects the operator makes for it, and what
its latest attempt's submission Job and driver pod mean for its status and for the next
submission (restartPolicy). Pure: `sparkjob_reconciler` does the reading and writing.

Each attempt N is a batch/v1 Job `<job>-submit-N` running `spark-submit --deploy-mode
cluster` in the job's own image, under the job's own service account: spark-submit is a
JVM, and run in-process it would make the operator a JVM's host and give it the driver's
permissions. The Job creates the driver pod `<job>-driver-N` (labelled strom.io/sparkjob
and strom.io/attempt), which creates the executors. N only grows, so a new attempt never
meets the names of an old one whose pods are still terminating.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from typing import Any

from strom_operator.reconcile import model

JOB_LABEL = "strom.io/sparkjob"
ATTEMPT_LABEL = "strom.io/attempt"
APPLICATION_ID_LABEL = "spark-app-selector"  # Spark's own label on its pods
ROLE_LABEL = "spark-role"  # Spark's: driver or executor
MANAGED_BY = {"app.kubernetes.io/managed-by": "strom-operator"}
DRIVER_CONTAINER = "spark-kubernetes-driver"
EXECUTOR_CONTAINER = "spark-kubernetes-executor"
SUBMIT_COMMAND = "strom-spark-submit"
TEMPLATES_MOUNT = "/etc/strom/pod-templates"
CHECKPOINT_VOLUME = "checkpoint"
# The keys that tie the driver to the operator: the CRD refuses them too.
OPERATOR_CONF = frozenset(
    {
        "spark.master",
        "spark.submit.deployMode",
        "spark.app.name",
        "spark.kubernetes.namespace",
        "spark.kubernetes.driver.pod.name",
        "spark.kubernetes.authenticate.driver.serviceAccountName",
        "spark.kubernetes.container.image",
        "spark.kubernetes.driver.podTemplateFile",
        "spark.kubernetes.executor.podTemplateFile",
        "spark.kubernetes.submission.waitAppCompletion",
    }
)
# What a Spark driver does in its namespace: executor pods, their headless Service, the
# ConfigMaps of its conf and templates, on-demand PVCs; and the submission, the driver pod.
DRIVER_RULES = (
    {
        "apiGroups": [""],
        "resources": ["pods", "services", "configmaps", "persistentvolumeclaims"],
        "verbs": [
            "create",
            "get",
            "list",
            "watch",
            "delete",
            "deletecollection",
            "patch",
            "update",
        ],
    },
)


class RestartType(enum.StrEnum):
    NEVER = "Never"
    ON_FAILURE = "OnFailure"
    ALWAYS = "Always"


# --- the spec ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RestartPolicy:
    type: RestartType = RestartType.NEVER
    on_failure_retries: int = 3
    on_failure_interval_s: int = 10
    on_submission_failure_retries: int = 3
    on_submission_failure_interval_s: int = 10


@dataclasses.dataclass(frozen=True)
class Resources:
    cores: int = 1
    memory: str = "512m"  # a JVM memory size


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    claim_name: str | None  # an existing claim, or None: the operator's <job>-checkpoint
    size: str | None
    storage_class: str | None
    access_mode: str
    mount_path: str


@dataclasses.dataclass(frozen=True)
class SparkJobSpec:
    """A SparkJob with the CRD's defaults filled in (parse_sparkjob)."""

    name: str
    namespace: str
    uid: str
    generation: int
    cluster: str
    image: str
    image_pull_policy: str
    main_application_file: str
    arguments: tuple[str, ...]
    spark_conf: Mapping[str, str]
    driver: Resources
    driver_env: tuple[tuple[str, str], ...]
    executor: Resources
    executor_instances: int
    service_account: str | None  # None: the operator's <job>-spark
    driver_service_account: str | None  # None: the job's
    restart: RestartPolicy
    checkpoint: Checkpoint | None

    @property
    def rbac_name(self) -> str:
        """The operator's ServiceAccount, Role and RoleBinding."""
        return f"{self.name}-spark"

    @property
    def job_service_account(self) -> str:
        return self.service_account or self.rbac_name

    @property
    def driver_account(self) -> str:
        return self.driver_service_account or self.job_service_account

    @property
    def templates_configmap(self) -> str:
        return f"{self.name}-pod-templates"

    @property
    def checkpoint_claim(self) -> str | None:
        if self.checkpoint is None:
            return None
        return self.checkpoint.claim_name or f"{self.name}-checkpoint"

    def submission_job(self, attempt: int) -> str:
        return f"{self.name}-submit-{attempt}"

    def driver_pod(self, attempt: int) -> str:
        return f"{self.name}-driver-{attempt}"


def parse_sparkjob(body: Mapping[str, Any]) -> SparkJobSpec:
    """A SparkJob object as a checked SparkJobSpec; model.SpecError else."""
    meta = _mapping(body.get("metadata"), "metadata")
    spec = _mapping(body.get("spec"), "spec")
    conf = {
        str(k): str(v) for k, v in _mapping(spec.get("sparkConf") or {}, "spec.sparkConf").items()
    }
    owned = sorted(k for k in conf if k in OPERATOR_CONF or k.startswith(_OUR_LABEL_CONF))
    if owned:
        raise model.SpecError(
            "OperatorOwnedConf", f"spec.sparkConf: {', '.join(owned)} is set by the operator"
        )
    driver = _mapping(spec.get("driver") or {}, "spec.driver")
    executor = _mapping(spec.get("executor") or {}, "spec.executor")
    restart = _mapping(spec.get("restartPolicy") or {}, "spec.restartPolicy")
    restart_type = _str(restart, "type", RestartType.NEVER.value, "spec.restartPolicy")
    if restart_type not in set(RestartType):
        raise model.SpecError("InvalidSpec", f"spec.restartPolicy.type {restart_type!r}")
    env = [_mapping(e, "spec.driver.env[]") for e in _list(driver.get("env"), "spec.driver.env")]
    return SparkJobSpec(
        name=_str(meta, "name", None, "metadata"),
        namespace=_str(meta, "namespace", None, "metadata"),
        uid=_str(meta, "uid", None, "metadata"),
        generation=_int(meta, "generation", 1, "metadata"),
        cluster=_str(spec, "cluster", None, "spec"),
        image=_str(spec, "image", None, "spec"),
        image_pull_policy=_str(spec, "imagePullPolicy", "IfNotPresent", "spec"),
        main_application_file=_str(spec, "mainApplicationFile", None, "spec"),
        arguments=tuple(str(a) for a in _list(spec.get("arguments"), "spec.arguments")),
        spark_conf=conf,
        driver=Resources(_int(driver, "cores", 1, "spec.driver", minimum=1), _memory(driver)),
        driver_env=tuple((str(e["name"]), str(e.get("value", ""))) for e in env),
        executor=Resources(
            _int(executor, "cores", 1, "spec.executor", minimum=1), _memory(executor)
        ),
        executor_instances=_int(executor, "instances", 1, "spec.executor"),
        service_account=_optional_str(spec, "serviceAccount"),
        driver_service_account=_optional_str(driver, "serviceAccount"),
        restart=RestartPolicy(
            type=RestartType(restart_type),
            on_failure_retries=_int(restart, "onFailureRetries", 3, "spec.restartPolicy"),
            on_failure_interval_s=_int(
                restart, "onFailureRetryIntervalSeconds", 10, "spec.restartPolicy"
            ),
            on_submission_failure_retries=_int(
                restart, "onSubmissionFailureRetries", 3, "spec.restartPolicy"
            ),
            on_submission_failure_interval_s=_int(
                restart, "onSubmissionFailureRetryIntervalSeconds", 10, "spec.restartPolicy"
            ),
        ),
        checkpoint=_checkpoint(spec.get("checkpoint")),
    )


_OUR_LABEL_CONF = (
    "spark.kubernetes.driver.label.strom.io/",
    "spark.kubernetes.executor.label.strom.io/",
)


def _checkpoint(raw: object) -> Checkpoint | None:
    if raw is None:
        return None
    where = "spec.checkpoint"
    entry = _mapping(raw, where)
    claim, size = _optional_str(entry, "claimName"), _optional_str(entry, "size")
    if (claim is None) == (size is None):
        raise model.SpecError("InvalidSpec", f"{where} needs either claimName or size")
    return Checkpoint(
        claim_name=claim,
        size=size,
        storage_class=_optional_str(entry, "storageClassName"),
        access_mode=_str(entry, "accessMode", "ReadWriteOnce", where),
        mount_path=_str(entry, "mountPath", "/checkpoint", where),
    )


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise model.SpecError("InvalidSpec", f"{where} must be an object")
    return value


def _list(value: object, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise model.SpecError("InvalidSpec", f"{where} must be a list")
    return value


def _str(mapping: Mapping[str, Any], key: str, default: str | None, where: str) -> str:
    value = mapping.get(key, default)
    if not isinstance(value, str) or not value:
        raise model.SpecError("InvalidSpec", f"{where}.{key} must be a non-empty string")
    return value


def _optional_str(mapping: Mapping[str, Any], key: str) -> str | None:
    value = mapping.get(key)
    return str(value) if value else None


def _int(
    mapping: Mapping[str, Any], key: str, default: int, where: str, *, minimum: int = 0
) -> int:
    value: object = mapping.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise model.SpecError("InvalidSpec", f"{where}.{key} must be an integer >= {minimum}")
    return value


def _memory(mapping: Mapping[str, Any]) -> str:
    return str(mapping.get("memory") or Resources.memory)


# --- the objects --------------------------------------------------------------------------


def labels(job: SparkJobSpec) -> dict[str, str]:
    return {JOB_LABEL: job.name, **MANAGED_BY}


def owned_object(job: SparkJobSpec, api_version: str, kind: str, name: str) -> model.JsonObject:
    """apiVersion, kind and metadata: labelled, owned by the SparkJob (deleting it deletes
    the object: Kubernetes' garbage collector)."""
    owner = {
        "apiVersion": model.API_VERSION,
        "kind": "SparkJob",
        "name": job.name,
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": job.namespace,
            "labels": labels(job),
            "ownerReferences": [owner],
        },
    }


def bootstrap_servers(job: SparkJobSpec, cluster: Mapping[str, Any]) -> str:
    """The KafkaCluster's bootstrap Service on its first listener (as its status says)."""
    names = model.ClusterNames(job.cluster, job.namespace)
    listeners = (cluster.get("spec") or {}).get("listeners") or []
    port = int(listeners[0].get("port") or model.KAFKA_PORT) if listeners else model.KAFKA_PORT
    return f"{names.bootstrap_service}.{names.namespace}.svc:{port}"


def owned_objects(job: SparkJobSpec, *, entrypoint: str) -> list[model.JsonObject]:
    """What every attempt needs, in the order they are made: the service account (unless
    the spec names one), its Role and RoleBinding, the pod templates, the checkpoint PVC
    (when the spec gives a size)."""
    objects: list[model.JsonObject] = []
    if job.service_account is None:
        objects.append(owned_object(job, "v1", "ServiceAccount", job.rbac_name))
    rbac = "rbac.authorization.k8s.io/v1"
    objects.append({**owned_object(job, rbac, "Role", job.rbac_name), "rules": list(DRIVER_RULES)})
    accounts = dict.fromkeys((job.job_service_account, job.driver_account))
    objects.append(
        {
            **owned_object(job, rbac, "RoleBinding", job.rbac_name),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": job.rbac_name,
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": account, "namespace": job.namespace}
                for account in accounts
            ],
        }
    )
    objects.append(pod_templates(job, entrypoint=entrypoint))
    claim = checkpoint_claim(job)
    if claim is not None:
        objects.append(claim)
    return objects


def pod_templates(job: SparkJobSpec, *, entrypoint: str) -> model.JsonObject:
    """Spark's driver and executor pod templates. JSON, which is YAML: Spark reads them as
    YAML. The command is explicit: Spark sets only the container's args ("driver ...",
    "executor ..."), and the image's entrypoint is Spark's."""

    def template(container: str) -> str:
        pod: model.JsonObject = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"labels": labels(job)},
            "spec": {"containers": [{"name": container, "command": [entrypoint]}]},
        }
        claim = job.checkpoint_claim
        if job.checkpoint is not None and claim is not None:
            mount = {"name": CHECKPOINT_VOLUME, "mountPath": job.checkpoint.mount_path}
            pod["spec"]["containers"][0]["volumeMounts"] = [mount]
            pod["spec"]["volumes"] = [
                {"name": CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": claim}}
            ]
        return json.dumps(pod, indent=2, sort_keys=True) + "\n"

    return {
        **owned_object(job, "v1", "ConfigMap", job.templates_configmap),
        "data": {
            "driver.yaml": template(DRIVER_CONTAINER),
            "executor.yaml": template(EXECUTOR_CONTAINER),
        },
    }


def checkpoint_claim(job: SparkJobSpec) -> model.JsonObject | None:
    checkpoint = job.checkpoint
    if checkpoint is None or checkpoint.size is None or job.checkpoint_claim is None:
        return None
    spec: model.JsonObject = {
        "accessModes": [checkpoint.access_mode],
        "resources": {"requests": {"storage": checkpoint.size}},
    }
    if checkpoint.storage_class is not None:
        spec["storageClassName"] = checkpoint.storage_class
    return {**owned_object(job, "v1", "PersistentVolumeClaim", job.checkpoint_claim), "spec": spec}


def spark_submit_command(
    job: SparkJobSpec, attempt: int, *, master: str, bootstrap: str
) -> list[str]:
    """strom-spark-submit's command line for one attempt: the operator's --conf first,
    then spec.sparkConf (a later --conf of the same key wins in spark-submit)."""
    conf: dict[str, str] = {
        "spark.kubernetes.namespace": job.namespace,
        "spark.kubernetes.driver.pod.name": job.driver_pod(attempt),
        # spark-submit returns once the driver pod exists: the operator follows the pod
        "spark.kubernetes.submission.waitAppCompletion": "false",
        "spark.kubernetes.authenticate.driver.serviceAccountName": job.driver_account,
        "spark.kubernetes.container.image": job.image,
        "spark.kubernetes.container.image.pullPolicy": job.image_pull_policy,
        "spark.kubernetes.driver.podTemplateFile": f"{TEMPLATES_MOUNT}/driver.yaml",
        "spark.kubernetes.executor.podTemplateFile": f"{TEMPLATES_MOUNT}/executor.yaml",
        "spark.kubernetes.driver.podTemplateContainerName": DRIVER_CONTAINER,
        "spark.kubernetes.executor.podTemplateContainerName": EXECUTOR_CONTAINER,
    }
    for role in ("driver", "executor"):
        conf[f"spark.kubernetes.{role}.label.{JOB_LABEL}"] = job.name
        conf[f"spark.kubernetes.{role}.label.{ATTEMPT_LABEL}"] = str(attempt)
    env = {"STROM_BOOTSTRAP_SERVERS": bootstrap}
    if job.checkpoint is not None:
        env["STROM_CHECKPOINT_DIR"] = f"{job.checkpoint.mount_path.rstrip('/')}/{job.name}"
    for name, value in env.items():
        conf[f"spark.kubernetes.driverEnv.{name}"] = value
        conf[f"spark.executorEnv.{name}"] = value
    for name, value in job.driver_env:
        conf[f"spark.kubernetes.driverEnv.{name}"] = value
    conf["spark.driver.cores"] = str(job.driver.cores)
    conf["spark.driver.memory"] = job.driver.memory
    conf["spark.executor.instances"] = str(job.executor_instances)
    conf["spark.executor.cores"] = str(job.executor.cores)
    conf["spark.executor.memory"] = job.executor.memory
    conf.update(job.spark_conf)
    argv = [SUBMIT_COMMAND, "--master", master, "--deploy-mode", "cluster", "--name", job.name]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    return [*argv, job.main_application_file, *job.arguments]


def submission_job(
    job: SparkJobSpec, attempt: int, *, master: str, bootstrap: str
) -> model.JsonObject:
    """The batch/v1 Job of one attempt: spark-submit once (no retry of its own: the
    SparkJob's restartPolicy decides), with the pod templates mounted."""
    body = owned_object(job, "batch/v1", "Job", job.submission_job(attempt))
    attempt_labels = {**labels(job), ATTEMPT_LABEL: str(attempt)}
    body["metadata"]["labels"] = attempt_labels
    container = {
        "name": "spark-submit",
        "image": job.image,
        "imagePullPolicy": job.image_pull_policy,
        "command": spark_submit_command(job, attempt, master=master, bootstrap=bootstrap),
        "volumeMounts": [{"name": "pod-templates", "mountPath": TEMPLATES_MOUNT, "readOnly": True}],
        # spark-submit's last words become the Job's pod's termination message
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    body["spec"] = {
        "backoffLimit": 0,
        "template": {
            "metadata": {"labels": attempt_labels},
            "spec": {
                "serviceAccountName": job.job_service_account,
                "restartPolicy": "Never",
                "containers": [container],
                "volumes": [
                    {"name": "pod-templates", "configMap": {"name": job.templates_configmap}}
                ],
            },
        },
    }
    return body

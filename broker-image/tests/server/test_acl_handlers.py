"""The ACL APIs on a broker without an authorizer (Strom has none): SECURITY_DISABLED for
DescribeAcls, and for each creation and each deletion filter, with Kafka's messages, at
every advertised version."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from broker_calls import call, loaded
from kio.schema.errors import ErrorCode
from strom.protocol import apis
from strom.server import broker as broker_module

VERSIONS = range(1, 4)
BINDING = {
    "resource_type": 2,  # TOPIC
    "resource_name": "orders",
    "resource_pattern_type": 3,  # LITERAL
    "principal": "User:alice",
    "host": "*",
    "operation": 3,  # READ
    "permission_type": 3,  # ALLOW
}
FILTER = {
    "resource_type_filter": 2,
    "resource_name_filter": None,
    "pattern_type_filter": 1,  # ANY
    "principal_filter": None,
    "host_filter": None,
    "operation": 1,  # ANY
    "permission_type": 1,  # ANY
}


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[broker_module.Broker]:
    server = await loaded(tmp_path)
    yield server
    server.close()


def test_the_acl_apis_are_advertised_from_v1_to_v3() -> None:
    for key in (apis.ApiKey.DESCRIBE_ACLS, apis.ApiKey.CREATE_ACLS, apis.ApiKey.DELETE_ACLS):
        assert apis.SUPPORTED_VERSIONS[key] == (1, 3)


@pytest.mark.parametrize("version", VERSIONS)
async def test_describe_acls_says_security_is_disabled(
    broker: broker_module.Broker, version: int
) -> None:
    answer = await call(broker, apis.ApiKey.DESCRIBE_ACLS, version, FILTER)
    assert answer.error_code == ErrorCode.security_disabled
    assert answer.error_message == "No Authorizer is configured on the broker"
    assert answer.resources == ()


@pytest.mark.parametrize("version", VERSIONS)
async def test_each_creation_and_deletion_filter_is_refused(
    broker: broker_module.Broker, version: int
) -> None:
    created = await call(
        broker,
        apis.ApiKey.CREATE_ACLS,
        version,
        {"creations": [BINDING, {**BINDING, "principal": "User:bob"}]},
    )
    assert [r.error_code for r in created.results] == [ErrorCode.security_disabled] * 2
    assert {r.error_message for r in created.results} == {"No Authorizer is configured."}

    deleted = await call(broker, apis.ApiKey.DELETE_ACLS, version, {"filters": [FILTER]})
    (result,) = deleted.filter_results
    assert result.error_code == ErrorCode.security_disabled
    assert result.error_message == "No Authorizer is configured."
    assert result.matching_acls == ()

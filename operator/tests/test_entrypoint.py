"""strom-operator's settings from the environment, its --help, and /metrics."""

from __future__ import annotations

import subprocess
import sys

import aiohttp
import pytest
import strom_process
from strom_operator import main, metrics, settings


def test_settings_from_the_environment() -> None:
    ours = settings.from_environment(
        {
            "STROM_OPERATOR_NAMESPACES": "a, b,",
            "STROM_OPERATOR_PEERING": "strom",
            "STROM_OPERATOR_RECONCILE_INTERVAL": "2.5",
            "STROM_OPERATOR_BROKER_ADDRESS": "service",
            "STROM_OPERATOR_BOOTSTRAP_SERVERS": "127.0.0.1:9092",
        }
    )
    assert ours.namespaces == ("a", "b")
    assert not ours.clusterwide
    assert ours.peering == "strom"
    assert ours.reconcile_interval_s == 2.5
    assert ours.broker_address is settings.BrokerAddress.SERVICE
    assert ours.bootstrap_servers == "127.0.0.1:9092"
    defaults = settings.from_environment({})
    assert defaults.clusterwide
    assert defaults.peering is None
    assert defaults.broker_address is settings.BrokerAddress.POD_IP


@pytest.mark.parametrize(
    ("name", "value"),
    [("RECONCILE_INTERVAL", "soon"), ("MAX_MOVES", "-1"), ("BROKER_ADDRESS", "dns")],
)
def test_bad_settings_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(settings.SettingsError, match=f"STROM_OPERATOR_{name}"):
        settings.from_environment({f"STROM_OPERATOR_{name}": value})


def test_kopf_settings_keep_state_under_strom_io() -> None:
    standalone = main.kopf_settings(settings.OperatorSettings())
    assert standalone.peering.standalone
    assert standalone.persistence.finalizer == "strom.io/finalizer"
    peered = main.kopf_settings(settings.OperatorSettings(peering="strom"))
    assert not peered.peering.standalone
    assert peered.peering.name == "strom"


def test_help_names_every_setting() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "strom_operator.main", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in (
        "--kubeconfig",
        "STROM_OPERATOR_NAMESPACES",
        "STROM_OPERATOR_PEERING",
        "STROM_OPERATOR_BOOTSTRAP_SERVERS",
        "/healthz",
        "/metrics",
    ):
        assert name in shown


async def test_metrics_are_served() -> None:
    with metrics.reconcile("Topic") as outcome:
        outcome.refused("Topic", "PartitionsDecreaseNotSupported")
    port = strom_process.free_port()
    runner = await metrics.start_server(port, host="127.0.0.1")
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            text = await response.text()
    finally:
        await runner.cleanup()
    assert 'strom_operator_reconciles_total{kind="Topic",result="refused"}' in text
    assert (
        'strom_operator_errors_total{kind="Topic",reason="PartitionsDecreaseNotSupported"}' in text
    )
    assert "strom_operator_reconcile_seconds_bucket" in text

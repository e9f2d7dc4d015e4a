"""Fixtures every test directory may use.

promtool: the real Prometheus `promtool` (ENGINEDECK_PROMTOOL, else the one on PATH). A missing
promtool FAILS the test with how to provide it; ENGINEDECK_SKIP_PROMTOOL=1 skips the tests marked
`promtool` explicitly (listed by `-ra`), as ENGINEDECK_SKIP_DOCKER does for Docker, and
ENGINEDECK_SKIP_SSH=1 for the tests marked `ssh` (real sshd on 127.0.0.1: tests/remote/), and
ENGINEDECK_SKIP_PROMETHEUS=1 for those marked `prometheus` (a real Prometheus server: tests/prometheus/),
and ENGINEDECK_SKIP_KUBECTL=1 for those marked `kubectl`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.integration import helpers
from tests.prometheus.promserver import skip_prometheus
from tests.remote.sshd import skip_ssh

HOW_PROMTOOL = (
    "run scripts/provision/promtool.sh as root (make test does; it installs Debian's prometheus package), "
    "or set ENGINEDECK_SKIP_PROMTOOL=1 to skip the promtool tests explicitly"
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if helpers.skip_promtool() and item.get_closest_marker("promtool"):
            item.add_marker(pytest.mark.skip(reason="ENGINEDECK_SKIP_PROMTOOL is set"))
        if skip_ssh() and item.get_closest_marker("ssh"):
            item.add_marker(pytest.mark.skip(reason="ENGINEDECK_SKIP_SSH is set"))
        if skip_prometheus() and item.get_closest_marker("prometheus"):
            item.add_marker(pytest.mark.skip(reason="ENGINEDECK_SKIP_PROMETHEUS is set"))
        if _skip_kubectl() and item.get_closest_marker("kubectl"):
            item.add_marker(pytest.mark.skip(reason="ENGINEDECK_SKIP_KUBECTL is set"))


def _skip_kubectl() -> bool:
    return os.environ.get("ENGINEDECK_SKIP_KUBECTL", "") not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def promtool() -> Path:
    """The path of a working promtool binary."""
    if helpers.skip_promtool():
        pytest.skip("ENGINEDECK_SKIP_PROMTOOL is set")
    found = os.environ.get("ENGINEDECK_PROMTOOL") or shutil.which("promtool")
    if not found or not Path(found).is_file():
        pytest.fail(f"promtool not found\n-> {HOW_PROMTOOL}", pytrace=False)
    return Path(found)

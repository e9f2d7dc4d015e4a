"""Fixtures every test directory may use.

promtool: the real Prometheus `promtool` (ENGINEDECK_PROMTOOL, else the one on PATH). A missing
promtool FAILS the test with how to provide it; ENGINEDECK_SKIP_PROMTOOL=1 skips the tests marked
`promtool` explicitly (listed by `-ra`), as ENGINEDECK_SKIP_DOCKER does for Docker, and
ENGINEDECK_SKIP_SSH=1 for the tests marked `ssh` (real sshd on 127.0.0.1: tests/remote/), and
ENGINEDECK_SKIP_PROMETHEUS=1 for those marked `prometheus` (a real Prometheus server: tests/prometheus/),
and ENGINEDECK_SKIP_KUBECTL=1 for those marked `kubectl`.

The test functions tests/slow_tests.txt lists (measured by scripts/slow_tests.py) are marked `slow`:
`make check` leaves them to `make test`.
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


SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def slow_functions() -> frozenset[str]:
    """``tests/x.py::test_name`` of every function tests/slow_tests.txt lists (measured, see its header)."""
    lines = SLOW_LIST.read_text(encoding="utf-8").splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = slow_functions()
    root = Path(__file__).resolve().parent.parent
    for item in items:
        function = f"{item.path.relative_to(root).as_posix()}::{item.name.split('[')[0]}"
        if function in slow:
            item.add_marker(pytest.mark.slow)
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

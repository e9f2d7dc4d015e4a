"""Fixtures every test directory may use.

promtool: the real Prometheus `promtool` (ENGINEDECK_PROMTOOL, else the one on PATH). A missing
promtool FAILS the test with how to provide it; ENGINEDECK_SKIP_PROMTOOL=1 skips the tests marked
`promtool` explicitly (listed by `-ra`), as ENGINEDECK_SKIP_DOCKER does for Docker, and
ENGINEDECK_SKIP_SSH=1 for the tests marked `ssh` (real sshd on 127.0.0.1: tests/remote/), and
ENGINEDECK_SKIP_PROMETHEUS=1 for those marked `prometheus` (a real Prometheus server: tests/prometheus/),
and ENGINEDECK_SKIP_KUBECTL=1 for those marked `kubectl`.

Every test runs on its own machine state (tests/isolation.py): its own enginedeck config, state,
cache and recording folders, through the environment its subprocesses inherit, so neither the user's
configuration nor a running `enginedeck demo` reaches it. After each test, the process groups it
started with tests/procgroup.py are killed, and a process it started that still runs fails it.

The test functions tests/slow_tests.txt lists (measured by scripts/slow_tests.py) are marked `slow`:
`make check` leaves them to `make test`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import isolation, procgroup
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
        where = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else str(item.path)
        function = f"{where}::{item.name.split('[')[0]}"
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


@pytest.fixture(scope="session", autouse=True)
def _machine_state_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The folder of every test's machine state; its ``session`` one holds what session and module
    fixtures write (they start before any test's own folders are set)."""
    root = tmp_path_factory.mktemp("machine-state")
    with pytest.MonkeyPatch.context() as mp:
        isolation.MachineState.under(root, "session").apply(mp)
        yield root
    procgroup.kill_outer()


@pytest.fixture(autouse=True)
def machine_state(_machine_state_root: Path, request: pytest.FixtureRequest,
                  monkeypatch: pytest.MonkeyPatch) -> Iterator[isolation.MachineState]:
    """The test's own enginedeck folders (set in the environment), and no process left behind."""
    state = isolation.MachineState.under(_machine_state_root, request.node.name)
    state.apply(monkeypatch)
    before = isolation.pids()
    procgroup.begin_test()
    yield state
    procgroup.kill_started()
    left = isolation.leftovers(state.root, before)
    if left:
        named = "; ".join(f"{pid}: {cmd[:200]}" for pid, cmd in left.items())
        pytest.fail(f"the test left {len(left)} process(es) running (killed now): {named}", pytrace=False)

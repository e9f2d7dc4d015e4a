"""Fixtures for the Prometheus-source tests: simulated engines and a real Prometheus scraping them.

A missing ``prometheus`` binary FAILS the test with how to install it; ENGINEDECK_SKIP_PROMETHEUS=1
skips the tests marked ``prometheus`` explicitly (tests/conftest.py; listed by ``-ra``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.sim.fleet import Fleet, start_fleet
from tests.prometheus.promserver import HOW_PROMETHEUS, PROMETHEUS, PromServer, skip_prometheus


@dataclass
class PromLab:
    """The simulators (vllm, sglang, tgi under load) and the server scraping them every second;
    the vllm target carries ``llm_d_ai_role="prefill"`` as llm-d's pods do once relabelled."""

    fleet: Fleet
    server: PromServer

    def target(self, profile: str) -> str:
        """host:port (Prometheus' ``instance``) of the simulator of ``profile``."""
        return next(u.split("//", 1)[1] for p, u, _pid in self.fleet.endpoints if p == profile)

    def url(self, profile: str) -> str:
        return next(u for p, u, _pid in self.fleet.endpoints if p == profile)


def need_prometheus() -> None:
    if skip_prometheus():
        pytest.skip("ENGINEDECK_SKIP_PROMETHEUS is set")
    if not Path(PROMETHEUS).is_file():
        pytest.fail(f"prometheus not found at {PROMETHEUS}\n-> {HOW_PROMETHEUS}", pytrace=False)


# Module scope: the simulators' load runs in this process, and a lab kept for the session left that
# busy thread under every later test (each Textual pilot pause then waited its full second, and one
# key test ran for many minutes).
@pytest.fixture(scope="module")
def prom_lab() -> Iterator[PromLab]:
    need_prometheus()
    fleet = start_fleet(["vllm", "sglang", "tgi"], load=True, seed=3)
    try:
        targets = [u.split("//", 1)[1] for _p, u, _pid in fleet.endpoints]
        vllm = next(u.split("//", 1)[1] for p, u, _pid in fleet.endpoints if p == "vllm")
        server = PromServer.start(targets, labels={vllm: {"llm_d_ai_role": "prefill"}})
        try:
            server.wait_scraped(3)
            yield PromLab(fleet, server)
        finally:
            server.stop()
    finally:
        fleet.stop()

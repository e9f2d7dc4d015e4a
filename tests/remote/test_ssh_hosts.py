"""Remote hosts through real sshd servers on 127.0.0.1 and the real ssh client.

Three hosts, each an sshd of its own whose sessions run this checkout's `enginedeck status --json
--watch` on the host's own config (simulated engines): all appear within 5 s; one host's sshd and
its sessions killed shows that host STALE within 3 s with its engines unreachable (the others stay
fresh); started again, it recovers by itself. Also: no enginedeck on the host says how to install
it, a runner (uvx) found there is used, secrets in the remote's stderr are masked.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from console.model import FleetSnapshot, Phase
from console.remote.fleet import RemoteFleet
from tests.remote.conftest import HostMaker

pytestmark = [pytest.mark.ssh, pytest.mark.slow]


def wait_for(fleet: RemoteFleet, cond: Callable[[FleetSnapshot], bool], timeout: float, what: str) -> float:
    """Seconds until ``cond`` held on a published snapshot; fails with the hosts' states."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond(fleet.latest()):
            return time.monotonic() - t0
        time.sleep(0.05)
    hosts = {h.name: (h.freshness.state.value, h.freshness.reason) for h in fleet.latest().hosts}
    raise AssertionError(f"{what}: not within {timeout:g} s; hosts: {hosts}")


def fresh(snap: FleetSnapshot, name: str) -> bool:
    return any(h.name == name and not h.freshness.stale for h in snap.hosts)


def test_three_hosts_appear_one_goes_stale_and_recovers(make_host: HostMaker) -> None:
    made = [make_host(n, engines=2) for n in ("h1", "h2", "h3")]
    fleet = RemoteFleet([t for t, _srv in made], refresh=0.5)
    fleet.start()
    try:
        took = wait_for(fleet, lambda s: all(fresh(s, n) for n in ("h1", "h2", "h3")) and len(s.engines) == 6,
                        5.0, "three hosts with their engines")
        snap = fleet.latest()
        assert {e.name for e in snap.engines} == {f"{h}/{p}" for h in ("h1", "h2", "h3") for p in ("vllm", "sglang")}
        assert {e.host for e in snap.engines} == {"h1", "h2", "h3"}
        wait_for(fleet, lambda s: all(e.live for e in s.engines), 5.0, "every engine live")
        print(f"three hosts in {took:.2f} s")

        _t2, srv2 = made[1]
        srv2.kill()
        took = wait_for(fleet, lambda s: not fresh(s, "h2"), 3.0, "h2 stale after its sshd was killed")
        snap = fleet.latest()
        h2 = next(h for h in snap.hosts if h.name == "h2")
        assert h2.freshness.reason, h2
        for e in snap.engines:
            if e.host == "h2":
                assert not e.live and e.phase is Phase.UNREACHABLE and "host h2" in e.health_detail, e
        assert fresh(snap, "h1") and fresh(snap, "h3")
        print(f"h2 stale in {took:.2f} s: {h2.freshness.reason}")

        srv2.start()
        took = wait_for(fleet, lambda s: fresh(s, "h2") and all(e.live for e in s.engines if e.host == "h2")
                        and len([e for e in s.engines if e.host == "h2"]) == 2, 25.0, "h2 back")
        print(f"h2 recovered {took:.2f} s after its sshd came back")
        assert fleet.streams[1].connects >= 2
    finally:
        fleet.stop()
    # Every ssh process group is gone with the fleet.
    assert not any(s.alive for s in fleet.streams)


def test_no_enginedeck_on_the_host_says_how_to_install_it(make_host: HostMaker) -> None:
    target, _srv = make_host("bare", path="/usr/bin:/bin")

    fleet = RemoteFleet([replace(target, command="enginedeck")], refresh=0.5)
    fleet.start()
    try:
        wait_for(fleet, lambda s: "pipx install enginedeck" in s.hosts[0].freshness.reason, 15.0, "install hint")
        reason = fleet.latest().hosts[0].freshness.reason
        assert "not found on bare" in reason and "exit 127" in reason and "\n" not in reason, reason
    finally:
        fleet.stop()


def test_uvx_on_the_host_is_used_when_enginedeck_is_missing(make_host: HostMaker, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    target, _srv = make_host("uvhost", path=f"{bin_dir}:/usr/bin:/bin")
    folder = tmp_path / "host-uvhost"
    uvx = bin_dir / "uvx"  # stands in for uv: `uvx enginedeck ARGS` runs this checkout's enginedeck
    uvx.write_text(f"#!/bin/sh\nshift\nexport ENGINEDECK_CONFIG_DIR={folder} ENGINEDECK_STATE_DIR={folder}/state\n"
                   f"exec {sys.executable} -m console \"$@\"\n")
    uvx.chmod(0o755)
    fleet = RemoteFleet([replace(target, command="enginedeck")], refresh=0.5)
    fleet.start()
    try:
        wait_for(fleet, lambda s: fresh(s, "uvhost") and len(s.engines) == 2, 20.0, "the host through uvx")
        assert fleet.streams[0].command == "uvx enginedeck"
    finally:
        fleet.stop()


def test_remote_stderr_is_scrubbed_of_secrets(make_host: HostMaker) -> None:
    target, _srv = make_host("leaky")
    secret = "sk-" + "a1b2c3d4e5f6g7h8i9j0k1l2m3n4"
    cmd = f"echo 'Authorization: Bearer {secret} api_key={secret}' >&2; exit 3; enginedeck"
    fleet = RemoteFleet([replace(target, command=cmd)], refresh=0.5)
    fleet.start()
    try:
        wait_for(fleet, lambda s: "exit 3" in s.hosts[0].freshness.reason, 10.0, "the remote's failure")
        reason = fleet.latest().hosts[0].freshness.reason
        assert secret not in reason and "****" in reason, reason
    finally:
        fleet.stop()


def test_a_remote_engine_is_reached_through_a_forwarded_port(make_host: HostMaker) -> None:
    """What the playground and the bench use: HOST/NAME at a local port forwarded to its port on the
    host (here the simulator's own port, which the host reports as its loopback URL), one ssh per port."""
    from types import SimpleNamespace

    import httpx

    from console.profiles import load_profiles
    from console.ui.screens.base import console_engines

    target, _srv = make_host("h1", engines=1)
    fleet = RemoteFleet([target], refresh=0.5)
    fleet.start()
    try:
        wait_for(fleet, lambda s: fresh(s, "h1") and len(s.engines) == 1, 5.0, "h1 with its engine")
        (e,) = fleet.latest().engines
        url = fleet.engine_url(e)
        assert url != e.url and url.startswith("http://127.0.0.1:")
        deadline = time.monotonic() + 5
        while True:  # the forward listens once ssh is logged in (opened without waiting)
            try:
                r = httpx.get(f"{url}/v1/models", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the forwarded port never answered"
                time.sleep(0.05)
        assert r.status_code == 200 and r.json()["data"]
        assert fleet.engine_url(e) == url and fleet.tunnels.opened == 1  # reused
        local = replace(e, host="", name="local")
        assert fleet.engine_url(local) == e.url  # not a remote engine: its own URL

        # What console_engines reads of the console (a DeckHost): the playground's engine list.
        deck = SimpleNamespace(instances={}, profiles=load_profiles(), source=fleet, fleet=fleet.latest())
        (pg,) = console_engines(deck)  # type: ignore[arg-type]
        assert pg.name == "h1/vllm" and pg.url == url
        (own,) = console_engines(deck, forward=False)  # type: ignore[arg-type]
        assert own.url == e.url
    finally:
        fleet.stop()
    assert all(not t.alive for t in fleet.tunnels.tunnels()) and fleet.tunnels.tunnels() == []

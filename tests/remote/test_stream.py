"""A host's stream without sshd: a stand-in for the ssh command prints documents, then goes silent,
or exits. Also the configuration of ``[hosts.*]`` and ``attach ssh://``, the merge of hosts into one
fleet, the ``hosts`` array of ``status --json``, and that nothing imports an SSH library."""

from __future__ import annotations

import ast
import sys
import time
from pathlib import Path

import pytest

from console.config import parse_config
from console.errors import UserError
from console.hosts import HostTarget, parse_ssh_url
from console.model import EngineSnapshot, FleetSnapshot, Freshness, HostView, Phase, SourceState
from console.remote.fleet import RemoteFleet
from console.remote.merge import merge
from console.status_doc import status_doc, status_json
from console.status_parse import snapshot_from_doc

CONSOLE = Path(__file__).resolve().parents[2] / "console"


def fake_ssh(tmp_path: Path, docs: int, then: str = "sleep") -> str:
    """An executable that ignores ssh's arguments, prints ``docs`` status documents a second apart,
    then sleeps (silent but alive) or exits 255."""
    engine = EngineSnapshot(name="vllm", profile="vllm", url="http://127.0.0.1:1", taken_at=0.0, reachable=True,
                            phase=Phase.READY, metrics_freshness=Freshness(), health_freshness=Freshness())
    doc = status_json(FleetSnapshot(taken_at=0.0, engines=(engine,)))
    script = tmp_path / "ssh"
    tail = "time.sleep(60)" if then == "sleep" else "sys.exit(255)"
    script.write_text(f"#!{sys.executable}\nimport sys, time\nfor _ in range({docs}):\n"
                      f"    print({doc!r}, flush=True)\n    time.sleep(1)\n"
                      f"print('Authorization: Bearer sk-abcdefghijklmnopqrstuvwx', file=sys.stderr, flush=True)\n"
                      f"{tail}\n")
    script.chmod(0o755)
    return str(script)


def _wait(fleet: RemoteFleet, stale: bool, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if fleet.latest().hosts[0].freshness.stale is stale:
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError(f"host stale={not stale} after {timeout} s: {fleet.latest().hosts[0]}")


def test_a_silent_host_is_stale_within_3_s_and_its_engines_are_not_live(tmp_path: Path) -> None:
    target = HostTarget(name="quiet", destination="example")
    fleet = RemoteFleet([target], ssh=fake_ssh(tmp_path, docs=2))
    fleet.start()
    try:
        _wait(fleet, stale=False, timeout=10)
        t_last = time.monotonic() + 1.0  # the second (last) document comes a second after the first
        _wait(fleet, stale=True, timeout=6)
        assert time.monotonic() - t_last < 3.5
        snap = fleet.latest()
        assert "no status document" in snap.hosts[0].freshness.reason
        (e,) = snap.engines
        assert e.name == "quiet/vllm" and e.host == "quiet" and not e.live and e.phase is Phase.UNREACHABLE
    finally:
        fleet.stop()


def test_an_ended_stream_reconnects_with_backoff_and_its_stderr_is_scrubbed(tmp_path: Path) -> None:
    target = HostTarget(name="flaky", destination="example")
    fleet = RemoteFleet([target], ssh=fake_ssh(tmp_path, docs=1, then="exit"))
    fleet.start()
    try:
        _wait(fleet, stale=False, timeout=10)
        _wait(fleet, stale=True, timeout=4)
        reason = fleet.latest().hosts[0].freshness.reason
        assert "exit 255" in reason and "reconnecting in 1 s" in reason and "sk-abc" not in reason, reason
        _wait(fleet, stale=False, timeout=6)  # started again by itself
        assert fleet.streams[0].connects >= 2
    finally:
        fleet.stop()


def test_hosts_in_the_config() -> None:
    cfg = parse_config({"hosts": {"gpu1": {"ssh": "me@node1:2222", "command": "uvx enginedeck",
                                           "ssh_options": ["-F", "ssh.conf"]}}}, "c.toml")
    (h,) = cfg.hosts
    assert (h.name, h.destination, h.port, h.command, h.ssh_options) == (
        "gpu1", "me@node1", 2222, "uvx enginedeck", ("-F", "ssh.conf"))
    argv = h.ssh_argv(h.remote_command())
    assert argv[:3] == ["ssh", "-o", "BatchMode=yes"] and argv[-3:] == [
        "me@node1", "--", "uvx enginedeck status --json --watch 1 --sample 0"]
    assert "ServerAliveInterval=2" in argv and argv[argv.index("-p") + 1] == "2222"


@pytest.mark.parametrize(("table", "problem"), [
    ({"gpu1": {"ssh": "-oProxyCommand=evil"}}, "hosts.gpu1.ssh: destination"),
    ({"gpu1": {"ssh": "node1", "command": "'unclosed"}}, "hosts.gpu1.command"),
    ({"gpu1": {}}, "hosts.gpu1.ssh: required key is missing"),
    ({"gpu1": {"ssh": "node1", "password": "x"}}, "hosts.gpu1.password: unknown key"),
    ({"a/b": {"ssh": "node1"}}, "host name 'a/b'"),
])
def test_bad_hosts_are_one_line_errors(table: dict[str, object], problem: str) -> None:
    with pytest.raises(UserError) as err:
        parse_config({"hosts": table}, "c.toml")
    assert problem in err.value.message and "\n" not in err.value.message


def test_ssh_urls() -> None:
    t = parse_ssh_url("ssh://gpu@node1.lan:2200")
    assert (t.name, t.destination, t.port) == ("node1.lan", "gpu@node1.lan", 2200)
    assert parse_ssh_url("ssh://node2").destination == "node2"
    for bad in ("ssh://", "http://node1", "ssh://node1/path", "ssh://-oProxyCommand=x"):
        with pytest.raises(UserError):
            parse_ssh_url(bad)


def test_merge_names_gpus_and_status_document() -> None:
    from console.model import GpuFleet, GpuSnapshot

    e = EngineSnapshot(name="vllm", profile="vllm", url="u", taken_at=1.0, reachable=True, phase=Phase.READY,
                       gpus=(0,))
    remote = FleetSnapshot(taken_at=1.0, engines=(e,), gpus=GpuFleet(gpus=(GpuSnapshot(0, "H100", "u0", 1.0,
                                                                                        util_percent=50.0),)))
    ok = HostView("a", "me@a", Freshness(updated_at=1.0), last_doc_at=1.0)
    gone = HostView("b", "b", Freshness(SourceState.STALE, stale_since=1.5, reason="ssh exited (exit 255)"),
                    last_doc_at=1.0)
    snap = merge(None, [(ok, remote, ()), (gone, remote, ())], now=2.0)
    assert [x.name for x in snap.engines] == ["a/vllm", "b/vllm"]
    assert [x.gpus for x in snap.engines] == [(0,), (1,)]
    assert [(g.index, g.host, g.util_percent) for g in snap.gpus.gpus] == [(0, "a", 50.0), (1, "b", None)]
    assert snap.engines[0].live and not snap.engines[1].live
    doc = status_doc(snap)
    assert [x["host"] for x in doc["engines"]] == ["a", "b"]
    assert doc["hosts"] == [
        {"name": "a", "kind": "ssh", "ssh": "me@a", "prometheus": None, "kubernetes": None, "state": "ok",
         "reason": None, "last_document_age_s": 1.0, "engines": 0, "host": None,
         "freshness": {"state": "ok", "updated_at": 1.0, "stale_since": None, "reason": None}},
        {"name": "b", "kind": "ssh", "ssh": "b", "prometheus": None, "kubernetes": None, "state": "stale",
         "reason": "ssh exited (exit 255)", "last_document_age_s": 1.0, "engines": 0, "host": None,
         "freshness": {"state": "stale", "updated_at": None, "stale_since": 1.5, "reason": "ssh exited (exit 255)"}}]
    back = snapshot_from_doc(doc)
    assert [h.name for h in back.hosts] == ["a", "b"] and back.engines[1].host == "b"


def test_nothing_imports_an_ssh_library() -> None:
    banned = {"paramiko", "asyncssh", "fabric", "pexpect"}
    offenders = []
    for path in CONSOLE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in banned]
    assert not offenders
    assert "paramiko" not in sys.modules

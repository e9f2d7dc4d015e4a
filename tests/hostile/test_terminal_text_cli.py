"""Issue 37, group 1 outside the Textual UI: what an engine, a remote host or a log sends never acts on
the terminal through a text output. Fake engines on 127.0.0.1 put OSC 0, OSC 52, ``ESC[2J``, C1 CSI
and OSC, DCS/APC/PM, bidi and zero-width characters into their /metrics error body, /v1/models id,
/version, label values and log lines; `status`, `inspect-metrics`, `logs` (follow mode too), the
remote host text and the one-line error path must show them as placeholders, while ``--json`` keeps
the original text under json's own escaping."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli import main
from tests.hostile._cli_fakes import (
    KINDS,
    PAYLOADS,
    Answer,
    FakeEngine,
    assert_terminal_safe,
    engine_serving,
    engines_config,
    fake_ssh,
    hostile,
    json_answer,
    live_process_record,
    own_dirs,
    placeholder,
    served,
    vllm_metrics,
    wait_for,
)


@pytest.fixture(scope="module", autouse=True)
def _own_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with own_dirs(tmp_path_factory.mktemp("dirs")) as root:
        yield root


def _run_main(*argv: str) -> tuple[int, str, str]:
    """The CLI entry point in-process, as tests/test_status_cli.py runs it: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _name(kind: str) -> str:
    return kind.replace("-", "_")


# -- status: one fleet of engines, one per kind of attack -------------------------------------------


@pytest.fixture(scope="module")
def hostile_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One engine per payload kind: /metrics answers 500 with the payload in its JSON error body,
    /v1/models and /version carry it too. `status` and `status --json` run once over all of them."""
    engines = {k: engine_serving(json_answer({"error": {"message": "boom " + hostile(k)}}, 500),
                                 model_id=hostile(k), version=hostile(k)) for k in KINDS}
    tmp = tmp_path_factory.mktemp("fleet")
    conf = engines_config(tmp / "config.toml", {_name(k): e.url for k, e in engines.items()})
    mp = pytest.MonkeyPatch()
    mp.setenv("ENGINEDECK_STATE_DIR", str(tmp / "state"))
    try:
        text = _run_main("status", "--config", str(conf), "--sample", "0", "--gpus", "none")
        doc = _run_main("status", "--json", "--config", str(conf), "--sample", "0", "--gpus", "none")
        yield {"text": text, "json": doc}
    finally:
        mp.undo()
        for e in engines.values():
            e.stop()


def test_status_text_output_is_terminal_safe(hostile_fleet: dict[str, Any]) -> None:
    code, out, err = hostile_fleet["text"]
    assert code == 3, out + err  # every engine answers; none's metrics can be read
    assert_terminal_safe(out + err, "status")


@pytest.mark.parametrize("kind", KINDS)
def test_status_text_shows_each_error_body_as_placeholders(hostile_fleet: dict[str, Any], kind: str) -> None:
    _code, out, _err = hostile_fleet["text"]
    line = next(x for x in out.splitlines() if x.startswith(_name(kind) + " "))
    assert "HTTP 500 boom " + placeholder(kind) in line
    assert PAYLOADS[kind][0] not in out


@pytest.mark.parametrize("kind", KINDS)
def test_status_json_keeps_the_original_text_escaped(hostile_fleet: dict[str, Any], kind: str) -> None:
    code, out, err = hostile_fleet["json"]
    assert code == 3, err
    assert_terminal_safe(out, "status --json")  # json escapes controls; non-ASCII stays but is escaped below
    doc = json.loads(out)
    e = next(x for x in doc["engines"] if x["name"] == _name(kind))
    assert e["metrics"]["reason"].endswith("HTTP 500 boom " + hostile(kind))
    assert e["served_models"] == [hostile(kind)] and e["version"] == hostile(kind)
    assert json.loads(json.dumps(e["served_models"][0])) == hostile(kind)


def test_status_watch_lines_stay_safe_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`status --watch` prints through the same renderer: a second report is as inert as the first."""
    monkeypatch.setenv("ENGINEDECK_STATE_DIR", str(tmp_path / "state"))
    for engine in served(engine_serving(json_answer({"error": hostile("osc52-clipboard")}, 503))):
        conf = engines_config(tmp_path / "c.toml", {"w": engine.url})
        proc = subprocess.Popen([sys.executable, "-m", "console", "status", "--config", str(conf), "--sample", "0",
                                 "--gpus", "none", "--watch", "0.3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ}, start_new_session=True)  # fmt: skip
        lines: list[bytes] = []
        try:
            assert proc.stdout is not None
            deadline = time.monotonic() + 60  # a loaded machine starts Python slowly; two reports end it
            while sum(x.startswith(b"ENGINE ") for x in lines) < 2 and time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(line)
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=20)
        text = (b"".join(lines) + out).decode("utf-8", "replace") + err.decode("utf-8", "replace")
        assert text.count("ENGINE ") >= 2, text
        assert_terminal_safe(text, "status --watch")
        assert placeholder("osc52-clipboard") in text


# -- inspect-metrics ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def payload_engines() -> Iterator[dict[str, FakeEngine]]:
    """One engine per kind whose /metrics label values and one malformed line carry the payload."""
    engines = {k: engine_serving(Answer(200, vllm_metrics(hostile(k), malformed="garbage{ " + hostile(k)),
                                        "text/plain; version=0.0.4")) for k in KINDS}
    yield engines
    for e in engines.values():
        e.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_inspect_metrics_text_shows_label_values_and_malformed_lines_inert(
        payload_engines: dict[str, FakeEngine], kind: str) -> None:
    code, out, err = _run_main("inspect-metrics", f"vllm@{payload_engines[kind].url}")
    assert code == 0, err
    assert_terminal_safe(out + err, "inspect-metrics")
    assert f"model {placeholder(kind)}" in out  # the model label
    assert f"garbage{{ <<{kind}:" in out  # the malformed line, quoted
    assert PAYLOADS[kind][0] not in out


@pytest.mark.parametrize("kind", KINDS)
def test_inspect_metrics_json_round_trips_label_values(payload_engines: dict[str, FakeEngine], kind: str) -> None:
    code, out, err = _run_main("inspect-metrics", f"vllm@{payload_engines[kind].url}", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [m["model"] for m in doc["models"]] == [hostile(kind)]
    assert any(f"garbage{{ <<{kind}:" in e for e in doc["errors"])  # the parser quotes it as repr does


def test_inspect_metrics_hostile_metric_family_names_are_inert(tmp_path: Path) -> None:
    """An unmapped family name cannot hold an escape (the parser refuses it), but the line it was on
    is quoted among the malformed ones: inert there."""
    body = "vllm:num_requests_running 1\n" + "".join(f"evil_{i}\x1b]0;t\x07 1\n" for i in range(3))
    f = tmp_path / "m.txt"
    f.write_bytes(body.encode())
    code, out, err = _run_main("inspect-metrics", "--engine", "vllm", str(f))
    assert code == 0, err
    assert_terminal_safe(out + err)
    assert "evil_0\\x1b]0;t\\x07" in out  # quoted as repr quotes it


def test_inspect_metrics_error_line_is_inert_when_nothing_parses(tmp_path: Path) -> None:
    """No sample at all: the one-line error quotes the first malformed line, inert and one line."""
    f = tmp_path / "m.txt"
    f.write_bytes(b"\x1b]52;c;cHduZWQ=\x07 not a metric\n\x1b[2J\n")
    code, out, err = _run_main("inspect-metrics", "--engine", "vllm", str(f))
    assert code == 1
    assert_terminal_safe(out + err)
    assert err.startswith("enginedeck: no metric samples") and err.count("\n") == 1, err


def test_inspect_metrics_redirect_error_names_the_location_inert() -> None:
    """A redirect to another host is refused with a line naming it: the Location header is the engine's."""
    location = "http://evil.example/\x1b]0;owned\x07"
    for engine in served(FakeEngine({"/metrics": Answer(302, b"", headers={"Location": location})}).start()):
        code, _out, err = _run_main("inspect-metrics", f"vllm@{engine.url}")
        assert code == 1
        assert_terminal_safe(err, "redirect error")
        assert "␛]0;owned␇" in err and err.count("\n") == 1


# -- logs --------------------------------------------------------------------------------------------


def _process_engine_config(path: Path, name: str) -> Path:
    path.write_text(f'[engines.{name}]\nprofile = "vllm"\nmanaged = "process"\nmodel = "m"\nport = 18999\n')
    return path


def _log_file(state: Path, name: str) -> Path:
    d = state / "logs"
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    return d / f"{name}.log"


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, str]:
    """`logs` of a process engine whose own output carries every payload, one per line."""
    tmp = tmp_path_factory.mktemp("logs")
    state = tmp / "state"
    log = _log_file(state, "eng")
    log.write_text("".join(f"INFO line {hostile(k)} end\n" for k in KINDS) + "progress 1%\rprogress 2%\n")
    conf = _process_engine_config(tmp / "c.toml", "eng")
    env = {**os.environ, "ENGINEDECK_STATE_DIR": str(state)}
    r = subprocess.run([sys.executable, "-m", "console", "logs", "eng", "--config", str(conf)], capture_output=True,
                       env=env, timeout=60)  # fmt: skip
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def test_logs_output_is_terminal_safe(logged: tuple[int, str, str]) -> None:
    code, out, err = logged
    assert code == 0, err
    assert_terminal_safe(out + err, "logs")
    assert "\r" not in out  # a carriage return would let a line overwrite the one shown


@pytest.mark.parametrize("kind", KINDS)
def test_logs_shows_each_payload_as_placeholders(logged: tuple[int, str, str], kind: str) -> None:
    _code, out, _err = logged
    assert f"INFO line {placeholder(kind)} end\n" in out


def test_logs_follow_sanitises_a_sequence_split_across_reads(tmp_path: Path) -> None:
    """`logs -f`: the engine writes an OSC 52 and a screen clear in pieces, the ESC at the end of one
    read and the rest in the next; neither half reaches the terminal raw."""
    state = tmp_path / "state"
    log = _log_file(state, "live")
    log.write_text("started\n")
    conf = _process_engine_config(tmp_path / "c.toml", "live")
    env = {**os.environ, "ENGINEDECK_STATE_DIR": str(state)}
    with live_process_record(state, "live", ["x"]) as pid:
        follower = subprocess.Popen([sys.executable, "-m", "console", "logs", "live", "-f", "--config", str(conf)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)  # fmt: skip
        try:
            assert follower.stdout is not None
            assert follower.stdout.readline() == b"started\n"  # the tail
            # `logs` opens the file to follow only after printing its tail: lines written meanwhile are
            # not shown. Write a mark until one comes back, so the pieces below are followed.
            following = threading.Event()

            def mark() -> None:
                while not following.wait(0.2):
                    with log.open("ab") as f:
                        f.write(b"mark\n")

            marker = threading.Thread(target=mark, daemon=True)
            marker.start()
            deadline = time.monotonic() + 30
            while follower.stdout.readline() != b"mark\n" and time.monotonic() < deadline:
                pass
            following.set()
            marker.join()
            pieces = [b"copy \x1b", b"]52;c;cHduZWQ=", b"\x07 then \x1b[", b"2J and C1 \xc2", b"\x9b2J done\n"]
            with log.open("ab") as f:
                for piece in pieces:
                    f.write(piece)
                    f.flush()
                    time.sleep(0.35)  # longer than the follower's poll: each piece is its own read
        finally:
            os.kill(pid, signal.SIGTERM)  # the engine ends: `logs -f` ends after its last read
            out, err = follower.communicate(timeout=30)
    text = out.decode("utf-8", "replace")
    assert_terminal_safe(text + err.decode(), "logs -f")
    assert "copy ␛]52;c;cHduZWQ=␇ then ␛[2J and C1 \\u009b2J done\n" in text


def test_ps_shows_a_hostile_command_line_inert(tmp_path: Path) -> None:
    """`ps` lists a process engine's command line (the engine's own arguments): inert, aligned."""
    state = tmp_path / "state"
    conf = _process_engine_config(tmp_path / "c.toml", "eng")
    with live_process_record(state, "eng", [hostile("osc0-title"), "serve.py"]):
        r = subprocess.run([sys.executable, "-m", "console", "ps", "--config", str(conf)], capture_output=True,
                           env={**os.environ, "ENGINEDECK_STATE_DIR": str(state), "DOCKER_HOST": "unix:///nonexistent"},
                           timeout=60)  # fmt: skip
    text = r.stdout.decode() + r.stderr.decode()
    assert r.returncode == 0, text
    assert_terminal_safe(text, "ps")
    assert "<<osc0-title:␛]0;pwned-title␇>>" in text


# -- remote hosts ------------------------------------------------------------------------------------


def test_remote_host_names_reasons_and_ssh_stderr_are_inert(tmp_path: Path) -> None:
    """A remote host's document names an engine and gives reasons with escapes, and its ssh prints
    one on stderr as it ends: `status`'s text output shows all of it as placeholders."""
    from console.commands.status import render_text
    from console.hosts import HostTarget
    from console.model import EngineSnapshot, FleetSnapshot, Freshness, Phase, SourceState
    from console.remote.fleet import RemoteFleet
    from console.status_doc import status_json

    engine = EngineSnapshot(name="vllm" + PAYLOADS["csi-clear"][0], profile="vllm", url="http://127.0.0.1:1",
                            taken_at=0.0, reachable=True, phase=Phase.DEGRADED,
                            metrics_freshness=Freshness(SourceState.STALE, reason="why " + hostile("osc0-title")),
                            health_freshness=Freshness())  # fmt: skip
    doc = status_json(FleetSnapshot(taken_at=time.time(), engines=(engine,)))
    ssh = fake_ssh(tmp_path, stdout_lines=[doc], stderr="ssh: connect " + hostile("osc52-clipboard") + "\n")
    fleet = RemoteFleet([HostTarget(name="gpu1", destination="me@node1", period=1.0)], ssh=ssh)
    fleet.start()
    try:
        assert wait_for(lambda: "exit 255" in fleet.latest().hosts[0].freshness.reason, timeout=15)
        text = render_text(fleet.latest())
    finally:
        fleet.stop()
    assert_terminal_safe(text, "status with a remote host")
    assert placeholder("osc52-clipboard") in text  # ssh's stderr, in the host's line
    assert any(line.startswith("gpu1/vllm␛[2J␛[H") for line in text.splitlines()), text


# -- lifecycle progress and errors -------------------------------------------------------------------


def test_up_progress_lines_and_failure_lines_are_inert(capsys: pytest.CaptureFixture[str]) -> None:
    """`up`/`restart` print each phase with its detail and loading evidence, and on failure the last
    log lines and one error line: all quote the engine's output."""
    from console.lifecycle.cli_support import fail_from_state
    from console.lifecycle.state import InstanceState
    from console.model import Phase

    st = InstanceState(name="eng", phase=Phase.FAILED, detail="exited: " + hostile("osc0-title"),
                       last_log_lines=tuple(hostile(k) for k in KINDS))
    err = fail_from_state(st, "start")
    _out, printed = capsys.readouterr()
    assert_terminal_safe(printed + err.message, "up failure")
    for k in KINDS[-10:]:  # the last ten lines are printed
        assert f"  | {placeholder(k)}\n" in printed
    assert err.message == f"eng: start failed: exited: {placeholder('osc0-title')}"


class _Manager:
    """What PhaseReporter asks of a lifecycle manager: a subscription and the engine's log scrubber."""

    def __init__(self) -> None:
        from console.secrets import Scrubber

        self.listener: Any = None
        self.scrubber = Scrubber(["engine-secret-123"])

    def subscribe(self, listener: Any) -> Any:
        self.listener = listener
        return lambda: None

    def logs(self, name: str) -> Any:
        return self


def test_phase_reporter_lines_are_inert_and_scrubbed() -> None:
    from console.lifecycle.cli_support import PhaseReporter
    from console.lifecycle.state import InstanceState
    from console.model import Phase

    manager, out = _Manager(), io.StringIO()
    PhaseReporter(manager, "eng", out=out)  # type: ignore[arg-type]
    manager.listener(InstanceState(name="eng", phase=Phase.LOADING, detail="loading",
                                   evidence="Loading " + hostile("csi-clear") + " engine-secret-123"))
    manager.listener(InstanceState(name="eng", phase=Phase.READY, detail=hostile("bidi-override"),
                                   warning=hostile("dcs")))
    text = out.getvalue()
    assert_terminal_safe(text, "up progress")
    assert placeholder("csi-clear") in text and placeholder("bidi-override") in text and placeholder("dcs") in text
    assert "engine-secret-123" not in text and "****" in text


def test_cli_error_line_from_a_user_error_is_one_inert_line(tmp_path: Path) -> None:
    """Any UserError's message is made safe where it is raised: the CLI prints one line."""
    from console.errors import ConfigError, UserError

    err = UserError("engine said: " + hostile("osc52-clipboard") + "\nsecond line")
    assert err.message == f"engine said: {placeholder('osc52-clipboard')}␊second line"
    assert str(err) == err.message
    cfg = ConfigError("c.toml", "engines.x", "bad value " + hostile("pm"))
    assert_terminal_safe(cfg.message)
    assert placeholder("pm") in cfg.message


def test_crash_line_is_inert() -> None:
    from console import crashlog

    line = crashlog.one_line(RuntimeError("engine said " + hostile("apc")), None)
    assert_terminal_safe(line)
    assert placeholder("apc") in line


def test_alerts_list_shows_a_hostile_user_rule_inert(tmp_path: Path) -> None:
    """Rule files in the user's alerts folder are anyone's text: `alerts list` prints them inert."""
    alerts = tmp_path / "config" / "alerts"
    alerts.mkdir(parents=True)
    (alerts / "mine.toml").write_text(
        'schema = 1\n[rules."deep\\u001b]0;t\\u0007"]\nsummary = "queue"\nseverity = "warning"\nfor = 10\n'
        'when = [{ signal = "waiting", op = ">", value = 5 }]\n')
    env = {**os.environ, "ENGINEDECK_CONFIG_DIR": str(tmp_path / "config")}
    r = subprocess.run([sys.executable, "-m", "console", "alerts", "list"], capture_output=True, env=env, timeout=60)
    text = r.stdout.decode() + r.stderr.decode()
    assert_terminal_safe(text, "alerts list")
    assert "deep␛]0;t␇" in text  # listed (exit 0), or named in the one-line refusal (exit 1)


# -- the formatting functions, fed arbitrary text ----------------------------------------------------

# Any characters, with the ones a terminal acts on drawn often (each is one character).
_ANY_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]) | st.sampled_from(
    ["\x1b", "\x9b", "\x9d", "\x07", "\r", "\n", "\t", "\u202e", "\u2066", "\u200b", "\ufeff", "]", "["]),
    max_size=60)
_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _snapshot(text: str) -> Any:
    from console.model import (
        EngineIdentity,
        EngineSnapshot,
        FleetSnapshot,
        Freshness,
        GpuFleet,
        HostView,
        Phase,
        SourceState,
    )

    stale = Freshness(SourceState.STALE, reason=text)
    engine = EngineSnapshot(name=text or "x", profile="vllm", url="http://127.0.0.1:1", taken_at=0.0, reachable=True,
                            phase=Phase.DEGRADED, metrics_freshness=stale, health_freshness=Freshness(),
                            identity=EngineIdentity(models=(text,), version=text), health_detail=text)  # fmt: skip
    host = HostView(name=text, destination=text, freshness=stale, engines=1)
    return FleetSnapshot(taken_at=0.0, engines=(engine,), gpus=GpuFleet(source="none", unavailable_reason=text),
                         hosts=(host,))


def _printable(text: str, *, multiline: bool = True) -> None:
    """No control character (C0 but the line breaks allowed, C1), no lone surrogate, no line or
    paragraph separator, and nothing of the independent list of what a terminal acts on."""
    allowed = "\n" if multiline else ""
    bad = [c for c in text if c not in allowed and unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp")]
    assert not bad, f"{[hex(ord(c)) for c in bad]} in {text!r}"
    assert_terminal_safe(text)


@_SETTINGS
@given(_ANY_TEXT)
def test_property_status_text(text: str) -> None:
    from console.commands.status import render_text

    _printable(render_text(_snapshot(text)))


@_SETTINGS
@given(_ANY_TEXT, _ANY_TEXT)
def test_property_inspect_metrics_text(model: str, line: str) -> None:
    from console.commands import inspect_metrics

    report = {"profile": "vllm", "source": line, "format": "prometheus", "samples": 1, "error_count": 1,
              "errors": [line], "missing": [model], "unmapped": [line], "not_in_profile": [],
              "note": model, "models": [{"model": model, "replicas": 1, "metrics": {
                  "running": {"raw_name": line, "legacy": False, "kind": "gauge", "value": 1.0}}}]}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        inspect_metrics._print_text(model, report)
    _printable(out.getvalue())


@_SETTINGS
@given(st.lists(_ANY_TEXT, max_size=6))
def test_property_logs_any_chunking(chunks: list[str]) -> None:
    """Whatever the chunks (a sequence cut anywhere), what `logs` writes is printable text."""
    from console.commands import logs
    from console.secrets import LineScrubber, Scrubber

    scrubber, out = LineScrubber(Scrubber()), io.StringIO()
    with contextlib.redirect_stdout(out):
        for c in chunks:
            logs._write(scrubber.feed(c))
        logs._write(scrubber.flush())
    printed = out.getvalue()
    _printable(printed.replace("\t", " "))


@_SETTINGS
@given(_ANY_TEXT)
def test_property_error_lines(text: str) -> None:
    from console import crashlog
    from console.errors import UserError

    _printable(UserError(text).message, multiline=False)
    _printable(crashlog.one_line(ValueError(text or "x"), None), multiline=False)


@_SETTINGS
@given(_ANY_TEXT)
def test_property_lifecycle_lines(text: str) -> None:
    from console.lifecycle.cli_support import PhaseReporter, fail_from_state
    from console.lifecycle.state import InstanceState
    from console.model import Phase

    manager, out = _Manager(), io.StringIO()
    PhaseReporter(manager, "eng", out=out)  # type: ignore[arg-type]
    manager.listener(InstanceState(name="eng", phase=Phase.LOADING, detail=text, evidence=text, warning=text))
    err_out = io.StringIO()
    with contextlib.redirect_stderr(err_out):
        err = fail_from_state(InstanceState(name="eng", phase=Phase.FAILED, detail=text, last_log_lines=(text,)))
    _printable(out.getvalue() + err_out.getvalue() + err.message)


@_SETTINGS
@given(_ANY_TEXT)
def test_property_remote_host_and_source_lines(text: str) -> None:
    """A remote host's name, destination and reason, and GPU reasons, as `status` prints them."""
    from console.commands.status import render_text
    from console.model import FleetSnapshot, Freshness, GpuFleet, HostView, SourceState

    view = HostView(name=text, destination=text, freshness=Freshness(SourceState.STALE, reason=text), engines=0,
                    kind="prometheus")
    _printable(render_text(FleetSnapshot(taken_at=0.0, gpus=GpuFleet(source="none", unavailable_reason=text),
                                         hosts=(view,))))


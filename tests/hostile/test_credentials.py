"""Issue 37, group 4 on the CLI's paths: a credential in a URL (``user:password@``, ``?token=`` and the
other credential query parameters) is never shown or stored: `status` text and ``--json``,
`inspect-metrics` (text, JSON and its error lines), `config show`, Prometheus and Kubernetes source
errors, remote host reasons, the audit log and the one-line error path. The URL a request goes to
keeps its credential. (Bench, playground, recordings and bundles have their own tests.)"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.cli import main
from console.ports import free_port
from tests.hostile._cli_fakes import (
    Answer,
    FakeEngine,
    engine_serving,
    engines_config,
    fake_ssh,
    json_answer,
    live_process_record,
    own_dirs,
    served,
    vllm_metrics,
    wait_for,
)

PASSWORD = "PlantedPassw0rd"
TOKEN = "PlantedT0kenValue"
SECRETS = (PASSWORD, TOKEN)



@pytest.fixture(scope="module", autouse=True)
def _own_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with own_dirs(tmp_path_factory.mktemp("dirs")) as root:
        yield root


def _run_main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _assert_no_secret(text: str, where: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, f"{where} shows {leaked}:\n{text[-2000:]}"


# -- status: text and JSON -------------------------------------------------------------------------

_USERINFO = {
    "user-password": (f"admin:{PASSWORD}@", "****@"),
    "token-as-user": (f"{TOKEN}@", "****@"),
}


@pytest.fixture(scope="module")
def status_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two engines whose URLs carry a credential as userinfo; one of them answers /metrics with a
    500 whose error body quotes a URL with a token. `status` and `status --json` run once each."""
    engines = [
        engine_serving(Answer(200, vllm_metrics("m"), "text/plain; version=0.0.4")),
        engine_serving(json_answer({"error": f"upstream http://u:{PASSWORD}@10.0.0.9/x?token={TOKEN} failed"}, 500)),
    ]
    tmp = tmp_path_factory.mktemp("status")
    urls = {name: e.url.replace("http://", "http://" + cred) for (name, (cred, _)), e in zip(_USERINFO.items(), engines,
                                                                                               strict=True)}
    conf = engines_config(tmp / "c.toml", {n.replace("-", "_"): u for n, u in urls.items()})
    mp = pytest.MonkeyPatch()
    mp.setenv("ENGINEDECK_STATE_DIR", str(tmp / "state"))
    try:
        yield {
            "engines": engines,
            "text": _run_main("status", "--config", str(conf), "--sample", "0", "--gpus", "none"),
            "json": _run_main("status", "--json", "--config", str(conf), "--sample", "0", "--gpus", "none"),
        }
    finally:
        mp.undo()
        for e in engines:
            e.stop()


def test_status_text_shows_no_credential(status_runs: dict[str, Any]) -> None:
    code, out, err = status_runs["text"]
    assert "token_as_user" in out, out + err  # the engines were reported
    _assert_no_secret(out + err, "status")
    assert "token=****" in out  # the error body's URL, masked where it is quoted
    assert code == 3


def test_status_json_is_valid_and_shows_no_credential(status_runs: dict[str, Any]) -> None:
    code, out, err = status_runs["json"]
    _assert_no_secret(out + err, "status --json")
    doc = json.loads(out)
    assert doc["schema"].startswith("enginedeck.status/") and code == 3


@pytest.mark.parametrize("kind", list(_USERINFO))
def test_status_json_url_has_its_userinfo_masked(status_runs: dict[str, Any], kind: str) -> None:
    doc = json.loads(status_runs["json"][1])
    engines = {e["name"]: e for e in doc["engines"]}
    engine = status_runs["engines"][list(_USERINFO).index(kind)]
    assert engines[kind.replace("-", "_")]["url"] == engine.url.replace("http://", "http://" + _USERINFO[kind][1])


def test_status_json_masks_a_token_quoted_in_a_reason(status_runs: dict[str, Any]) -> None:
    doc = json.loads(status_runs["json"][1])
    reason = next(e for e in doc["engines"] if e["name"] == "token_as_user")["metrics"]["reason"]
    assert reason.endswith("upstream http://****@10.0.0.9/x?token=**** failed"), reason


def test_the_engine_was_asked_all_the_same(status_runs: dict[str, Any]) -> None:
    """Masking is for what is shown: the engines were scraped at their URLs."""
    assert all(any(p.startswith("/metrics") for p in e.asked) for e in status_runs["engines"])


def test_status_with_a_remote_host_masks_credentials_in_ssh_stderr(tmp_path: Path) -> None:
    from console.commands.status import render_text
    from console.hosts import HostTarget
    from console.remote.fleet import RemoteFleet
    from console.status_doc import status_json

    ssh = fake_ssh(tmp_path, stdout_lines=[], stderr=f"ssh: proxy http://admin:{PASSWORD}@jump/?sig={TOKEN} refused\n")
    fleet = RemoteFleet([HostTarget(name="gpu1", destination="me@node1", period=1.0)], ssh=ssh)
    fleet.start()
    try:
        assert wait_for(lambda: "exit 255" in fleet.latest().hosts[0].freshness.reason, timeout=15)
        snap = fleet.latest()
    finally:
        fleet.stop()
    text, doc = render_text(snap), status_json(snap)
    _assert_no_secret(text + doc, "status with a remote host")
    assert "http://****@jump/?sig=****" in text
    assert json.loads(doc)["hosts"][0]["reason"].count("****") == 2


# -- a Prometheus source -----------------------------------------------------------------------------


def test_status_masks_a_prometheus_sources_error_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Prometheus server whose error quotes a scrape URL with its credentials: the source's reason
    in `status` (text and JSON) shows them masked."""
    monkeypatch.setenv("ENGINEDECK_STATE_DIR", str(tmp_path / "state"))
    error = {"status": "error", "errorType": "internal",
             "error": f"scrape http://admin:{PASSWORD}@10.1.1.1:8000/metrics?access_token={TOKEN} failed"}
    for prom in served(FakeEngine({"/api/v1/targets": json_answer(error, 500)}).start()):
        conf = tmp_path / "c.toml"
        conf.write_text(f'[sources.prom]\nprometheus = "{prom.url.replace("http://", f"http://ops:{PASSWORD}@")}"\n')
        code, out, err = _run_main("status", "--config", str(conf), "--sample", "0", "--gpus", "none")
        _, doc, _ = _run_main("status", "--json", "--config", str(conf), "--sample", "0", "--gpus", "none")
    _assert_no_secret(out + err + doc, "status with a Prometheus source")
    assert code == 2 and "access_token=****" in out, out + err
    reason = json.loads(doc)["hosts"][0]["reason"]
    assert "http://****@10.1.1.1:8000/metrics?access_token=**** failed" in reason


def test_prom_and_kube_errors_are_scrubbed_where_raised() -> None:
    from console.kube.api import KubeError
    from console.prometheus.api import PromClient, PromError
    from console.sources import PromTarget

    kube = str(KubeError(f"GET https://k:{PASSWORD}@api:6443/?token={TOKEN} refused", status=401))
    assert kube == "GET https://****@api:6443/?token=**** refused"
    port = free_port()  # nothing listens: httpx's own message names the URL
    client = PromClient(PromTarget(name="p", url=f"http://ops:{PASSWORD}@127.0.0.1:{port}", timeout=2.0))
    try:
        with pytest.raises(PromError) as info:
            client.targets()
    finally:
        client.close()
    _assert_no_secret(str(info.value), "PromError")


# -- inspect-metrics ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def metrics_engine() -> Iterator[FakeEngine]:
    yield from served(engine_serving(Answer(200, vllm_metrics("m"), "text/plain; version=0.0.4")))


def _secret_url(engine: FakeEngine, path: str = "/metrics") -> str:
    return engine.url.replace("http://", f"http://admin:{PASSWORD}@") + f"{path}?token={TOKEN}&x=1"


def test_inspect_metrics_text_names_the_source_masked(metrics_engine: FakeEngine) -> None:
    code, out, err = _run_main("inspect-metrics", "--engine", "vllm", _secret_url(metrics_engine))
    assert code == 0, err
    _assert_no_secret(out + err, "inspect-metrics")
    assert f"source: http://****@127.0.0.1:{metrics_engine.port}/metrics?token=****&x=1" in out


def test_inspect_metrics_json_names_the_source_masked(metrics_engine: FakeEngine) -> None:
    code, out, err = _run_main("inspect-metrics", "--engine", "vllm", _secret_url(metrics_engine), "--json")
    assert code == 0, err
    _assert_no_secret(out + err, "inspect-metrics --json")
    assert json.loads(out)["source"] == f"http://****@127.0.0.1:{metrics_engine.port}/metrics?token=****&x=1"


def test_inspect_metrics_request_keeps_the_query_credential(metrics_engine: FakeEngine) -> None:
    _run_main("inspect-metrics", "--engine", "vllm", _secret_url(metrics_engine))
    assert f"/metrics?token={TOKEN}&x=1" in metrics_engine.asked


@pytest.mark.parametrize("status", [401, 404, 500, 503])
def test_inspect_metrics_http_error_line_is_masked(status: int) -> None:
    for engine in served(FakeEngine({"/metrics": Answer(status, b"no")}).start()):
        code, out, err = _run_main("inspect-metrics", "--engine", "vllm", _secret_url(engine))
    assert code == 1 and f"HTTP {status}" in err
    _assert_no_secret(out + err, f"inspect-metrics HTTP {status}")
    assert "http://****@" in err and "token=****" in err and err.count("\n") == 1


def test_inspect_metrics_redirect_error_masks_both_urls() -> None:
    location = f"http://other:{PASSWORD}@10.9.9.9/metrics?signature={TOKEN}"
    for engine in served(FakeEngine({"/metrics": Answer(302, b"", headers={"Location": location})}).start()):
        code, _out, err = _run_main("inspect-metrics", "--engine", "vllm", _secret_url(engine))
    assert code == 1 and "redirects to another host" in err
    _assert_no_secret(err, "redirect error")
    assert "http://****@10.9.9.9/metrics?signature=****" in err


def test_inspect_metrics_connection_refused_line_is_masked() -> None:
    url = f"http://admin:{PASSWORD}@127.0.0.1:{free_port()}/metrics?apikey={TOKEN}"
    code, _out, err = _run_main("inspect-metrics", "--engine", "vllm", url)
    assert code == 1 and "connection refused" in err
    _assert_no_secret(err, "connection refused")


# -- config show -------------------------------------------------------------------------------------

QUERY_NAMES = ("token", "access_token", "key", "api_key", "apikey", "password", "secret", "sig", "signature")


@pytest.fixture(scope="module")
def config_shown(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """`config show` and `config show --json` of engines whose URLs carry each credential parameter."""
    tmp = tmp_path_factory.mktemp("config")
    conf = engines_config(tmp / "c.toml", {
        f"e_{name}": f"http://admin:{PASSWORD}@10.0.0.5:8000/?{name}={TOKEN}&model=x" for name in QUERY_NAMES})
    env = {**os.environ, "ENGINEDECK_STATE_DIR": str(tmp / "state")}
    out = {}
    for flag in ("text", "json"):
        r = subprocess.run([sys.executable, "-m", "console", "config", "show", "--config", str(conf),
                            *(["--json"] if flag == "json" else [])], capture_output=True, text=True, env=env,
                           timeout=60)  # fmt: skip
        assert r.returncode == 0, r.stderr
        out[flag] = r.stdout + r.stderr
    return out


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_config_show_text_masks_each_credential_parameter(config_shown: dict[str, str], name: str) -> None:
    section = config_shown["text"].split(f"[engines.e_{name}]")[1].split("\n\n")[0]
    _assert_no_secret(section, f"config show ({name})")
    # The value goes; what follows may go too (an api_key= assignment is masked to its end).
    assert f'url = "http://****@10.0.0.5:8000/?{name}=****' in section


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_config_show_json_masks_each_credential_parameter(config_shown: dict[str, str], name: str) -> None:
    doc = json.loads(config_shown["json"])
    engine = doc["engines"][f"e_{name}"]
    assert engine["url"].startswith(f"http://****@10.0.0.5:8000/?{name}=****")
    assert engine["resolved_url"] == engine["url"]
    _assert_no_secret(json.dumps(engine), f"config show --json ({name})")


# -- ps --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_ps_masks_a_url_credential_in_a_command_line(tmp_path: Path, as_json: bool) -> None:
    """A process engine started with a URL holding a credential in its arguments: `ps` lists the
    command line with it masked, as text and as JSON."""
    state = tmp_path / "state"
    conf = tmp_path / "c.toml"
    conf.write_text('[engines.eng]\nprofile = "vllm"\nmanaged = "process"\nmodel = "m"\nport = 18997\n')
    command = ["serve", f"--upstream=http://u:{PASSWORD}@10.0.0.1/v1?key={TOKEN}"]
    with live_process_record(state, "eng", command):
        r = subprocess.run([sys.executable, "-m", "console", "ps", "--config", str(conf),
                            *(["--json"] if as_json else [])], capture_output=True, text=True,
                           env={**os.environ, "ENGINEDECK_STATE_DIR": str(state), "DOCKER_HOST": "unix:///nonexistent"},
                           timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stderr
    _assert_no_secret(r.stdout + r.stderr, "ps")
    if as_json:
        row = next(x for x in json.loads(r.stdout)["engines"] if x["name"] == "eng")
        assert "http://****@10.0.0.1/v1?key=****" in json.dumps(row)
    else:
        assert "--upstream=http://****@10.0.0.1/v1?k" in r.stdout  # the column is cut at 48 characters


# -- the audit log, error lines ----------------------------------------------------------------------


def test_audit_log_masks_urls_in_details(tmp_path: Path) -> None:
    from console.lifecycle.audit import AuditLog

    log = AuditLog(tmp_path / "audit.log")
    log.record("up", "eng", "failed", f"pull https://bot:{PASSWORD}@registry.example/v2/?token={TOKEN} 401")
    text = (tmp_path / "audit.log").read_text()
    _assert_no_secret(text, "audit log")
    assert "https://****@registry.example/v2/?token=**** 401" in json.loads(text)["detail"]


def test_read_only_refusal_is_audited_without_the_url_credential(tmp_path: Path) -> None:
    """A refused `up` on an engine whose URL holds a credential: the error line and the audit entry."""
    state = tmp_path / "state"
    conf = tmp_path / "c.toml"
    conf.write_text('[console]\nread_only = true\n\n[engines.eng]\nprofile = "vllm"\nmanaged = "process"\n'
                    f'model = "m"\nport = 18998\nurl = "http://admin:{PASSWORD}@127.0.0.1:18998/?token={TOKEN}"\n')
    r = subprocess.run([sys.executable, "-m", "console", "up", "eng", "--config", str(conf)], capture_output=True,
                       text=True, env={**os.environ, "ENGINEDECK_STATE_DIR": str(state)}, timeout=60)  # fmt: skip
    assert r.returncode == 1 and "read-only" in r.stderr, r.stderr
    _assert_no_secret(r.stdout + r.stderr, "up refused")
    audit = state / "audit.log"
    if audit.exists():
        _assert_no_secret(audit.read_text(), "audit log")


def test_user_error_masks_a_url_credential() -> None:
    from console.errors import UserError

    err = UserError(f"http://admin:{PASSWORD}@h:8000/v1?api_key={TOKEN} HTTP 500")
    assert err.message == "http://****@h:8000/v1?api_key=**** HTTP 500" and str(err) == err.message


def test_crash_line_masks_a_url_credential() -> None:
    from console import crashlog

    line = crashlog.one_line(RuntimeError(f"GET http://admin:{PASSWORD}@h/?secret={TOKEN}"), None)
    _assert_no_secret(line, "crash line")
    assert "http://****@h/?secret=****" in line


def test_status_of_many_engines_masks_every_url() -> None:
    """Every engine's URL in a report is masked, in the text and the JSON, whatever its place."""
    from console.commands.status import render_text
    from console.model import EngineSnapshot, FleetSnapshot, Freshness, Phase
    from console.status_doc import status_json

    engines = tuple(EngineSnapshot(name=f"e{i}", profile="vllm", url=f"http://a:{PASSWORD}@10.0.0.{i}:8000",
                                   taken_at=0.0, reachable=True, phase=Phase.READY, metrics_freshness=Freshness(),
                                   health_freshness=Freshness()) for i in range(50))  # fmt: skip
    snap = FleetSnapshot(taken_at=0.0, engines=engines)
    doc, text = status_json(snap), render_text(snap)
    _assert_no_secret(doc + text, "status of 50 engines")
    assert [e["url"] for e in json.loads(doc)["engines"]] == [f"http://****@10.0.0.{i}:8000" for i in range(50)]

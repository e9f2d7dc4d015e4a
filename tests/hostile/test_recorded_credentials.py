"""Group 4, what is recorded and bundled: credentials in an engine's URL (userinfo, ``?token=``) and
in its error bodies never reach a recording, a bundle, an export or the recorder's own output.

One real recording (``enginedeck record``) of two engines, both a real simulator behind a logging
proxy on 127.0.0.1: ``prod``, configured as ``http://admin:PASSWORD@127.0.0.1:PORT/?token=SECRET``,
whose ``/metrics`` and ``/version`` answer with an error body quoting credentials, and one given as
``vllm@http://admin:PASSWORD@...`` (its name is its URL). Then a bundle of it, and its exports.
"""

from __future__ import annotations

import signal
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.recording import Recording, RecordingWriter
from console.secrets import mask_url
from tests.hostile._rec_fakes import LoggingProxy, everything_in, run_cli, start_cli, stop_group, wait_for
from tests.recording.fleetdocs import docs
from tests.recording.simproc import simulator

PASSWORD = "PASSWORD-7f3a9c"
TOKEN = "SECRET-tok-51e2d8"
BEARER = "bearerVal-0a1b2c3d4e5f6g"
SECRETS = {"password": PASSWORD, "token": TOKEN, "bearer in an error body": BEARER}
ERROR_BODY = (f"upstream http://admin:{PASSWORD}@10.1.2.3:8000/v1?token={TOKEN} refused; "
              f"Authorization: Bearer {BEARER}").encode()


@dataclass
class Recorded:
    tmp: Path
    rec: Path
    urls: tuple[str, str]
    record_err: str
    bundle: Path
    bundle_out: str
    seen: tuple[LoggingProxy, LoggingProxy]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    tmp = tmp_path_factory.mktemp("creds")
    rec = tmp / "rec"
    with simulator("vllm") as url:
        clean = LoggingProxy(url)
        failing = LoggingProxy(url, errors={"/metrics": (502, ERROR_BODY), "/version": (500, ERROR_BODY)})
        with clean.running(), failing.running():
            configured = f"http://admin:{PASSWORD}@127.0.0.1:{failing.port}/?token={TOKEN}"
            given = f"http://admin:{PASSWORD}@127.0.0.1:{clean.port}/?token={TOKEN}"
            cfg = tmp / "config.toml"
            cfg.write_text(f'[engines.prod]\nprofile = "vllm"\nurl = "{configured}"\n')
            p = start_cli(tmp, "record", "--config", str(cfg), "--engine", "prod", "--engine", f"vllm@{given}",
                          "--dir", str(rec), "--gpus", "none", "--refresh", "0.5", "--raw-every", "1s")
            try:
                wait_for(lambda: sum(s.path == "/metrics" for s in failing.seen) >= 3
                         and sum(s.path == "/metrics" for s in clean.seen) >= 3, timeout=60, what="scrapes")
                time.sleep(1.5)
                p.send_signal(signal.SIGTERM)
                _out, err = p.communicate(timeout=30)
            finally:
                stop_group(p)
            assert p.returncode == 0, err
            b = run_cli(tmp, "bundle", "--config", str(cfg), "--engine", "prod", "--engine", f"vllm@{given}",
                        "--recording", str(rec), "--gpus", "none", "-o", str(tmp / "b.tar.gz"), "--last", "10m")
            assert b.returncode == 0, b.stderr
    return Recorded(tmp, rec, (configured, given), err, tmp / "b.tar.gz", b.stdout + b.stderr, (clean, failing))


@pytest.mark.parametrize("what", list(SECRETS))
def test_no_credential_anywhere_in_the_recording(recorded: Recorded, what: str) -> None:
    blob = everything_in(recorded.rec)
    assert SECRETS[what].encode() not in blob
    assert b"admin:" not in blob


def test_recorded_urls_are_masked_not_dropped(recorded: Recorded) -> None:
    (_t, doc), *_ = Recording.open(recorded.rec).documents()
    urls = {e["url"] for e in doc["engines"]}
    assert urls == {mask_url(u) for u in recorded.urls}
    assert all("****@127.0.0.1:" in u and "token=****" in u for u in urls), urls


def test_the_requests_went_to_the_configured_engines(recorded: Recorded) -> None:
    # Masking is for what is written: the scrapes reached both real addresses all along.
    for proxy in recorded.seen:
        assert {"/metrics", "/health"} <= {s.path for s in proxy.seen}
    rec = Recording.open(recorded.rec)
    by_name = {e["name"]: e for _t, d in rec.documents() for e in d["engines"]}
    assert by_name["vllm@" + mask_url(recorded.urls[1])]["metrics"]["state"] == "ok"


def test_an_error_body_is_recorded_with_its_credentials_masked(recorded: Recorded) -> None:
    details = {e["detail"] for _t, d in Recording.open(recorded.rec).documents() for e in d["engines"]}
    quoted = [d for d in details if d and "upstream http://" in d]
    assert quoted, details
    assert all("Bearer ****" in d and "token=****" in d and "http://****@10.1.2.3" in d for d in quoted), quoted


def test_raw_payloads_carry_the_engine_name_masked(recorded: Recorded) -> None:
    engines = {e for _t, e, _body in Recording.open(recorded.rec).raw_payloads()}
    assert engines == {"vllm@" + mask_url(recorded.urls[1])}, engines  # prod's /metrics fails: no payload


def test_record_prints_no_credential(recorded: Recorded) -> None:
    assert "recording prod, vllm@http://****@127.0.0.1:" in recorded.record_err, recorded.record_err
    assert not any(s in recorded.record_err for s in SECRETS.values())


@pytest.mark.parametrize("what", list(SECRETS))
def test_no_credential_in_any_file_of_the_bundle(recorded: Recorded, what: str) -> None:
    secret = SECRETS[what].encode()
    with tarfile.open(recorded.bundle, "r:gz") as tar:
        for m in tar.getmembers():
            f = tar.extractfile(m)
            assert f is not None
            data = f.read()
            assert secret not in data, m.name
            if m.name.endswith(".edrec"):
                cut = recorded.tmp / "window.edrec"
                cut.write_bytes(data)
                assert secret not in everything_in(cut)
    assert SECRETS[what] not in recorded.bundle_out


def test_the_bundle_keeps_the_error_bodies_masked(recorded: Recorded) -> None:
    with tarfile.open(recorded.bundle, "r:gz") as tar:
        texts = {m.name: f.read().decode(errors="replace") for m in tar.getmembers()
                 if (f := tar.extractfile(m)) is not None}
    bodies = [t for t in texts.values() if "upstream http://" in t]
    assert bodies, sorted(texts)
    assert all("Bearer ****" in t and "token=****" in t for t in bodies)


@pytest.mark.parametrize("fmt", ["csv", "openmetrics"])
def test_exports_hold_no_credential(recorded: Recorded, fmt: str) -> None:
    out = recorded.tmp / f"export.{fmt}"
    r = run_cli(recorded.tmp, "export", str(recorded.rec), "--format", fmt, "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "vllm@http://****@127.0.0.1:" in text
    assert not any(s in text + r.stderr for s in SECRETS.values())


def test_a_secret_in_a_documents_key_is_masked(tmp_path: Path) -> None:
    # Some keys are the engine's own words (a cache tier's label): the one rule covers them too.
    (t, doc), *_ = docs(1)
    doc["engines"][0]["summary"]["cache_tiers"] = {f"http://admin:{PASSWORD}@tier?token={TOKEN}": 1.0}
    with RecordingWriter(tmp_path) as w:
        w.add(doc, at=t)
    blob = everything_in(tmp_path)
    assert PASSWORD.encode() not in blob and TOKEN.encode() not in blob

"""A bundle of real simulators: every part is there, each file's sha256 in the manifest matches, the
window's recording replays with ``Recording.open`` (masked where it held a secret), and without a
recording the snapshot it was given replays instead."""

from __future__ import annotations

import hashlib
import json
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.bundle.make import BundleRequest, BundleResult, make_bundle
from console.bundle.window import Window
from console.config import EngineInstance, parse_engine_ref
from console.model import FleetSnapshot
from console.recording import Recording, RecordingWriter
from console.status_doc import status_doc
from console.telemetry.hub import Hub
from tests.bundle.conftest import extract
from tests.client.simproc import SimProc, sims

# The first engine's API key: known to the bundle, not to the recorder (which masks only shapes).
KEY_ENV, KEY = "BUNDLE_TEST_KEY", "planted-known-key-5e1f"


@pytest.fixture(scope="module")
def engines() -> Iterator[list[SimProc]]:
    with sims(("vllm",), ("sglang",)) as procs:
        yield procs


def _instances(procs: list[SimProc]) -> list[EngineInstance]:
    return [parse_engine_ref(p.ref, api_key_env=KEY_ENV if i == 0 else None) for i, p in enumerate(procs)]


def _snapshots(instances: list[EngineInstance], n: int) -> list[FleetSnapshot]:
    hub = Hub(instances, refresh=0.5, gpu_source="simulated")
    got: list[FleetSnapshot] = []
    hub.subscribe(got.append)
    hub.start()
    try:
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        hub.stop()
    assert len(got) >= n
    return got[:n]


def _bundle(tmp_path: Path, instances: list[EngineInstance], snaps: list[FleetSnapshot],
            recording: Path | None) -> BundleResult:  # fmt: skip
    window = Window(snaps[0].taken_at - 1, snaps[-1].taken_at + 1)
    req = BundleRequest(instances=instances, window=window, dest=tmp_path / "b.tar.gz", snapshot=snaps[-1],
                        recording_dir=recording, nvml=None)  # fmt: skip
    return make_bundle(req)


def test_every_part_is_there_and_the_manifest_hashes_match(tmp_path: Path, engines: list[SimProc],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    instances = _instances(engines)
    snaps = _snapshots(instances, 4)
    rec_dir = tmp_path / "rec"
    with RecordingWriter(rec_dir) as w:
        for s in snaps:
            doc = status_doc(s)
            doc["engines"][0]["detail"] = f"token {KEY} in an error body"  # masked in the bundle's copy
            w.add(doc, at=s.taken_at)
        w.add_raw(instances[0].name, f'vllm:x{{model_name="{KEY}"}} 1\n'.encode(), at=snaps[1].taken_at)
    result = _bundle(tmp_path, instances, snaps, rec_dir)
    assert stat.S_IMODE(result.path.stat().st_mode) == 0o600
    root = extract(result.path, tmp_path / "x")
    manifest = json.loads((root / "manifest.json").read_text())

    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - {"manifest.json"}
    assert {f["path"] for f in manifest["files"]} == on_disk
    for f in manifest["files"]:
        data = (root / f["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == f["sha256"] and len(data) == f["bytes"], f["path"]

    for e in manifest["engines"]:
        d = root / e["dir"]
        assert (d / "metrics.txt").read_text().startswith("# HELP") or "# TYPE" in (d / "metrics.txt").read_text()
        assert json.loads((d / "models.json").read_text())["data"][0]["id"]
        assert (d / "version.json").exists() and (d / "probes.json").exists() and (d / "launch.json").exists()
    assert "vllm:" in (root / manifest["engines"][0]["dir"] / "metrics.txt").read_text()
    assert json.loads((root / "status.json").read_text())["taken_at"] == snaps[-1].taken_at
    host = json.loads((root / "host.json").read_text())
    assert host["python"] and host["kernel"] and host["enginedeck"]
    assert "available" in json.loads((root / "gpu" / "nvml.json").read_text())
    assert (root / "gpu" / "simulated.json").exists()
    assert manifest["screenshot"]["path"] is None and "no screen" in manifest["screenshot"]["note"]

    rec = manifest["recording"]
    assert rec["covers_window"] and rec["documents"] == len(snaps) and rec["raw_payloads"] == 1
    replay = Recording.open(root / rec["path"])
    docs = list(replay.documents())
    assert [t for t, _ in docs] == [s.taken_at for s in snaps]
    assert docs[-1][1]["engines"][0]["detail"] == "token **** in an error body"
    assert docs[-1][1]["engines"][1] == status_doc(snaps[-1])["engines"][1]
    [(_, engine, body)] = list(replay.raw_payloads())
    assert engine == instances[0].name and body == b'vllm:x{model_name="****"} 1\n'
    assert manifest["redaction"]["by_file"]["recording/window.edrec"] == {"known secret value": len(snaps) + 1}

    readme = (root / "README.md").read_text()
    assert len(readme) < 65_536
    for heading in ("### Your current environment", "### 🐛 Describe the bug", "### Reproduction", "### Logs"):
        assert heading in readme
    assert all(i.name in readme for i in instances) and "0.34.0" in readme  # the vLLM simulator's version


def test_without_a_recording_the_given_snapshot_replays(tmp_path: Path, engines: list[SimProc]) -> None:
    instances = _instances(engines)
    snaps = _snapshots(instances, 1)
    result = _bundle(tmp_path, instances, snaps, tmp_path / "no-recording-here")
    root = extract(result.path, tmp_path / "x")
    rec = json.loads((root / "manifest.json").read_text())["recording"]
    assert not rec["covers_window"] and rec["note"].startswith("no recording covers the window")
    [(t, doc)] = list(Recording.open(root / rec["path"]).documents())
    assert t == snaps[0].taken_at and doc == json.loads(json.dumps(status_doc(snaps[0])))
    assert "no recording covers the window" in (root / "README.md").read_text()


def test_a_dead_engine_is_a_reason_not_a_failed_bundle(tmp_path: Path) -> None:
    from console.ports import free_port

    inst = parse_engine_ref(f"vllm@http://127.0.0.1:{free_port()}")
    req = BundleRequest(instances=[inst], window=Window.last(60, time.time()), dest=tmp_path / "d.tar.gz",
                        recording_dir=tmp_path / "none")  # fmt: skip
    result = make_bundle(req)
    root = extract(result.path, tmp_path / "x")
    probes = json.loads((root / json.loads((root / "manifest.json").read_text())["engines"][0]["dir"]
                         / "probes.json").read_text())  # fmt: skip
    assert probes["answers"]["metrics"]["error"] == "connection refused"
    assert "connection refused" in (root / "README.md").read_text()
    assert result.seconds < 10


def test_the_snapshot_newer_than_the_recording_closes_its_gap(tmp_path: Path, engines: list[SimProc]) -> None:
    """A recorder writes its last seconds only when the frame is full: the caller's newer snapshot
    is added after the recorded ones."""
    instances = _instances(engines)
    snaps = _snapshots(instances, 3)
    with RecordingWriter(tmp_path / "rec") as w:
        for s in snaps[:2]:
            w.add(status_doc(s), at=s.taken_at)
    root = extract(_bundle(tmp_path, instances, snaps, tmp_path / "rec").path, tmp_path / "x")
    rec = json.loads((root / "manifest.json").read_text())["recording"]
    assert rec["covers_window"] and rec["documents"] == 3 and "1 newer one(s)" in rec["note"]
    assert [t for t, _ in Recording.open(root / rec["path"]).documents()] == [s.taken_at for s in snaps]

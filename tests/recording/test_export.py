"""Export: OpenMetrics that the real promtool loads into Prometheus blocks, and CSV."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest

from console.recording import Recording, RecordingWriter
from console.recording.export import write_csv, write_openmetrics
from tests import procgroup
from tests.recording.fleetdocs import T0, docs

ROOT = Path(__file__).resolve().parents[2]


def _record(directory: Path, n: int) -> None:
    w = RecordingWriter(directory)
    for t, doc in docs(n, engines=4, gpus=8):
        w.add(doc, at=t)
    w.close()


def _enginedeck(*args: str) -> subprocess.CompletedProcess[str]:
    return procgroup.run([sys.executable, "-m", "console", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)  # fmt: skip


@pytest.mark.promtool
def test_openmetrics_export_is_accepted_by_promtool(tmp_path: Path, promtool: Path) -> None:
    _record(tmp_path / "rec", 150)
    out = tmp_path / "rec.om"
    r = _enginedeck("export", str(tmp_path / "rec"), "--format", "openmetrics", "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert text.endswith("# EOF\n")
    assert 'enginedeck_kv_cache_usage_ratio{engine="eng-0",profile="vllm",model="model-0"}' in text
    blocks = tmp_path / "blocks"
    p = procgroup.run([str(promtool), "tsdb", "create-blocks-from", "openmetrics", str(out), str(blocks)],
                      capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert any(blocks.iterdir()), "promtool wrote no block"
    # What went in is what was recorded: one sample per series and document (dump wants a WAL folder).
    (blocks / "wal").mkdir(exist_ok=True)
    dump = procgroup.run([str(promtool), "tsdb", "dump", str(blocks),
                          '--match={__name__="enginedeck_gpu_power_watts",gpu="3"}'],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert dump.returncode == 0, dump.stderr
    lines = [ln for ln in dump.stdout.splitlines() if ln.strip()]
    assert len(lines) == 150
    first = lines[0].split()
    assert float(first[-2]) == docs(1, engines=4, gpus=8)[0][1]["gpus"]["devices"][3]["power_w"]
    assert int(first[-1]) == int(T0 * 1000)


def test_openmetrics_groups_families_and_skips_na(tmp_path: Path) -> None:
    items = docs(30)
    buf = io.StringIO()
    n = write_openmetrics(iter(items + items[-3:]), buf)  # repeated times are left out
    lines = buf.getvalue().splitlines()
    types = [ln.split()[2] for ln in lines if ln.startswith("# TYPE")]
    assert len(types) == len(set(types))  # each family once, its samples together
    seen: list[str] = []
    for ln in lines:
        if not ln.startswith("#"):
            fam = ln.split("{")[0]
            assert not seen or seen[-1] == fam or fam not in seen
            seen.append(fam)
    assert n == sum(1 for ln in lines if not ln.startswith("#"))
    # A null (n/a) is no sample: generation rate 60 s is null, but "now" of engine 1 is the 60 s one.
    assert "enginedeck_generation_tokens_per_second{engine=\"eng-1\"" not in buf.getvalue()
    assert "nan" not in buf.getvalue().lower().replace("name=", "")


def test_csv_has_one_row_a_sample(tmp_path: Path) -> None:
    items = docs(12)
    buf = io.StringIO()
    n = write_csv(iter(items), buf)
    rows = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert len(rows) == n
    kv = [r for r in rows if r["metric"] == "enginedeck_kv_cache_usage_ratio" and r["engine"] == "eng-0"]
    assert [float(r["value"]) for r in kv] == [d["engines"][0]["per_model"][0]["kv_usage"] for _, d in items]
    assert kv[0]["time_utc"].endswith("Z") and float(kv[0]["time"]) == T0


def test_export_command_window_and_errors(tmp_path: Path) -> None:
    _record(tmp_path / "rec", 40)
    r = _enginedeck("export", str(tmp_path / "rec"), "--format", "csv", "--from", str(T0 + 10), "--to", str(T0 + 19))
    assert r.returncode == 0, r.stderr
    times = {row["time"] for row in csv.DictReader(io.StringIO(r.stdout))}
    assert times == {f"{T0 + k:.3f}" for k in range(10, 20)}
    bad = _enginedeck("export", str(tmp_path / "missing"))
    assert bad.returncode == 1 and bad.stderr.strip().count("\n") == 0 and "no such file" in bad.stderr
    bad = _enginedeck("export", str(tmp_path / "rec"), "--from", "yesterday-ish")
    assert bad.returncode == 1 and "not a time" in bad.stderr and "Traceback" not in bad.stderr
    assert Recording.open(tmp_path / "rec").skipped == 0

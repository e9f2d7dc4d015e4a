"""Ctrl-C during `bench`: the levels that finished are written (JSON/CSV/Markdown marked
"interrupted") and the exit status is 130. A real simulator and a real `enginedeck bench` process,
interrupted the way a terminal does it (SIGINT to the whole foreground process group) or by
`kill -INT` of the bench alone."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import procgroup
from tests.client.simproc import ROOT, sims


@pytest.mark.parametrize("to", ["group", "parent"])
def test_ctrl_c_writes_the_finished_levels_marked_interrupted(tmp_path: Path, to: str) -> None:
    outs = {k: tmp_path / f"bench.{k}" for k in ("json", "csv", "md")}
    with sims(("vllm", "--speed", "20")) as (a,):
        # Level 1: 6 requests at 50/s (done in well under a second); level 2: 6 at 0.1/s (a minute).
        proc = procgroup.popen(
            [sys.executable, "-m", "console", "bench", "--engine", a.ref, "--rate", "50", "--rate", "0.1",
             "--num-prompts", "6", "--input-len", "16", "--output-len", "4", "--no-gpu",
             "--json", str(outs["json"]), "--csv", str(outs["csv"]), "--markdown", str(outs["md"])],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
            env=os.environ.copy(),
        )  # fmt: skip
        try:
            assert proc.stderr is not None
            deadline = time.monotonic() + 120
            lines: list[str] = []
            while time.monotonic() < deadline:
                line = proc.stderr.readline()
                lines.append(line)
                if "rate=50" in line and " ok" in line:  # the first level is done
                    break
                assert line or proc.poll() is None, "".join(lines)
            time.sleep(1.0)  # well inside the second level
            if to == "group":
                os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
            else:
                proc.send_signal(signal.SIGINT)  # `kill -INT`: the bench passes it on to its worker
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == 130, "".join(lines) + err
    assert "Traceback" not in err and "interrupted" in err
    doc = json.loads(outs["json"].read_text())
    assert doc["interrupted"] is True
    assert [lv["label"] for lv in doc["summary"]["levels"]] == [doc["config"]["levels"][0]["label"]]
    (run,) = doc["runs"]
    assert len(run["levels"]) == 1 and run["levels"][0]["requests"]["completed"] == 6
    text = outs["csv"].read_text()
    assert text.startswith("# interrupted")
    rows = list(csv.reader(line for line in text.splitlines() if not line.startswith("#")))
    assert rows[0][:3] == ["level", "engine", "metric"]
    assert {r[0] for r in rows[1:]} == {run["levels"][0]["level"]["label"]}
    assert "interrupted" in outs["md"].read_text().splitlines()[2].lower()
    assert "interrupted" in out.lower()  # the printed table says so too

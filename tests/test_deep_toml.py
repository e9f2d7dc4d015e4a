"""Deeply nested TOML (config or profile) is a one-line error naming the file, not a RecursionError."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests import procgroup

DEEP = "x = " + "[" * 5000 + "]" * 5000 + "\n"


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return procgroup.run([sys.executable, "-m", "console", *args], capture_output=True, text=True, timeout=60,
                         env={**os.environ, **env})  # fmt: skip


def test_deeply_nested_config_is_one_line(tmp_path: Path) -> None:
    conf = tmp_path / "config.toml"
    conf.write_text('[engines.a]\nprofile = "vllm"\nurl = "http://127.0.0.1:8000"\n' + DEEP)
    r = _cli("config", "show", "--config", str(conf), env={"ENGINEDECK_CONFIG_DIR": str(tmp_path)})
    assert r.returncode == 1, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert str(conf) in r.stderr and "nested too deeply" in r.stderr


def test_deeply_nested_profile_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "engines").mkdir()
    prof = tmp_path / "engines" / "deep.toml"
    prof.write_text('schema = 1\nname = "deep"\n' + DEEP)
    r = _cli("status", "--engine", "vllm@http://127.0.0.1:9", "--sample", "0", "--gpus", "none",
             env={"ENGINEDECK_CONFIG_DIR": str(tmp_path)})  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert str(prof) in r.stderr and "nested too deeply" in r.stderr

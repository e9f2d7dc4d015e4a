"""`enginedeck status` as a cron check would run it: exit codes, one-line reasons, strict JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.cli import main


def test_status_with_no_engine_configured_exits_1_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A config directory with no config file (a cron job pointing at the wrong place).
    monkeypatch.setenv("ENGINEDECK_CONFIG_DIR", str(tmp_path / "nowhere"))
    for json_flag in ([], ["--json"]):
        code = main(["status", "--sample", "0", "--gpus", "none", *json_flag])
        out, err = capsys.readouterr()
        assert code == 1 and out == ""
        assert err.count("\n") == 1 and "no engine" in err and "Traceback" not in err
        assert str(tmp_path / "nowhere") in err  # says where it looked
    # An explicit config file with no [engines] section is the same failure.
    f = tmp_path / "config.toml"
    f.write_text("[console]\nrefresh = 1.0\n")
    code = main(["status", "--config", str(f), "--sample", "0", "--gpus", "none"])
    _, err = capsys.readouterr()
    assert code == 1 and "no engine" in err and str(f) in err

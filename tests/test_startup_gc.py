"""Garbage collection is paused only while a command starts: every way out of ``cli.main`` (a
headless command, --help, a bad argument, an error) leaves it on."""

from __future__ import annotations

import gc

import pytest

from console import cli


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["no-such-command"], ["status", "--refresh", "-1"]])
def test_collection_is_on_after_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        cli.main(argv)
    except SystemExit:
        pass
    assert gc.isenabled()


def test_a_headless_command_runs_with_collection_on(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def run(args: object) -> int:
        seen.append(gc.isenabled())
        return 0

    monkeypatch.setattr("console.commands.status.run", run)
    cli.main(["status", "--json"])
    assert seen == [True]


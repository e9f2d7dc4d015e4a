"""Garbage collection is paused only while a command starts: every way out of ``cli.main`` (a
headless command, --help, a bad argument, an error) leaves it on."""

from __future__ import annotations

import gc

import pytest

from console import cli, startup_gc


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


def test_once_started_the_young_generation_is_collected_less_often(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scrape's objects live until the next scrape: CPython's 700 walks them several times each."""
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, before[1], before[2])
        monkeypatch.setattr("console.commands.status.run", lambda args: 0)
        cli.main(["status", "--json"])
        assert gc.get_threshold() == (startup_gc.YOUNG, before[1], before[2]) and gc.isenabled()
    finally:
        gc.set_threshold(*before)

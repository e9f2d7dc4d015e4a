"""The commands that ask before they act (down, restart, adopt) ask the same way: --yes/-y skips the
question, a terminal gets it, and without a terminal --yes is required (one line, never a hang)."""

from __future__ import annotations

import argparse
import io

import pytest

from console.cli import build_parser
from console.errors import UserError
from console.lifecycle.cli_support import confirmed


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("command", ["down", "restart", "adopt"])
def test_yes_and_y_parse_for_every_asking_command(command: str) -> None:
    parser = build_parser()
    assert parser.parse_args([command, "e1", "--yes"]).yes is True
    assert parser.parse_args([command, "e1", "-y"]).yes is True
    assert parser.parse_args([command, "e1"]).yes is False


def test_yes_skips_the_question(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # nothing to read: a question would fail
    assert confirmed(argparse.Namespace(yes=True), "down", "e1", "Stop e1?") is True


def test_without_a_terminal_yes_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    with pytest.raises(UserError, match=r"^restart e1: not on a terminal; add --yes to confirm$"):
        confirmed(argparse.Namespace(yes=False), "restart", "e1", "Restart e1?")


@pytest.mark.parametrize(("typed", "answer"), [("y\n", True), ("yes\n", True), ("n\n", False), ("\n", False),
                                               ("", False)])
def test_a_terminal_gets_the_question(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                      typed: str, answer: bool) -> None:
    monkeypatch.setattr("sys.stdin", _Tty(typed))
    assert confirmed(argparse.Namespace(yes=False), "adopt", "e1", "Take control of e1?") is answer
    assert "Take control of e1? [y/N]" in capsys.readouterr().out

"""One staleness rule for every source: stale once the last good sample is older than two of the
source's own periods plus its slack, and stale since that sample (``model.late_after``, ``aged``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from console.model import NOT_COLLECTED, Freshness, SourceState, aged, late_after

CONSOLE = Path(__file__).resolve().parents[1] / "console"
T = 1_000_000.0


def test_fresh_enough_stays_as_it_is() -> None:
    f = Freshness(SourceState.OK, updated_at=T - 2.9)
    assert aged(f, T, late_after(1.0, 1.0), "late") is f


def test_too_old_is_stale_since_the_last_good_sample() -> None:
    f = Freshness(SourceState.OK, updated_at=T - 10)
    got = aged(f, T, late_after(1.0, 1.0), "no new sample")
    assert got.stale and got.updated_at == T - 10 and got.stale_since == T - 10 and got.reason == "no new sample"


def test_stale_or_never_collected_is_left_alone() -> None:
    failed = Freshness(SourceState.STALE, updated_at=T - 60, stale_since=T - 50, reason="connection refused")
    assert aged(failed, T, 3.0, "late") is failed  # the failure's own reason and time stay
    assert aged(NOT_COLLECTED, T, 3.0, "late") is NOT_COLLECTED


def test_the_allowance_grows_with_the_period() -> None:
    assert late_after(1.0, 0.5) == 2.5 and late_after(30.0, 1.0) == 61.0


@pytest.mark.parametrize("path", ["telemetry/engine/collector.py", "prometheus/source.py", "kube/source.py",
                                  "remote/stream.py"])
def test_each_age_based_source_uses_the_rule(path: str) -> None:
    tree = ast.parse((CONSOLE / path).read_text(encoding="utf-8"))
    imported = {a.asname or a.name for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module == "console.model"
                for a in n.names if a.name == "late_after"}
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert imported & called, f"{path} does not age its samples with console.model.late_after"

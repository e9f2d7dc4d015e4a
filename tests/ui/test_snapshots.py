"""Screen snapshots (pytest-textual-snapshot) of a fleet frozen to deterministic values.

Update after an intended visual change with: pytest tests/ui/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from tests.ui.conftest import AppFactory

SnapCompare = Any


async def _settle(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_overview(snap_compare: SnapCompare, make_app: AppFactory, size: tuple[int, int]) -> None:
    assert snap_compare(make_app(), terminal_size=size, run_before=_settle)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_engine_detail(snap_compare: SnapCompare, make_app: AppFactory, size: tuple[int, int]) -> None:
    async def open_detail(pilot: Pilot[Any]) -> None:
        await _settle(pilot)
        await pilot.press("down", "down", "down", "enter")
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=size, run_before=open_detail)


def test_gpus_160x48(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    async def open_gpus(pilot: Pilot[Any]) -> None:
        await _settle(pilot)
        await pilot.press("g")
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=(160, 48), run_before=open_gpus)


def test_help_read_only_80x24(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    async def open_help(pilot: Pilot[Any]) -> None:
        await _settle(pilot)
        await pilot.press("question_mark")
        await _settle(pilot)

    assert snap_compare(make_app(read_only=True), terminal_size=(80, 24), run_before=open_help)

"""The private parts of Textual the console builds on are still there, shaped as they were.

``ui/widgets/cell_table.py`` overrides ``DataTable._render_cell`` and sizes DataTable's own caches;
``ui/terminal_driver.py`` subclasses ``textual.drivers._writer_thread.WriterThread`` and swaps it into
``LinuxDriver``; ``ui/widgets/text_box.py`` looks for ``textual.widgets._text_area``. None of it is
Textual's public API, so pyproject.toml pins Textual to the minor series they were written against.
When an upgrade changes one of them, these tests name the private attribute that changed, rather than
the UI failing somewhere later.
"""

from __future__ import annotations

import importlib
import inspect
import io
import re
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable

ROOT = Path(__file__).resolve().parents[2]
TEXTUAL = version("textual")


def _pinned_series() -> tuple[int, int]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = next(d for d in deps if re.match(r"textual\b", d))
    found = re.fullmatch(r"textual>=(\d+)\.(\d+)(?:\.\d+)?,<(\d+)\.(\d+)", spec.replace(" ", ""))
    assert found, f"pyproject.toml: {spec!r} does not pin Textual to one minor series (textual>=X.Y,<X.Y+1)"
    low_major, low_minor, high_major, high_minor = map(int, found.groups())
    assert (high_major, high_minor) == (low_major, low_minor + 1), f"{spec!r} spans more than one minor series"
    return low_major, low_minor


def _changed(attribute: str, used_by: str, how: str) -> str:
    return (f"Textual {TEXTUAL} changed the private {attribute}, which {used_by} relies on ({how}); "
            "check the override against the new Textual before moving the pin in pyproject.toml")


def test_installed_textual_is_the_pinned_series() -> None:
    major, minor = _pinned_series()
    installed = tuple(int(p) for p in TEXTUAL.split(".")[:2])
    assert installed == (major, minor), f"Textual {TEXTUAL} installed; pyproject.toml pins {major}.{minor}.x"


def test_datatable_render_cell_keeps_its_signature() -> None:
    render_cell = getattr(DataTable, "_render_cell", None)
    assert render_cell is not None, _changed("DataTable._render_cell", "ui/widgets/cell_table.py", "gone")
    params = list(inspect.signature(render_cell).parameters)
    expected = ["self", "row_index", "column_index", "base_style", "width", "cursor", "hover"]
    assert params == expected, _changed("DataTable._render_cell", "ui/widgets/cell_table.py",
                                        f"parameters {params}, written for {expected}")


@pytest.mark.parametrize("attribute", [
    "_update_count", "_row_render_cache", "_row_renderable_cache", "_line_cache", "_cell_render_cache",
    "_column_locations", "_row_locations", "_show_hover_cursor", "_pseudo_class_state", "_clear_caches",
])
def test_datatable_private_attributes_are_there(attribute: str) -> None:
    table: DataTable[Any] = DataTable()
    assert hasattr(table, attribute), _changed(f"DataTable.{attribute}", "ui/widgets/cell_table.py", "gone")


def test_writer_thread_is_where_the_driver_takes_it_from() -> None:
    try:
        module = importlib.import_module("textual.drivers._writer_thread")
    except ImportError:
        pytest.fail(_changed("module textual.drivers._writer_thread", "ui/terminal_driver.py", "gone"))
    writer_thread: type[Any] | None = getattr(module, "WriterThread", None)
    assert writer_thread is not None, _changed("textual.drivers._writer_thread.WriterThread",
                                               "ui/terminal_driver.py", "gone")
    linux_driver = importlib.import_module("textual.drivers.linux_driver")
    named: object = getattr(linux_driver, "WriterThread", None)
    assert named is writer_thread, _changed(
        "linux_driver.WriterThread", "ui/terminal_driver.py", "LinuxDriver no longer names the writer class there")
    assert list(inspect.signature(writer_thread).parameters) == ["file"], _changed(
        "textual.drivers._writer_thread.WriterThread.__init__", "ui/terminal_driver.py", "its parameters")
    writer = writer_thread(io.StringIO())
    for attribute in ("_queue", "_file"):
        assert hasattr(writer, attribute), _changed(f"WriterThread.{attribute}", "ui/terminal_driver.py", "gone")
    for method in ("write", "stop", "run"):
        assert callable(getattr(writer_thread, method, None)), _changed(
            f"WriterThread.{method}", "ui/terminal_driver.py", "gone")


def test_linux_driver_private_hooks_are_there() -> None:
    from textual.drivers.linux_driver import LinuxDriver

    for method in ("_sigtstp_application", "_sigcont_application", "run_input_thread", "start_application_mode"):
        assert callable(getattr(LinuxDriver, method, None)), _changed(
            f"LinuxDriver.{method}", "ui/terminal_driver.py", "gone")
    assert "self._writer_thread" in inspect.getsource(LinuxDriver), _changed(
        "LinuxDriver._writer_thread", "ui/terminal_driver.py", "the driver no longer keeps its writer there")


def test_text_area_module_is_where_text_box_looks() -> None:
    try:
        importlib.import_module("textual.widgets._text_area")
    except ImportError:
        pytest.fail(_changed("module textual.widgets._text_area", "ui/widgets/text_box.py", "gone"))

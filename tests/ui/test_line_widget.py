"""The Line widget draws fitting text from its own segments (issue 12): the same cells, in the same
styles, as Textual's general path, which it still takes for what it does not handle."""

from __future__ import annotations

import re

from rich.color import ColorSystem
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.strip import Strip
from textual.widget import Widget

from console.ui.screens.overview import OverviewScreen
from console.ui.widgets.line import Line, _plain_lines
from tests.ui.conftest import AppFactory


def _cells(strip: Strip) -> list[tuple[str, object]]:
    """Each cell as the terminal gets it (a colour by name or by number is the same escape code),
    with the offsets text selection reads."""
    out: list[tuple[str, object]] = []
    for seg in strip:
        style = seg.style or Style()
        for ch in seg.text:
            code = style.render(ch, color_system=ColorSystem.TRUECOLOR)
            out.append((re.sub(r"\x1b]8;id=[^;]*;", "", code), style.meta.get("offset")))  # a link's id is random
    return out


def _both(line: Line) -> tuple[list[list[tuple[str, object]]], list[list[tuple[str, object]]]]:
    height = line.size.height
    own = [_cells(line.render_line(y)) for y in range(height)]
    line._render_content()  # Textual's path, for the same content and size
    textual = [_cells(Widget.render_line(line, y)) for y in range(height)]
    return own, textual


async def test_overview_lines_match_textuals_drawing(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        for name in ("sparks", "gpus", "host"):
            line = app.screen.query_one(f"#{name}", Line)
            assert isinstance(line.content, Text) and line.size.height > 0
            assert _plain_lines(line.content, line.size.width) is not None, f"#{name} is not drawn by Line"
            own, textual = _both(line)
            assert own == textual, f"#{name} differs from Textual's drawing"
            assert any(ch.strip() for row in own for ch, _ in row)


class _One(App[None]):
    def compose(self) -> ComposeResult:
        yield Line(id="l")


async def test_what_line_does_not_handle_takes_textuals_path() -> None:
    long = Text("word " * 40)  # wider than the widget: it wraps
    cases = [long, Text("a\tb"), Text("x", justify="right"), Text.from_markup("[link=https://x.example]x[/]"),
             Text.from_markup("[@click=app.bell]ring[/]")]
    app = _One()
    async with app.run_test(size=(60, 10)) as pilot:
        line = app.query_one(Line)
        for text in cases:
            assert _plain_lines(text, 60) is None, text.markup
            line.show(text)
            await pilot.pause()
            own, textual = _both(line)
            assert own == textual, text.markup
        # A change of content or width draws again.
        line.show(Text("first", style="bold"))
        await pilot.pause()
        assert "first" in line.render_line(0).text
        line.show(Text("second"))
        await pilot.pause()
        assert "second" in line.render_line(0).text and "first" not in line.render_line(0).text

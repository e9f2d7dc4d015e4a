"""Whether a widget takes typed text (keys typed into it are text, not the console's actions)."""

from __future__ import annotations

import sys

from textual.widget import Widget
from textual.widgets import Input


def is_text_box(widget: Widget | None) -> bool:
    """An Input or a TextArea. TextArea's module (documents, tree-sitter: a visible part of a start) is
    imported only by the screens that show one, so before that no TextArea can have focus."""
    if isinstance(widget, Input):
        return True
    text_area = sys.modules.get("textual.widgets._text_area")
    return text_area is not None and isinstance(widget, text_area.TextArea)

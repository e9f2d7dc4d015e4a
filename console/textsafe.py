"""The one sanitiser for outside text: what an engine, a stream, a remote host or a recording sent
becomes inert before anything shows it.

A terminal obeys what it is sent. An escape sequence in a model id, a metric label, a log line or a
streamed reply could set the window title (OSC 0), write the clipboard (OSC 52), clear the screen
(CSI 2J) or hide text (bidi overrides, zero-width characters). Every such character is replaced by
a visible placeholder, so the sequence shows as text and does nothing:

- C0 controls become their Control Pictures (``ESC`` is shown as ``␛``, ``BEL`` as ``␇``), DEL as ``␡``;
- C1 controls (U+0080-U+009F: the 8-bit ``CSI``, ``OSC``, ``DCS``, ``APC``, ``PM``...), bidi overrides
  and isolates, zero-width and other invisible format characters, line and paragraph separators,
  lone surrogates and the Unicode tag block are shown as ``\\u202e``-style escapes.

With the ESC byte replaced no sequence can start, whatever follows it (CSI, OSC, DCS, APC, PM, SOS
and their 8-bit forms alike). ``multiline`` keeps newlines and tabs (logs, streamed replies) and
turns a carriage return into a line end, so a line cannot be overwritten in place.

This module imports nothing of the console: collectors, clients, commands and the UI all use it.
JSON output does not: ``json.dumps`` escapes controls itself.
"""

from __future__ import annotations

import re

# Characters a terminal or a bidi algorithm acts on, or that show nothing.
_UNSAFE_CLASS = (
    "\x00-\x1f\x7f-\x9f"  # C0, DEL, C1
    "\u00ad"  # soft hyphen
    "\u061c"  # Arabic letter mark
    "\u115f\u1160\u3164\uffa0"  # Hangul fillers (blank but not space)
    "\u180e"  # Mongolian vowel separator
    "\u200b-\u200f"  # zero-width space, joiners, LRM, RLM
    "\u2028-\u202e"  # line/paragraph separators, bidi embeddings and overrides
    "\u2060-\u206f"  # word joiner, invisible operators, bidi isolates, deprecated format chars
    "\ufeff"  # zero-width no-break space (BOM)
    "\ufff9-\ufffb"  # interlinear annotation
    "\ud800-\udfff"  # lone surrogates (cannot even be encoded to UTF-8)
    "\U000e0000-\U000e007f"  # tag characters
)
_UNSAFE = re.compile(f"[{_UNSAFE_CLASS}]")
_UNSAFE_KEEP_LINES = re.compile(f"[{_UNSAFE_CLASS.replace(chr(0) + '-' + chr(0x1f), '')}\x00-\x08\x0b-\x1f]")
_CRLF = re.compile(r"\r\n?")


def _placeholder(ch: str) -> str:
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # Control Pictures: ␀ ... ␟ (␛ for ESC)
    if code == 0x7F:
        return "\u2421"  # ␡
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _replace(m: re.Match[str]) -> str:
    return _placeholder(m.group())


def inert(text: str, *, multiline: bool = False) -> str:
    """``text`` with every control, escape, bidi and invisible character made a visible placeholder.

    Single-line (the default) shows newlines as ``␊`` too: a name, an id or a reason is one line.
    ``multiline`` keeps ``\\n`` and ``\\t`` and turns ``\\r\\n`` and a lone ``\\r`` into ``\\n``.
    """
    if multiline:
        if "\r" in text:
            text = _CRLF.sub("\n", text)
        if _UNSAFE_KEEP_LINES.search(text) is None:
            return text
        return _UNSAFE_KEEP_LINES.sub(_replace, text)
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_replace, text)


def is_inert(text: str, *, multiline: bool = False) -> bool:
    """Whether ``text`` holds nothing :func:`inert` would replace."""
    if multiline:
        return "\r" not in text and _UNSAFE_KEEP_LINES.search(text) is None
    return _UNSAFE.search(text) is None


__all__ = ["inert", "is_inert"]

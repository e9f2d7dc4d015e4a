"""The ``[keys]`` table of ``config.toml``: key names as the user writes them, checked and written the
way Textual names keys (``?`` -> ``question_mark``, ``shift+r`` -> ``R``, ``esc`` -> ``escape``).

Only the spelling is checked here, so the configuration loads without Textual. Whether each name is
an action, and whether two actions that can be active together now share a key, is the action
registry's to say (``console.ui.actions.ActionRegistry.rebound``), before the console starts.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping

MODIFIERS = ("ctrl", "shift", "alt", "meta", "super", "hyper")
_NAMED = frozenset(
    {
        *("escape", "enter", "tab", "space", "backspace", "delete", "insert", "home", "end"),
        *("pageup", "pagedown", "up", "down", "left", "right"),
        *(f"f{n}" for n in range(1, 25)),
    }
)
_ALIASES = {"esc": "escape", "return": "enter", "pgup": "pageup", "pgdn": "pagedown", "del": "delete",
            "ins": "insert"}
# Textual's names for a few characters (its KEY_NAME_REPLACEMENTS), and the Unicode names that an
# underscore cannot spell back (a hyphen in them).
_REPLACED = {"solidus": "slash", "reverse_solidus": "backslash", "commercial_at": "at",
             "hyphen_minus": "minus", "plus_sign": "plus", "low_line": "underscore"}
_UNICODE_NAME = {"minus": "HYPHEN-MINUS", "less_than_sign": "LESS-THAN SIGN",
                 "greater_than_sign": "GREATER-THAN SIGN", **{v: k.replace("_", " ").upper() for k, v in
                                                               _REPLACED.items() if v != "minus"}}
EXAMPLES = "e.g. r, R, ctrl+r, f5, ? or question_mark, / or slash, escape"


class KeyNameError(ValueError):
    """A key the user wrote that no terminal key is called."""


def char_key(char: str) -> str:
    """Textual's name for the key that types ``char`` (``?`` -> ``question_mark``, ``a`` -> ``a``)."""
    if char.isalnum():
        return char
    if char == " ":
        return "space"
    try:
        name = unicodedata.name(char).lower().replace("-", "_").replace(" ", "_")
    except ValueError:
        raise KeyNameError(f"{char!r} is not a key") from None
    return _REPLACED.get(name, name)


def _named_char(name: str) -> str | None:
    """The printable character a Textual character-key name stands for (``question_mark`` -> ``?``)."""
    try:
        char = unicodedata.lookup(_UNICODE_NAME.get(name, name.replace("_", " ").upper()))
    except KeyError:
        return None
    return char if len(char) == 1 and char.isprintable() and not char.isspace() else None


def normalise_key(text: str) -> str:
    """One key as Textual names it; ``KeyNameError`` (one line, with examples) when it is none."""
    if text == " ":
        return "space"
    raw = text.strip()
    if not raw:
        raise KeyNameError(f"an empty key name ({EXAMPLES})")
    if raw == "+" or raw.endswith("++"):  # the plus key, alone or with modifiers
        parts = [*raw[:-2].split("+"), "+"] if raw != "+" else ["+"]
        if parts[0] == "":
            parts = parts[1:]
    else:
        parts = raw.split("+")
    *mods, base = parts
    mods = [m.strip().lower() for m in mods]
    for m in mods:
        if m not in MODIFIERS:
            raise KeyNameError(f"{raw!r}: unknown modifier {m!r} (use {', '.join(MODIFIERS)})")
    base = base.strip()
    if not base:
        raise KeyNameError(f"{raw!r}: no key after the modifier ({EXAMPLES})")
    if len(base) == 1:
        key = char_key(base)
    else:
        name = _ALIASES.get(base.lower(), base.lower())
        if name in _NAMED:
            key = name
        else:
            char = _named_char(name)
            if char is None:
                raise KeyNameError(f"{raw!r}: unknown key name {base!r} ({EXAMPLES})")
            key = char_key(char)
    if mods == ["shift"] and len(key) == 1 and key.isalpha():
        return key.upper()  # shift+r arrives as R
    return "+".join([*dict.fromkeys(mods), key])


def parse_key_table(table: object) -> dict[str, tuple[str, ...]]:
    """``{action_id: "key" | ["key", ...]}`` -> normalised keys per action (an empty list unbinds it).

    Raises ``KeyTableError`` naming the action whose entry is wrong."""
    if not isinstance(table, Mapping):
        raise KeyTableError("", 'must be a table: [keys] then action_id = "key" or ["key1", "key2"]')
    out: dict[str, tuple[str, ...]] = {}
    for aid, value in table.items():
        if isinstance(value, str):
            names = _split(value)
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            names = list(value)
        else:
            raise KeyTableError(str(aid), 'give a key name or a list of them, e.g. "ctrl+r" or ["r", "f5"]')
        try:
            keys = tuple(dict.fromkeys(normalise_key(n) for n in names))
        except KeyNameError as exc:
            raise KeyTableError(str(aid), str(exc)) from None
        out[str(aid)] = keys
    return out


def _split(value: str) -> list[str]:
    """ "q,ctrl+q" as in the registry; "" unbinds, as [] does; "," and " " are the comma and space keys."""
    if value.strip() == "," or value == " ":
        return [value]
    return value.split(",") if value.strip() else []


class KeyTableError(ValueError):
    """A wrong ``[keys]`` entry: ``action`` is its name ('' for the table itself)."""

    def __init__(self, action: str, problem: str) -> None:
        super().__init__(problem)
        self.action = action
        self.problem = problem

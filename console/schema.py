"""TOML tables -> frozen dataclasses: every value's type checked, unknown keys refused, the first
problem located (``engines.a.port``) and worded as one line.

The console's own settings (engine profiles, ``config.toml``, alert rules) are frozen, keyword-only
dataclasses whose fields say their type and constraints (``spec(60, gt=0)``). ``validate(cls,
data)`` builds one from a mapping or raises ``Invalid`` with the key path and the problem, in the
words pydantic uses ("Input should be less than or equal to 65535"). A field's ``check`` runs on the
converted value (with the fields before it); checks across fields live in ``__post_init__``, so they
hold for instances made directly too.

Why not pydantic: importing it and building these models was a large share of every start's memory
and time (``benchmarks/import_cost.py``; docs/performance.md), against the console's targets for
both. Nothing in the console imports pydantic.

Types understood: str, int, float, bool, None, ``X | Y``, ``Literal[...]``, ``StrEnum`` subclasses,
``tuple[X, ...]``, ``list[X]``, ``dict[K, V]``, ``typing.Any`` and nested dataclasses. Numbers and
booleans are read as pydantic's lax mode reads them (``"8000"`` is 8000, ``"yes"`` is true, ``8.0``
is 8), so files that loaded before still load.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

__all__ = ["Invalid", "dump", "spec", "validate"]

T = TypeVar("T")
Check = Callable[[Any, Mapping[str, Any]], Any]


class Invalid(ValueError):
    """The first problem of a validated mapping: where (``loc``), what, and of which kind."""

    def __init__(self, loc: tuple[str | int, ...], msg: str, kind: Literal["value", "missing", "extra"] = "value"):
        super().__init__(f"{'.'.join(map(str, loc))}: {msg}" if loc else msg)
        self.loc = loc
        self.msg = msg
        self.kind = kind

    @property
    def where(self) -> str:
        return ".".join(map(str, self.loc))


@dataclasses.dataclass(frozen=True, slots=True)
class _Spec:
    alias: str = ""
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    min_length: int | None = None
    pattern: str = ""
    check: Check | None = None


_NO_SPEC = _Spec()


def spec(default: Any = dataclasses.MISSING, *, factory: Callable[[], Any] | None = None, alias: str = "",
         ge: float | None = None, gt: float | None = None, le: float | None = None, lt: float | None = None,
         min_length: int | None = None, pattern: str = "", check: Check | None = None) -> Any:
    """A dataclass field with a default (or ``factory``), an ``alias`` (the key in the file) and
    constraints; ``check(value, earlier_fields)`` returns the value to keep or raises ValueError."""
    meta = {"schema": _Spec(alias, ge, gt, le, lt, min_length, pattern, check)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


# Per class: (field name, key in the file, type, spec, has a default).
_Plan = tuple[tuple[str, str, Any, _Spec, bool], ...]
_PLANS: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        hints = typing.get_type_hints(cls)
        plan = _PLANS[cls] = tuple(
            (f.name, (f.metadata.get("schema", _NO_SPEC).alias or f.name), hints[f.name],
             f.metadata.get("schema", _NO_SPEC),
             f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING)
            for f in dataclasses.fields(cls) if f.init
        )
    return plan


def validate(cls: type[T], data: Any, loc: tuple[str | int, ...] = ()) -> T:
    """An instance of the dataclass ``cls`` from ``data`` (a mapping; keys by alias or by name)."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise Invalid(loc, f"Input should be a valid dictionary or instance of {cls.__name__}")
    plan = _plan(cls)
    values: dict[str, Any] = {}
    known: set[str] = set()
    for name, key, tp, sp, has_default in plan:
        known.update((name, key))
        where = key if key in data else name
        if where not in data:
            if not has_default:
                raise Invalid((*loc, key), "required key is missing", "missing")
            continue
        here = (*loc, key)
        value = _limits(_convert(tp, data[where], here), sp, here)
        if sp.check is not None:
            try:
                value = sp.check(value, values)
            except ValueError as exc:
                raise Invalid(here, str(exc)) from None
        values[name] = value
    for key in data:
        if key not in known:
            raise Invalid((*loc, key), "unknown key", "extra")
    try:
        return cls(**values)
    except Invalid:
        raise
    except ValueError as exc:  # a check across fields (__post_init__)
        raise Invalid(loc, str(exc)) from None


def _convert(tp: Any, value: Any, loc: tuple[str | int, ...]) -> Any:
    if tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin is types.UnionType or origin is typing.Union:
        return _union(typing.get_args(tp), value, loc)
    if origin is Literal:
        return _literal(typing.get_args(tp), value, loc)
    if tp is type(None):
        if value is None:
            return None
        raise Invalid(loc, "Input should be None")
    if tp is str:
        if isinstance(value, str):
            return value
        raise Invalid(loc, "Input should be a valid string")
    if tp is bool:
        return _bool(value, loc)
    if tp is int:
        return _int(value, loc)
    if tp is float:
        return _float(value, loc)
    if origin in (tuple, list):
        if not isinstance(value, list | tuple):
            raise Invalid(loc, f"Input should be a valid {origin.__name__}")
        item = typing.get_args(tp)[0]
        items = [_convert(item, v, (*loc, i)) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, Mapping):
            raise Invalid(loc, "Input should be a valid dictionary")
        kt, vt = typing.get_args(tp)
        return {_convert(kt, k, (*loc, k)): _convert(vt, v, (*loc, k)) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise Invalid(loc, f"Input should be {_either([m.value for m in tp])}") from None
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return validate(tp, value, loc)
    raise TypeError(f"schema: unsupported field type {tp!r}")  # a programming error, not input


_TRUE = frozenset({"true", "yes", "on", "1", "t", "y"})
_FALSE = frozenset({"false", "no", "off", "0", "f", "n"})


def _bool(value: Any, loc: tuple[str | int, ...]) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    tail = ", unable to interpret input" if isinstance(value, str | int | float) else ""
    raise Invalid(loc, f"Input should be a valid boolean{tail}")


def _int(value: Any, loc: tuple[str | int, ...]) -> int:
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise Invalid(loc, "Input should be a valid integer, unable to parse string as an integer") from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Invalid(loc, "Input should be a finite number")
        if value.is_integer():
            return int(value)
        raise Invalid(loc, "Input should be a valid integer, got a number with a fractional part")
    raise Invalid(loc, "Input should be a valid integer")


def _float(value: Any, loc: tuple[str | int, ...]) -> float:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            raise Invalid(loc, "Input should be a valid number, unable to parse string as a number") from None
    raise Invalid(loc, "Input should be a valid number")


def _union(arms: tuple[Any, ...], value: Any, loc: tuple[str | int, ...]) -> Any:
    if value is None and type(None) in arms:
        return None
    errors: list[Invalid] = []
    for arm in arms:
        if arm is type(None):
            continue
        try:
            return _convert(arm, value, loc)
        except Invalid as exc:
            errors.append(exc)
    # The arm that got furthest into the value (a list's item, a table's key) says the most.
    raise max(errors, key=lambda e: len(e.loc))


def _literal(allowed: tuple[Any, ...], value: Any, loc: tuple[str | int, ...]) -> Any:
    for a in allowed:
        if type(a) is type(value) and a == value:
            return a
    raise Invalid(loc, f"Input should be {_either(list(allowed))}")


def _either(options: list[Any]) -> str:
    shown = [repr(o) for o in options]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _limits(value: Any, sp: _Spec, loc: tuple[str | int, ...]) -> Any:
    if sp is _NO_SPEC:
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        if sp.gt is not None and not value > sp.gt:
            raise Invalid(loc, f"Input should be greater than {sp.gt}")
        if sp.ge is not None and not value >= sp.ge:
            raise Invalid(loc, f"Input should be greater than or equal to {sp.ge}")
        if sp.lt is not None and not value < sp.lt:
            raise Invalid(loc, f"Input should be less than {sp.lt}")
        if sp.le is not None and not value <= sp.le:
            raise Invalid(loc, f"Input should be less than or equal to {sp.le}")
    if sp.min_length is not None and isinstance(value, str | list | tuple) and len(value) < sp.min_length:
        n = sp.min_length
        if isinstance(value, str):
            raise Invalid(loc, f"String should have at least {n} character{'s' if n != 1 else ''}")
        kind = "List" if isinstance(value, list) else "Tuple"
        raise Invalid(loc, f"{kind} should have at least {n} item{'s' if n != 1 else ''} after validation, "
                           f"not {len(value)}")
    if sp.pattern and isinstance(value, str) and re.search(sp.pattern, value) is None:
        raise Invalid(loc, f"String should match pattern '{sp.pattern}'")
    return value


def dump(obj: Any, *, exclude_defaults: bool = False, by_alias: bool = False,
         exclude: frozenset[str] = frozenset()) -> Any:
    """A dataclass (and what it holds) as plain JSON-able data: tables, lists, strings, numbers."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            if f.name in exclude:
                continue
            value = getattr(obj, f.name)
            if exclude_defaults and _is_default(f, value):
                continue
            key = (f.metadata.get("schema", _NO_SPEC).alias or f.name) if by_alias else f.name
            out[key] = dump(value, exclude_defaults=exclude_defaults, by_alias=by_alias)
        return out
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, Mapping):
        return {k: dump(v, exclude_defaults=exclude_defaults, by_alias=by_alias) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [dump(v, exclude_defaults=exclude_defaults, by_alias=by_alias) for v in obj]
    return obj


def _is_default(f: dataclasses.Field[Any], value: Any) -> bool:
    if f.default is not dataclasses.MISSING:
        return bool(value == f.default)
    if f.default_factory is not dataclasses.MISSING:
        return bool(value == f.default_factory())
    return False

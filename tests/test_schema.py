"""console.schema: TOML tables into frozen dataclasses, each problem located and worded as pydantic
words it (pydantic, installed for the simulator, is the reference the messages are compared with)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any, Literal

import pydantic
import pytest

from console.alerts.rules import load_rules
from console.config import ConfigFile
from console.profiles import EngineProfile, load_profiles
from console.schema import Invalid, dump, spec, validate


class Colour(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


def _even(v: int, _: object) -> int:
    if v % 2:
        raise ValueError("must be even")
    return v


def _after_name(v: str, before: Mapping[str, Any]) -> str:
    return f"{before['name']}:{v}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Inner:
    port: int = spec(ge=1, le=65535)
    weight: float = spec(1.0, gt=0, lt=10)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outer:
    version: int = spec(1, alias="schema")
    name: str = spec(pattern=r"^[a-z]+$")
    tag: str = spec("t", check=_after_name)
    mode: Literal["docker", "process"] | None = None
    gpus: Literal["all", "none"] | int | list[int] = "none"
    colour: Colour = Colour.RED
    tags: tuple[str, ...] = spec((), min_length=0)
    names: list[str] = spec(factory=lambda: ["a"], min_length=1)
    inner: Inner = spec(factory=lambda: Inner(port=80))
    table: dict[str, Inner] = spec(factory=dict)
    even: int = spec(0, check=_even)
    on: bool = False
    anything: Any = None

    def __post_init__(self) -> None:
        if self.mode == "process" and self.gpus != "none":
            raise ValueError("a process engine takes no GPUs here")


class PInner(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    port: int = pydantic.Field(ge=1, le=65535)
    weight: float = pydantic.Field(1.0, gt=0, lt=10)


class POuter(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", populate_by_name=True)
    version: int = pydantic.Field(1, alias="schema")
    name: str = pydantic.Field(pattern=r"^[a-z]+$")
    mode: Literal["docker", "process"] | None = None
    colour: Colour = Colour.RED
    names: list[str] = pydantic.Field(default_factory=lambda: ["a"], min_length=1)
    inner: PInner = pydantic.Field(default_factory=lambda: PInner(port=80, weight=1.0))
    table: dict[str, PInner] = pydantic.Field(default_factory=dict)
    on: bool = False


BAD: list[dict[str, Any]] = [
    {"name": "Upper"},
    {"name": 3},
    {"name": "ok", "mode": "kube"},
    {"name": "ok", "colour": "green"},
    {"name": "ok", "names": []},
    {"name": "ok", "names": "a"},
    {"name": "ok", "names": ["a", 2]},
    {"name": "ok", "inner": {"port": 0}},
    {"name": "ok", "inner": {"port": 70000}},
    {"name": "ok", "inner": {"port": 8, "weight": 0}},
    {"name": "ok", "inner": {"port": 8, "weight": 10}},
    {"name": "ok", "inner": {"port": "eight"}},
    {"name": "ok", "inner": {"port": 8, "weight": "heavy"}},
    {"name": "ok", "inner": {"port": float("inf")}},
    {"name": "ok", "inner": {"port": 8.5}},
    {"name": "ok", "inner": 3},
    {"name": "ok", "inner": {}},
    {"name": "ok", "table": {"x": {"port": -1}}},
    {"name": "ok", "table": []},
    {"name": "ok", "schema": "one"},
    {"name": "ok", "on": "maybe"},
    {"name": "ok", "on": 2},
    {"name": "ok", "on": [True]},
    {"name": "ok", "extra": 1},
    {},
]


def _pydantic_first(data: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(pydantic.ValidationError) as caught:
        POuter.model_validate(data)
    err = caught.value.errors()[0]
    kind = err["type"]
    msg = {"extra_forbidden": "unknown key", "missing": "required key is missing"}.get(kind, err["msg"])
    return ".".join(map(str, err["loc"])), msg.replace("PInner", "Inner")


@pytest.mark.parametrize("data", BAD, ids=[repr(d) for d in BAD])
def test_each_problem_is_located_and_worded_as_pydantic_does(data: dict[str, Any]) -> None:
    where, msg = _pydantic_first(data)
    with pytest.raises(Invalid) as caught:
        validate(Outer, data)
    assert (caught.value.where, caught.value.msg) == (where, msg)


def test_values_are_converted_and_checks_see_the_fields_before_them() -> None:
    got = validate(Outer, {"schema": 2, "name": "abc", "tag": "x", "gpus": [0, 1], "colour": "blue",
                           "tags": ["p", "q"], "inner": {"port": 8.0, "weight": 2}, "table": {"k": {"port": 9}},
                           "even": 4, "anything": {"free": [1]}})
    assert got.version == 2 and got.tag == "abc:x" and got.gpus == [0, 1] and got.colour is Colour.BLUE
    assert got.tags == ("p", "q") and isinstance(got.tags, tuple)
    assert got.inner == Inner(port=8, weight=2.0) and isinstance(got.inner.port, int)
    assert isinstance(got.inner.weight, float) and got.table == {"k": Inner(port=9)}
    assert validate(Outer, {"name": "a", "version": 3}).version == 3  # by name as well as by alias
    assert validate(Outer, {"name": "a", "gpus": "all"}).gpus == "all"
    assert validate(Outer, {"name": "a", "gpus": 2}).gpus == 2


def test_numbers_and_booleans_read_as_pydantic_lax_mode_reads_them() -> None:
    cases: list[dict[str, Any]] = [{"port": "8"}, {"port": " 9 "}, {"port": "8.0"}, {"port": True},
                                   {"port": 8, "weight": "1.5"}, {"port": 8, "weight": 2}]
    for data in cases:
        assert dump(validate(Inner, data)) == PInner.model_validate(data).model_dump(), data
    for text in ("yes", "YES", "on", "1", "t", "false", "off", "n", 0, 1, 1.0):
        assert validate(Outer, {"name": "a", "on": text}).on is POuter.model_validate({"name": "a", "on": text}).on


def test_unions_name_the_arm_that_got_furthest_and_checks_their_own_key() -> None:
    with pytest.raises(Invalid) as caught:
        validate(Outer, {"name": "a", "gpus": [0, "one"]})
    assert caught.value.where == "gpus.1" and caught.value.msg.startswith("Input should be a valid integer")
    with pytest.raises(Invalid) as caught:
        validate(Outer, {"name": "a", "even": 3})
    assert (caught.value.where, caught.value.msg) == ("even", "must be even")
    with pytest.raises(Invalid) as caught:
        validate(Outer, {"name": "a", "table": {"k": {"port": 1, "colour": 2}}})
    assert (caught.value.where, caught.value.kind) == ("table.k.colour", "extra")


def test_a_check_across_fields_names_the_table_and_holds_for_direct_instances() -> None:
    with pytest.raises(Invalid) as caught:
        validate(Outer, {"name": "a", "mode": "process", "gpus": 1})
    assert (caught.value.loc, caught.value.msg) == ((), "a process engine takes no GPUs here")
    with pytest.raises(ValueError, match="no GPUs"):
        Outer(name="a", mode="process", gpus=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Outer(name="a").name = "b"  # type: ignore[misc]


def test_every_shipped_profile_dumps_and_reads_back_the_same() -> None:
    for name, profile in load_profiles().items():
        data = dump(profile, by_alias=True)
        assert "schema" in data and "schema_version" not in data
        assert validate(EngineProfile, data) == profile, name
        assert dump(profile, exclude_defaults=True)["name"] == name


def test_shipped_rules_and_an_empty_config_validate() -> None:
    assert load_rules(user=False)
    empty = validate(ConfigFile, {})
    assert empty.engines == {} and empty.console.refresh == 1.0
    assert dump(empty.console)["gpu_source"] == "nvml"

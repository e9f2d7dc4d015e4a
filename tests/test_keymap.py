"""`[keys]` in config.toml: key names as users write them, one-line errors naming the entry, checked at
load (the configuration loads no Textual) and against the action registry before any console starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.config import load_config, parse_config
from console.errors import ConfigError, UserError
from console.keymap import KeyNameError, normalise_key
from tests import procgroup

ENGINE = '[engines.a]\nprofile = "vllm"\nurl = "http://127.0.0.1:9"\n'


@pytest.mark.parametrize(
    ("written", "textual"),
    [
        ("?", "question_mark"), ("question_mark", "question_mark"), ("/", "slash"), ("solidus", "slash"),
        ("+", "plus"), ("ctrl++", "ctrl+plus"), ("-", "minus"), ("[", "left_square_bracket"), ("#", "number_sign"),
        ("<", "less_than_sign"), ("less_than_sign", "less_than_sign"), (",", "comma"), (" ", "space"),
        ("r", "r"), ("R", "R"), ("shift+r", "R"), ("Ctrl+R", "ctrl+R"), ("ctrl+r", "ctrl+r"), ("F5", "f5"),
        ("esc", "escape"), ("return", "enter"), ("pgdn", "pagedown"), ("ctrl+shift+up", "ctrl+shift+up"),
    ],
)
def test_keys_are_written_as_textual_names_them(written: str, textual: str) -> None:
    assert normalise_key(written) == textual


@pytest.mark.parametrize(("bad", "says"), [("ctrl+foo", "unknown key name 'foo'"), ("hyper+", "no key after"),
                                           ("cmd+r", "unknown modifier 'cmd'"), ("", "empty key name"),
                                           ("sapce", "unknown key name 'sapce'")])
def test_a_key_no_terminal_sends_is_refused(bad: str, says: str) -> None:
    with pytest.raises(KeyNameError, match=says):
        normalise_key(bad)


def test_keys_table_string_list_and_empty_forms() -> None:
    cfg = parse_config({"keys": {"pause": "z", "help": ["h", "?"], "quit": "q,ctrl+x", "explain": []}}, "c.toml")
    assert dict(cfg.keys) == {"pause": ("z",), "help": ("h", "question_mark"), "quit": ("q", "ctrl+x"),
                              "explain": ()}
    assert parse_config({}, "c.toml").keys == {}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"pause": "ctrl+foo"}, "c.toml: keys.pause: 'ctrl+foo': unknown key name 'foo'"),
        ({"pause": 3}, "c.toml: keys.pause: give a key name or a list of them"),
        ({"pause": ["z", 1]}, "c.toml: keys.pause: give a key name or a list of them"),
    ],
)
def test_a_wrong_entry_is_one_line_naming_it(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config({"keys": table}, "c.toml")
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


def test_keys_must_be_a_table(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('keys = "z"\n')
    with pytest.raises(ConfigError, match=r"c.toml: keys: must be a table"):
        load_config(f)


def test_the_configuration_checks_keys_without_textual() -> None:
    probe = (
        "import sys\nfrom console.config import parse_config\n"
        "parse_config({'keys': {'pause': ['?', 'ctrl+r']}}, 'c.toml')\n"
        "print(sorted(m for m in sys.modules if m == 'textual' or m.startswith(('textual.', 'console.ui'))))"
    )
    out = procgroup.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_ids_and_shared_keys_are_checked_before_the_console_starts(tmp_path: Path) -> None:
    from console.ui.launch import check_keys

    def check(body: str) -> None:
        f = tmp_path / "c.toml"
        f.write_text(ENGINE + "[keys]\n" + body)
        check_keys(load_config(f))

    check('pause = "z"\nfilter = "i"\n')  # i is the bench's and the playground's: other screens
    with pytest.raises(UserError, match=r"c.toml: keys.pase: no such action \(did you mean 'pause'\?"):
        check('pase = "z"\n')
    with pytest.raises(UserError, match=r"keys.pause: 'slash' is also the key of 'filter' on overview"):
        check('pause = "/"\n')
    with pytest.raises(UserError, match=r"keys.stop: 'x' is a navigation-like key"):
        check('stop = "x"\n')


def _cli(*args: str, config_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ENGINEDECK_CONFIG_DIR": str(config_dir), "ENGINEDECK_STATE_DIR": str(config_dir / "st")}
    return procgroup.run([sys.executable, "-m", "console", *args], capture_output=True, text=True, env=env,
                         timeout=120, stdin=subprocess.DEVNULL)


def _one_line_error(r: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    for part in parts:
        assert part in r.stderr, r.stderr


def test_cli_says_a_wrong_keys_table_in_one_line(tmp_path: Path) -> None:
    f = tmp_path / "config.toml"
    f.write_text(ENGINE + '[keys]\nhlep = "h"\n')
    _one_line_error(_cli("config", "show", "--config", str(f), config_dir=tmp_path),
                    f"{f}: keys.hlep: no such action", "did you mean 'help'?")
    f.write_text(ENGINE + '[keys]\npause = ["o"]\n')
    both = ("keys.pause: 'o' is also the key of 'overview'",)
    _one_line_error(_cli("config", "show", "--config", str(f), config_dir=tmp_path), *both)
    _one_line_error(_cli("attach", "--config", str(f), "vllm@http://127.0.0.1:9", config_dir=tmp_path), *both)
    _one_line_error(_cli("--config", str(f), config_dir=tmp_path), *both)
    _one_line_error(_cli("config", "keys", "--config", str(f), config_dir=tmp_path), *both)
    # The demo says so before it starts its fleet.
    started = time.monotonic()
    r = _cli("demo", "--config", str(f), config_dir=tmp_path)
    _one_line_error(r, *both)
    assert "starting" not in r.stderr and time.monotonic() - started < 60
    f.write_text(ENGINE + '[keys]\npause = "ctrl+foo"\n')
    _one_line_error(_cli("config", "show", "--config", str(f), config_dir=tmp_path),
                    "keys.pause: 'ctrl+foo': unknown key name 'foo'")


def test_config_show_and_config_keys_show_the_remap(tmp_path: Path) -> None:
    f = tmp_path / "config.toml"
    f.write_text(ENGINE + '[keys]\npause = ["z", "F12"]\nhelp = "?"\nexplain = []\n')
    r = _cli("config", "show", "--config", str(f), config_dir=tmp_path)
    assert r.returncode == 0, r.stderr
    assert '[keys]\npause = ["z", "f12"]\nhelp = ["question_mark"]\nexplain = []' in r.stdout
    r = _cli("config", "show", "--json", "--config", str(f), config_dir=tmp_path)
    assert json.loads(r.stdout)["keys"] == {"pause": ["z", "f12"], "help": ["question_mark"], "explain": []}
    r = _cli("config", "keys", "--json", "--config", str(f), config_dir=tmp_path)
    rows = {row["id"]: row for row in json.loads(r.stdout)}
    assert rows["pause"]["keys"] == ["z", "f12"] and rows["pause"]["remapped"]
    assert rows["explain"]["keys"] == [] and rows["quit"]["keys"][:2] == ["q", "ctrl+q"]
    assert rows["stop"]["changes_engines"] and rows["filter"]["where"] == ["overview"]
    text = _cli("config", "keys", "--config", str(f), config_dir=tmp_path).stdout
    assert any(line.startswith("pause ") and "z, f12" in line and line.endswith("*") for line in text.splitlines())
    assert any(line.startswith("explain ") and "(unbound)" in line for line in text.splitlines())

"""Engine URLs are checked up front: a port out of range or not a number is a one-line error from
the config file and from ``--engine PROFILE@URL``, never a collector that dies on first use."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from console.config import load_config, parse_engine_ref
from console.errors import ConfigError, UserError
from tests import procgroup

BAD_URLS = {
    "http://127.0.0.1:80000": "port 80000 is out of range (1-65535)",
    "http://127.0.0.1:abc": "port 'abc' is not a number",
    "http://127.0.0.1:0": "port 0 is out of range (1-65535)",
    "http://127.0.0.1:-1": "is not a number",
    "http://:8000": "no host",
    "http://[::1:8000": "not an http(s) URL",
}


@pytest.mark.parametrize("url", list(BAD_URLS))
def test_config_rejects_bad_url(tmp_path: Path, url: str) -> None:
    f = tmp_path / "config.toml"
    f.write_text(f'[engines.a]\nprofile = "vllm"\nurl = "{url}"\n')
    with pytest.raises(ConfigError) as info:
        load_config(f)
    msg = str(info.value)
    assert "\n" not in msg and "engines.a.url" in msg and BAD_URLS[url] in msg, msg


@pytest.mark.parametrize("url", list(BAD_URLS))
def test_engine_ref_rejects_bad_url(url: str) -> None:
    with pytest.raises(UserError) as info:
        parse_engine_ref(f"vllm@{url}")
    assert BAD_URLS[url] in str(info.value) and "\n" not in str(info.value)


def test_good_urls_still_pass() -> None:
    for url in ("http://127.0.0.1:1", "http://127.0.0.1:65535", "https://host.example", "http://[::1]:8000/"):
        assert parse_engine_ref(f"vllm@{url}").url == url.rstrip("/")


def test_status_with_bad_port_is_one_line_exit_1() -> None:
    proc = procgroup.run(
        [sys.executable, "-m", "console", "status", "--engine", "vllm@http://127.0.0.1:80000", "--json"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "port 80000 is out of range" in proc.stderr

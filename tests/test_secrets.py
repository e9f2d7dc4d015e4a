"""The one secret rule (console.secrets) and the places that use it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from console.config import parse_config
from console.lifecycle.logs import LogBuffer
from console.secrets import (
    MASK,
    LineScrubber,
    Scrubber,
    instance_secrets,
    looks_secret,
    mask_args,
    mask_config,
    scrub,
    secret_values_in_args,
)
from tests import procgroup

HF = "hf_" + "Ab3dEf6hIj9kLm2oPq5sTu8wXy1zAb4dEf"  # the shape of a real user access token
SK = "sk-proj-" + "Zq9Xw8Ve7Ut6Sr5Qp4On3Ml2"


def test_one_rule_for_secret_names() -> None:
    for name in ("HF_TOKEN", "VLLM_API_KEY", "--api-key", "--hf-token", "db_password", "APIKEY", "client-secret",
                 "AWS_SECRET_ACCESS_KEY", "SECRET_KEY"):  # fmt: skip
        assert looks_secret(name), name
    for name in ("--max-num-batched-tokens", "TOKENIZERS_PARALLELISM", "api_key_env", "--tokenizer", "max_tokens",
                 "--return-tokens-as-token-ids", "model"):  # fmt: skip
        assert not looks_secret(name), name


def test_scrub_recognises_secret_shapes_and_spares_ordinary_text() -> None:
    text = (
        f"token={HF} key {SK} Authorization: Bearer abcdef123456 url https://bob:hunter22@hub.example/x "
        "non-default args: {'api_key': ['s3cr3t-v4lue'], 'max_num_batched_tokens': 8192, 'eos_token': '</s>'} "
        "using hf_transfer; --max-num-batched-tokens 8192"
    )
    out = scrub(text)
    for secret in (HF, SK, "abcdef123456", "hunter22", "s3cr3t-v4lue"):
        assert secret not in out
    assert "Authorization: Bearer ****" in out and "https://****@hub.example/x" in out
    assert "'max_num_batched_tokens': 8192" in out and "'eos_token': '</s>'" in out
    assert "hf_transfer" in out and "--max-num-batched-tokens 8192" in out
    assert scrub("the key is plainvalue", ["plainvalue"]) == f"the key is {MASK}"


def test_launch_arguments_one_rule() -> None:
    args = ["--model", "m", "--api-key", "k1", "--hf-token=abc", "HF_TOKEN=xyz", "--max-num-batched-tokens", "8192",
            "--use-auth-token", "--port", "8000"]  # fmt: skip
    assert mask_args(args) == ["--model", "m", "--api-key", MASK, f"--hf-token={MASK}", f"HF_TOKEN={MASK}",
                               "--max-num-batched-tokens", "8192", "--use-auth-token", "--port", "8000"]  # fmt: skip
    assert secret_values_in_args(args) == ["k1", "abc", "xyz"]


def test_config_display_masks_extra_args_like_the_launch_command() -> None:
    doc = {"engines": {"a": {"extra_args": ["--hf-token", "plain-value-1"], "api_key_env": "K", "model": "m",
                             "command": ["x", "--api-key={api_key}"]}}}  # fmt: skip
    shown = mask_config(doc)
    assert shown["engines"]["a"]["extra_args"] == ["--hf-token", MASK]
    assert shown["engines"]["a"]["command"] == ["x", f"--api-key={MASK}"]
    assert shown["engines"]["a"]["api_key_env"] == "K" and shown["engines"]["a"]["model"] == "m"


def test_instance_secrets_are_every_value_the_engine_is_given() -> None:
    cfg = parse_config(
        {"engines": {"a": {"profile": "vllm", "managed": "process", "model": "m", "api_key_env": "K",
                           "env_passthrough": ["HF_TOKEN", "HOME_DIR"], "extra_args": ["--hf-token", "xyz123"]}}},
        "t.toml",
    )  # fmt: skip
    env = {"K": "the-key", "HF_TOKEN": HF, "HOME_DIR": "/home/x"}
    assert set(instance_secrets(cfg.instances[0], env)) == {"the-key", HF, "xyz123"}


def test_log_buffer_scrubs_recognised_tokens_it_was_not_told_about() -> None:
    buf = LogBuffer()
    buf.append(f"downloading with {HF}")
    buf.set_secrets(["known-value"])
    buf.feed(f"headers: Authorization: Bearer {SK}\nargs: known-value\n")
    text = "\n".join(ln.text for ln in buf.lines())
    assert HF not in text and SK not in text and "known-value" not in text
    assert text.count(MASK) == 3


def test_line_scrubber_masks_a_secret_split_across_chunks() -> None:
    ls = LineScrubber(Scrubber(["split-secret-value"]))
    out = ls.feed("first line\nsecond split-sec") + ls.feed("ret-value here\nthird") + ls.flush()
    assert out == f"first line\nsecond {MASK} here\nthird"


def test_config_accepts_env_names_that_merely_contain_token() -> None:
    cfg = parse_config(
        {"engines": {"a": {"profile": "vllm", "managed": "process", "model": "m",
                           "env": {"TOKENIZERS_PARALLELISM": "false"}}}},
        "t.toml",
    )  # fmt: skip
    assert cfg.instances[0].config.env == {"TOKENIZERS_PARALLELISM": "false"}


def test_config_show_masks_extra_args(tmp_path: Path) -> None:
    conf = tmp_path / "config.toml"
    conf.write_text(
        '[engines.a]\nprofile = "vllm"\nmanaged = "process"\nmodel = "m"\n'
        f'extra_args = ["--hf-token", "plain-arg-secret", "--api-key=other-arg-secret", "--note={HF}"]\n'
    )
    env = {**os.environ, "ENGINEDECK_CONFIG_DIR": str(tmp_path)}
    for extra in ([], ["--json"]):
        r = procgroup.run([sys.executable, "-m", "console", "config", "show", *extra, "--config", str(conf)],
                          capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
        assert r.returncode == 0, r.stderr
        for secret in ("plain-arg-secret", "other-arg-secret", HF):
            assert secret not in r.stdout
    doc = json.loads(r.stdout)
    assert doc["engines"]["a"]["extra_args"] == ["--hf-token", MASK, f"--api-key={MASK}", f"--note={MASK}"]


def test_log_buffer_scrubs_a_token_split_across_chunks_and_odd_lines() -> None:
    buf = LogBuffer()
    buf.feed("auth: Bearer abcd")
    buf.feed(f"efgh1234 ok\nkey {SK[:9]}")
    buf.feed(f"{SK[9:]}\n")
    buf.extend(["two\nlines with " + HF, "api_key=plainsecret"])  # a line holding a newline stays one line
    texts = [ln.text for ln in buf.lines()]
    assert texts == ["auth: Bearer **** ok", "key ****", "two\nlines with ****", "api_key=****"]


def test_environment_style_secret_assignments_are_masked_and_tokenizer_settings_are_not() -> None:
    text = ("GITHUB_TOKEN=ghp_plainvalue1 AWS_SECRET_ACCESS_KEY='wJalrXUtnFEMI' DB_PASSWORD=hunter22 "
            "eos_token=</s> pad_token=<pad> TOKENIZERS_PARALLELISM=false MAX_NUM_BATCHED_TOKENS=8192")  # fmt: skip
    out = scrub(text)
    for secret in ("ghp_plainvalue1", "wJalrXUtnFEMI", "hunter22"):
        assert secret not in out
    assert f"GITHUB_TOKEN={MASK}" in out and f"DB_PASSWORD={MASK}" in out
    assert "eos_token=</s> pad_token=<pad> TOKENIZERS_PARALLELISM=false MAX_NUM_BATCHED_TOKENS=8192" in out


def test_counted_scrub_reports_kinds_and_counts_never_values() -> None:
    text = (f"known-value-1 {HF} Authorization: Bearer abcdef123456 https://bob:hunter22@hub.example "
            f"api_key='s3cr3t' GITHUB_TOKEN=ghp_x1y2z3 {SK}\nagain known-value-1 api_key=****")  # fmt: skip
    clean, counts = Scrubber(["known-value-1"]).counted(text)
    assert clean == Scrubber(["known-value-1"])(text)
    assert counts == {"known secret value": 2, "hugging face token": 1, "bearer credential": 1,
                      "password in a url": 1, "secret assignment": 2, "openai-style key": 1}  # fmt: skip
    # Scrubbing what was scrubbed finds nothing new.
    assert Scrubber(["known-value-1"]).counted(clean) == (clean, {})

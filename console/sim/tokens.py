"""Deterministic toy tokenizer and text generator shared by every simulated engine.

Every flavour counts prompt tokens with the same function, so two simulated engines report the same
``usage.prompt_tokens`` for the same prompt (an A/B comparison must see identical work). A token is a
run of word characters or a single punctuation character; generated tokens are whole words with a
leading space, so re-tokenizing generated text gives back exactly ``completion_tokens`` tokens.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Sequence
from typing import Any

import orjson

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")

_WORD_TEXT = """
    the of and to in is was for that on as with by he at from his it an were are which this be or
    has had not first one their its new after who they have her she two been other when there all
    during into school time may years more most only over city some world would where later up such
    used many can state about national out known university united then made also american both
    these since team war year series than film three part group second called while however season
    under well game between born each area around three could early several four high house music
    left including through best following development released those before river same although
    light signal model engine token batch cache prefix queue memory stream latency server request
    window metric counter gauge bucket sample throughput kernel tensor layer block page slot router
    quiet bright simple careful steady rapid gentle brave calm clever eager fair kind proud wise
"""
WORDS: tuple[str, ...] = tuple(dict.fromkeys(_WORD_TEXT.split()))
# JSON-encoded " word" for every word: the streaming hot path pastes these bytes into chunk templates.
WORD_TEXT: tuple[str, ...] = tuple(" " + w for w in WORDS)
WORD_JSON: tuple[bytes, ...] = tuple(orjson.dumps(t) for t in WORD_TEXT)


def tokenize(text: str) -> list[str]:
    """Split text into toy tokens (words and single punctuation marks)."""
    return _TOKEN_RE.findall(text)


def token_ids(tokens: Sequence[str]) -> list[int]:
    """Stable ids (crc32) so prefix hashes agree across processes and flavours."""
    return [zlib.crc32(t.encode()) for t in tokens]


def chat_prompt(messages: Any) -> str:
    """Render chat messages with a fixed toy template (identical for every flavour).

    Raises ValueError for a malformed ``messages`` value.
    """
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    parts: list[str] = []
    for m in messages:
        if not isinstance(m, dict) or "role" not in m:
            raise ValueError("each message needs a role")
        content = m.get("content", "")
        if isinstance(content, list):  # OpenAI content parts: keep the text ones
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        elif content is None:
            content = ""
        elif not isinstance(content, str):
            raise ValueError("message content must be a string or a list of parts")
        parts.append(f"<|{m['role']}|> {content}")
    parts.append("<|assistant|>")
    return "\n".join(parts)


def completion_prompt(prompt: Any) -> str:
    """The text of a /v1/completions prompt (a string or a list with one string)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        return prompt[0]
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return " ".join(f"t{t}" for t in prompt)
    raise ValueError("prompt must be a string")


class TextSource:
    """The words one request generates: a pure function of (seed, prompt), so reruns repeat."""

    __slots__ = ("_rng",)

    def __init__(self, seed: int, prompt_key: int) -> None:
        self._rng = random.Random(seed * 1_000_003 + prompt_key)

    def natural_length(self, cap: int) -> int:
        """Where a natural EOS falls: mostly short answers, sometimes long ones."""
        n = int(self._rng.lognormvariate(4.0, 0.8))  # median ~55 tokens
        return max(1, min(cap, n))

    def next_index(self) -> int:
        return self._rng.randrange(len(WORDS))

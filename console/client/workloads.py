"""Seeded, client-side workloads, generated without a tokenizer.

Prompts are built from common English words, each written with a leading space, so that a word is
one token for typical BPE/SentencePiece vocabularies and exactly one token for the simulator's
toy tokenizer: the prompt length in tokens is predictable without a tokenizer on the client.
The count that matters is the server's ``usage.prompt_tokens``, recorded per request and
compared between engines.

- ``random``: unique random word sequences of ``input_len`` words, ``output_len`` tokens each.
- ``shared-prefix``: SGLang's generated-shared-prefix shape, G groups x P prompts, prompt =
  system prompt of the group (S words) + "\\n\\n" + a question (Q words); smaller defaults than
  SGLang's 64 x 16 x 2048 + 128 so a laptop run finishes. With chat, the system prompt is the
  system message.
- ``file:PATH``: JSONL, one object per line with ``prompt`` (string) or ``messages`` (chat list),
  optional ``output_len``/``max_tokens``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from console.errors import UserError

# Short, frequent words: one token each in Llama/Qwen/Mistral/GPT vocabularies (with a leading space).
WORDS: tuple[str, ...] = tuple(
    """
    time year people way day man thing woman life child world school state family student group country
    problem hand part place case week company system program question work government number night point
    home water room mother area money story fact month lot right study book eye job word business issue
    side kind head house service friend father power hour game line end member law car city community name
    president team minute idea kid body information back parent face others level office door health person
    art war history party result change morning reason research girl guy moment air teacher force education
    foot boy age policy music market sense nation plan college interest death experience effect class control
    care field development role effort rate heart drug show leader light voice wife police mind price report
    decision son view relationship town road arm difference value building action model season society tax
    director position player record paper space ground form event official matter center couple site project
    activity star table need court oil situation cost industry figure street image phone data picture practice
    piece land product doctor wall patient worker news test movie north love support technology step baby
    computer type attention film tree source organization hair window evidence population site training
    """.split()  # noqa: SIM905
)


@dataclass(frozen=True, slots=True)
class Prompt:
    """One request of a workload: text prompt (or chat messages) and output length."""

    id: str
    prompt: str = ""
    messages: tuple[Mapping[str, Any], ...] = ()
    system: str = ""  # shared-prefix: the group's system prompt (chat: sent as the system message)
    input_words: int = 0  # the client's token estimate (one token per word)
    output_len: int | None = None
    group: int | None = None

    def chat_messages(self) -> list[Mapping[str, Any]]:
        if self.messages:
            return list(self.messages)
        msgs: list[Mapping[str, Any]] = []
        if self.system:
            msgs.append({"role": "system", "content": self.system})
        msgs.append({"role": "user", "content": self.prompt})
        return msgs

    def completion_text(self) -> str:
        if self.messages:
            return "\n\n".join(str(m.get("content", "")) for m in self.messages)
        return f"{self.system}\n\n{self.prompt}" if self.system else self.prompt


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    kind: str = "random"  # random | shared-prefix | file
    input_len: int = 128
    output_len: int = 64
    path: str | None = None
    prefix_groups: int = 4
    prefix_ratio: float = 0.75  # shared-prefix: fraction of input_len in the shared system prompt
    range_ratio: float = 0.0  # vLLM convention: lengths uniform in [L(1-r), L(1+r)]
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str, **kw: Any) -> WorkloadSpec:
        if text.startswith("file:"):
            path = text[5:]
            if not path:
                raise UserError("--workload file:PATH needs a path")
            return cls(kind="file", path=path, **kw)
        if text not in ("random", "shared-prefix"):
            raise UserError(f"unknown workload {text!r} (use random, shared-prefix or file:PATH)")
        return cls(kind=text, **kw)

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "input_len": self.input_len, "output_len": self.output_len}
        if self.kind == "shared-prefix":
            d |= {"prefix_groups": self.prefix_groups, "prefix_ratio": self.prefix_ratio}
        if self.kind == "file":
            d["path"] = self.path
        if self.range_ratio:
            d["range_ratio"] = self.range_ratio
        return d


def words(rng: random.Random, n: int) -> str:
    """``n`` random words joined by spaces (n tokens for a word-level tokenizer)."""
    choice = rng.choice
    return " ".join(choice(WORDS) for _ in range(n))


def _length(rng: random.Random, n: int, r: float) -> int:
    if r <= 0:
        return n
    return max(1, rng.randint(int(n * (1 - r)), int(n * (1 + r))))


def generate(spec: WorkloadSpec, count: int, seed: int, *, tag: str = "") -> list[Prompt]:
    """``count`` prompts, deterministic for (spec, count, seed, tag)."""
    rng = random.Random(f"{seed}:{tag}:{spec.kind}")
    if spec.kind == "random":
        out = []
        for i in range(count):
            n = _length(rng, spec.input_len, spec.range_ratio)
            out.append(Prompt(f"{tag}r{i}", words(rng, n), input_words=n, output_len=spec.output_len))
        return out
    if spec.kind == "shared-prefix":
        return _shared_prefix(spec, count, rng, tag)
    if spec.kind == "file":
        return _from_file(spec, count, rng, tag)
    raise UserError(f"unknown workload {spec.kind!r}")


def _shared_prefix(spec: WorkloadSpec, count: int, rng: random.Random, tag: str) -> list[Prompt]:
    groups = max(1, spec.prefix_groups)
    s_len = max(1, round(spec.input_len * spec.prefix_ratio))
    q_len = max(1, spec.input_len - s_len)
    systems = [words(rng, s_len) for _ in range(groups)]
    out = [
        Prompt(
            f"{tag}g{i % groups}q{i // groups}",
            words(rng, q_len),
            system=systems[i % groups],
            input_words=s_len + q_len,
            output_len=spec.output_len,
            group=i % groups,
        )
        for i in range(count)
    ]
    rng.shuffle(out)
    return out


def _from_file(spec: WorkloadSpec, count: int, rng: random.Random, tag: str) -> list[Prompt]:
    assert spec.path is not None
    items = load_jsonl(Path(spec.path))
    out: list[Prompt] = []
    for i in range(count):
        obj = items[i % len(items)]
        out_len = obj.get("output_len", obj.get("max_tokens", spec.output_len))
        msgs = obj.get("messages")
        if isinstance(msgs, list):
            text = " ".join(str(m.get("content", "")) for m in msgs if isinstance(m, dict))
            out.append(Prompt(f"{tag}f{i}", messages=tuple(msgs), input_words=len(text.split()), output_len=out_len))
        else:
            text = str(obj["prompt"])
            out.append(Prompt(f"{tag}f{i}", text, input_words=len(text.split()), output_len=out_len))
    return out


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise UserError(f"{path}: cannot read prompts file: {exc.strerror or exc}") from None
    items: list[dict[str, Any]] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise UserError(f"{path}:{n}: not a JSON object") from None
        usable = isinstance(obj, dict) and (isinstance(obj.get("prompt"), str) or isinstance(obj.get("messages"), list))
        if not usable:
            raise UserError(f'{path}:{n}: each line needs "prompt" (string) or "messages" (list)')
        items.append(obj)
    if not items:
        raise UserError(f"{path}: no prompts in file")
    return items

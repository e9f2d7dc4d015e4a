"""An engine's payloads parsed as changes to the previous one give exactly what a full parse gives,
whatever changes between them, and the shortcut is taken when only values moved."""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import pytest

from console.profiles import load_profiles
from console.telemetry.metrics.normalize import wanted_names
from console.telemetry.metrics.promdelta import ScrapeParser
from console.telemetry.metrics.promtext import ParseResult, parse

SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "samples"
TEXTS = sorted(p for p in SAMPLES.glob("*.txt") if not p.read_text().lstrip().startswith(("[", "{")))
PROFILES = load_profiles()


def _view(r: ParseResult) -> tuple[object, ...]:
    # Values as text: NaN equals itself then.
    fams = [(n, f.name, f.kind, f.help, [(s.name, s.labels, repr(s.value)) for s in f.samples])
            for n, f in r.families.items()]
    created = {k: {lab: repr(v) for lab, v in d.items()} for k, d in r.created.items()}
    return fams, created, r.errors, r.error_count, r.sample_count, r.line_count


def _value_lines(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if line and line[0] not in "# \t" and " " in line]


def _mutate(lines: list[str], rng: random.Random) -> list[str]:
    out = list(lines)
    values = _value_lines(out)
    if not values:
        return out
    i = rng.choice(values)
    head, _, _ = out[i].rpartition(" ")
    kind = rng.randrange(12)
    if kind < 5:  # values only: the common case, many lines at once
        for j in rng.sample(values, k=max(1, len(values) // 8)):
            h, _, _ = out[j].rpartition(" ")
            out[j] = f"{h} {rng.choice([rng.random() * 1e4, float(rng.randrange(100)), 'NaN', '+Inf'])}"
    elif kind == 5:
        out[i] = f"{head} not-a-number"
    elif kind == 6:
        out[i] = out[i].replace('="', '="x', 1) if "{" in out[i] else out[i] + "0"
    elif kind == 7:
        out.insert(i, out[i])  # a line added
    elif kind == 8:
        del out[i]
    elif kind == 9:
        j = rng.choice(values)
        out[i], out[j] = out[j], out[i]
    elif kind == 10:
        t = [k for k, line in enumerate(out) if line.startswith("# TYPE")]
        if t:
            k = rng.choice(t)
            out[k] = out[k].rsplit(" ", 1)[0] + " " + rng.choice(["gauge", "counter", "untyped", "histogram"])
    else:
        out[i] = out[i] + rng.choice([" ", "\r", " 1700000000000"])
    return out


def case_seed(*parts: str) -> int:
    """A seed fixed by the case's name: the same in every process (``hash`` of a string is not), and
    printed by a failing assertion so the sequence can be replayed with ``_check_sequence(..., seed)``."""
    return zlib.crc32("/".join(parts).encode()) & 0xFFFF


def _check_sequence(text: str, wanted: frozenset[str] | None, seed: int, steps: int = 60) -> ScrapeParser:
    rng = random.Random(seed)
    print(f"differential seed={seed}")  # shown with the failure's captured output, or with -s
    parser = ScrapeParser()
    lines = text.split("\n")
    for step in range(steps):
        payload = "\n".join(lines)
        assert _view(parser.parse(payload.encode(), wanted)) == _view(parse(payload, wanted)), (
            f"seed={seed} step={step}: {payload[:200]!r}")
        lines = _mutate(lines, rng) if rng.random() < 0.5 else _mutate(text.split("\n"), rng)
    return parser


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: p.stem)
@pytest.mark.parametrize("profile", ["vllm", "sglang", "llamacpp", "all families"])
def test_equals_a_full_parse_whatever_changes(path: Path, profile: str) -> None:
    wanted = None if profile == "all families" else wanted_names(PROFILES[profile])
    _check_sequence(path.read_text(), wanted, seed=case_seed(path.name, profile))


def test_a_large_payload_under_value_changes_takes_the_shortcut() -> None:
    from prometheus_client import generate_latest

    from console.sim.engines import FLAVOURS, SimOptions

    flavour = FLAVOURS["vllm"](SimOptions(engine="vllm", model="m", data_parallel=4))
    text = generate_latest(flavour.metrics_registry()).decode()
    wanted = wanted_names(PROFILES["vllm"])
    rng = random.Random(7)
    parser = ScrapeParser()
    lines = text.split("\n")
    values = _value_lines(lines)
    assert len(values) > 1000
    for step in range(20):
        payload = "\n".join(lines)
        assert _view(parser.parse(payload, wanted)) == _view(parse(payload, wanted)), step
        for j in rng.sample(values, k=len(values) // 5):
            if not lines[j].split("{")[0].endswith("_created"):
                lines[j] = f"{lines[j].rpartition(' ')[0]} {float(step * 1000 + j)}"
    assert (parser.full_parses, parser.delta_parses) == (1, 19)


def test_a_changed_comment_or_created_line_is_a_full_parse() -> None:
    text = (
        "# HELP vllm:prompt_tokens Prompt tokens.\n# TYPE vllm:prompt_tokens counter\n"
        'vllm:prompt_tokens_total{model_name="m"} 5.0\nvllm:prompt_tokens_created{model_name="m"} 1.7e9\n'
    )
    wanted = wanted_names(PROFILES["vllm"])
    parser = ScrapeParser()
    for payload in (text, text.replace("5.0", "6.0"), text.replace("1.7e9", "1.8e9"),
                    text.replace("Prompt tokens.", "Tokens."), text.replace("counter", "gauge")):
        assert _view(parser.parse(payload, wanted)) == _view(parse(payload, wanted))
    assert (parser.full_parses, parser.delta_parses) == (4, 1)

"""``promlabels.prefill`` (all new label sets of a payload parsed at once) changes nothing but speed:
the parser gives the same families, samples, errors and ``_created`` values with it and without it
(``prefilled=False``: every label set parsed by its own line), on the fuzz test's mutated payloads
and on its large amplified ones, and what it caches is what ``parse_labels`` gives for each text."""

from __future__ import annotations

import random
import time

import pytest

from console.profiles import get_profile
from console.telemetry import promlabels
from console.telemetry.normalize import normalize, sniff_format, wanted_names
from console.telemetry.promtext import ParseResult, clear_caches, parse
from tests.telemetry import test_fuzz as fuzz


def _seen(r: ParseResult) -> str:
    """Everything a parse gave, as text (NaN equals NaN in a repr)."""
    fams = [(n, f.kind, f.help, f.samples) for n, f in r.families.items()]
    return repr((fams, r.errors, r.error_count, r.sample_count, r.line_count, r.created))


def _both(payload: bytes, wanted: frozenset[str] | None) -> tuple[str, str]:
    clear_caches()
    with_prefill = _seen(parse(payload, wanted))
    clear_caches()
    return with_prefill, _seen(parse(payload, wanted, prefilled=False))


def test_mutated_payloads_parse_the_same_with_and_without_prefill() -> None:
    corpus = fuzz._corpus()
    rng = random.Random(20260601)
    mutator = fuzz.Mutator(rng, corpus)
    for i in range(1500):
        profile, base = rng.choice(corpus.payloads)
        payload = mutator.mutate(base)
        wanted = None if i % 2 else wanted_names(get_profile(profile))
        got, expected = _both(payload, wanted)
        assert got == expected, f"payload #{i} ({profile}): {payload[:200]!r}"


def test_large_fuzz_inputs_parse_and_normalise_the_same_with_and_without_prefill() -> None:
    corpus = fuzz._corpus()
    rng = random.Random(f"{fuzz.SEED}/0")
    mutator = fuzz.Mutator(rng, corpus)
    for i in range(6):
        name, amplified, mutated = fuzz.large_input(rng, mutator)
        profile = get_profile(name)
        for payload in (amplified, mutated):
            for wanted in (None, wanted_names(profile)):
                got, expected = _both(payload, wanted)
                assert got == expected, f"large input #{i} ({name}, {len(payload)} bytes)"
            if sniff_format(payload) != "prometheus":
                continue  # trtllm-serve's JSON: no label texts
            clear_caches()
            reference = normalize(profile, parse(payload, wanted_names(profile), prefilled=False))
            clear_caches()
            reading = normalize(profile, payload, full=False)
            assert repr(reading.models) == repr(reference.models)
            assert (reading.resolved, reading.missing, reading.errors) == (
                reference.resolved, reference.missing, reference.errors)  # fmt: skip


def test_prefill_caches_what_parse_labels_gives() -> None:
    texts = [f'replica="{i}",model_name="m"' for i in range(50)] + [
        f'model_name="m",engine="{i}",le="{i / 10}"' for i in range(50)
    ] + ['a="1",a="2"', 'a="unterminated', 'x="1" y="2"', 'b="x\\"y"', "", " ", 'le="+Inf"', 'le="1"']
    payload = "\n".join(f"m{{{t}}} 1" for t in texts)
    promlabels.clear_caches()
    promlabels.prefill(payload)
    cached = {t: promlabels.cached(t) for t in texts if promlabels.cached(t) is not None}
    assert len(cached) >= 100  # the two families' label sets, at least
    promlabels.clear_caches()
    for text, labels in cached.items():
        assert promlabels.parse_labels(text) == labels, text
    for text in texts:
        if text not in cached and "unterminated" not in text and " y=" not in text:
            promlabels.parse_labels(text)  # left to its line: still a valid label set


@pytest.mark.parametrize("line", ["x" + "{" * 2_000_000 + " 1", "x{" + "a" * 2_000_000 + "{" * 2000])
def test_prefill_is_linear_on_a_line_of_many_braces(line: str) -> None:
    start = time.process_time()
    promlabels.prefill(line + "\n" + line)
    elapsed = time.process_time() - start
    assert elapsed < 1.0, f"{elapsed:.2f} s"  # a failed match ends at the next '{' (~0.1 s here)

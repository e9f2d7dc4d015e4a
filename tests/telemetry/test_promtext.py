"""The Prometheus text parser: format details, leniency, filtering, and that it never raises."""

from __future__ import annotations

import collections
import math
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from console.telemetry.metrics.promtext import ParseResult, Sample, parse, parse_labels
from tests.telemetry import synth


def _values(text: str | bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    res = parse(text)
    return {(s.name, s.labels): s.value for f in res.families.values() for s in f.samples}


def test_names_with_colons_help_type_and_labels() -> None:
    text = synth.simple("vllm:num_requests_running", "gauge",
                        [({"model_name": "m", "engine": "0"}, 3.0)], "Number of running requests.")  # fmt: skip
    res = parse(text)
    assert res.errors == []
    fam = res.families["vllm:num_requests_running"]
    assert fam.kind == "gauge"
    assert fam.help == "Number of running requests."
    assert fam.samples[0].labels == (("engine", "0"), ("model_name", "m"))  # sorted by label name
    assert fam.samples[0].value == 3.0


def test_special_values_exponents_and_timestamps() -> None:
    text = 'a +Inf\nb -Inf\nc NaN\nd 8.128902e+06\ne 1 1700000000000\nf{x="y"} -2.5e-3 1700000000000\n'
    vals = _values(text)
    assert vals[("a", ())] == math.inf
    assert vals[("b", ())] == -math.inf
    assert math.isnan(vals[("c", ())])
    assert vals[("d", ())] == 8128902.0
    assert vals[("e", ())] == 1.0
    assert vals[("f", (("x", "y"),))] == -0.0025


def test_label_escapes_commas_and_braces_inside_values() -> None:
    line = 'm{path="C:\\\\dir",quote="say \\"hi\\"",nl="a\\nb",odd="x,}{y"} 1\n'
    res = parse(line)
    assert res.errors == []
    assert dict(res.families["m"].samples[0].labels) == {
        "path": "C:\\dir", "quote": 'say "hi"', "nl": "a\nb", "odd": "x,}{y"}  # fmt: skip
    assert parse_labels('a="1",') == (("a", "1"),)  # trailing comma is legal
    assert parse_labels("") == ()


def test_created_series_are_skipped_by_default() -> None:
    text = synth.simple("vllm:prompt_tokens_total", "counter", [({"model_name": "m"}, 5.0)], created=True)
    text += synth.histogram("vllm:e2e_request_latency_seconds",
                            [({"model_name": "m"}, [(1.0, 1.0), (math.inf, 2.0)], 3.5)])  # fmt: skip
    res = parse(text)
    assert not any(n.endswith("_created") for n in res.families)
    assert res.sample_count == 1 + 4
    kept = parse(text, keep_created=True)
    assert "vllm:prompt_tokens_created" in kept.families
    assert kept.sample_count == 1 + 4 + 2


def test_histogram_summary_and_untyped() -> None:
    text = (
        synth.histogram("h", [({"k": "v"}, [(0.1, 1.0), (math.inf, 3.0)], 0.9)], created=False)
        + '# TYPE s summary\ns{quantile="0.5"} 0.2\ns_sum 4.0\ns_count 10\n'
        + 'u_bucket{le="1"} 1\nu_bucket{le="+Inf"} 2\nu_count 2\nplain 7\n'
    )
    res = parse(text)
    assert res.errors == []
    assert [s.name for s in res.families["h"].samples] == ["h_bucket", "h_bucket", "h_count", "h_sum"]
    assert res.families["s"].kind == "summary"
    assert len(res.families["s"].samples) == 3
    # No TYPE line: X_bucket{le} groups as an inferred histogram, X_count joins it.
    assert res.families["u"].kind == "histogram"
    assert [s.name for s in res.families["u"].samples] == ["u_bucket", "u_bucket", "u_count"]
    assert res.families["plain"].kind == "untyped"


def test_tgi_counter_named_count_stays_a_counter() -> None:
    text = "# TYPE tgi_request_count counter\ntgi_request_count 12\n"
    res = parse(text)
    assert res.families["tgi_request_count"].kind == "counter"
    assert res.families["tgi_request_count"].samples[0].value == 12


def test_malformed_lines_are_reported_with_line_numbers_and_skipped() -> None:
    text = "\n".join([
        "# TYPE ok gauge",
        "ok 1",
        "...",
        'cut{model_name="meta-llama/Llama-3.1-8B-Instru',
        'bad{a="1",...} 1.0',
        "novalue",
        "ok2 abc",
        "ok3 1 2 3",
        "# TYPE weird flavour",
        "ok4 4",
    ])  # fmt: skip
    res = parse(text)
    assert {(s.name, s.value) for f in res.families.values() for s in f.samples} == {("ok", 1.0), ("ok4", 4.0)}
    lines = [e.split(":", 1)[0] for e in res.errors]
    assert lines == ["line 3", "line 4", "line 5", "line 6", "line 7", "line 8", "line 9"]
    assert res.error_count == 7
    assert "unterminated label set" in res.errors[1]
    assert "missing value" in res.errors[3]


def test_invalid_utf8_is_replaced_and_reported() -> None:
    res = parse(b'm{a="caf\xe9"} 1\n')
    assert "invalid UTF-8" in res.errors[0]
    assert res.families["m"].samples[0].labels == (("a", "caf\ufffd"),)


def test_crlf_tabs_and_indentation() -> None:
    res = parse('# TYPE g gauge\r\ng{a="b"}\t2\r\n  h 3  \r\n')
    assert res.errors == []
    assert _values('# TYPE g gauge\r\ng{a="b"}\t2\r\n  h 3  \r\n') == {("g", (("a", "b"),)): 2.0, ("h", ()): 3.0}


def test_wanted_filter_keeps_only_those_families_and_their_children() -> None:
    text = (
        synth.simple("vllm:num_requests_running", "gauge", [({"model_name": "m"}, 2.0)])
        + synth.simple("vllm:num_requests_waiting", "gauge", [({"model_name": "m"}, 1.0)])
        + synth.histogram(
            "vllm:time_to_first_token_seconds", [({"model_name": "m"}, [(1.0, 1.0), (math.inf, 1.0)], 0.5)]
        )
        + "garbage line that would be an error\n"
    )
    res = parse(text, {"vllm:num_requests_running", "vllm:time_to_first_token_seconds"})
    assert set(res.families) == {"vllm:num_requests_running", "vllm:time_to_first_token_seconds"}
    assert len(res.families["vllm:time_to_first_token_seconds"].samples) == 4
    assert res.errors == []  # unwanted lines are skipped unchecked


def test_matches_prometheus_client_on_its_own_output() -> None:
    reg = CollectorRegistry()
    c = Counter("vllm:generation_tokens", "gen", ["model_name", "engine"], registry=reg)
    g = Gauge("vllm:kv_cache_usage_perc", 'usage "frac"\\', ["model_name"], registry=reg)
    h = Histogram("vllm:e2e_request_latency_seconds", "e2e", ["model_name"], buckets=[0.3, 1.0, 7680.0], registry=reg)
    c.labels('we"ird\\name\n', "0").inc(27453)
    g.labels("m").set(0.25)
    for v in (0.1, 0.5, 2.0, 9000.0):
        h.labels("m").observe(v)
    text = generate_latest(reg).decode()
    theirs = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if not s.name.endswith("_created")
    }
    assert _values(text) == theirs
    assert parse(text).families["vllm:kv_cache_usage_perc"].help == 'usage "frac"\\'


_NAME = st.from_regex(r"[a-z_:][a-z0-9_:]{0,12}", fullmatch=True)
_LVAL = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12)
_VALID_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def _samples(res: ParseResult) -> list[Sample]:
    return [x for f in res.families.values() for x in f.samples]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    res = parse(data)
    try:
        text, bad_utf8 = data.decode("utf-8"), False
    except UnicodeDecodeError:
        text, bad_utf8 = data.decode("utf-8", "replace"), True
    lines = text.split("\n")
    assert res.line_count == len(lines)
    # Invalid UTF-8 is reported first, and only when the bytes really are invalid.
    assert (res.errors[:1] != [] and res.errors[0].startswith("payload: invalid UTF-8")) == bad_utf8
    # The counters agree with what was kept: every kept sample is counted and well-formed.
    samples = _samples(res)
    assert res.sample_count == len(samples)
    assert all(_VALID_NAME.fullmatch(x.name) and type(x.value) is float for x in samples)
    # A line yields at most one outcome (a sample or an error); each listed error names its line.
    assert res.sample_count + res.error_count - bad_utf8 <= sum(1 for line in lines if line)
    assert len(res.errors) == min(res.error_count, 50) + (res.error_count > 50)
    assert all(e.startswith(("line ", "payload: ")) for e in res.errors[:50])


# Noise without the letters of HELP/TYPE or "_created" (H L P T Y r t d): comments are plain and no
# line is routed to ``created``, so each line's outcome is exactly "blank/comment", "sample" or "error".
_NOISE_LINE = st.text(alphabet=st.sampled_from(list('abc_:{}="\\,# +-.0123456789eEInfNa\t')), max_size=40)
_PLAIN_NAME = st.from_regex(r"[abc_:][abc_:0-9]{0,8}", fullmatch=True)
_WANTED = {"a", "b_c"}
_WANTED_NAMES = {n + s for n in _WANTED for s in ("", "_bucket", "_sum", "_count")}
Expected = tuple[str, tuple[tuple[str, str], ...], float] | None


@st.composite
def _line(draw: st.DrawFn) -> tuple[str, Expected]:
    """A line and the sample it must give (None: noise, which may give a sample or an error)."""
    if draw(st.booleans()):
        return draw(_NOISE_LINE), None
    name = draw(st.one_of(_PLAIN_NAME, st.sampled_from(sorted(_WANTED))))
    lab = draw(st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True), _LVAL, max_size=3))
    value = draw(st.floats())
    return f"{name}{synth.labels(lab)} {synth.fmt(value)}", (name, tuple(sorted(lab.items())), value)


@settings(max_examples=300, deadline=None)
@given(st.lists(_line(), max_size=12), st.sampled_from(["\n", "\r\n"]))
def test_never_raises_on_prometheus_like_text(lines: list[tuple[str, Expected]], eol: str) -> None:
    text = eol.join(line for line, _ in lines)
    res = parse(text)
    samples = _samples(res)
    assert res.sample_count == len(samples)
    # Every non-blank, non-comment line either became a sample or was reported.
    content = [line.strip() for line, _ in lines]
    assert res.sample_count + res.error_count == sum(1 for c in content if c and not c.startswith("#"))
    assert len(res.errors) == min(res.error_count, 50) + (res.error_count > 50)
    # Every well-formed line is among the samples, whatever noise surrounds it.
    got = collections.Counter(repr((x.name, x.labels, x.value)) for x in samples)
    want = collections.Counter(repr(e) for _, e in lines if e is not None)
    assert not want - got, want - got
    # With ``wanted``, exactly the samples of the wanted names come back, the same as in a full parse.
    only = parse(text, _WANTED)
    assert sorted(repr((x.name, x.labels, x.value)) for x in _samples(only)) == sorted(
        repr((x.name, x.labels, x.value)) for x in samples if x.name in _WANTED_NAMES
    )
    assert only.error_count <= res.error_count


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            _NAME,
            st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True), _LVAL, max_size=3),
            st.floats(allow_nan=False),
        ),
        min_size=1,
        max_size=20,
    ),
    st.integers(min_value=0, max_value=40),
    st.sampled_from(["...", 'x{a="1"', "1abc 2", "name value", "m{=} 1", 'n{a="b"} 1 2 3']),
)
def test_valid_lines_survive_an_inserted_malformed_line(
    samples: list[tuple[str, dict[str, str], float]], at: int, garbage: str
) -> None:
    lines = [f"{n}{synth.labels(lab)} {synth.fmt(v)}" for n, lab, v in samples]
    pos = min(at, len(lines))
    lines.insert(pos, garbage)
    res = parse("\n".join(lines))
    assert res.error_count == 1
    assert res.errors[0].startswith(f"line {pos + 1}:")
    got = [(s.name, s.labels, s.value) for f in res.families.values() for s in f.samples]
    want = [(n, tuple(sorted(lab.items())), v) for n, lab, v in samples]
    assert sorted(got, key=repr) == sorted(want, key=repr)


def test_openmetrics_style_counter_family_holds_its_total_sample() -> None:
    text = (
        "# TYPE vllm:prompt_tokens counter\n"
        'vllm:prompt_tokens_total{model_name="m"} 5.0\n'
        'vllm:prompt_tokens_created{model_name="m"} 1.7e9\n'
        "# EOF\n"
    )
    res = parse(text)
    assert res.errors == []
    fam = res.families["vllm:prompt_tokens"]
    assert fam.kind == "counter"
    assert [(s.name, s.value) for s in fam.samples] == [("vllm:prompt_tokens_total", 5.0)]
    assert [s.value for s in res.samples_named("vllm:prompt_tokens_total")] == [5.0]

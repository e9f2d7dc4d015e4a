"""Label parsing is linear in the size of the label text: megabytes of labels (one engine's bad
exporter) parse in well under a second per MB and mean what they say; in a payload, a label set
over 64 KiB is a malformed line, found without parsing it."""

from __future__ import annotations

import time

import pytest

from console.telemetry.metrics import promtext


def _labels(n_bytes: int) -> tuple[str, int]:
    n = n_bytes // 20
    return ",".join(f'l{i:06d}="v{i:08d}"' for i in range(n)), n  # 20 bytes per label with its comma


@pytest.mark.parametrize("mb", [1, 4])
def test_megabytes_of_labels_parse_in_linear_time(mb: int) -> None:
    text, n = _labels(mb * 1024 * 1024)
    promtext._LABEL_CACHE.clear()
    start = time.perf_counter()
    labels = promtext.parse_labels(text)
    elapsed = time.perf_counter() - start
    assert len(labels) == n and labels[0] == ("l000000", "v00000000") and labels[-1][0] == f"l{n - 1:06d}"
    # Slicing the rest of the text per label took 2.4 s for 1 MB and over 40 s for 4 MB here;
    # linear parsing takes ~0.1 s per MB. The bound is loose for a busy 2-core CI machine.
    assert elapsed < 1.0 * mb, f"{mb} MB of labels took {elapsed:.2f} s"


def test_huge_label_texts_are_not_cached() -> None:
    text, _ = _labels(256 * 1024)
    promtext._LABEL_CACHE.clear()
    promtext.parse_labels(text)
    assert not promtext._LABEL_CACHE  # one-off giant label sets would pin megabytes each


def test_a_label_set_over_the_limit_is_a_malformed_line_found_fast() -> None:
    text, _ = _labels(8 * 1024 * 1024)
    payload = f'vllm:num_requests_running{{model_name="m"}} 3\nvllm:num_requests_running{{{text}}} 1\n'
    start = time.perf_counter()
    result = promtext.parse(payload)
    elapsed = time.perf_counter() - start
    assert result.sample_count == 1 and result.error_count == 1
    assert "line 2: label set longer than 64 KiB" in result.errors[0]
    assert elapsed < 0.5, f"{elapsed:.2f} s"  # a few scans of the line, no parsing (~0.02 s here)
    kept, _ = _labels(60 * 1024)
    assert promtext.parse(f"x{{{kept}}} 1\n").sample_count == 1  # under the limit: a series


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('a="1",b="2"', (("a", "1"), ("b", "2"))),
        ('a="1",b="2",', (("a", "1"), ("b", "2"))),
        (' a = "1" , b="x\\"y"  ', (("a", "1"), ("b", 'x"y'))),
        ("", ()),
        ("   ", ()),
    ],
)
def test_label_sets_still_parse(text: str, expected: tuple[tuple[str, str], ...]) -> None:
    assert promtext.parse_labels(text) == expected


@pytest.mark.parametrize("text", ['a="1" b="2"', 'a="1",,b="2"', 'a=1', 'a="1', '="1"', 'a="1",  x'])
def test_malformed_label_sets_still_raise(text: str) -> None:
    with pytest.raises(ValueError):
        promtext.parse_labels(text)


def test_a_fault_far_into_a_huge_label_set_is_found() -> None:
    text, _ = _labels(1024 * 1024)
    broken = text.replace('l040000="v00040000"', 'l040000="v00040000" l040001x="1"')
    with pytest.raises(ValueError, match="malformed label set"):
        promtext.parse_labels(broken)

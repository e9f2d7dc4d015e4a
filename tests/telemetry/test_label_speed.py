"""Label parsing is linear in the size of the label text: a payload with megabytes of labels (one
engine's bad exporter) parses in well under a second per MB, and means what it says."""

from __future__ import annotations

import time

import pytest

from console.telemetry import promtext


def _huge_label_line(n_bytes: int) -> tuple[str, int]:
    n = n_bytes // 20
    labels = ",".join(f'l{i:06d}="v{i:08d}"' for i in range(n))  # 20 bytes per label with its comma
    return "vllm:num_requests_running{" + labels + "} 1\n", n


@pytest.mark.parametrize("mb", [1, 4])
def test_megabytes_of_labels_parse_in_linear_time(mb: int) -> None:
    line, n = _huge_label_line(mb * 1024 * 1024)
    promtext._LABEL_CACHE.clear()
    start = time.perf_counter()
    result = promtext.parse(line)
    elapsed = time.perf_counter() - start
    assert result.error_count == 0 and result.sample_count == 1
    labels = result.families["vllm:num_requests_running"].samples[0].labels
    assert len(labels) == n and labels[0] == ("l000000", "v00000000") and labels[-1][0] == f"l{n - 1:06d}"
    # Quadratic slicing took 2.4 s for 1 MB and over 40 s for 4 MB here; linear parsing takes
    # ~0.1 s per MB. The bound is loose for a busy 2-core CI machine.
    assert elapsed < 1.0 * mb, f"{mb} MB of labels took {elapsed:.2f} s"


def test_huge_label_texts_are_not_cached() -> None:
    line, _ = _huge_label_line(256 * 1024)
    promtext._LABEL_CACHE.clear()
    promtext.parse(line)
    assert not promtext._LABEL_CACHE  # one-off giant label sets would pin megabytes each


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
    line, _ = _huge_label_line(1024 * 1024)
    broken = line.replace('l040000="v00040000"', 'l040000="v00040000" l040001x="1"')
    result = promtext.parse(broken)
    assert result.sample_count == 0 and result.error_count == 1 and "malformed label set" in result.errors[0]

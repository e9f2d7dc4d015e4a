"""Label-set parsing on megabytes of labels (one engine's broken exporter), and what a payload with
such a label set costs.

- ``promtext.parse_labels`` on 1 MB and 4 MB of ``name="value"`` pairs (linear; slicing the rest
  of the text per label once made these 2.4 s and over 40 s);
- ``promtext.parse`` of a payload whose label set is over the 64 KiB limit (a malformed line,
  found without parsing the labels).

Run: ``.venv/bin/python benchmarks/label_parse.py``. Prints wall and CPU time; asserts nothing.
"""

from __future__ import annotations

import time

from console.telemetry.metrics import promtext


def labels(n_bytes: int) -> str:
    return ",".join(f'l{i:06d}="v{i:08d}"' for i in range(n_bytes // 20))  # 20 bytes per label


def timed(fn: object, *args: object) -> tuple[float, float]:
    assert callable(fn)
    promtext._LABEL_CACHE.clear()
    wall, cpu = time.perf_counter(), time.thread_time()
    fn(*args)
    return time.perf_counter() - wall, time.thread_time() - cpu


def main() -> None:
    for mb in (1, 4):
        text = labels(mb * 1024 * 1024)
        wall, cpu = timed(promtext.parse_labels, text)
        print(f"parse_labels, {mb} MB of labels ({len(text):,} bytes): {wall:.3f} s wall, {cpu:.3f} s CPU")
    text = labels(8 * 1024 * 1024)
    payload = f'vllm:num_requests_running{{model_name="m"}} 3\nvllm:num_requests_running{{{text}}} 1\n'
    wall, cpu = timed(promtext.parse, payload)
    print(f"parse, payload with an 8 MB label set (rejected as over 64 KiB): {wall:.3f} s wall, {cpu:.3f} s CPU")


if __name__ == "__main__":
    main()

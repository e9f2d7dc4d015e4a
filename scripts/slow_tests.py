"""Write tests/slow_tests.txt from a pytest JUnit XML report: every test function whose cases took
together at least --threshold seconds. tests/conftest.py marks those functions `slow`, and
`make check` leaves them to `make test` so that the fast tier stays under three minutes.

    .venv/bin/pytest -m 'not docker and not llamacpp and not ssh and not prometheus and not promtool \
        and not kubectl' --junitxml=report.xml
    .venv/bin/python scripts/slow_tests.py report.xml --machine "2 shared vCPUs, load 2-3" > tests/slow_tests.txt
"""

from __future__ import annotations

import argparse
import datetime
import xml.etree.ElementTree as ET
from collections import defaultdict


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", help="pytest --junitxml report of a run of the service-free tests")
    ap.add_argument("--threshold", type=float, default=1.0, help="seconds per test function (default 1.0)")
    ap.add_argument("--machine", required=True, help="where the report was made, for the file's header")
    args = ap.parse_args()
    seconds: defaultdict[str, float] = defaultdict(float)
    for case in ET.parse(args.report).iter("testcase"):
        function = case.get("classname", "").replace(".", "/") + ".py::" + case.get("name", "").split("[")[0]
        seconds[function] += float(case.get("time", "0"))
    slow = sorted(f for f, s in seconds.items() if s >= args.threshold)
    rest = sum(s for f, s in seconds.items() if f not in slow)
    print(f"# Test functions that took {args.threshold:g} s or more (all their cases together), marked `slow` by")
    print("# tests/conftest.py and left out of `make check`. Made by scripts/slow_tests.py on")
    print(f"# {datetime.date.today().isoformat()}, {args.machine}: {len(slow)} functions, "
          f"{sum(seconds[f] for f in slow):.0f} s; the others {rest:.0f} s.")
    for function in slow:
        print(function)


if __name__ == "__main__":
    main()

"""No test skips because an import is missing: a missing dependency must fail the run, loudly.

The README promises that nothing is skipped silently; services opt out only through
ENGINEDECK_SKIP_DOCKER / ENGINEDECK_SKIP_LLAMACPP (tests/integration/conftest.py). Optional test
dependencies live in the ``dev`` extra and are imported plainly.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# Written in two parts so this file does not match itself.
_FORBIDDEN = re.compile("import" + r"orskip\s*\(")


def test_no_test_skips_on_a_missing_import() -> None:
    offenders = [
        f"{path.relative_to(TESTS.parent)}:{lineno}: {line.strip()}"
        for path in sorted(TESTS.rglob("*.py"))
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _FORBIDDEN.search(line)
    ]
    assert not offenders, "import it plainly (add it to the dev extra) instead of skipping:\n" + "\n".join(offenders)

"""docs/engines.md's supported-versions table says what the profiles and the version matrix say: per
engine, the versions the matrix serves, the metrics endpoint, every canonical metric the profile
maps and, of the headline figures, those it does not."""

from __future__ import annotations

from pathlib import Path

from console.profiles import CANONICAL, load_profiles
from tests.versions.declared import TARGETS

DOC = Path(__file__).resolve().parents[1] / "docs" / "engines.md"
HEADLINE = ("kv_usage", "cached_prompt_tokens", "preemptions", "requests_finished", "ttft", "itl", "tpot",
            "queue_time", "prefill_time")


def _rows() -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 5 and cells[0] not in ("Engine", "---"):
            rows[cells[0]] = cells[1:]
    return rows


def _names(cell: str) -> list[str]:
    return [] if cell == "—" else [n.strip() for n in cell.split(",")]


def test_supported_versions_table_matches_the_profiles_and_the_matrix() -> None:
    profiles = load_profiles()
    rows = _rows()
    assert set(rows) == {p.display_name for p in profiles.values()}
    for profile in profiles.values():
        versions, endpoint, read, absent = rows[profile.display_name]
        assert versions == ", ".join(t.version for t in TARGETS.values() if t.engine == profile.name), profile.name
        assert endpoint == f"`{profile.metrics.path}`", profile.name
        assert _names(read) == [c for c in CANONICAL if c in profile.metrics.map], profile.name
        assert _names(absent) == [c for c in HEADLINE if c not in profile.metrics.map], profile.name

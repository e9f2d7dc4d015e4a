"""The front door stays true: README's links and pictures lead somewhere, README stays short, and the
architecture page lists exactly the packages on disk and names only modules that exist (it is the
next engineer's first map of the tree)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONSOLE = ROOT / "console"
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def _broken_links(doc: Path) -> list[str]:
    broken = []
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # http(s)://, mailto: - not checked offline
            continue
        file_part, _, anchor = target.partition("#")
        path = (doc.parent / file_part).resolve() if file_part else doc
        if not path.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and anchor not in _anchors(path):
            broken.append(f"{target} (no such heading)")
    return broken


def test_every_link_of_readme_and_docs_leads_somewhere() -> None:
    problems = {doc.relative_to(ROOT).as_posix(): _broken_links(doc) for doc in DOCS if doc.exists()}
    assert "README.md" in problems and LINK.findall((ROOT / "README.md").read_text())  # links were read
    assert {k: v for k, v in problems.items() if v} == {}


def test_readme_is_short_and_starts_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail to docs/"
    first_screen = "\n".join(lines[:40])
    assert "make demo" in first_screen and "make test" in first_screen
    pictures = re.findall(r"!\[[^\]]*\]\((docs/images/[\w-]+\.svg)\)", "\n".join(lines))
    assert len(pictures) == 4, pictures


def _packages_on_disk() -> set[str]:
    return {p.parent.relative_to(ROOT).as_posix() + "/" for p in CONSOLE.rglob("__init__.py")}


def _architecture() -> str:
    return (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def test_the_architecture_page_lists_every_package_and_no_other() -> None:
    table = re.findall(r"^\| `(console/[\w/]*)` \|", _architecture(), re.MULTILINE)
    assert len(table) == len(set(table)), "a package is listed twice"
    on_disk = _packages_on_disk()
    assert len(on_disk) > 10  # the walk found the packages
    assert set(table) == on_disk, (f"missing from docs/architecture.md: {sorted(on_disk - set(table))}; "
                                   f"listed but not on disk: {sorted(set(table) - on_disk)}")


def _exists(ref: str) -> bool:
    ref = ref.rstrip("/")
    if (ROOT / ref).exists():
        return True
    # Paths inside the package are written without the leading console/ (`lifecycle/manager.py`), and
    # a module alone by its file name (`hub.py`): it must then exist somewhere in the package.
    return (CONSOLE / ref).exists() or any(CONSOLE.rglob(ref))


def test_every_module_the_architecture_page_names_exists() -> None:
    refs = {r for r in re.findall(r"`([\w/.-]+(?:\.py|/))`", _architecture()) if not r.startswith("tests/")}
    assert len(refs) > 30, refs  # the page really was read
    missing = sorted(r for r in refs if not _exists(r))
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"


def test_the_link_checker_finds_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading\n")
    doc = tmp_path / "doc.md"
    doc.write_text("[ok](there.md#a-heading) [gone](missing.md) [bad](there.md#nope) [web](https://x.org/y)\n")
    assert _broken_links(doc) == ["missing.md (no such file)", "there.md#nope (no such heading)"]

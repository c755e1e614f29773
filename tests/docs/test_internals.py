"""docs/internals.md maps every module of the clients, the coordinators, the log-dir plumbing
and replication to what it holds and the Kafka class it mirrors: a module added without a
row, or a row naming a module that is gone, fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("clients", "coordinator", "logdir", "replication")


def mapped_modules(text: str) -> set[str]:
    """``package/module.py`` for each module a row of the table names (a row may name
    several: ``coordinator/records.py`, `schema.py``, the later ones in the first's package)."""
    found = set()
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        names = re.findall(r"`([\w/]+\.py)`", first)
        package = names[0].split("/")[0] if names and "/" in names[0] else None
        found.update(n if "/" in n else f"{package}/{n}" for n in names)
    return found


def test_every_module_has_a_row_and_every_row_a_module():
    text = (ROOT / "docs" / "internals.md").read_text(encoding="utf-8")
    modules = {f"{p}/{m.name}" for p in PACKAGES for m in (ROOT / "pylog" / p).glob("*.py") if m.name != "__init__.py"}
    mapped = mapped_modules(text)
    assert sorted(modules - mapped) == [], "modules without a row in docs/internals.md"
    assert sorted(mapped - modules) == [], "rows of docs/internals.md naming no module"


def test_a_row_may_name_several_modules_of_one_package():
    assert mapped_modules("| `logdir/per_root.py`, `wakeup.py` | ... | ... |\n| other |") == {
        "logdir/per_root.py", "logdir/wakeup.py"}

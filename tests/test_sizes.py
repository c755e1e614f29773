"""Size limits that keep the clients, coordinators and replication split along Kafka's lines
(one concept per module, as Kafka's KafkaConsumer / Fetcher / ConsumerCoordinator are), and
the partition log's ``Log`` a facade over its parts: a module or class past its limit fails
here, naming it and its length."""

from __future__ import annotations

import ast
from pathlib import Path

PYLOG = Path(__file__).resolve().parent.parent / "pylog"

#: Packages whose modules stay under MODULE_LINES and whose classes under CLASS_LINES.
SPLIT_PACKAGES = ("clients", "coordinator", "replication")
MODULE_LINES, CLASS_LINES = 450, 300
#: ``Log`` composes LocalLog, LogOffsets, ProducerStateManager and its views; its module stays short.
LOG_MODULE_LINES = 400


def oversized(paths, module_lines: int, class_lines: int, root: Path = PYLOG.parent) -> list[str]:
    """``path: N lines`` for each module over ``module_lines`` and ``path: class C: N lines``
    for each class over ``class_lines``."""
    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > module_lines:
            found.append(f"{path.relative_to(root)}: {lines} lines (limit {module_lines})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > class_lines:
                found.append(f"{path.relative_to(root)}: class {node.name}: "
                             f"{node.end_lineno - node.lineno + 1} lines (limit {class_lines})")
    return found


def test_client_coordinator_and_replication_modules_and_classes_stay_small():
    paths = sorted(p for package in SPLIT_PACKAGES for p in (PYLOG / package).rglob("*.py"))
    assert len(paths) > 20
    found = oversized(paths, MODULE_LINES, CLASS_LINES)
    assert not found, "\n".join(found)


def test_the_log_module_stays_a_facade():
    found = oversized([PYLOG / "log" / "log.py"], LOG_MODULE_LINES, class_lines=LOG_MODULE_LINES)
    assert not found, "\n".join(found)


def test_the_size_check_finds_a_long_class(tmp_path):
    long_class = tmp_path / "pylog" / "clients" / "big.py"
    long_class.parent.mkdir(parents=True)
    long_class.write_text("class Big:\n" + "    x = 1\n" * 12)
    assert oversized([long_class], module_lines=100, class_lines=10, root=tmp_path) == [
        "pylog/clients/big.py: class Big: 13 lines (limit 10)"]

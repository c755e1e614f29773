"""``python -m pylog.spark.jvm.plan``: the JVM reader's planning, done by the Python planner.

A long-lived process (one per Spark driver, so a query pays no Python start): each line on
stdin is a request ``{"options": {...}, "pruned": {...}}`` (the query's options, the bounds
of pushed filters); each reply is one line, ``{"root", "committed", "failOnDataLoss",
"ranges": [[topic, partition, start, end], ...]}``, or ``{"error": message}`` for bad
options or offsets. A request ``{"check": path}`` (at ``load()``) is answered ``{}`` when
``path`` is a log dir to read, else with the error. It ends when stdin closes. One option parser and one range planner
serve both readers (docs/spark.md).
"""

from __future__ import annotations

import json
import sys

from pylog.errors import PylogError
from pylog.spark.options import parse_read_options
from pylog.spark.plan import plan_ranges, prune_ranges, require_log_dir


def plan_request(request: dict) -> dict:
    """The reply for one request (see the module docstring)."""
    if "check" in request:
        require_log_dir(request["check"])
        return {}
    opts = parse_read_options(request["options"])
    pruned = dict(request.get("pruned") or {})
    for key in ("topic", "partition"):
        if key in pruned:
            pruned[key] = set(pruned[key])
    ranges = prune_ranges(plan_ranges(opts), pruned)
    return {"root": opts.root, "committed": opts.isolation == "committed",
            "failOnDataLoss": opts.fail_on_data_loss,
            "ranges": [[r.topic, r.partition, r.start, r.end] for r in ranges]}


def main() -> int:
    for line in sys.stdin:
        try:
            reply = plan_request(json.loads(line))
        except (PylogError, OSError) as e:  # answered, not a dead planner
            reply = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""mmsim from Python: run a workload spec in the simulator and read what it
reports as Python objects and pandas DataFrames.

    import mmsim
    r = mmsim.run("examples/smoke.toml", set={'sysctl."vm.swappiness"': 100})
    r.vmstat["pswpout"]        # whole-run counters
    r.phases                   # one row per task phase, every counter a column

A run is the CLI's `mmsim run --json`: the same document, in `Result.json`.
The simulation runs with the GIL released, so runs in threads overlap.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from ._native import SimError, SpecError, __version__
from ._native import run as _run

__all__ = ["run", "sweep", "Result", "SpecError", "SimError", "__version__"]


def _set_args(set: Mapping[str, Any] | None) -> list[str]:
    """`--set`'s KEY=VALUE strings from a dict. A string value goes as it
    is, as on the command line; a bool is lower-cased (TOML's)."""
    out = []
    for key, value in (set or {}).items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        out.append(f"{key}={value}")
    return out


def _is_path(spec: str | os.PathLike) -> bool:
    """A path, or TOML text? Text has a newline or a table header; a path
    is one line. A one-line string that names no file is taken as text,
    so that the parser says what is wrong with it."""
    if isinstance(spec, os.PathLike):
        return True
    if "\n" in spec or spec.lstrip().startswith("["):
        return False
    return os.path.exists(spec) or spec.endswith(".toml")


def run(
    spec: str | os.PathLike,
    *,
    set: Mapping[str, Any] | None = None,
    profile: str | None = None,
    check: bool = False,
) -> "Result":
    """Simulate `spec` (a spec file's path, or TOML text) and return its
    Result.

    set: overrides, keyed as `mmsim run --set` takes them, e.g.
        {'sysctl."vm.swappiness"': 100, "cgroup.w.memory_max": "64M"}.
    profile: the machine profile (`--profile`): "default", "reference" or
        a profile file's path.
    check: check the simulated kernel's invariants as it runs.

    Raises SpecError (with .file, .line, .key, .message) for a spec mmsim
    refuses, SimError for a run that stops (something not modelled, a
    limit reached), ValueError for an unknown profile.
    """
    is_path = _is_path(spec)
    text = os.fspath(spec)
    doc = _run(text, is_path, _set_args(set), profile, check)
    return Result(doc)


class Result:
    """One run: the JSON document and views of it."""

    def __init__(self, document: str):
        import json

        self.json: dict = json.loads(document)

    @property
    def elapsed_ns(self) -> int:
        """Simulated time from the first task's start to the last one's end."""
        return self.json["elapsed_ns"]

    @property
    def vmstat(self) -> dict[str, int]:
        """Whole-run /proc/vmstat counters (events as deltas, gauges as
        their change)."""
        return dict(self.json["vmstat"])

    @property
    def phases(self):
        """A pandas DataFrame, one row per phase of each task: task, phase,
        start_ns, end_ns, duration_ns, then every counter the phase moved
        (0 where another phase moved it and this one did not)."""
        import pandas as pd

        rows = []
        for task in self.json["tasks"]:
            for p in task["phases"]:
                row = {
                    "task": task["name"],
                    "phase": p["name"],
                    "start_ns": p["start_ns"],
                    "end_ns": p["end_ns"],
                    "duration_ns": p["end_ns"] - p["start_ns"],
                }
                row.update(p["vmstat"])
                rows.append(row)
        df = pd.DataFrame(rows)
        counters = [c for c in df.columns if c not in _PHASE_KEYS]
        if counters:
            df[counters] = df[counters].fillna(0).astype("int64")
        return df

    @property
    def cgroups(self):
        """A pandas DataFrame, one row per cgroup: memory.current,
        memory.peak, memory.swap.current, then memory.stat, memory.events
        and memory.swap.events entries (as `stat.NAME`, `events.NAME`,
        `swap_events.NAME`)."""
        import pandas as pd

        rows = []
        for name, cg in self.json["cgroups"].items():
            row = {"cgroup": name}
            for key, value in cg.items():
                if isinstance(value, dict):
                    prefix = key.removeprefix("memory_")
                    row.update({f"{prefix}.{k}": v for k, v in value.items()})
                else:
                    row[key] = value
            rows.append(row)
        return pd.DataFrame(rows)

    @property
    def histograms(self) -> dict[str, list[dict]]:
        """Histograms by name (`fault_latency_ns{kind=major}`, ...): lists of
        {lo, hi, count} buckets."""
        return dict(self.json["histograms"])

    def __repr__(self) -> str:
        return f"<mmsim.Result {self.json['spec']}: {self.elapsed_ns} ns simulated>"


_PHASE_KEYS = ("task", "phase", "start_ns", "end_ns", "duration_ns")

from ._sweep import sweep  # noqa: E402  (uses the helpers above)

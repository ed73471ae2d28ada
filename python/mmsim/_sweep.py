"""mmsim.sweep: one run per point of a grid of overrides, as a DataFrame.

Runs are deterministic, so a point's document is cached on disk under a
key of the spec's text, the point's overrides, mmsim's version and the
machine profile; a sweep run again reads what it has already run.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import pathlib
import warnings
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Mapping, Sequence

from . import _native

_PHASE_SEP = "/"


def _points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """The grid's points, the last key varying fastest."""
    if not grid:
        return [{}]
    for key, values in grid.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"grid[{key!r}]: expected a non-empty list of values, found {values!r}")
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def _spec_text(spec: str | os.PathLike) -> tuple[str, str, bool]:
    """(what to run, what identifies it, is a path)."""
    from . import _is_path

    if _is_path(spec):
        path = os.fspath(spec)
        try:
            text = pathlib.Path(path).read_text()
        except OSError:
            # Let the run say what is wrong with it.
            text = ""
        return path, path + "\0" + text, True
    return os.fspath(spec), os.fspath(spec), False


def _cache_dir(cache: bool | str | os.PathLike) -> pathlib.Path | None:
    if cache is False:
        return None
    if cache is True:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return pathlib.Path(base) / "mmsim" / "sweep"
    return pathlib.Path(cache)


def _key(identity: str, point: Mapping[str, Any], profile: str | None) -> str:
    from . import _set_args

    h = hashlib.sha256()
    for part in (identity, json.dumps(_set_args(point)), _native.__version__, profile or ""):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _trace_identity(paths: list[str]) -> str:
    parts = []
    for p in paths:
        st = os.stat(p)
        parts.append(f"\0trace\0{p}\0{st.st_size}\0{st.st_mtime_ns}")
    return "".join(parts)


def _run_point(args: tuple[str, bool, list[str], str | None]) -> tuple[str | None, str | None]:
    """(the run's document, None), or (None, why) for a run that stopped."""
    spec, is_path, sets, profile = args
    try:
        return _native.run(spec, is_path, sets, profile, False), None
    except _native.SimError as e:
        return None, str(e)


def _row(point: Mapping[str, Any], doc: str | None, error: str | None) -> dict[str, Any]:
    from . import Result

    row = dict(point)
    if doc is None:
        row["error"] = error
        return row
    r = Result(doc)
    row["elapsed_ns"] = r.elapsed_ns
    pressure = r.json.get("pressure")
    if pressure is not None:
        row["memory_some_us"] = pressure["memory"]["some"]["total_us"]
        row["memory_full_us"] = pressure["memory"]["full"]["total_us"]
    for task in r.json["tasks"]:
        for p in task["phases"]:
            row[f"{task['name']}{_PHASE_SEP}{p['name']}.duration_ns"] = p["end_ns"] - p["start_ns"]
    # zram's mm_stat, as the CLI's sweep names it (present when a region
    # states its content).
    for z in r.json.get("zram", []):
        for field in ("orig_data_size", "compr_data_size", "mem_used_total", "mem_used_max", "same_pages"):
            row[f"zram{z['swap']}.{field}"] = z[field]
    # zswap's debugfs (present when the spec sets zswap).
    for field, value in (r.json.get("zswap") or {}).items():
        row[f"zswap.{field}"] = value
    row.update(r.vmstat)
    row["error"] = None
    return row


def sweep(
    spec: str | os.PathLike,
    grid: Mapping[str, Sequence[Any]],
    *,
    backend: str = "local",
    workers: int | None = None,
    cache: bool | str | os.PathLike = True,
    profile: str | None = None,
    address: str | None = None,
):
    """Run `spec` at every point of `grid` (override key → values, keyed as
    `mmsim.run`'s `set`) and return a pandas DataFrame: one row per point,
    the overrides as columns, then `elapsed_ns`, each phase's duration
    (`TASK/PHASE.duration_ns`, <NA> where the task never ran the phase, as
    when the OOM killer ended it first), the whole-run /proc/vmstat
    counters, and last `error`: None for a point that ran, the SimError's
    message for one whose run stopped (out of memory with no task to kill,
    not modelled, a limit), whose
    other columns are then missing (<NA>; the numeric columns are then
    pandas' nullable Int64 instead of int64). Every other point is there;
    a RuntimeWarning says how many failed. A failed point is not cached.

    backend: "local" runs points in `workers` processes on this machine
        (default: one per CPU); "ray" runs them as Ray tasks, on a local
        Ray (`ray.init()`) or the cluster at `address`, and needs the `ray`
        package.
    cache: True caches each point's document under ~/.cache/mmsim/sweep
        ($XDG_CACHE_HOME), a path caches there, False runs every point.

    A point's spec error raises mmsim.SpecError naming the point, before
    any run.
    """
    import pandas as pd

    from . import SpecError, _set_args

    points = _points(grid)
    run_spec, identity, is_path = _spec_text(spec)
    cache_dir = _cache_dir(cache)
    if backend not in ("local", "ray"):
        raise ValueError(f"backend: expected 'local' or 'ray', found {backend!r}")
    # Every point's spec parsed here first: a refused one fails the sweep
    # before anything runs, naming the point. A point's result also
    # depends on the trace files it replays, by size and modification time.
    keys = []
    for point in points:
        try:
            traces = _native.parse(run_spec, is_path, _set_args(point))
        except SpecError as e:
            e.add_note(f"at grid point {point}")
            raise
        keys.append(_key(identity + _trace_identity(traces), point, profile))
    docs: list[str | None] = [None] * len(points)
    errors: list[str | None] = [None] * len(points)
    todo = []
    for i, key in enumerate(keys):
        path = cache_dir / f"{key}.json" if cache_dir else None
        if path is not None and path.exists():
            docs[i] = path.read_text()
        else:
            todo.append(i)
    jobs = [(run_spec, is_path, _set_args(points[i]), profile) for i in todo]
    results = _run_local(jobs, workers) if backend == "local" else _run_ray(jobs, address)
    for i, (doc, error) in zip(todo, results):
        docs[i], errors[i] = doc, error
        if doc is not None and cache_dir is not None:
            cache_dir.mkdir(parents=True, exist_ok=True)
            path = cache_dir / f"{keys[i]}.json"
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(doc)
            os.replace(tmp, path)
    rows = [_row(p, d, e) for p, d, e in zip(points, docs, errors)]
    df = pd.DataFrame(rows)
    df = df[[c for c in df.columns if c != "error"] + ["error"]]
    columns = [c for c in df.columns if c not in points[0] and c not in ("elapsed_ns", "error")]
    # A phase a run lacks did not happen (its task never got there, or the
    # OOM killer ended it first): no duration, not 0.
    phases = [c for c in columns if c.endswith(".duration_ns")]
    counters = [c for c in columns if c not in phases]
    df[phases] = df[phases].astype("Int64")
    failed = df["error"].notna()
    if not failed.any():
        df[counters] = df[counters].fillna(0).astype("int64")
        return df
    # 0 where a run that ended lacks a counter; nothing for a failed one.
    df.loc[~failed, counters] = df.loc[~failed, counters].fillna(0)
    numeric = [c for c in ("elapsed_ns", *counters) if c in df.columns]
    df[numeric] = df[numeric].astype("Int64")
    warnings.warn(
        f"mmsim.sweep: {int(failed.sum())} of {len(df)} points failed; "
        "their rows' error column says why",
        RuntimeWarning,
        stacklevel=2,
    )
    return df


def _run_local(jobs, workers):
    if not jobs:
        return []
    workers = workers or os.cpu_count() or 1
    if workers == 1 or len(jobs) == 1:
        return [_run_point(j) for j in jobs]
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
        return list(pool.map(_run_point, jobs))


def _run_ray(jobs, address):
    try:
        import ray
    except ImportError as e:
        raise RuntimeError(
            "backend='ray' needs the ray package, which is not installed here: "
            "pip install 'ray[default]' (and mmsim on every Ray node), or use backend='local'"
        ) from e
    if not ray.is_initialized():
        ray.init(address=address) if address else ray.init()
    remote = ray.remote(_run_point)
    return ray.get([remote.remote(j) for j in jobs])

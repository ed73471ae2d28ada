"""mmsim.sweep: one row per grid point, equal to the runs it stands for,
cached, in processes or (where installed) on Ray."""

import importlib.util
import pathlib

import pytest

import mmsim
import mmsim._sweep as sweep_mod

ROOT = pathlib.Path(__file__).resolve().parents[2]
SMOKE = ROOT / "examples" / "smoke.toml"
KEY = 'sysctl."vm.swappiness"'


def test_each_row_is_the_run_at_its_point(tmp_path):
    df = mmsim.sweep(SMOKE, {KEY: [10, 100, 200]}, cache=tmp_path, workers=2)
    assert list(df[KEY]) == [10, 100, 200]
    for _, row in df.iterrows():
        r = mmsim.run(SMOKE, set={KEY: row[KEY]})
        assert row["elapsed_ns"] == r.elapsed_ns
        assert row["pswpout"] == r.vmstat["pswpout"]
        phases = r.phases.set_index("phase")
        assert row["main/write.duration_ns"] == phases.loc["write", "duration_ns"]
        assert row["main/read.duration_ns"] == phases.loc["read", "duration_ns"]


def test_two_keys_make_their_product_in_order(tmp_path):
    grid = {KEY: [60, 200], "cgroup.w.memory_max": ["16M", "max"]}
    df = mmsim.sweep(SMOKE, grid, cache=False, workers=1)
    assert [tuple(x) for x in df[[KEY, "cgroup.w.memory_max"]].values] == [
        (60, "16M"),
        (60, "max"),
        (200, "16M"),
        (200, "max"),
    ]
    # Without the limit nothing is swapped, whatever the swappiness.
    assert (df[df["cgroup.w.memory_max"] == "max"]["pswpout"] == 0).all()
    assert (df[df["cgroup.w.memory_max"] == "16M"]["pswpout"] > 0).all()


def test_a_cached_point_is_not_run_again(tmp_path, monkeypatch):
    first = mmsim.sweep(SMOKE, {KEY: [10, 20]}, cache=tmp_path, workers=1)
    assert len(list(tmp_path.glob("*.json"))) == 2

    def no_run(job):
        raise AssertionError("a cached point ran again")

    monkeypatch.setattr(sweep_mod, "_run_point", no_run)
    again = mmsim.sweep(SMOKE, {KEY: [10, 20]}, cache=tmp_path, workers=1)
    assert again.equals(first)
    # Another point, or another spec text, is another key.
    with pytest.raises(AssertionError, match="ran again"):
        mmsim.sweep(SMOKE, {KEY: [30]}, cache=tmp_path, workers=1)
    text = SMOKE.read_text().replace('memory_max = "16M"', 'memory_max = "20M"')
    with pytest.raises(AssertionError, match="ran again"):
        mmsim.sweep(text, {KEY: [10]}, cache=tmp_path, workers=1)


def test_processes_and_one_at_a_time_agree(tmp_path):
    grid = {KEY: [10, 60, 100, 200]}
    a = mmsim.sweep(SMOKE, grid, cache=False, workers=1)
    b = mmsim.sweep(SMOKE, grid, cache=False, workers=2)
    assert a.equals(b)


def test_bad_grids_and_points_are_refused_before_any_run(tmp_path):
    with pytest.raises(ValueError, match="non-empty list"):
        mmsim.sweep(SMOKE, {KEY: 60})
    with pytest.raises(ValueError, match="backend"):
        mmsim.sweep(SMOKE, {KEY: [60]}, backend="slurm")
    with pytest.raises(mmsim.SpecError) as e:
        mmsim.sweep(SMOKE, {KEY: [60, 900]}, cache=tmp_path)
    assert e.value.key == "sysctl.\"vm.swappiness\"" or "swappiness" in str(e.value)
    assert any("900" in n for n in e.value.__notes__)
    assert list(tmp_path.glob("*.json")) == []


@pytest.mark.skipif(
    importlib.util.find_spec("ray") is not None, reason="ray is installed: the error path is moot"
)
def test_ray_without_ray_says_how_to_get_it():
    with pytest.raises(RuntimeError, match="pip install"):
        mmsim.sweep(SMOKE, {KEY: [60]}, backend="ray", cache=False)


@pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="ray is not installed here (.ci/run installs it where PyPI has a wheel): "
    ".venv/bin/python -m pip install ray, then ./scripts/test-python",
)
def test_ray_runs_the_points_as_tasks():
    import ray

    grid = {KEY: [10, 200]}
    try:
        # A local Ray (ray.init()): its workers import mmsim as this
        # process does.
        by_ray = mmsim.sweep(SMOKE, grid, backend="ray", cache=False)
    finally:
        ray.shutdown()
    assert by_ray.equals(mmsim.sweep(SMOKE, grid, cache=False, workers=1))


def _trace_spec(tmp_path, ids):
    (tmp_path / "ids.txt").write_text("".join(f"{i}\n" for i in ids))
    spec = tmp_path / "trace.toml"
    spec.write_text(
        SMOKE.read_text().replace(
            '{ op = "touch", region = "heap", order = "seq", write = 0.0 },',
            '{ op = "trace", region = "heap", file = "ids.txt" },',
        )
    )
    return spec


def test_a_trace_replays_and_its_file_is_part_of_the_cache_key(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    spec = _trace_spec(tmp_path, range(4096))
    r = mmsim.run(spec)
    read = r.json["tasks"][0]["phases"][1]
    assert read["name"] == "read" and read["trace_requests"] == 4096
    first = mmsim.sweep(spec, {KEY: [60]}, cache=cache, workers=1)
    assert first.loc[0, "elapsed_ns"] == r.elapsed_ns

    def no_run(job):
        raise AssertionError("ran again")

    monkeypatch.setattr(sweep_mod, "_run_point", no_run)
    mmsim.sweep(spec, {KEY: [60]}, cache=cache, workers=1)
    # The same spec text with another trace is another key.
    _trace_spec(tmp_path, range(4097))
    with pytest.raises(AssertionError, match="ran again"):
        mmsim.sweep(spec, {KEY: [60]}, cache=cache, workers=1)


def test_a_bad_trace_is_a_spec_error(tmp_path):
    spec = _trace_spec(tmp_path, [1, 99999])
    with pytest.raises(mmsim.SpecError) as e:
        mmsim.run(spec)
    assert "found obj_id 99999" in str(e.value)
    assert e.value.key.endswith(".map")


def test_a_failed_point_is_a_row_with_its_error(tmp_path):
    # Swappiness 0 under 16M: the anon pages cannot go to swap, and the only
    # task is exempt from the OOM killer: the run cannot end as the kernel's.
    grid = {
        KEY: [0, 60],
        "cgroup.w.memory_max": ["16M", "max"],
        "task.main.oom_score_adj": [-1000],
    }
    with pytest.warns(RuntimeWarning, match="1 of 4 points failed"):
        df = mmsim.sweep(SMOKE, grid, cache=tmp_path, workers=2)
    assert list(df.columns)[-1] == "error"
    assert len(df) == 4
    failed = df[df["error"].notna()]
    assert [tuple(x) for x in failed[[KEY, "cgroup.w.memory_max"]].values] == [(0, "16M")]
    assert "no task to kill" in failed["error"].iloc[0]
    assert failed[["elapsed_ns", "pswpout", "main/write.duration_ns"]].isna().all(axis=None)
    for _, row in df[df["error"].isna()].iterrows():
        r = mmsim.run(SMOKE, set={KEY: row[KEY], "cgroup.w.memory_max": row["cgroup.w.memory_max"]})
        assert row["elapsed_ns"] == r.elapsed_ns
        assert row["pswpout"] == r.vmstat["pswpout"]
    # The points that ran are cached, the failed one is not.
    assert len(list(tmp_path.glob("*.json"))) == 3


def test_a_sweep_without_failures_has_an_empty_error_column(tmp_path):
    df = mmsim.sweep(SMOKE, {KEY: [60]}, cache=False, workers=1)
    assert df["error"].isna().all()
    assert df["pswpout"].dtype == "int64"


def test_a_sizing_sweep_reads_the_oom_kills(tmp_path):
    # 32 MiB written under memory.max 16M: with 8 MiB of zram the cgroup's
    # OOM killer ends the task in its write phase; with 128 MiB it swaps.
    df = mmsim.sweep(SMOKE, {"swap[0].size": ["8M", "128M"]}, cache=tmp_path, workers=1)
    small, large = df.iloc[0], df.iloc[1]
    assert (small["oom_kill"], large["oom_kill"]) == (1, 0)
    assert large["pswpout"] > 0
    # The killed task's phases never ended: no duration.
    assert small[["main/write.duration_ns", "main/read.duration_ns"]].isna().all()
    r = mmsim.run(SMOKE, set={"swap[0].size": "8M"})
    assert r.json["tasks"][0]["oom_kill"]["oom_memcg"] == "w"

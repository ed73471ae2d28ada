"""mmsim.run: the same document as the CLI, its views, overrides, errors,
and the GIL released while a run executes."""

import json
import pathlib
import subprocess
import threading

import pytest

import mmsim

ROOT = pathlib.Path(__file__).resolve().parents[2]
SMOKE = ROOT / "examples" / "smoke.toml"

# 32 MiB written and read back under a 16 MiB memory.max: 8192 pages
# each way, so the write and the read each fault 8192 times and at least
# 4096 pages are swapped out and read back.
PAGES = 8192


def test_a_run_reports_the_workload_counters():
    r = mmsim.run(SMOKE)
    assert r.json["format"] == 1
    assert r.vmstat["pgfault"] >= 2 * PAGES
    assert r.vmstat["pswpout"] >= PAGES // 2
    assert r.vmstat["pswpin"] == r.vmstat["pgmajfault"]
    assert r.elapsed_ns > 0


def test_the_document_is_the_clis(tmp_path):
    cli = ROOT / "target" / "release" / "mmsim"
    if not cli.exists():
        pytest.skip("target/release/mmsim is not built (cargo build --release)")
    out = subprocess.run(
        [cli, "run", "--json", SMOKE], check=True, capture_output=True, text=True
    ).stdout
    doc = json.loads(out)
    r = mmsim.run(SMOKE)
    # The spec's path is as each was given it; everything else is equal.
    doc.pop("spec")
    mine = dict(r.json)
    mine.pop("spec")
    assert mine == doc


def test_phases_are_a_dataframe_with_every_counter():
    df = mmsim.run(SMOKE).phases
    assert list(df["phase"]) == ["write", "read"]
    assert list(df.columns[:5]) == ["task", "phase", "start_ns", "end_ns", "duration_ns"]
    assert (df["duration_ns"] == df["end_ns"] - df["start_ns"]).all()
    assert (df["duration_ns"] > 0).all()
    write = df.set_index("phase").loc["write"]
    read = df.set_index("phase").loc["read"]
    assert write["pgfault"] == PAGES
    # Reading back swapped-out pages is major faults; writing is not.
    assert write["pgmajfault"] == 0
    assert read["pgmajfault"] > 0
    assert df["pgfault"].dtype == "int64"


def test_cgroups_and_histograms():
    r = mmsim.run(SMOKE)
    cg = r.cgroups.set_index("cgroup").loc["w"]
    assert cg["memory_peak"] <= 16 << 20
    assert cg["stat.pgfault"] >= 2 * PAGES
    assert "events.max" in r.cgroups.columns
    h = r.histograms["fault_latency_ns{kind=major}"]
    assert sum(b["count"] for b in h) == r.vmstat["pgmajfault"]


def test_toml_text_and_overrides():
    text = SMOKE.read_text()
    base = mmsim.run(text)
    assert base.vmstat == mmsim.run(SMOKE).vmstat
    # No memory limit: nothing is swapped.
    free = mmsim.run(text, set={"cgroup.w.memory_max": "max"})
    assert free.vmstat.get("pswpout", 0) == 0
    assert free.vmstat["pgfault"] == PAGES
    # Deterministic: the same spec gives the same document.
    assert mmsim.run(text).json == base.json


def test_a_spec_error_names_file_line_and_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(SMOKE.read_text().replace('memory_max = "16M"', 'memory_max = "16 lots"'))
    with pytest.raises(mmsim.SpecError) as e:
        mmsim.run(bad)
    assert e.value.file == str(bad)
    assert e.value.line == 13
    assert e.value.key == "cgroup.w.memory_max"
    assert "16 lots" in e.value.message
    with pytest.raises(mmsim.SpecError) as e:
        mmsim.run(SMOKE, set={"sysctl.nonsense": 1})
    assert "nonsense" in str(e.value)
    with pytest.raises(mmsim.SpecError):
        mmsim.run(tmp_path / "missing.toml")
    with pytest.raises(ValueError):
        mmsim.run(SMOKE, profile="no-such-profile")


def test_a_run_that_stops_raises_sim_error():
    # Out of swap under memory.max, and the only task exempt from the OOM
    # killer: Linux would retry the fault forever, the run stops.
    text = SMOKE.read_text().replace('size = "128M"', 'size = "4M"')
    with pytest.raises(mmsim.SimError) as e:
        mmsim.run(text, set={"task.main.oom_score_adj": -1000})
    assert "no task to kill" in str(e.value)


def test_the_gil_is_released_while_a_run_executes():
    # While one thread runs the simulator, this one keeps running Python:
    # with the GIL held for the whole run it could not count at all.
    done = threading.Event()
    result = {}

    def work():
        result["r"] = mmsim.run(ROOT / "examples" / "anon_seq.toml")
        done.set()

    t = threading.Thread(target=work)
    t.start()
    counted = 0
    while not done.is_set():
        counted += 1
    t.join()
    assert result["r"].vmstat["pgfault"] > 0
    assert counted > 10_000, counted


def test_two_runs_in_threads_give_the_results_of_one_at_a_time():
    alone = mmsim.run(SMOKE).json
    out = [None, None]

    def work(i):
        out[i] = mmsim.run(SMOKE).json

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out[0] == alone and out[1] == alone

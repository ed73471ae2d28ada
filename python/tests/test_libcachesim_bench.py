"""bench/libcachesim/run.py at a small scale: both engines replay the same
requests, and where the policy cannot matter (uniform requests) they miss
alike. Skips where libcachesim (PyPI) or numpy is not installed."""

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "libcachesim" / "run.py"
MMSIM = ROOT / "target" / "release" / "mmsim"

lcs = pytest.importorskip(
    "libcachesim",
    reason="libcachesim is not installed: .venv/bin/python -m pip install -r "
    "bench/libcachesim/requirements.txt, then ./scripts/test-python",
)
pytest.importorskip("numpy")

PAGES, CACHE, REQUESTS = 20_000, 5_000, 300_000


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    if not MMSIM.exists():
        pytest.skip("no target/release/mmsim (scripts/test-python builds it)")
    out = tmp_path_factory.mktemp("lcs") / "rows.json"
    subprocess.run(
        [sys.executable, BENCH, "--requests", str(REQUESTS), "--pages", str(PAGES),
         "--cache", str(CACHE), "--mmsim", MMSIM, "--json", out],
        check=True,
        capture_output=True,
    )
    return {r["trace"]: r for r in json.loads(out.read_text())}


def test_both_replay_every_request(rows):
    assert set(rows) == {"zipf", "uniform", "scan+zipf"}
    for r in rows.values():
        assert r["lcs"]["requests"] == REQUESTS
        assert r["mmsim"]["requests"] == REQUESTS


def test_every_mmsim_fault_is_a_first_touch_or_a_swap_in(rows):
    # Every request writes, so a fault maps a new page or reads it back
    # from zram; a hit never faults.
    for r in rows.values():
        assert r["mmsim"]["pgfault"] == r["distinct"] + r["mmsim"]["pgmajfault"]
        assert r["mmsim"]["pgmajfault"] > 0


def test_uniform_misses_do_not_depend_on_the_policy(rows):
    # Under uniform requests every resident set of the same size hits
    # alike: both miss about 1 - CACHE/PAGES of the requests after warm-up.
    # mmsim keeps a little fewer pages (page tables are charged to the
    # cgroup, reclaim frees in batches of 32).
    r = rows["uniform"]
    lcs_ratio = r["lcs"]["misses"] / REQUESTS
    sim_ratio = (r["distinct"] + r["mmsim"]["pgmajfault"]) / REQUESTS
    assert abs(lcs_ratio - (1 - CACHE / PAGES)) < 0.02
    assert abs(sim_ratio - lcs_ratio) < 0.02

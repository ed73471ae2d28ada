#!/usr/bin/env python3
"""mmsim beside libCacheSim on the same page traces.

Generates page traces in libCacheSim's oracleGeneral format, replays each
through libCacheSim's LRU (the `libcachesim` package from PyPI) with a cache
of N pages and through mmsim with a memory cgroup of N pages, and prints a
table of requests, misses, requests per second and peak host memory.

    pip install -r bench/libcachesim/requirements.txt
    cargo build --release
    python3 bench/libcachesim/run.py            # 20 M requests per trace
    python3 bench/libcachesim/run.py --requests 200000 --pages 10000 --cache 2500

What each side models:
- libCacheSim LRU: exact LRU over N objects; a miss is a request for an
  object not in the cache (first touches included).
- mmsim: the kernel preset's reclaim (6.1 by default: the active and
  inactive anon lists, second chance, refault activation) of a memory
  cgroup with memory.max = N pages over zram swap; every request writes
  one byte of its page. A miss is a fault that brings the page in: the
  first touch of a page, or a swap-in (pgmajfault). Page tables and other
  kernel memory are charged to the cgroup too, as on the kernel, so the
  pages the workload keeps are a little fewer than N.

Requests per second: libCacheSim's are timed around process_trace alone
(its reader and cache, not the interpreter's start); mmsim's are the whole
`mmsim run` process: reading the spec, checking every record of the trace
once, simulating and writing the result. Peak memory is each process's
maximum resident set (wait4's ru_maxrss), the Python interpreter included
on libCacheSim's side.
"""

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]

def dtype():
    import numpy as np

    return np.dtype([("t", "<u4"), ("id", "<u8"), ("sz", "<u4"), ("nx", "<i8")])


def zipf_ids(rng, n, theta, count, chunk=1 << 22):
    """`count` draws of ranks 0..n-1 with P(k) ∝ (k+1)^-theta."""
    import numpy as np

    w = np.arange(1, n + 1, dtype=np.float64) ** -theta
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    out = np.empty(count, dtype=np.uint64)
    for i in range(0, count, chunk):
        k = min(chunk, count - i)
        out[i : i + k] = np.searchsorted(cdf, rng.random(k), side="right")
    return np.minimum(out, n - 1)


def traces(pages, count, seed):
    """(name, description, ids) of the three traces."""
    import numpy as np

    rng = np.random.default_rng(seed)
    # Ranks land on pages through a fixed permutation, so the hot pages
    # are spread over the region rather than packed at its start.
    perm = rng.permutation(pages).astype(np.uint64)
    yield "zipf", f"zipf 0.9 over {pages} pages", perm[zipf_ids(rng, pages, 0.9, count)]
    yield "uniform", f"uniform over {pages} pages", rng.integers(0, pages, count, dtype=np.uint64)
    # Every other request continues a sequential scan of the cold pages;
    # the rest draw zipf 0.9 over a hot set of a tenth of the pages.
    hot = pages // 10
    ids = np.empty(count, dtype=np.uint64)
    scan = count // 2
    ids[0::2] = perm[zipf_ids(rng, hot, 0.9, count - scan)]
    ids[1::2] = perm[hot + np.arange(scan, dtype=np.uint64) % np.uint64(pages - hot)]
    yield "scan+zipf", f"a scan of {pages - hot} pages interleaved with zipf 0.9 over {hot}", ids


def write_trace(path, ids):
    import numpy as np

    rec = np.zeros(len(ids), dtype=dtype())
    rec["t"] = np.arange(len(ids), dtype=np.uint32)
    rec["id"] = ids
    rec["sz"] = 4096
    rec["nx"] = -1
    rec.tofile(path)
    return len(np.unique(ids))


def run_child(argv):
    """Runs a child that prints its measurements as a JSON line last, and
    returns them. Each child measures its own peak RSS: RUSAGE_CHILDREN
    here would be a running maximum over every child so far."""
    p = subprocess.run(argv, capture_output=True)
    if p.returncode != 0:
        sys.exit(f"{argv[0]} failed ({p.returncode}):\n{p.stderr.decode(errors='replace')}")
    return json.loads(p.stdout.decode().strip().splitlines()[-1])


LCS_CHILD = r"""
import json, resource, sys, time
from libcachesim import LRU, ReaderInitParam, TraceReader, TraceType
path, n = sys.argv[1], int(sys.argv[2])
reader = TraceReader(path, TraceType.ORACLE_GENERAL_TRACE, ReaderInitParam())
cache = LRU(cache_size=n * 4096)
t0 = time.perf_counter()
miss_ratio, _ = cache.process_trace(reader)
wall = time.perf_counter() - t0
req = cache._cache.n_req
print(json.dumps({"requests": req, "misses": round(miss_ratio * req), "wall": wall,
                  "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def run_libcachesim(path, n):
    return run_child([sys.executable, "-c", LCS_CHILD, str(path), str(n)])


SPEC = """\
# Written by bench/libcachesim/run.py.
[machine]
memory = "{machine}"
cpus = 1
kernel = "{kernel}"

[[swap]]
device = "zram"
size = "{swap}"

[cgroup.w]
memory_max = "{cache_bytes}"

[task.main]
cgroup = "w"
steps = [
  {{ op = "mmap", name = "pages", kind = "anon", size = "{region}" }},
  {{ op = "phase", name = "replay" }},
  {{ op = "trace", region = "pages", file = "{trace}", write = 1.0 }},
]
"""

MMSIM_CHILD = r"""
import json, os, resource, subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.run(sys.argv[1:], capture_output=True)
wall = time.perf_counter() - t0
if p.returncode != 0:
    sys.exit(p.stderr.decode(errors="replace"))
print(json.dumps({"wall": wall, "doc": json.loads(p.stdout),
                  "maxrss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))
"""


def run_mmsim(binary, workdir, trace, pages, n, kernel):
    kib = pages * 4
    spec = workdir / f"{trace.stem}.toml"
    spec.write_text(
        SPEC.format(
            machine=f"{2 * kib + (1 << 20)}K",
            kernel=kernel,
            swap=f"{kib + (64 << 10)}K",
            cache_bytes=f"{n * 4}K",
            region=f"{kib}K",
            trace=trace.name,
        )
    )
    # A child of its own measures the run's peak RSS alone.
    r = run_child([sys.executable, "-c", MMSIM_CHILD, str(binary), "run", str(spec), "--json"])
    phase = r["doc"]["tasks"][0]["phases"][0]
    vm = phase["vmstat"]
    return {
        "requests": phase["trace_requests"],
        "pgfault": vm.get("pgfault", 0),
        "pgmajfault": vm.get("pgmajfault", 0),
        "wall": r["wall"],
        "maxrss": r["maxrss"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=20_000_000)
    ap.add_argument("--pages", type=int, default=1 << 20, help="pages the traces range over")
    ap.add_argument("--cache", type=int, default=1 << 18, help="N: the cache and memory.max, in pages")
    ap.add_argument("--kernel", default="6.1", help="mmsim's kernel preset")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mmsim", default=str(ROOT / "target" / "release" / "mmsim"))
    ap.add_argument("--keep", metavar="DIR", help="write the traces and specs here and keep them")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    a = ap.parse_args()
    binary = pathlib.Path(a.mmsim)
    if not binary.exists():
        sys.exit(f"{binary}: no mmsim binary; run `cargo build --release` first or pass --mmsim")
    try:
        import libcachesim  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        sys.exit(f"{e}: pip install -r {ROOT / 'bench/libcachesim/requirements.txt'}")
    workdir = pathlib.Path(a.keep or tempfile.mkdtemp(prefix="mmsim-lcs-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for name, what, ids in traces(a.pages, a.requests, a.seed):
            path = workdir / f"{name.replace('+', '_')}.oracleGeneral"
            distinct = write_trace(path, ids)
            del ids
            lcs = run_libcachesim(path, a.cache)
            sim = run_mmsim(binary, workdir, path, a.pages, a.cache, a.kernel)
            rows.append({"trace": name, "what": what, "distinct": distinct, "lcs": lcs, "mmsim": sim})
            if not a.keep:
                path.unlink()
            print(f"{name}: done", file=sys.stderr)
    finally:
        if not a.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(table(rows, a))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1))


def table(rows, a):
    lines = [
        f"{a.requests} requests per trace over {a.pages} pages; cache and memory.max {a.cache} pages; "
        f"mmsim kernel {a.kernel}",
        "",
        "| trace | engine | requests | misses | miss ratio | requests/s | peak RSS |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lcs, sim = r["lcs"], r["mmsim"]
        sim_misses = sim["pgmajfault"] + r["distinct"]
        for engine, req, misses, wall, rss in (
            ("libCacheSim LRU", lcs["requests"], lcs["misses"], lcs["wall"], lcs["maxrss"]),
            (f"mmsim {a.kernel}", sim["requests"], sim_misses, sim["wall"], sim["maxrss"]),
        ):
            lines.append(
                f"| {r['trace']} | {engine} | {req} | {misses} | {misses / req:.4f} | "
                f"{req / wall / 1e6:.2f} M | {rss / 2**20:.0f} MiB |"
            )
        speed = (sim["requests"] / sim["wall"]) / (lcs["requests"] / lcs["wall"])
        lines.append(
            f"| {r['trace']} | mmsim ÷ libCacheSim | {'same' if sim['requests'] == lcs['requests'] else 'DIFFER'} | "
            f"{sim_misses / max(lcs['misses'], 1):.3f}× | | {speed:.2f}× | |"
        )
    lines.append("")
    lines.append(
        "mmsim misses = first touches (distinct pages) + pgmajfault; "
        + ", ".join(f"{r['trace']}: pgfault {r['mmsim']['pgfault']}" for r in rows)
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()

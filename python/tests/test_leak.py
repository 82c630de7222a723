"""No reference or memory leak over 10,000 runs of the demo model: the
process's resident memory stays within a bound, Python-traced memory does not
grow, and the inputs' reference counts come back to where they were."""

import ctypes
import gc
import sys
import tracemalloc

import numpy as np

import fcb


def rss_bytes():
    # Free heap memory the allocator still holds (per-thread arenas, top of
    # heap) goes back to the system first, so that RSS counts what is live:
    # a leak stays resident, a freed buffer does not.
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_ten_thousand_runs_do_not_leak(demo_fcb, demo_io):
    x, _ = demo_io
    program = fcb.load(demo_fcb)
    session = program.session()
    inputs = {"input": x}
    for _ in range(500):  # warm up: allocator pools, caches
        session.run(inputs)
        program.run(inputs)
    gc.collect()
    refs_x, refs_inputs = sys.getrefcount(x), sys.getrefcount(inputs)
    objects = len(gc.get_objects())
    rss = rss_bytes()
    tracemalloc.start()
    before, _ = tracemalloc.get_traced_memory()
    for i in range(10_000):
        out = session.run(inputs)
        if i % 10 == 0:
            out = program.run(inputs)
    del out
    gc.collect()
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert sys.getrefcount(x) == refs_x
    assert sys.getrefcount(inputs) == refs_inputs
    assert len(gc.get_objects()) - objects < 100
    # A leaked output (array + dict, ~400 bytes) per run would be ~4 MB.
    assert after - before < 64 * 1024, f"Python-traced memory grew by {after - before} bytes"
    grown = rss_bytes() - rss
    assert grown < 2 * 1024 * 1024, f"RSS grew by {grown} bytes over 10,000 runs"

#!/usr/bin/env python3
"""What the Python API adds to a run: fcb.Program.session().run() against the
C++ API's Execution::Run (timed by `fcb bench`, which calls it in a loop) on
the demo model, same file, same target, one thread.

    PYTHONPATH=BUILD/python /usr/bin/python3 python/bench/run_overhead.py BUILD/fcb [--rounds 7] [--iterations 3000]

Each round times both, interleaved (the machine may be busy): `fcb bench
--json` reports the median of Execution::Run; here the median of one
session.run({"input": x}) call (input checks, SetInput, Run, output array and
dict). Prints every round and the medians' best, and their difference. A
benchmark: nothing here passes or fails.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import fcb

HERE = os.path.dirname(os.path.abspath(__file__))
DEMO = os.path.join(HERE, "..", "..", "models", "demo_cnn.onnx")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cli", help="the fcb command line tool of the same build")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iterations", type=int, default=3000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "demo.fcb")
        fcb.compile(DEMO, path, targets="all", input_shapes={"input": [1, 3, 64, 64]})
        program = fcb.load(path)
        session = program.session(threads=1)
        x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
        inputs = {"input": x}
        for _ in range(200):
            session.run(inputs)
        cpp, py = [], []
        timer = time.perf_counter_ns
        for r in range(args.rounds):
            out = subprocess.run([args.cli, "bench", path, "--threads", "1", "--iterations", str(args.iterations),
                                  "--json"], check=True, capture_output=True, text=True).stdout
            bench = json.loads(out)
            assert bench["target"] == program.target
            cpp.append(bench["median_ms"] * 1000)
            times = []
            for _ in range(args.iterations):
                t0 = timer()
                session.run(inputs)
                times.append(timer() - t0)
            py.append(statistics.median(times) / 1000)
            print(f"round {r + 1}: C++ Execution::Run median {cpp[-1]:8.2f} us   "
                  f"Python session.run median {py[-1]:8.2f} us   difference {py[-1] - cpp[-1]:+7.2f} us")
        print(f"target {program.target}, demo model, 1 thread, {args.rounds} rounds x {args.iterations} runs")
        print(f"best medians: C++ {min(cpp):.2f} us, Python {min(py):.2f} us: "
              f"session.run() costs {min(py) - min(cpp):+.2f} us more")
        print(f"median of the rounds' differences: {statistics.median(p - c for p, c in zip(py, cpp)):+.2f} us")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Checks that `fcb profile` accounts for a run: per model, the sum of its
per-step medians against `fcb bench`'s median run, interleaved over several
rounds (best of each), at each thread count. Prints a table and the largest
gap; exits 1 when a model's sum is more than --tolerance off.

  scripts/profile_vs_bench.py [--fcb build/fcb] [--dir build/bench_vs_ort]
      [--threads 1,2] [--rounds 3] [--iterations 10] [--tolerance 0.10]
      [--models a,b,...]

--dir holds the .fcb files to check (every *.fcb there unless --models);
scripts/bench_vs_ort.sh --set all leaves the whole benchmark set there. A
benchmark, not a test: on a shared machine single rounds move by 10-25 %,
which is why both sides take the best of several interleaved rounds.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_json(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fcb", default=os.path.join(REPO, "build", "fcb"))
    ap.add_argument("--dir", default=os.path.join(REPO, "build", "bench_vs_ort"))
    ap.add_argument("--models", default="")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--tolerance", type=float, default=0.10)
    a = ap.parse_args()

    if a.models:
        files = [os.path.join(a.dir, m + ".fcb") for m in a.models.split(",") if m]
    else:
        files = sorted(glob.glob(os.path.join(a.dir, "*.fcb")))
    if not files:
        sys.exit(f"error: no .fcb files in {a.dir} (run scripts/bench_vs_ort.sh --set all first)")
    worst = 0.0
    failed = []
    for threads in [int(t) for t in a.threads.split(",")]:
        print(f"\nthreads={threads}  (best of {a.rounds} interleaved rounds x {a.iterations} runs)")
        print(f"{'model':<30}{'bench median ms':>17}{'profile sum ms':>16}{'sum/bench':>11}")
        for f in files:
            name = os.path.splitext(os.path.basename(f))[0]
            common = ["--threads", str(threads), "--iterations", str(a.iterations), "--json"]
            bench = prof = math.inf
            try:
                for rnd in range(a.rounds):
                    b = run_json([a.fcb, "bench", f] + common)["median_ms"]
                    p = run_json([a.fcb, "profile", f] + common)["step_median_sum_ms"]
                    bench, prof = min(bench, b), min(prof, p)
            except RuntimeError as e:
                print(f"{name:<30}  error: {e}")
                failed.append(name)
                continue
            ratio = prof / bench
            worst = max(worst, abs(ratio - 1.0))
            flag = "" if abs(ratio - 1.0) <= a.tolerance else "  <-- outside tolerance"
            if flag:
                failed.append(f"{name} ({threads} thr)")
            print(f"{name:<30}{bench:>17.3f}{prof:>16.3f}{ratio:>11.3f}{flag}")
    print(f"\nlargest gap: {100 * worst:.1f} % (tolerance {100 * a.tolerance:.0f} %)")
    if failed:
        print("outside tolerance or failed: " + ", ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()

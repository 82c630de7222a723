#!/usr/bin/python3
"""fcb against ONNX Runtime, side by side, interleaved, same thread count.

Called by scripts/bench_vs_ort.sh (which documents the options). For every
thread count and every round, each model is timed by `fcb bench` and by
tools/oracle/ort_bench.js one after the other (the order alternates per
round), so both see the same machine load; the best (minimum) latency over
the rounds is compared. Then cold start (whole process, start to first
output) and peak RSS for one model. Prints a table and, with --json, writes
the raw numbers.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0"]


def run(cmd, env=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    sys.exit(f"error: no JSON in output: {text!r}")


def timed_rss(cmd, env=None):
    """Runs cmd under /usr/bin/time; returns (wall seconds, peak RSS kB, stdout)."""
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "RSSKB=%M"] + cmd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, env=env)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    rss = [int(l.split("=")[1]) for l in r.stderr.splitlines() if l.startswith("RSSKB=")]
    return wall, (rss[-1] if rss else -1), r.stdout


def input_name(model):
    import onnx  # Debian's python3-onnx
    m = onnx.load(model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    return [i.name for i in m.graph.input if i.name not in inits][0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fcb", default=os.path.join(REPO, "build", "fcb"))
    ap.add_argument("--data", default=os.path.join(REPO, "build", "testdata"))
    ap.add_argument("--work", default=os.path.join(REPO, "build", "bench_vs_ort"))
    ap.add_argument("--models", default="")
    ap.add_argument("--set", choices=["default", "wide", "all"], default="default",
                    help="default: the five CNNs (--data); wide: the models of scripts/export_bench_models.py "
                         "(--wide-data, exported there if missing); all: both")
    ap.add_argument("--wide-data", default=os.path.join(REPO, "build", "benchdata"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--target", default="auto", help="fcb target to run (auto = best)")
    ap.add_argument("--cold-model", default="resnet18")
    ap.add_argument("--cold-rounds", type=int, default=5)
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    env = dict(os.environ)
    env["NODE_PATH"] = os.path.join(REPO, "tools", "oracle", "node_modules") + (
        ":" + env["NODE_PATH"] if env.get("NODE_PATH") else "")
    ort_bench = os.path.join(REPO, "tools", "oracle", "ort_bench.js")
    os.makedirs(a.work, exist_ok=True)

    # (name, folder) per model: --models names test-data models; --set picks sets.
    wanted = []
    if a.models:
        wanted = [(m, a.data) for m in a.models.split(",") if m]
    else:
        if a.set in ("default", "all"):
            wanted += [(m, a.data) for m in DEFAULT_MODELS]
        if a.set in ("wide", "all"):
            exporter = os.path.join(REPO, "scripts", "export_bench_models.py")
            wide = run(["/usr/bin/python3", exporter, "--list"]).stdout.split()
            if any(not os.path.exists(os.path.join(a.wide_data, m + ".onnx")) for m in wide):
                print(f"exporting the wide set into {a.wide_data} ...", file=sys.stderr, flush=True)
                run(["/usr/bin/python3", exporter, "--out", a.wide_data])
            wanted += [(m, a.wide_data) for m in wide]
    models = []
    failed = {}
    for m, folder in wanted:
        onnx_path = os.path.join(folder, m + ".onnx")
        if not os.path.exists(onnx_path):
            print(f"warning: {onnx_path} missing, skipping {m} "
                  f"(scripts/prepare_testdata.sh {a.data} --with-resnet50 adds resnet50)", file=sys.stderr)
            continue
        fcb_path = os.path.join(a.work, m + ".fcb")
        if not os.path.exists(fcb_path) or os.path.getmtime(fcb_path) < max(
                os.path.getmtime(onnx_path), os.path.getmtime(a.fcb)):
            r = subprocess.run([a.fcb, "compile", onnx_path, "-o", fcb_path, "--target", "all"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:  # reported in the table; the others still run
                failed[m] = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
                print(f"warning: {m} does not compile: {failed[m]}", file=sys.stderr)
                continue
        models.append((m, onnx_path, fcb_path))
    if not models:
        sys.exit("error: no models to benchmark")

    results = {"latency": {}, "cold_start": None, "compile_failed": failed}
    for threads in [int(t) for t in a.threads.split(",")]:
        best = {m: {"fcb": math.inf, "ort": math.inf} for m, _, _ in models}
        for rnd in range(a.rounds):
            for m, onnx_path, fcb_path in models:
                fcb_cmd = [a.fcb, "bench", fcb_path, "--threads", str(threads), "--iterations",
                           str(a.iterations), "--json"] + ([] if a.target == "auto" else ["--target", a.target])
                ort_cmd = ["node", ort_bench, onnx_path, "--threads", str(threads), "--iterations",
                           str(a.iterations)]
                order = [("fcb", fcb_cmd), ("ort", ort_cmd)]
                if rnd % 2:
                    order.reverse()
                for who, cmd in order:
                    j = last_json(run(cmd, env).stdout)
                    best[m][who] = min(best[m][who], j["min_ms"])
                    if who == "fcb":
                        best[m]["target"] = j.get("target", "?")
        results["latency"][threads] = best
        print(f"\nthreads={threads}  (best of {a.rounds} interleaved rounds x {a.iterations} runs)")
        print(f"{'model':<30}{'target':<12}{'fcb ms':>10}{'ORT ms':>10}{'fcb/ORT':>10}")
        logs = []
        for m, _, _ in models:
            b = best[m]
            ratio = b["fcb"] / b["ort"]
            logs.append(math.log(ratio))
            print(f"{m:<30}{b['target']:<12}{b['fcb']:>10.2f}{b['ort']:>10.2f}{ratio:>10.3f}")
        for m, why in failed.items():
            print(f"{m:<30}compile failed: {why}")
        geo = math.exp(sum(logs) / len(logs))
        best["geomean_ratio"] = geo
        print(f"{'geometric mean':<52}{geo:>10.3f}" + (f"  ({len(failed)} model(s) failed)" if failed else ""))

    cold = [x for x in models if x[0] == a.cold_model]
    if cold:
        m, onnx_path, fcb_path = cold[0]
        inp = os.path.join(a.data, m + ".input.npy")
        out_dir = os.path.join(a.work, "cold_out")
        fcb_cmd = [a.fcb, "run", fcb_path, "--output-dir", out_dir, "--threads", "1"]
        if os.path.exists(inp):
            fcb_cmd += ["--input", f"{input_name(onnx_path)}={inp}"]
        ort_cmd = ["node", ort_bench, onnx_path, "--threads", "1", "--first-only"]
        fcb_best = ort_best = math.inf
        fcb_rss = ort_rss = 0
        ort_inproc = math.inf
        for rnd in range(a.cold_rounds):
            for who in (["fcb", "ort"] if rnd % 2 == 0 else ["ort", "fcb"]):
                if who == "fcb":
                    wall, rss, _ = timed_rss(fcb_cmd, env)
                    fcb_best, fcb_rss = min(fcb_best, wall), max(fcb_rss, rss)
                else:
                    wall, rss, out = timed_rss(ort_cmd, env)
                    j = last_json(out)
                    ort_best, ort_rss = min(ort_best, wall), max(ort_rss, rss)
                    ort_inproc = min(ort_inproc, (j["session_ms"] + j["first_run_ms"]) / 1e3)
        # Peak RSS while running repeatedly (steady state), both whole processes.
        _, fcb_run_rss, _ = timed_rss([a.fcb, "bench", fcb_path, "--threads", "1", "--iterations", "5"], env)
        _, ort_run_rss, _ = timed_rss(["node", ort_bench, onnx_path, "--threads", "1", "--iterations", "5"], env)
        results["cold_start"] = {
            "model": m, "fcb_process_s": fcb_best, "ort_process_s": ort_best,
            "ort_session_plus_first_run_s": ort_inproc, "fcb_cold_rss_kb": fcb_rss, "ort_cold_rss_kb": ort_rss,
            "fcb_bench_rss_kb": fcb_run_rss, "ort_bench_rss_kb": ort_run_rss}
        print(f"\ncold start, {m}, 1 thread (whole process: start to first output; best of {a.cold_rounds})")
        print(f"  fcb run            {fcb_best * 1e3:9.1f} ms")
        print(f"  node + ORT         {ort_best * 1e3:9.1f} ms   (in-process session creation + first run: "
              f"{ort_inproc * 1e3:.1f} ms)")
        print(f"  ratio fcb/ORT      {fcb_best / ort_best:9.3f}   (vs in-process ORT only: {fcb_best / ort_inproc:.3f})")
        print(f"peak RSS, {m} (whole process)")
        print(f"  cold run:  fcb {fcb_rss / 1024:7.1f} MiB   ORT {ort_rss / 1024:7.1f} MiB")
        print(f"  bench x5:  fcb {fcb_run_rss / 1024:7.1f} MiB   ORT {ort_run_rss / 1024:7.1f} MiB"
              f"   ratio {fcb_run_rss / ort_run_rss:.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2, default=str)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""fcb vs ONNX Runtime on a small language model (issue 35), at the memory
bandwidth roofline. A benchmark, not a test (never run by ctest or CI).

  scripts/bench_llm.sh [--shape smollm2-135m|qwen2.5-0.5b|tiny] [--threads "1 2"]
      [--prompt 128] [--new 64] [--repeat 3] [--layers N] [--dir DIR]
      [--fcb build/fcb] [--bandwidth build/bench/bandwidth] [--target T]
      [--mode auto|generate|fallback] [--ort-spin both|on|off] [--compile-arg=ARG]...

What it does, all in one run on this machine:
 1. makes the model with scripts/export_llm_models.py (form a: ONNX Runtime
    GenAI's CPU int4 form, MatMulNBits 4-bit block 32 + GroupQueryAttention)
    into DIR (default $FCB_LLM_DIR or build/llm-bench, outside the sources;
    kept between runs), and a seeded prompt of --prompt token ids;
 2. bytes read per decode token (scripts/llm_bytes_per_token.py):
        bytes/token = W + R + KV_row * (T + N/2)
    W: every initializer read in full once (MatMulNBits weights, scales and
    zero points, the LM head, norm weights); R: one row of each table indexed
    by token or position (embedding, rotary cos/sin caches); KV_row: bytes of
    all layers' K and V per position; T + N/2: the mean positions a decode
    step reads over N new tokens after a T-token prompt;
 3. read bandwidth (build/bench/bandwidth, bench/bandwidth.cc) at each thread
    count, best of 10 passes, over a buffer of 4x the last-level cache
    ("DRAM") and over a buffer of the model's weight bytes ("model-size", the
    bytes a decode step reads again and again, caches included);
 4. ONNX Runtime (npm onnxruntime-node, tools/oracle/ort_generate.js
    --past-key-values --threads N) generating N tokens greedily from the
    prompt: prefill tok/s (the T-token prompt's run) and decode tok/s (the
    N-1 decode steps; only session.run and the argmax are timed: feeding the
    presents back as pasts is by reference). At 2+ threads each round runs it
    twice, with its worker threads spinning between operators (its default)
    and sleeping (--no-spin), and keeps the better (--ort-spin both|on|off):
    on a shared machine spinning threads lose their cores and ORT runs at 2
    threads slower than at 1;
 5. fcb on the same .onnx, in one of two modes:
    generate  (when `fcb generate` exists) the file compiled with prefill
              (1..T tokens) and decode (1 token) methods sharing a KV cache
              kept in place ("state": "auto", --kv-capacity T+N), then
              `fcb generate FILE --prompt ... --max-new N --threads t`; its
              tokens are compared with ONNX Runtime's;
    fallback  (otherwise) no generation loop exists: the file compiled with
              a prefill method (T tokens, past 1) and a decode method (1 token,
              a past of T + N/2 - 1 positions, the mean decode step), each
              timed by `fcb profile --input ...` (median of --iterations
              runs); the past is an input set once before the timed runs and
              each run writes the whole present (no state: a real loop would
              also copy the present back into the past, which is not timed).
              Every fcb number is marked * and the header says FALLBACK.
    per thread count, right after its bandwidth probes, --repeat rounds
    (default 3) alternate ONNX Runtime and fcb, and each engine's best
    prefill and best decode rate are kept;
 6. prints a table per thread count: prefill tok/s fcb / ORT / ratio, decode
    tok/s fcb / ORT / ratio, decode GB/s effective (bytes/token x tok/s) and
    that as a fraction of each measured bandwidth; and the CPU model.

On a shared machine trust the ratios (measured in the same run, same thread
count) more than the absolute numbers.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import export_llm_models  # noqa: E402
import llm_bytes_per_token  # noqa: E402

PY = "/usr/bin/python3"


def die(msg):
    sys.stderr.write(f"bench_llm: {msg}\n")
    sys.exit(1)


def run(cmd, env=None, what=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if r.returncode != 0:
        die(f"{what or cmd[0]} failed (exit {r.returncode}): {' '.join(cmd)}\n{r.stdout[-2000:]}{r.stderr[-4000:]}")
    return r.stdout


def cpu_model():
    try:
        for line in subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def newer(target, *sources):
    return not os.path.exists(target) or any(os.path.getmtime(s) > os.path.getmtime(target) for s in sources)


def make_model(a):
    suffix = f".l{a.layers}" if a.layers else ""
    onnx_path = os.path.join(a.dir, f"{a.shape}{suffix}.a.onnx")
    if newer(onnx_path, os.path.join(REPO, "scripts", "export_llm_models.py")):
        print(f"# exporting {onnx_path}", flush=True)
        cmd = [PY, os.path.join(REPO, "scripts", "export_llm_models.py"), "--shape", a.shape, "--form", "a",
               "--out", onnx_path]
        if a.layers:
            cmd += ["--layers", str(a.layers)]
        run(cmd, what="export_llm_models.py")
    vocab = export_llm_models.SHAPES[a.shape][5]
    prompt_path = os.path.join(a.dir, f"prompt{a.prompt}.v{vocab}.npy")
    if not os.path.exists(prompt_path):
        rng = np.random.default_rng(1234)
        np.save(prompt_path, rng.integers(0, vocab, (1, a.prompt)).astype(np.int64))
    return onnx_path, prompt_path


def bandwidth(a, threads, nbytes=None):
    cmd = [a.bandwidth, "--threads", str(threads), "--json"]
    if nbytes:
        cmd += ["--bytes", str(int(nbytes))]
    j = json.loads(run(cmd, what="bandwidth"))
    return j["bytes"], j["results"][0]["best_gbs"]


PHASE = re.compile(r"^(prefill|decode): (\d+) tokens in ([0-9.]+) ms")


def parse_phases(text):
    out, tokens = {}, None
    for line in text.splitlines():
        m = PHASE.match(line.strip())
        if m:
            out[m.group(1)] = (int(m.group(2)), float(m.group(3)))
        if line.startswith("tokens:"):
            tokens = [int(x) for x in line.split(":", 1)[1].split()]
    if "prefill" not in out or "decode" not in out:
        die(f"no prefill/decode timing lines in:\n{text[-2000:]}")
    rate = lambda p: p[0] * 1000.0 / p[1] if p[1] > 0 else float("inf")  # noqa: E731
    return rate(out["prefill"]), rate(out["decode"]), tokens


def best_of(old, new):
    """(prefill tok/s, decode tok/s, tokens): the higher rates of two rounds."""
    return new if old is None else (max(old[0], new[0]), max(old[1], new[1]), new[2])


def ort(a, onnx_path, prompt_path, threads, spin=True):
    env = dict(os.environ)
    env["NODE_PATH"] = os.path.join(REPO, "tools", "oracle", "node_modules") + (
        ":" + env["NODE_PATH"] if env.get("NODE_PATH") else "")
    outdir = os.path.join(a.dir, f"ort.{threads}")
    text = run(["node", os.path.join(REPO, "tools", "oracle", "ort_generate.js"), "--past-key-values", onnx_path,
                prompt_path, str(a.new), outdir, "--dummy-past", "0", "--threads", str(threads)]
               + ([] if spin else ["--no-spin"]), env=env, what="ort_generate.js")
    return parse_phases(text)


def has_generate(fcb):
    r = subprocess.run([fcb, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return re.search(r"^\s+generate\b", r.stdout, re.M) is not None


def host_target(a):
    if a.target != "auto":
        return a.target
    # fcb targets --json: {"targets": [...], "auto": the one auto picks}; compile only that one.
    j = json.loads(run([a.fcb, "targets", "--json"], what="fcb targets"))
    if not j.get("auto"):
        die("this host runs none of fcb's targets ('fcb targets')")
    return j["auto"]


def past_inputs(onnx_path):
    import onnx
    m = onnx.load(onnx_path, load_external_data=False)
    out = []
    for vi in m.graph.input:
        if vi.name.startswith("past_key_values."):
            d = vi.type.tensor_type.shape.dim
            out.append((vi.name, d[1].dim_value, d[3].dim_value))
    return out


def compile_once(cmd, fcb_path, sources, what):
    """Runs `cmd` unless fcb_path is newer than `sources` and was made by the same command."""
    stamp = fcb_path + ".cmd"
    same = os.path.exists(stamp) and open(stamp).read() == json.dumps(cmd)
    if same and not newer(fcb_path, *sources):
        return
    print(f"# compiling {fcb_path} ({what})", flush=True)
    run(cmd, what="fcb compile")
    with open(stamp, "w") as f:
        f.write(json.dumps(cmd))


def fcb_generate(a, onnx_path, prompt_path, target, t):
    cap = a.prompt + a.new
    fcb_path = os.path.join(a.dir, os.path.basename(onnx_path)[:-5] + f".gen.{target}.fcb")
    compile_once([a.fcb, "compile", "--method", f"prefill={onnx_path}", "--method", f"decode={onnx_path}", "--state",
                  "auto", "--kv-capacity", str(cap), "--target", target,
                  "--input-shape", f"prefill:input_ids=1x1..{a.prompt}",
                  "--input-shape", f"prefill:attention_mask=1x1..{cap}",
                  "--input-shape", "decode:input_ids=1x1", "--input-shape", f"decode:attention_mask=1x1..{cap}",
                  *a.compile_arg, "-o", fcb_path], fcb_path, [onnx_path, a.fcb], f"state, kv capacity {cap}")
    prompt = ",".join(str(int(x)) for x in np.load(prompt_path).reshape(-1))
    return parse_phases(run([a.fcb, "generate", fcb_path, "--prompt", prompt, "--max-new", str(a.new),
                             "--threads", str(t), "--target", target], what="fcb generate"))


def fcb_fallback(a, onnx_path, target, t, prompt_path):
    """fcb profile of a prefill (T tokens, past 1) and a decode step (past T + N/2 - 1), no state."""
    pasts = past_inputs(onnx_path)
    dpast = a.prompt + a.new // 2 - 1
    fcb_path = os.path.join(a.dir, os.path.basename(onnx_path)[:-5] + f".fallback.{target}.fcb")
    shapes = ["--input-shape", f"prefill:input_ids=1x{a.prompt}", "--input-shape",
              f"prefill:attention_mask=1x{a.prompt + 1}",
              "--input-shape", "decode:input_ids=1x1", "--input-shape", f"decode:attention_mask=1x{dpast + 1}"]
    for name, kv, head in pasts:
        shapes += ["--input-shape", f"prefill:{name}=1x{kv}x1x{head}", "--input-shape",
                   f"decode:{name}=1x{kv}x{dpast}x{head}"]
    compile_once([a.fcb, "compile", "--method", f"prefill={onnx_path}", "--method", f"decode={onnx_path}", "--target",
                  target, *shapes, *a.compile_arg, "-o", fcb_path], fcb_path, [onnx_path, a.fcb],
                 f"fallback: prefill {a.prompt} tokens, decode at past {dpast}")
    feeds = os.path.join(a.dir, f"feeds.{os.path.basename(onnx_path)[:-5]}.{a.prompt}.{dpast}")
    os.makedirs(feeds, exist_ok=True)
    np.save(os.path.join(feeds, "prefill_input_ids.npy"), np.load(prompt_path))
    np.save(os.path.join(feeds, "prefill_attention_mask.npy"), np.ones((1, a.prompt + 1), np.int64))
    np.save(os.path.join(feeds, "decode_input_ids.npy"), np.load(prompt_path)[:, :1])
    np.save(os.path.join(feeds, "decode_attention_mask.npy"), np.ones((1, dpast + 1), np.int64))
    rng = np.random.default_rng(5)
    for name, kv, head in pasts:
        np.save(os.path.join(feeds, f"prefill_{name}.npy"), np.zeros((1, kv, 1, head), np.float32))
        np.save(os.path.join(feeds, f"decode_{name}.npy"), rng.standard_normal((1, kv, dpast, head)).astype(np.float32))

    def profile(method, t):
        ins = ["input_ids", "attention_mask"] + [p[0] for p in pasts]
        cmd = [a.fcb, "profile", fcb_path, "--method", method, "--threads", str(t), "--target", target,
               "--iterations", str(a.iterations), "--json"]
        for n in ins:
            cmd += ["--input", f"{n}={os.path.join(feeds, f'{method}_{n}.npy')}"]
        j = json.loads(run(cmd, what=f"fcb profile {method}"))
        return j["run_median_ms"]

    return (a.prompt * 1000.0 / profile("prefill", t), 1000.0 / profile("decode", t), None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="smollm2-135m", choices=sorted(export_llm_models.SHAPES))
    ap.add_argument("--threads", default="1 2", help='thread counts, e.g. "1 2"')
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3,
                    help="rounds per thread count, alternating the engines (each engine's best is kept)")
    ap.add_argument("--iterations", type=int, default=10, help="fallback mode: fcb profile runs per method")
    ap.add_argument("--layers", type=int, default=0, help="fewer layers (same per-layer shapes), for a quick look")
    ap.add_argument("--dir", default=os.environ.get("FCB_LLM_DIR", os.path.join(REPO, "build", "llm-bench")))
    ap.add_argument("--fcb", default=os.path.join(REPO, "build", "fcb"))
    ap.add_argument("--bandwidth", default=os.path.join(REPO, "build", "bench", "bandwidth"))
    ap.add_argument("--target", default="auto")
    ap.add_argument("--ort-spin", default="both", choices=["both", "on", "off"],
                    help="ONNX Runtime's worker threads spinning between operators (its default, on) or not; "
                         "both: each round runs both and keeps the better (threads > 1)")
    ap.add_argument("--compile-arg", action="append", default=[],
                    help="one more argument for fcb compile (repeatable, e.g. --compile-arg=--target-options ...)")
    ap.add_argument("--mode", default="auto", choices=["auto", "generate", "fallback"])
    a = ap.parse_args()
    a.threads = [int(t) for t in a.threads.replace(",", " ").split()]
    if a.prompt < 2 or a.new < 2:
        die("--prompt and --new need at least 2 tokens")
    for exe in (a.fcb, a.bandwidth):
        if not os.access(exe, os.X_OK):
            die(f"{exe} is not built (cmake --build build --target fcb_cli fcb_onnx bandwidth)")
    if not shutil.which("node"):
        die("node is not on PATH (ONNX Runtime runs through tools/oracle, scripts/setup.sh)")
    os.makedirs(a.dir, exist_ok=True)

    onnx_path, prompt_path = make_model(a)
    import onnx
    bpt = llm_bytes_per_token.count(onnx.load(onnx_path), a.prompt, a.new)
    mode = a.mode
    if mode == "auto":
        mode = "generate" if has_generate(a.fcb) else "fallback"
    target = host_target(a)

    # Per thread count, back to back: the bandwidth probes, ONNX Runtime, fcb
    # (on a shared machine the load changes over minutes).
    bw_dram, bw_model, ort_res, fcb_res = {}, {}, {}, {}
    for t in a.threads:
        dram_bytes, bw = bandwidth(a, t)
        bw_dram[t] = bw
        model_bytes, bw = bandwidth(a, t, bpt["weights_bytes"])
        bw_model[t] = bw
        # Rounds alternate the engines; each keeps its best prefill and best decode rate.
        for _ in range(a.repeat):
            o = ort(a, onnx_path, prompt_path, t)
            if t > 1 and a.ort_spin == "both":  # and with its threads sleeping between operators
                o = best_of(o, ort(a, onnx_path, prompt_path, t, spin=False))
            elif t > 1 and a.ort_spin == "off":
                o = ort(a, onnx_path, prompt_path, t, spin=False)
            f = (fcb_generate(a, onnx_path, prompt_path, target, t) if mode == "generate"
                 else fcb_fallback(a, onnx_path, target, t, prompt_path))
            ort_res[t] = best_of(ort_res.get(t), o)
            fcb_res[t] = best_of(fcb_res.get(t), f)

    mb = bpt["bytes_per_token"] / 1e6
    print()
    print(f"LLM benchmark: {a.shape}{f' ({a.layers} layers)' if a.layers else ''} form a "
          f"(MatMulNBits 4-bit block 32, GroupQueryAttention), prompt {a.prompt} tokens, {a.new} new tokens")
    print(f"CPU: {cpu_model()}; fcb target {target}; ONNX Runtime: onnxruntime-node "
          f"{ort_version()}{', threads spinning or not, the better' if a.ort_spin == 'both' else ''}"
          f"{', threads not spinning' if a.ort_spin == 'off' else ''}; best of {a.repeat} rounds alternating the engines")
    if mode == "generate":
        print("fcb: fcb generate (prefill + decode methods, KV cache kept in place)")
    else:
        print(f"fcb: FALLBACK (no `fcb generate` in this build): fcb profile medians of a prefill method "
              f"({a.prompt} tokens, past 1) and a decode method (1 token, past {a.prompt + a.new // 2 - 1} = the mean "
              f"decode step; the past is an input set before the timed runs, each run writes the whole present); "
              f"marked * below")
    print(f"bytes per decode token: {mb:.1f} MB = weights {bpt['weights_bytes'] / 1e6:.1f} MB "
          f"(LM head {bpt['lm_head_bytes'] / 1e6:.1f} MB) + table rows {bpt['table_rows_bytes'] / 1e3:.1f} kB + KV "
          f"{bpt['kv_bytes'] / 1e6:.1f} MB ({bpt['kv_bytes_per_position']} B x {bpt['mean_positions']:g} positions)")
    print(f"read bandwidth (bench/bandwidth, best of 10, measured before each thread count's runs): DRAM-size "
          f"buffer {dram_bytes / 2**20:.0f} MiB, model-size buffer {model_bytes / 1e6:.1f} MB: "
          + "; ".join(f"{t} thr {bw_dram[t]:.1f} / {bw_model[t]:.1f} GB/s" for t in a.threads))
    star = "*" if mode == "fallback" else ""
    head = ("threads | prefill tok/s fcb | ORT | fcb/ORT | decode tok/s fcb | ORT | fcb/ORT | "
            "decode GB/s fcb | ORT | fcb frac of DRAM / model-size bw | ORT frac of DRAM / model-size bw")
    print()
    print(head)
    print("|".join(["---"] * (head.count("|") + 1)))
    for t in a.threads:
        fp, fd, ftok = fcb_res[t]
        op, od, otok = ort_res[t]
        fg, og = fd * mb / 1e3, od * mb / 1e3
        print(f"{t} | {fp:.1f}{star} | {op:.1f} | {fp / op:.2f}{star} | {fd:.1f}{star} | {od:.1f} | {fd / od:.2f}{star}"
              f" | {fg:.2f}{star} | {og:.2f} | {fg / bw_dram[t]:.2f} / {fg / bw_model[t]:.2f}{star}"
              f" | {og / bw_dram[t]:.2f} / {og / bw_model[t]:.2f}")
    if mode == "generate":
        for t in a.threads:
            same = fcb_res[t][2] == ort_res[t][2]
            print(f"tokens at {t} thread(s): fcb {'==' if same else '!='} ONNX Runtime")


def ort_version():
    p = os.path.join(REPO, "tools", "oracle", "node_modules", "onnxruntime-node", "package.json")
    for cand in [p] + [os.path.join(d, "onnxruntime-node", "package.json")
                       for d in os.environ.get("NODE_PATH", "").split(":") if d]:
        try:
            with open(cand) as f:
                return json.load(f)["version"]
        except (OSError, ValueError, KeyError):
            continue
    return "?"


if __name__ == "__main__":
    main()

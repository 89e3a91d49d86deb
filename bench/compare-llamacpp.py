#!/usr/bin/env python3
"""hetero against llama.cpp on the same GGUF files, side by side.

Usage: bench/compare-llamacpp.py LLAMA_BENCH [--llama-batched-bench BIN]
           [--llama-bench-avx2 BIN] [--llama-quantize BIN]
           [--models tiny,small] [--types f16,q8_0,q4_0,q4_K_M]
           [--model FILE ...] [--requantize q8_0,q4_K_M]
           [--simd native|avx2,avx512] [--repack on,off] [-p 128] [-n 64] [-d 0,4096]
           [--kv-type f16,q8_0] [-t 1,2] [-r 3] [--reps-in-process] [--depth-table]
           [--batch 4,16,64] [--npp 128] [--ntg 64]
           [--bandwidth GBPS] [--self-test]

LLAMA_BENCH is an llama-bench binary built beforehand (hetero does not
build llama.cpp).  Each row is one model at one hetero SIMD level; the two
programs run in alternation, one repetition at a time (the order flipped
every repetition), so that both see the same machine load; the table gives
the median tokens/s of each and their ratio.

Models: the embedded synthetic models (`--models` x `--types`, written by
build/hetero-run; a Q4_K_M file is made by llama-quantize from the F16 one
when `--llama-quantize` is given, else that type is skipped; `--models ''`
for none) and real GGUF files (`--model`, repeatable), each also
requantized to the `--requantize` types into a temporary directory
(hetero-quantize where it knows the type, llama-quantize for the _M/_S
mixes).

SIMD: `--simd avx2,avx512` runs hetero at each level (HX_SIMD).  llama.cpp
runs at the level it was built for ("native"), except that rows at avx2
use `--llama-bench-avx2` when given (an llama.cpp built without AVX-512).

Depth (`-d 0,4096`, llama-bench's `-d`): each test also after that many
tokens of context, evaluated unmeasured by both (`pp128@d4096`); each
program evaluates a depth once per process and reuses it for every test
and repetition there (llama-bench restores its saved state, hetero-bench
forks the session).  KV cache types (`--kv-type f16,q8_0`, a row each):
hetero-bench's `--kv-type`, llama-bench's `-ctk` and `-ctv`.  Threads
(`-t 1,2`): a row each, the thread-scaling column.

`--reps-in-process`: each program runs once per row with all `-r`
repetitions (the order of the two flipped row by row), so that a long
context is evaluated once per program and row rather than once per
repetition; the default alternates single repetitions.

`--depth-table`: `-p 512 -n 64 -d 0,4096,16384 --kv-type f16,q8_0
--reps-in-process` and the tests pp512 at every depth and tg64 at the
non-zero ones (llama-bench's `-d` table for long prompts); add `--simd
avx512,avx2 --llama-bench-avx2 BIN` for both levels.  It prints the time
it took at the end.

Repacked weights: `--repack on,off` runs hetero with HX_REPACK=1 and with
HX_REPACK=0 (each a row), in the same alternation as llama.cpp, so the
three share the machine's load; without it hetero runs with its default.

Batched decode (`--batch 4,16`, with `--llama-batched-bench`): B sequences,
each with `--npp` tokens of context, decode `--ntg` tokens each; hetero-bench
`-n NTG --seqs B -d NPP` against llama-batched-bench `-npp NPP -ntg NTG
-npl B` (its S_TG t/s), at the first SIMD level.

Roofline (tg rows): the bytes decode reads per token (every weight tensor
once, the token embedding table only where the output projection is
separate from it, then one row of it) and of the KV cache (the keys and
values of every earlier token, in the row's KV type, at the test's mean
position: hetero-bench's kv_bytes_per_token, the same bytes for both
programs, which store them alike) times tokens/s, as a share of the
machine's read bandwidth at the same thread count (`--bandwidth`, else
measured by build/bench-quant --bandwidth-only in turn with the programs'
repetitions, as one more of them, and its median taken: on a shared
machine the rate moves by half between minutes).  The column names the
rate it used.

A file llama.cpp fails on (a build whose kernels crash on this CPU, say)
keeps hetero's figures; the last column then says how llama.cpp ended.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import gguf_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("HX_BUILD", os.path.join(ROOT, "build"))
HETERO_QUANTIZE_TYPES = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"}


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hetero", "models")


def quiet(cmd, env=None):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def synthetic(preset, typ, quantize_bin):
    """Path of the embedded model in `typ`, written on first use."""
    if typ.lower() == "q4_k_m":
        src = synthetic(preset, "f16", quantize_bin)
        out = os.path.join(cache_dir(), f"synthetic-{preset}-q4_K_M.gguf")
        if not os.path.exists(out):
            if not quantize_bin:
                return None
            quiet([quantize_bin, src, out, "Q4_K_M"])
        return out
    path = os.path.join(cache_dir(), f"synthetic-{preset}-{typ}.gguf")
    if not os.path.exists(path):
        quiet([os.path.join(BUILD, "hetero-run"), "--synthetic", f"{preset}:{typ}", "--devices", "cpu", "-n", "1"])
    return path


def requantize(src, typ, workdir, quantize_bin):
    """`src` requantized to `typ` in workdir; None when no tool can."""
    out = os.path.join(workdir, f"{os.path.splitext(os.path.basename(src))[0]}-{typ}.gguf")
    if os.path.exists(out):
        return out
    if typ.lower() in HETERO_QUANTIZE_TYPES:
        # --pure: every matrix in that one type, as the name says (a recipe
        # name alone would give llama-quantize's mix for Q4_K, Q5_K ...)
        quiet([os.path.join(BUILD, "hetero-quantize"), "--pure", "--allow-requantize", src, out, typ.upper()])
    elif quantize_bin:
        quiet([quantize_bin, "--allow-requantize", src, out, typ.upper()])
    else:
        return None
    return out


# ---- reading what the programs print -------------------------------------

IN_LLC = set()  # (model path, test) rows hetero-bench found within the last-level cache
KV_READ = {}  # (model path, KV type, test) -> bytes of KV cache one decoded token reads


def parse_hetero(text, path=None, kv=None):
    """hetero-bench -o json: {test: tokens/s}; notes the decode rows whose
    working set fits the last-level cache (fits_llc) in IN_LLC, and the KV
    bytes each decoded token reads in KV_READ."""
    doc = json.loads(text)
    for r in doc["results"]:
        if r.get("fits_llc"):
            IN_LLC.add((path, r["test"]))
        if r.get("kv_bytes_per_token"):
            KV_READ[(path, kv, r["test"])] = r["kv_bytes_per_token"]
    return {r["test"]: r["avg_ts"] for r in doc["results"]}


def parse_llama_bench(text):
    """llama-bench -o json: {test: tokens/s} named as hetero-bench names them, and its commit."""
    tests, commit = {}, "unknown"
    for r in json.loads(text):
        name = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
        if r.get("n_depth"):
            name += f"@d{r['n_depth']}"
        tests[name] = r["avg_ts"]
        commit = r.get("build_commit") or commit
    return tests, commit


def parse_batched(text):
    """llama-batched-bench --output-format jsonl: {tgNTGxPL@dNPP: S_TG tokens/s}."""
    tests = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and '"speed_tg"' in line:
            r = json.loads(line)
            tests[batched_name(r["tg"], r["pl"], r["pp"])] = r["speed_tg"]
    return tests


def batched_name(ntg, pl, npp):
    return f"tg{ntg}x{pl}" + (f"@d{npp}" if npp else "")


def parse_bandwidth(text, threads):
    """bench-quant's line "memory read bandwidth (...): 1 thread X GB/s, 2 threads Y GB/s"."""
    m = re.search(r"memory read bandwidth \(.*?\): 1 thread ([0-9.]+) GB/s, 2 threads ([0-9.]+) GB/s", text)
    if not m:
        raise ValueError("no memory read bandwidth line")
    return float(m.group(1) if threads == 1 else m.group(2))


def gguf_decode_bytes(path):
    """Bytes one decoded token reads from the weights: every tensor's bytes
    (the gap to the next tensor's offset, the last one's to the end of the
    file), the token embedding table counted only when it is also the output
    projection (no output.weight), else one row of it, which is noise."""
    with open(path, "rb") as f:
        data = f.read()
    return decode_bytes_of(gguf_tensors(data), len(data))


def gguf_tensors(data):
    """[(name, offset in the data section, data section start)] of a GGUF file's bytes."""
    return [(name, off, start) for name, _, off, start in gguf_file.tensors(data)]


def decode_bytes_of(tensors, file_size):
    ordered = sorted(tensors, key=lambda t: t[1])
    sizes = {}
    for i, (name, off, start) in enumerate(ordered):
        end = ordered[i + 1][1] + start if i + 1 < len(ordered) else file_size
        sizes[name] = end - (off + start)
    tied = "output.weight" not in sizes
    return sum(s for name, s in sizes.items() if tied or name != "token_embd.weight")


# ---- running them ---------------------------------------------------------

REPACK_ENV = {"on": "1", "off": "0"}


def hetero_env(level, repack=None):
    env = dict(os.environ)
    if level != "native":
        env["HX_SIMD"] = level
    if repack:
        env["HX_REPACK"] = REPACK_ENV[repack]
    return env


def hetero_once(model, a, level, repack=None, kv="f16", threads=2, reps=1):
    out = subprocess.run([os.path.join(BUILD, "hetero-bench"), "-m", model, "-p", str(a.p), "-n", str(a.n),
                          "-d", a.d, "--kv-type", kv,
                          "-t", str(threads), "-r", str(reps), "--devices", "cpu", "-o", "json"],
                         check=True, capture_output=True, text=True, env=hetero_env(level, repack)).stdout
    return parse_hetero(out, model, kv)


def llama_once(bench, model, a, kv="f16", threads=2, reps=1):
    out = subprocess.run([bench, "-m", model, "-p", str(a.p), "-n", str(a.n), "-d", a.d, "-ctk", kv,
                          "-ctv", kv, "-t", str(threads), "-r", str(reps), "-o", "json"],
                         check=True, capture_output=True, text=True).stdout
    return parse_llama_bench(out)


def hetero_batched_once(model, a, level, threads):
    out = subprocess.run([os.path.join(BUILD, "hetero-bench"), "-m", model, "-p", "0", "-n", str(a.ntg),
                          "--seqs", a.batch, "-d", str(a.npp), "-t", str(threads), "-r", "1", "--devices", "cpu",
                          "-o", "json"], check=True, capture_output=True, text=True, env=hetero_env(level)).stdout
    return parse_hetero(out)


def llama_batched_once(bin_, model, a):
    most = max(int(b) for b in a.batch.split(","))
    threads = a.t.split(",")[0]
    out = subprocess.run([bin_, "-m", model, "-npp", str(a.npp), "-ntg", str(a.ntg), "-npl", a.batch,
                          "-t", threads, "-tb", threads, "-c", str(most * (a.npp + a.ntg) + 16),
                          "--output-format", "jsonl"], check=True, capture_output=True, text=True)
    return parse_batched(out.stdout + out.stderr)


def died(e):
    """How a llama.cpp run ended, in words."""
    if e.returncode < 0:
        try:
            return f"llama.cpp died of {signal.Signals(-e.returncode).name}"
        except ValueError:
            return f"llama.cpp died of signal {-e.returncode}"
    return f"llama.cpp exited {e.returncode}"


def guarded(fn, failed):
    """fn, run until it fails once: a failure (a crash of llama.cpp on one
    file) is noted in `failed` and that row's llama.cpp side left empty,
    so the rest of the comparison still runs."""
    def run():
        if failed:
            return {}
        try:
            return fn()
        except subprocess.CalledProcessError as e:
            failed.append(died(e))
            return {}
    return run


def seen(tests_commit, commits):
    """The tests of llama_once's answer; its commit noted."""
    commits.add(tests_commit[1])
    return tests_commit[0]


def alternate(reps, *fns):
    """Medians of {test: t/s} of measurements run in alternation, one
    repetition each in turn, the order reversed every other repetition."""
    samples = tuple({} for _ in fns)
    for r in range(reps):
        order = list(range(len(fns)))
        for who in (order if r % 2 == 0 else order[::-1]):
            for test, ts in fns[who]().items():
                samples[who].setdefault(test, []).append(ts)
    return tuple({t: statistics.median(v) for t, v in s.items()} for s in samples)


def in_process(flip, *fns):
    """Each fn once (it ran all repetitions itself), the order reversed
    when `flip`: {test: t/s} of each."""
    order = list(range(len(fns)))
    out = [None] * len(fns)
    for who in (order[::-1] if flip else order):
        out[who] = fns[who]()
    return tuple(out)


def tests_of(a):
    """The tests of a row: pp and tg at every depth; the depth table leaves
    out tg at depth 0."""
    depths = [int(d) for d in a.d.split(",")]
    return [f"{t}@d{d}" if d else t for d in depths for t in (f"pp{a.p}", f"tg{a.n}")
            if not (a.depth_table and d == 0 and t.startswith("tg"))]


def measured_bandwidth(threads):
    out = subprocess.run([os.path.join(BUILD, "bench-quant"), "--bandwidth-only", "--mib", "256", "--reps", "5"],
                         check=True, capture_output=True, text=True).stdout
    return parse_bandwidth(out, threads)


def row(label, typ, level, llama_level, test, h, l, roof, kv="f16", threads=2):
    ratio = f"{h / l:.2f}x" if h and l else "-"
    fmt = lambda v: f"{v:.1f}" if v else "-"
    print(f"| {label} | {typ} | {kv} | {threads} | {level} | {llama_level} | {test} | {fmt(h)} | {fmt(l)} | {ratio} "
          f"| {roof} |", flush=True)


def models_of(a, workdir):
    out = []
    for preset in filter(None, a.models.split(",")):
        for typ in a.types.split(","):
            out.append((f"synthetic {preset}", typ, synthetic(preset, typ, a.llama_quantize)))
    for path in a.model:
        base = os.path.basename(path)
        m = re.search(r"\.(Q[0-9A-Z_]+|F16|F32|BF16)\.gguf$", base, re.I)
        out.append((base, m.group(1) if m else "file", path))
        for typ in filter(None, a.requantize.split(",")):
            out.append((base, f"{typ} (requantized)", requantize(path, typ, workdir, a.llama_quantize)))
    return out


def compare(a):
    if not os.access(a.llama_bench, os.X_OK):
        sys.exit(f"compare-llamacpp: {a.llama_bench} is not an executable llama-bench")
    levels = a.simd.split(",")
    kvs = a.kv_type.split(",")
    threads = [int(t) for t in a.t.split(",")]
    bws = {t: a.bandwidth or measured_bandwidth(t) for t in threads}
    started = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="hetero-compare-")
    try:
        models = models_of(a, workdir)
        with open("/proc/loadavg") as f:
            load = f.read().split()[:3]
        how = ("each program once a row with all repetitions, the order flipped row by row, mean of the repetitions"
               if a.reps_in_process else "alternating repetitions, medians")
        bw_text = ", ".join(f"{bws[t]:.1f} GB/s at {t} thread{'s' if t > 1 else ''}" for t in threads)
        print(f"threads {a.t}, {a.r} repetitions, {how}; load average {' '.join(load)} at the start; "
              f"read bandwidth {bw_text}{' (given)' if a.bandwidth else ' (bench-quant, at the start)'}\n")
        print("| model | type | KV | threads | hetero SIMD | llama.cpp SIMD | test | hetero t/s | llama.cpp t/s "
              "| hetero / llama.cpp | roofline (hetero, llama.cpp), or note |")
        print("| --- | --- | --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: |")
        flip = False
        commits = set()
        for label, typ, path in models:
            if path is None:
                row(label, typ, "-", "-", "skipped: no quantizer for this type (--llama-quantize)", 0, 0, "")
                continue
            per_token = gguf_decode_bytes(path)
            for level, kv, nt in [(lv, k, t) for lv in levels for k in kvs for t in threads]:
                bench, llama_level = a.llama_bench, "native"
                if level == "avx2" and a.llama_bench_avx2:
                    bench, llama_level = a.llama_bench_avx2, "avx2"
                repacks = a.repack.split(",") if a.repack else [None]
                reps = a.r if a.reps_in_process else 1
                fns = [lambda rp=rp: hetero_once(path, a, level, rp, kv, nt, reps) for rp in repacks]
                failed = []
                llama = guarded(lambda: seen(llama_once(bench, path, a, kv, nt, reps), commits), failed)
                # The machine's read rate moves with its neighbours' load, so it
                # is read in turn with the programs' runs, as one more of them.
                rate = lambda nt=nt: {"bw": a.bandwidth or measured_bandwidth(nt)}
                if a.reps_in_process:
                    *hss, ls, rates = in_process(flip, *fns, llama, rate)
                    flip = not flip
                else:
                    *hss, ls, rates = alternate(a.r, *fns, llama, rate)
                bw = rates["bw"]
                for rp, hs in zip(repacks, hss):
                    for test in tests_of(a):
                        h, l = hs.get(test), ls.get(test)
                        roof = failed[0] if failed else ""
                        if test.startswith("tg") and h and l:
                            read = per_token + KV_READ.get((path, kv, test), 0)
                            roof = (f"{100 * h * read / (bw * 1e9):.0f} %, {100 * l * read / (bw * 1e9):.0f} %"
                                    f" of {bw:.1f} GB/s")
                            if (path, test) in IN_LLC:
                                roof = f"in LLC ({roof} of the memory's)"
                        row(label, typ, f"{level}, repack {rp}" if rp else level, llama_level, test, h, l, roof,
                            kv, nt)
            if a.batch and a.llama_batched_bench:
                failed = []
                hs, ls = alternate(a.r, lambda: hetero_batched_once(path, a, levels[0], threads[0]),
                                   guarded(lambda: llama_batched_once(a.llama_batched_bench, path, a), failed))
                for b in a.batch.split(","):
                    test = batched_name(a.ntg, int(b), a.npp)
                    row(label, typ, levels[0], "native", test, hs.get(test), ls.get(test), failed[0] if failed else "",
                        kvs[0], threads[0])
        with open("/proc/loadavg") as f:
            load = f.read().split()[:3]
        print(f"\nllama-bench build_commit {', '.join(sorted(commits)) or 'unknown'}; "
              f"load average {' '.join(load)} at the end; {(time.monotonic() - started) / 60:.1f} minutes")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ---- the parsers, on canned outputs ---------------------------------------

def self_test():
    lb = json.dumps([{"n_prompt": 128, "n_gen": 0, "n_depth": 0, "avg_ts": 250.5, "build_commit": "abc1234"},
                     {"n_prompt": 0, "n_gen": 64, "avg_ts": 40.25, "build_commit": "abc1234"},
                     {"n_prompt": 0, "n_gen": 64, "n_depth": 128, "avg_ts": 30.0}])
    failed, calls = [], []
    def crash():
        calls.append(1)
        raise subprocess.CalledProcessError(-signal.SIGSEGV, ["llama-bench"])
    g = guarded(crash, failed)
    assert g() == {} and g() == {} and len(calls) == 1, calls
    assert failed == ["llama.cpp died of SIGSEGV"], failed
    assert died(subprocess.CalledProcessError(3, ["x"])) == "llama.cpp exited 3"
    tests, commit = parse_llama_bench(lb)
    assert tests == {"pp128": 250.5, "tg64": 40.25, "tg64@d128": 30.0}, tests
    assert commit == "abc1234", commit
    bb = ("main: n_kv_max = 3088 ...\n"
          '{"n_kv_max": 3088, "pp": 128, "tg": 64, "pl": 4, "n_kv": 768, "t_pp": 1.0, "speed_pp": 512.0, '
          '"t_tg": 2.0, "speed_tg": 128.0, "t": 3.0, "speed": 256.0}\n'
          '{"n_kv_max": 3088, "pp": 128, "tg": 64, "pl": 16, "n_kv": 3072, "t_pp": 4.0, "speed_pp": 512.0, '
          '"t_tg": 4.0, "speed_tg": 256.0, "t": 8.0, "speed": 384.0}\n')
    assert parse_batched(bb) == {"tg64x4@d128": 128.0, "tg64x16@d128": 256.0}, parse_batched(bb)
    hb = json.dumps({"results": [{"test": "pp128", "avg_ts": 300.0}, {"test": "tg64x4@d128", "avg_ts": 90.0}]})
    assert parse_hetero(hb) == {"pp128": 300.0, "tg64x4@d128": 90.0}
    bq = "memory read bandwidth (AVX-512 streaming read-sum, 256 MiB): 1 thread 11.5 GB/s, 2 threads 19.0 GB/s\n"
    assert parse_bandwidth(bq, 1) == 11.5 and parse_bandwidth(bq, 2) == 19.0
    # A GGUF of one string key and three tensors: an untied model reads all
    # but the embedding table; a tied one reads that too.
    def gguf(names_sizes):
        kv = struct.pack("<Q", 12) + b"general.name" + struct.pack("<I", 8) + struct.pack("<Q", 1) + b"x"
        info, off = b"", 0
        for name, size in names_sizes:
            info += struct.pack("<Q", len(name)) + name.encode() + struct.pack("<IQI", 1, size // 2, 1)
            info += struct.pack("<Q", off)
            off += size
        head = b"GGUF" + struct.pack("<IQQ", 3, len(names_sizes), 1) + kv + info
        head += b"\0" * ((32 - len(head) % 32) % 32)
        return head + b"\1" * off
    untied = gguf([("token_embd.weight", 64), ("blk.0.attn_q.weight", 96), ("output.weight", 64)])
    assert decode_bytes_of(gguf_tensors(untied), len(untied)) == 160
    tied = gguf([("token_embd.weight", 64), ("blk.0.attn_q.weight", 96)])
    assert decode_bytes_of(gguf_tensors(tied), len(tied)) == 160
    assert batched_name(64, 16, 0) == "tg64x16"
    calls = []
    med = alternate(2, lambda: calls.append("a") or {"tg": len(calls)}, lambda: calls.append("b") or {"tg": 0},
                    lambda: calls.append("c") or {"tg": 1.0})
    assert calls == ["a", "b", "c", "c", "b", "a"], calls
    assert med == ({"tg": 3.5}, {"tg": 0}, {"tg": 1.0}), med
    ip = in_process(True, lambda: calls.append("x") or {"a": 1}, lambda: calls.append("y") or {"a": 2})
    assert calls[-2:] == ["y", "x"] and ip == ({"a": 1}, {"a": 2}), (calls, ip)
    class A:  # the depth table's tests: no tg at depth 0
        p, n, d, depth_table = 512, 64, "0,4096,16384", True
    assert tests_of(A) == ["pp512", "pp512@d4096", "tg64@d4096", "pp512@d16384", "tg64@d16384"], tests_of(A)
    A.depth_table = False
    assert tests_of(A)[:2] == ["pp512", "tg64"]
    hb2 = json.dumps({"results": [{"test": "tg64", "avg_ts": 9.0, "fits_llc": True},
                                  {"test": "tg64@d16384", "avg_ts": 2.0, "fits_llc": False}]})
    assert parse_hetero(hb2, "m.gguf") == {"tg64": 9.0, "tg64@d16384": 2.0}
    assert ("m.gguf", "tg64") in IN_LLC and ("m.gguf", "tg64@d16384") not in IN_LLC
    print("compare-llamacpp: self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("llama_bench", nargs="?")
    ap.add_argument("--llama-batched-bench")
    ap.add_argument("--llama-bench-avx2")
    ap.add_argument("--llama-quantize")
    ap.add_argument("--models", default="tiny,small")
    ap.add_argument("--types", default="f16,q8_0,q4_0,q4_K_M")
    ap.add_argument("--model", action="append", default=[])
    ap.add_argument("--requantize", default="")
    ap.add_argument("--simd", default="native")
    ap.add_argument("--repack", default="", help="on,off: hetero with and without repacked weights (HX_REPACK)")
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-d", default="0", help="context depths, as llama-bench's -d: 0,4096")
    ap.add_argument("--kv-type", default="f16", help="KV cache types for both programs, a row each: f16,q8_0")
    ap.add_argument("-t", default="2", help="threads, a row each: 1,2")
    ap.add_argument("--reps-in-process", action="store_true",
                    help="each program once a row with all repetitions (a long context evaluated once)")
    ap.add_argument("--depth-table", action="store_true",
                    help="-p 512 -n 64 -d 0,4096,16384 --kv-type f16,q8_0 --reps-in-process, tg at depth 0 left out")
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--batch", default="")
    ap.add_argument("--npp", type=int, default=128)
    ap.add_argument("--ntg", type=int, default=64)
    ap.add_argument("--bandwidth", type=float, help="read bandwidth in GB/s at -t threads")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.llama_bench:
        ap.error("LLAMA_BENCH is needed")
    if a.depth_table:
        a.p, a.n, a.d, a.reps_in_process = 512, 64, "0,4096,16384", True
        if a.kv_type == "f16":
            a.kv_type = "f16,q8_0"
    for kv in a.kv_type.split(","):
        if kv not in ("f16", "q8_0", "q4_0", "f32"):
            ap.error(f"--kv-type: '{kv}' is none of f16, q8_0, q4_0, f32")
    for t in a.t.split(","):
        if not t.isdigit() or int(t) < 1:
            ap.error(f"-t: '{t}' is not a thread count")
    for level in a.simd.split(","):
        if level not in ("native", "scalar", "avx2", "avx512"):
            ap.error(f"--simd: '{level}' is none of native, scalar, avx2, avx512")
    for rp in filter(None, a.repack.split(",")):
        if rp not in REPACK_ENV:
            ap.error(f"--repack: '{rp}' is none of on, off")
    compare(a)


if __name__ == "__main__":
    main()

"""hetero-server on one process and as a pipeline of 2 ranks under mpirun
(tests/test_mpi.c), or 2 tensor slices with --tensor-parallel in the model
arguments (tests/test_mpi_tp.c): four requests at once, greedy, must read
the same.
With four sessions in a step, rank 0 keeps two micro-batches in flight
(engine/pipeline.c), so this checks that path against one process.
Usage: mpi_server_check.py BUILD MODEL_ARGS.  Exit 0 when the texts are
the same, 1 otherwise (both printed)."""
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.request

PROMPTS = ["The capital of France is", "Once upon a time", "def fibonacci(n):", "Colors: red,"]


def complete(port, prompt, out, i):
    body = json.dumps({"prompt": prompt, "max_tokens": 12, "temperature": 0}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        out[i] = json.load(r)["choices"][0]["text"]


def run(build, model_args, port, ranks, tmp):
    launcher = []
    if ranks:
        launcher = ["mpirun", "--oversubscribe", "-np", str(ranks), "--host", f"127.0.0.1:{ranks}",
                    "--mca", "btl_vader_single_copy_mechanism", "none"]
        if "ASAN_OPTIONS" in os.environ:  # make asan (tests/test_mpi.c says why)
            launcher += ["-x", "ASAN_OPTIONS"]
    pidfile = os.path.join(tmp, f"pid-{port}")
    inner = (f"echo $$ > {pidfile}.${{OMPI_COMM_WORLD_RANK:-0}}; exec {build}/hetero-server {model_args} "
             f"--port {port} -c 256 -np 4 -t 1 --devices cpu")
    err = open(os.path.join(tmp, f"err-{port}"), "w")
    proc = subprocess.Popen(["timeout", "120"] + launcher + ["sh", "-c", inner], stderr=err)
    try:
        for _ in range(400):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        out = [None] * len(PROMPTS)
        threads = [threading.Thread(target=complete, args=(port, p, out, i)) for i, p in enumerate(PROMPTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # rank 0 drains, frees the model (the other ranks free theirs) and ends the job
        with open(pidfile + ".0") as f:
            os.kill(int(f.read()), signal.SIGTERM)
        rc = proc.wait(timeout=60)
        err.close()
        with open(os.path.join(tmp, f"err-{port}")) as f:
            return out, rc, f.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def main():
    build, model_args = sys.argv[1], sys.argv[2]
    tmp = sys.argv[3]
    one, rc1, _ = run(build, model_args, 18950 + os.getpid() % 500, 0, tmp)
    two, rc2, err = run(build, model_args, 19450 + os.getpid() % 500, 2, tmp)
    print("one process:", json.dumps(one), "exit", rc1)
    print("two ranks:  ", json.dumps(two), "exit", rc2)
    # 11 decode steps of four sessions each: as two micro-batches, rank 1
    # runs at least 22 steps; as one batch it would run about 12.  With
    # --tensor-parallel every rank runs every step whole: at least 11.
    tp = "--tensor-parallel" in model_args.split()
    m = re.search(r"rank 1 of 2: (?:tensor slice:|layers) [^;]+; (\d+) steps", err)
    steps = int(m.group(1)) if m else 0
    least = 11 if tp else 22
    print("rank 1 ran", steps, "steps (at least %d: %s)" % (least, "a tensor slice" if tp else "two micro-batches per step"))
    ok = rc1 == 0 and rc2 == 0 and None not in one and one == two and steps >= least
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

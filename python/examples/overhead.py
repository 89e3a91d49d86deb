"""The binding's overhead: tokens/s of Llama.create_completion against
hetero-run's, on the same model, prompt, length, context and threads,
greedy.

Each round starts hetero-run and a Python process that loads the model
with Llama and makes one create_completion: both cold alike (a fresh
process, its first generation).  Which of the two goes first alternates
from round to round, so that a machine busy with other work slows both
alike, and medians are compared.  hetero-run's
time is its own prefill + decode report; Python's is the wall time of the
whole create_completion call (tokenizing, the session, every callback),
and beside it C's own prefill + decode time inside that call, whose ratio
is the binding's own cost with no other process in between.

    python3 python/examples/overhead.py MODEL.gguf [HETERO_RUN] [ROUNDS] [N]
"""
import os
import re
import statistics
import subprocess
import sys

CHILD = r"""
import sys, time
from hetero import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=int(sys.argv[3]), n_threads=int(sys.argv[4]), verbose=False)
t0 = time.perf_counter()
r = llm.create_completion(sys.argv[2], max_tokens=int(sys.argv[5]), temperature=0)
wall = time.perf_counter() - t0
s = llm.last_stats
print(r["usage"]["completion_tokens"], wall, s.prefill_seconds + s.decode_seconds)
"""

model = sys.argv[1]
hetero_run = sys.argv[2] if len(sys.argv) > 2 else "build/hetero-run"
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
n = int(sys.argv[4]) if len(sys.argv) > 4 else 96
prompt, threads, ctx = "Once upon a time", 2, 2048
env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..") + os.pathsep +
           os.environ.get("PYTHONPATH", ""))

c_rates, py_rates, inner = [], [], []


def run_c():
    out = subprocess.run([hetero_run, "-m", model, "-p", prompt, "-n", str(n), "--temp", "0", "-t", str(threads),
                          "-c", str(ctx)], capture_output=True, text=True, check=True).stderr
    m = re.search(r"prefill (\d+) tokens in ([\d.]+) s .* decode (\d+) tokens in ([\d.]+) s", out)
    return int(m.group(3)), float(m.group(2)) + float(m.group(4))


def run_py():
    return subprocess.run([sys.executable, "-c", CHILD, model, prompt, str(ctx), str(threads), str(n)],
                          capture_output=True, text=True, check=True, env=env).stdout.split()


for r in range(rounds):
    if r % 2 == 0:
        (c_tok, c_sec), py = run_c(), run_py()
    else:
        py = run_py()
        c_tok, c_sec = run_c()
    py_tok, wall, c_inside = int(py[0]), float(py[1]), float(py[2])
    assert py_tok == c_tok, (py_tok, c_tok)
    c_rates.append(c_tok / c_sec)
    py_rates.append(py_tok / wall)
    inner.append(wall / c_inside)
    print(f"round {r + 1}: hetero-run {c_rates[-1]:.1f} tokens/s, create_completion {py_rates[-1]:.1f} tokens/s "
          f"(wall / C's own time {inner[-1]:.4f})", flush=True)
c, p = statistics.median(c_rates), statistics.median(py_rates)
paired = statistics.median(b / a for a, b in zip(c_rates, py_rates))
print(f"median of {rounds}, {n} tokens: hetero-run {c:.1f} tokens/s, create_completion {p:.1f} tokens/s, "
      f"ratio of medians {p / c:.3f}, median of the rounds' ratios {paired:.3f}; the binding's own cost: "
      f"{(statistics.median(inner) - 1) * 100:+.2f} % of the call")

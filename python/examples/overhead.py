"""The binding's overhead: tokens/s of Llama.create_completion against
hetero-run's on the same model, prompt, length and threads, greedy.

Runs alternate (hetero-run, then Python, ROUNDS times) so that a machine
busy with other work slows both alike; medians are compared.  hetero-run's
time is its own prefill + decode report; Python's is the wall time of the
whole create_completion call (tokenizing, the session, every callback).

    python3 python/examples/overhead.py MODEL.gguf [HETERO_RUN] [ROUNDS] [N]
"""
import re
import statistics
import subprocess
import sys
import time

from hetero import Llama

model = sys.argv[1]
hetero_run = sys.argv[2] if len(sys.argv) > 2 else "build/hetero-run"
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
n = int(sys.argv[4]) if len(sys.argv) > 4 else 96
prompt, threads, ctx = "Once upon a time", 2, 2048

llm = Llama(model_path=model, n_ctx=ctx, n_threads=threads, verbose=False)
llm(prompt, max_tokens=4, temperature=0)  # warm: page the weights in
c_rates, py_rates = [], []
for r in range(rounds):
    out = subprocess.run([hetero_run, "-m", model, "-p", prompt, "-n", str(n), "--temp", "0", "-t", str(threads),
                          "-c", str(ctx)], capture_output=True, text=True, check=True).stderr
    m = re.search(r"prefill (\d+) tokens in ([\d.]+) s .* decode (\d+) tokens in ([\d.]+) s", out)
    c_tok, c_sec = int(m.group(3)), float(m.group(2)) + float(m.group(4))
    t0 = time.perf_counter()
    res = llm.create_completion(prompt, max_tokens=n, temperature=0)
    py_sec = time.perf_counter() - t0
    py_tok = res["usage"]["completion_tokens"]
    assert py_tok == c_tok, (py_tok, c_tok)
    c_rates.append(c_tok / c_sec)
    py_rates.append(py_tok / py_sec)
    print(f"round {r + 1}: hetero-run {c_rates[-1]:.1f} tokens/s, create_completion {py_rates[-1]:.1f} tokens/s",
          flush=True)
c, p = statistics.median(c_rates), statistics.median(py_rates)
print(f"median of {rounds}, {n} tokens: hetero-run {c:.1f} tokens/s, create_completion {p:.1f} tokens/s, "
      f"ratio {p / c:.3f} ({(p / c - 1) * 100:+.1f} %)")

"""No leaks: 1,000 model/session cycles keep the process's resident
memory flat, whether closed explicitly or left to the collector."""
from __future__ import annotations

import gc

import hetero


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def cycle(runtime, path, explicit: bool, evaluate: bool) -> None:
    if explicit:
        with hetero.Model(runtime, path, n_ctx=32) as m, m.session() as s:
            if evaluate:
                s.eval([1, 2, 3])
                assert s.logits().shape == (258,)
    else:
        m = hetero.Model(runtime, path, n_ctx=32)
        s = m.session()
        if evaluate:
            s.eval([1, 2, 3])
            s.logits()
        del s, m  # the finalizers close them (the session first: it holds the model)


def test_model_session_cycles_keep_rss_flat(runtime, tiny_path):
    # Every cycle loads a model and opens a session; one in ten evaluates
    # (the KV blocks, the logits, the evaluation's buffers), which is what
    # takes time.
    for i in range(100):  # warm-up: allocator pools, caches
        cycle(runtime, tiny_path, i % 2 == 0, i % 20 in (0, 1))
    gc.collect()
    start = rss_mib()
    for i in range(1000):
        cycle(runtime, tiny_path, i % 2 == 0, i % 20 in (0, 1))
    gc.collect()
    grown = rss_mib() - start
    # A leak of one KV pool (32 tokens) or one session's logits per cycle
    # would be tens of MiB over 1,000 cycles.
    assert grown < 4.0, f"RSS grew {grown:.1f} MiB over 1,000 cycles"
    assert runtime.stats().tasks_alive == 0

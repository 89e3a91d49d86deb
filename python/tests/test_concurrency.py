"""Threads and asyncio: one Llama from many threads, the serving engine
from threads and from an event loop, and the GIL released while C runs."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

import hetero

GREEDY = hetero.Sampling(temperature=0)


def test_one_llama_from_threads(smollm2):
    prompts = ["The sky is", "Water is", "Cats are"]
    alone = {p: smollm2(p, max_tokens=6, temperature=0)["choices"][0]["text"] for p in prompts}
    got = {}

    def work(p):
        got[p] = smollm2(p, max_tokens=6, temperature=0)["choices"][0]["text"]

    ts = [threading.Thread(target=work, args=(p,)) for p in prompts]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert got == alone


def test_engine_from_threads_equals_sessions_alone(tiny):
    prompts = [f"prompt number {i}" for i in range(8)]
    alone = {}
    for p in prompts:
        with tiny.session() as s:
            alone[p] = s.generate(tiny.tokenize(p, parse_special=True), 10, GREEDY).text
    out = {}
    with hetero.Engine(tiny, max_running=4) as e:
        def work(p):
            r = e.submit(p, 10, GREEDY)
            pieces = [t.text for t in r]
            res = r.result()
            out[p] = (b"".join(pieces), res.stats.generated_tokens, res.finish_reason)

        ts = [threading.Thread(target=work, args=(p,)) for p in prompts]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        st = e.stats()
    assert {p: v[0] for p, v in out.items()} == alone
    assert all(v[1:] == (10, "length") for v in out.values())
    assert st.finished == 8 and st.failed == 0


def test_engine_logprobs_cancel_and_timeout(tiny):
    with hetero.Engine(tiny) as e:
        r = e.submit("abc", 4, GREEDY, top_logprobs=3)
        toks = [t for t in r if t.token >= 0]  # token -1: text held back until the end
        assert len(toks) == 4 and all(len(t.top) == 3 and t.top[0][0] == t.token for t in toks)
        long = e.submit("abc", 2000 - 8, GREEDY, ignore_eos=True) if tiny.n_ctx > 2000 else \
            e.submit("abc", tiny.n_ctx - 8, GREEDY, ignore_eos=True)
        long.cancel()
        res = long.result()
        assert res.finish_reason in ("cancelled", "length")
        slow = e.submit("abc", tiny.n_ctx - 8, GREEDY, ignore_eos=True)
        try:
            slow.result(timeout=0.0)
        except TimeoutError:
            pass
        slow.cancel()
        assert slow.result().finish_reason in ("cancelled", "length")


def test_async_engine(tiny):
    with tiny.session() as s:
        ref = s.generate(tiny.tokenize("Once upon a time", parse_special=True), 12, GREEDY).text

    async def main():
        async with hetero.AsyncEngine(tiny) as e:
            outs = await asyncio.gather(*[e.generate("Once upon a time", 12, GREEDY) for _ in range(6)])
            streamed = []
            async for t in e.submit("Once upon a time", 12, GREEDY):
                streamed.append(t.text)
            return outs, b"".join(streamed)

    outs, streamed = asyncio.run(main())
    assert all(text == ref and res.stats.generated_tokens == 12 for text, res in outs)
    assert streamed == ref


def test_the_gil_is_released_while_the_model_runs(tiny):
    # A Python thread counting while another thread evaluates: with the GIL
    # held through the C calls it could not count at all.
    stop = threading.Event()
    count = [0]

    def spin():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    with tiny.session() as s:
        ids = list(range(1, 200))
        t.start()
        time.sleep(0.01)
        before = count[0]
        t0 = time.perf_counter()
        s.eval(ids)
        dt = time.perf_counter() - t0
        during = count[0] - before
    stop.set()
    t.join()
    assert dt > 0.005 and during > 1000, (dt, during)


def test_engine_closed_with_requests_in_flight(tiny):
    e = hetero.Engine(tiny)
    r = e.submit("abc", tiny.n_ctx - 8, GREEDY, ignore_eos=True)
    next(iter(r))
    e.close()  # cancels it; its last callback came before the close returned
    list(r)
    assert r.result().finish_reason in ("cancelled", "length")


def test_engine_dropped_is_freed(tiny):
    import gc
    import weakref
    e = hetero.Engine(tiny)
    e.generate("abc", 4, GREEDY)
    w = weakref.ref(e)
    del e
    gc.collect()
    assert w() is None

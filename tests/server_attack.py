#!/usr/bin/env python3
"""hetero-server as an attacker and a careless client use it: one check per
defect of the server's hardening, each on servers of its own on 127.0.0.1
and free ports.  Attack traffic comes from other loopback addresses
(127.0.0.2 and up), so that the limits per client address can be told
from the fresh client's (127.0.0.1).  Every loop is bounded in count and
time.  Prints one line per check and runs them all; exits 1 when any
failed.

    server_attack.py BUILD_DIR [NAME...]   (NAME: run only those checks)
"""
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
ONLY = sys.argv[2:]


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


class Server:
    """hetero-server on a free port of 127.0.0.1."""

    def __init__(self, *args, expect_start=True):
        self.p = subprocess.Popen([f"{BUILD}/hetero-server", "--port", "0", "-t", "1", "--devices", "cpu", "--metrics", *args],
                                  stderr=subprocess.PIPE, text=True)
        self.port, self.err = None, []
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.p.stderr.readline()
            if not line:
                break
            self.err.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if expect_start:
            check(self.port, "hetero-server did not start: " + "".join(self.err)[-600:])
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.p.stderr:
            self.err.append(line)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def connect(srv, source="127.0.0.1", timeout=10):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", srv.port))
    return s


def read_reply(s, limit=5.0):
    """Bytes until the server closes, or `limit` seconds (then '<timeout>' is appended)."""
    s.settimeout(limit)
    data, end = b"", time.time() + limit
    try:
        while time.time() < end:
            b = s.recv(65536)
            if not b:
                return data
            data += b
    except (socket.timeout, TimeoutError):
        pass
    except OSError:
        return data
    return data + b"<timeout>"


def raw(srv, payload, limit=5.0, source="127.0.0.1"):
    s = connect(srv, source)
    s.sendall(payload)
    try:
        return read_reply(s, limit)
    finally:
        s.close()


def http(srv, method, path, body=None, headers=None, timeout=30, source=None):
    """(status, headers, parsed JSON or text); `source` binds the client address."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{srv.port}{path}", data=data, method=method,
                                 headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, hdrs, text = r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        status, hdrs, text = e.code, e.headers, e.read().decode()
    try:
        return status, hdrs, json.loads(text)
    except ValueError:
        return status, hdrs, text


def auth(key):
    return {"Authorization": f"Bearer {key}"}


def stream_open(srv, body, key=None, rcvbuf=None, source="127.0.0.1"):
    """A streamed completion's socket, its request sent."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(30)
    s.bind((source, 0))
    s.connect(("127.0.0.1", srv.port))
    b = json.dumps(dict(body, stream=True)).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + (f"Authorization: Bearer {key}\r\n".encode() if key else b"")
              + b"Content-Length: " + str(len(b)).encode() + b"\r\n\r\n" + b)
    return s


def first_event(s, limit=30):
    got, end = b"", time.time() + limit
    while b"data: " not in got and time.time() < end:
        b = s.recv(4096)
        if not b:
            break
        got += b
    return got


def keys_file(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False)
    f.write(text)
    f.close()
    return f.name


def metric(srv, name, key=None):
    _, _, text = http(srv, "GET", "/metrics", headers=auth(key) if key else None)
    m = re.search(rf"^hetero_{name} (\S+)$", text, re.M)
    check(m, f"/metrics has no hetero_{name}")
    return float(m.group(1))


def ttft_and_cached(srv, key, prompt, salt=None):
    """A streamed completion's time to its first token and its cached prompt tokens."""
    body = {"prompt": prompt, "max_tokens": 2, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    if salt is not None:
        body["cache_salt"] = salt
    data = json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{srv.port}/v1/completions", data=data, method="POST",
                                 headers={"Content-Type": "application/json", **auth(key)})
    t0, ttft, usage = time.perf_counter(), None, None
    with urllib.request.urlopen(req, timeout=60) as r:
        for line in r:
            if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                continue
            ev = json.loads(line[6:])
            if ttft is None and ev.get("choices"):
                ttft = time.perf_counter() - t0
            if ev.get("usage"):
                usage = ev["usage"]
    check(usage, "no usage chunk")
    return ttft, usage["prompt_tokens_details"]["cached_tokens"]


# 1 -------------------------------------------------------------------------

def cross_tenant_prefix():
    """Key B cannot learn key A's prompt from cached_tokens (or the time to first token)."""
    path = keys_file("sk-alice alice\nsk-carol carol\nsk-dave dave\n")
    # One token per byte (the embedded model): 48 bytes before the secret = 3 KV blocks.
    head = "You are the support bot of a bank. Internal code: "
    prompt = lambda code: head + code + " -- never reveal it. Padding to fill whole KV blocks.... User: hi"
    srv = Server("--api-keys", path, "-c", "512")
    try:
        http(srv, "POST", "/v1/completions", {"prompt": prompt("ZEBRA-7781-QX"), "max_tokens": 2},
             headers=auth("sk-alice"))
        # Each guess from a key that sent nothing before: only alice's blocks could match.
        right = ttft_and_cached(srv, "sk-carol", prompt("ZEBRA-7781-QX"))
        wrong = ttft_and_cached(srv, "sk-dave", prompt("ZEBRA-0000-AA"))
        print(f"   cross-tenant guess: right cached_tokens {right[1]}, ttft {right[0] * 1e3:.1f} ms; "
              f"wrong cached_tokens {wrong[1]}, ttft {wrong[0] * 1e3:.1f} ms")
        check(right[1] == 0 and wrong[1] == 0,
              f"another key's prompt shows in cached_tokens: right guess {right[1]}, wrong guess {wrong[1]}")
        # Within one key the cache still works; a cache_salt is a partition of its own.
        again = ttft_and_cached(srv, "sk-alice", prompt("ZEBRA-7781-QX"))
        salted = ttft_and_cached(srv, "sk-alice", prompt("ZEBRA-7781-QX"), salt="s1")
        salted2 = ttft_and_cached(srv, "sk-alice", prompt("ZEBRA-7781-QX"), salt="s1")
        check(again[1] >= 48, f"alice's own repeat found {again[1]} cached tokens")
        check(salted[1] == 0 and salted2[1] >= 48, f"cache_salt: first {salted[1]}, again {salted2[1]}")
    finally:
        srv.kill()
    # The operator's opt-in: one cache for all keys.
    srv = Server("--api-keys", path, "-c", "512", "--prefix-cache-shared")
    try:
        http(srv, "POST", "/v1/completions", {"prompt": prompt("ZEBRA-7781-QX"), "max_tokens": 2},
             headers=auth("sk-alice"))
        shared = ttft_and_cached(srv, "sk-carol", prompt("ZEBRA-7781-QX"))
        check(shared[1] >= 48, f"--prefix-cache-shared: carol found {shared[1]} cached tokens")
    finally:
        srv.kill()
        os.unlink(path)


# 2 -------------------------------------------------------------------------

def idle_connections():
    """Idle and trickling connections cannot lock out /health or a fresh client."""
    srv = Server("--max-requests", "16", "-c", "256")
    socks = []
    try:
        # max-requests + 64 + 20 idle connections from one address.
        for _ in range(16 + 64 + 20):
            try:
                socks.append(connect(srv, "127.0.0.2", timeout=2))
            except OSError:
                break
        time.sleep(0.3)
        t0 = time.time()
        try:
            st, _, _ = http(srv, "GET", "/health", timeout=3)
        except OSError as e:
            st = str(e)
        dt = time.time() - t0
        check(st == 200 and dt < 1.0, f"/health behind {len(socks)} idle connections: {st} after {dt:.2f} s")
        t0 = time.time()
        st, _, r = http(srv, "POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2}, timeout=5)
        check(st == 200, f"a completion behind {len(socks)} idle connections: {st}")
        print(f"   {len(socks)} idle connections: /health in {dt * 1e3:.0f} ms, a completion in "
              f"{(time.time() - t0) * 1e3:.0f} ms")
    finally:
        for s in socks:
            s.close()
        srv.kill()
    # The bounds: per address, in all (the oldest waiting gives way), and the idle deadline.
    srv = Server("-c", "256", "--max-connections", "48", "--max-connections-per-ip", "20", "--idle-timeout", "4")
    socks = []
    try:
        for _ in range(30):  # one address: 20 kept, the rest refused at once
            s = connect(srv, "127.0.0.2", timeout=2)
            socks.append(s)
        time.sleep(0.3)
        closed = sum(1 for s in socks if read_reply(s, 0.05) == b"")
        check(closed == 10, f"--max-connections-per-ip 20: {closed} of 30 closed, expected 10")
        for i in range(60):  # many addresses: past 48, refused while the others are young
            socks.append(connect(srv, f"127.0.1.{i + 1}", timeout=2))
        time.sleep(0.3)
        still = sum(1 for s in socks if read_reply(s, 0.01) != b"")
        young = sum(1 for s in socks[30:] if read_reply(s, 0.01) == b"")
        check(still <= 48 and young >= 1, f"past --max-connections 48: {still} open, {young} of 60 newcomers refused")
        time.sleep(1.2)  # then the oldest waiting one (over a second) gives way to a newcomer
        t0 = time.time()
        st, _, _ = http(srv, "GET", "/health", timeout=3)
        dt = time.time() - t0
        check(st == 200 and dt < 1.0, f"/health past --max-connections: {st} after {dt:.2f} s")
        # A slowloris client: a header byte every 0.3 s; closed by --idle-timeout 4.
        s = connect(srv, "127.0.0.3")
        t0, closed_at = time.time(), None
        for ch in b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 40:
            try:
                s.send(bytes([ch]))
                s.settimeout(0.3)
                if s.recv(1) == b"":
                    closed_at = time.time() - t0
                    break
            except (socket.timeout, TimeoutError):
                pass
            except OSError:
                closed_at = time.time() - t0
                break
            if time.time() - t0 > 9:
                break
        s.close()
        check(closed_at is not None and 3.5 < closed_at < 6.5,
              f"a slowloris client was not closed 4 s after it connected: {closed_at}")
        counts = {k: metric(srv, f"connections_{k}_total") for k in ("refused", "evicted", "timed_out")}
        check(all(counts.values()), f"/metrics connection counters: {counts}")
        print(f"   per-address limit refused 10 of 30; past the total, {still} open and {young} of 60 newcomers "
              f"refused; /health past the total limit in {dt * 1e3:.0f} ms; "
              f"slowloris closed after {closed_at:.1f} s")
    finally:
        for s in socks:
            s.close()
        srv.kill()


# 3 -------------------------------------------------------------------------

def tenant_queue_slots():
    """A key's queue does not take the server's --max-requests slots."""
    path = keys_file("sk-q q 1 0 1000\nsk-o o\n")
    srv = Server("--api-keys", path, "-c", "512", "--kv-tokens", "2048", "--max-requests", "4", "-np", "4")
    socks = []
    try:
        body = {"prompt": "Once", "max_tokens": 400, "temperature": 1, "ignore_eos": True}
        for _ in range(6):
            socks.append(stream_open(srv, body, key="sk-q"))
        # The server picks which of the six runs first: wait for whichever streams.
        ready, _, _ = select.select(socks, [], [], 60)
        check(len(ready) == 1, f"q's limit is 1 request at a time, yet {len(ready)} of 6 streamed")
        first_event(ready[0])
        time.sleep(0.5)
        t0 = time.perf_counter()
        st, hdrs, e = http(srv, "POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2},
                           headers=auth("sk-o"), timeout=30)
        check(st == 200, f"another key while q's queue holds 5 requests: {st} {e}")
        print(f"   q: 1 running + 5 queued; o answered 200 in {(time.perf_counter() - t0) * 1e3:.0f} ms")
    finally:
        for s in socks:
            s.close()
        srv.kill()
        os.unlink(path)


# 4 -------------------------------------------------------------------------

def key_file_parsing():
    """Whole lines, whole keys, bad files refused with the line; --api-key(-file); 'bearer' and spaces."""
    long_key = "k" * 200
    text = "# " + "x" * 509 + " ghost-key ghost\n" + f"{long_key} longkey\n" + "sk-a a\n"
    path = keys_file(text)
    srv = Server("--api-keys", path, "-c", "256")
    try:
        st, _, _ = http(srv, "GET", "/v1/models", headers=auth("ghost-key"))
        check(st == 401, f"the tail of a long comment line became a key: {st}")
        st, _, _ = http(srv, "GET", "/v1/models", headers=auth(long_key[:127]))
        check(st == 401, f"the first 127 characters of a 200-character key authenticate: {st}")
        st, _, _ = http(srv, "GET", "/v1/models", headers=auth(long_key))
        check(st == 200, f"the whole 200-character key: {st}")
        for h in ({"Authorization": "bearer sk-a"}, {"Authorization": "Bearer sk-a  "}, {"X-Api-Key": "sk-a"}):
            st, _, _ = http(srv, "GET", "/v1/models", headers=h)
            check(st == 200, f"{h}: {st}")
        st, _, _ = http(srv, "GET", "/v1/models", headers={"Authorization": "Bearer sk-"})
        check(st == 401, f"a prefix of a key: {st}")
    finally:
        srv.kill()
        os.unlink(path)
    for bad, line in (("sk-a a notanumber\n", 1), ("# fine\nsk-a a 1 2 3 4\n", 2), ("sk-a a\nsk-a b\n", 2),
                      ("k\u00e9y a\n", 1)):
        path = keys_file(bad)
        srv = Server("--api-keys", path, expect_start=False)
        rc = srv.p.wait(timeout=30)
        err = "".join(srv.err)
        os.unlink(path)
        check(rc != 0 and f"line {line}" in err, f"a bad key file {bad!r} was not refused at line {line}: "
              f"rc {rc}, {err[-300:]!r}")
    path = keys_file("# llama-server's format\nsk-file-1\n  sk-file-2  \n")
    srv = Server("--api-key", "sk-x,sk-y", "--api-key", "sk-z", "--api-key-file", path, "-c", "256")
    try:
        for k in ("sk-x", "sk-y", "sk-z", "sk-file-1", "sk-file-2"):
            st, _, _ = http(srv, "GET", "/v1/models", headers=auth(k))
            check(st == 200, f"--api-key/--api-key-file key {k}: {st}")
        st, _, _ = http(srv, "GET", "/v1/models", headers=auth("sk-w"))
        check(st == 401, f"an unknown key: {st}")
    finally:
        srv.kill()
        os.unlink(path)
    print("   long lines whole, long keys whole, 4 bad files refused with their line, --api-key(-file), "
          "'bearer', trailing spaces, X-Api-Key")


# 5 -------------------------------------------------------------------------

def tokens_per_minute():
    """A key limited to 50 tokens a minute gets at most 50, however many requests run at once."""
    path = keys_file("sk-t t 0 50 0\n")
    srv = Server("--api-keys", path, "-c", "512", "--kv-tokens", "8192", "-np", "16")
    try:
        got, lock = [], threading.Lock()

        def one():
            st, _, r = http(srv, "POST", "/v1/completions",
                            {"prompt": "Hi", "max_tokens": 200, "temperature": 1, "ignore_eos": True,
                             "logprobs": 0}, headers=auth("sk-t"), timeout=120)
            with lock:
                got.append((st, r))
        ts = [threading.Thread(target=one) for _ in range(10)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(150)
        ok = [r for st, r in got if st == 200]
        total = sum(r["usage"]["total_tokens"] for r in ok)
        given = sum(len(r["choices"][0]["logprobs"]["tokens"]) for r in ok)
        counted = sum(r["usage"]["completion_tokens"] for r in ok)
        print(f"   10 concurrent requests under 50 tokens/minute: {len(ok)} answered, "
              f"{len(got) - len(ok)} refused (429), {total} tokens in all")
        check(len(got) == 10 and ok, f"answers: {[st for st, _ in got]}")
        check(total <= 50, f"{total} tokens given to a key limited to 50 a minute")
        check(all(r["choices"][0]["finish_reason"] == "length" for r in ok), "finish_reason of a cut answer")
        check(given == counted, f"{given} tokens given, {counted} counted in usage")
    finally:
        srv.kill()
        os.unlink(path)


# 6 -------------------------------------------------------------------------

def bounded_shutdown():
    body = {"prompt": "Once", "max_tokens": 3000, "temperature": 1, "ignore_eos": True}
    # SIGHUP drains like SIGTERM: the stream ends with its last chunk and [DONE].
    srv = Server("-c", "1024")
    try:
        s = stream_open(srv, dict(body, max_tokens=300))
        got = first_event(s)
        srv.p.send_signal(signal.SIGHUP)
        got += read_reply(s, 30)
        rc = srv.p.wait(timeout=30)
        s.close()
        check(b"data: [DONE]" in got and b'"finish_reason":"length"' in got and rc == 0,
              f"SIGHUP: exit {rc}, the stream ends {got[-120:]!r}")
        print("   SIGHUP: the stream ends with its final chunk and [DONE], exit 0")
    finally:
        srv.kill()
    # During the drain: new work gets 503 + Retry-After at once; a second signal exits at once.
    srv = Server("-c", "4096")
    try:
        s = stream_open(srv, body)
        first_event(s)
        srv.p.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        t0 = time.time()
        try:
            st, hdrs, e = http(srv, "GET", "/health", timeout=3)
            st2, hdrs2, e2 = http(srv, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 2}, timeout=3)
        except OSError as err:
            st = st2 = f"no answer: {err}"
            hdrs = hdrs2 = {}
            e2 = {}
        dt = time.time() - t0
        check(st == 503 and hdrs.get("Retry-After") and st2 == 503 and hdrs2.get("Retry-After")
              and e2["error"]["code"] == "shutting_down" and dt < 2,
              f"during the drain: /health {st}, completion {st2} {e2}, Retry-After {hdrs2.get('Retry-After')}, "
              f"{dt:.1f} s")
        t0 = time.time()
        srv.p.send_signal(signal.SIGINT)
        try:
            rc = srv.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            rc = None
        dt = time.time() - t0
        s.close()
        check(rc is not None and dt < 2, f"a second signal: exit {rc} after {dt:.1f} s")
        print(f"   during the drain: 503 + Retry-After; a second signal exits in {dt * 1e3:.0f} ms")
    finally:
        srv.kill()
    # A client that never reads: the drain ends at --drain-timeout.
    srv = Server("-c", "4096", "--drain-timeout", "2")
    try:
        s = stream_open(srv, body, rcvbuf=2048)
        time.sleep(0.5)
        t0 = time.time()
        srv.p.send_signal(signal.SIGTERM)
        try:
            rc = srv.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            rc = None
        dt = time.time() - t0
        s.close()
        check(rc == 0 and dt < 8, f"SIGTERM with a client that never reads: exit {rc} after {dt:.1f} s")
        print(f"   SIGTERM with a reader that never reads (--drain-timeout 2): exit 0 after {dt:.1f} s")
    finally:
        srv.kill()


# 7 -------------------------------------------------------------------------

def mhd_version():
    try:
        v = subprocess.run(["pkg-config", "--modversion", "libmicrohttpd"], capture_output=True, text=True).stdout
        return tuple(int(x) for x in v.strip().split(".")[:2])
    except (OSError, ValueError):
        return (0, 0)


def http_framing():
    srv = Server("-c", "256")
    try:
        def status_and_error(resp):
            head, _, body = resp.partition(b"\r\n\r\n")
            status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.1 ") else 0
            try:
                err = json.loads(body)["error"]
            except (ValueError, KeyError, TypeError):
                err = None
            return status, err, body
        body = b'{"content":"a"}'
        # libmicrohttpd 1.0 refuses a Transfer-Encoding other than chunked itself (400, its own
        # page) before the server sees the request; 0.9 passes it on, and the server says 501.
        te_by_mhd = mhd_version() >= (1, 0)
        te_status = 400 if te_by_mhd else 501
        cases = [  # name, status, whether the server (not libmicrohttpd) answers, the request
            ("two Content-Length headers", 400, True,
             b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 15\r\nContent-Length: 15\r\n\r\n" + body),
            ("two different Content-Length headers", 400, True,
             b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 15\r\nContent-Length: 4\r\n\r\n" + body),
            ("Transfer-Encoding: identity", te_status, not te_by_mhd,
             b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n" + body),
            ("Transfer-Encoding: gzip", te_status, not te_by_mhd,
             b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n" + body),
            ("Transfer-Encoding: chunked and Content-Length", 400, True,
             b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 15\r\n\r\n"
             b"f\r\n" + body + b"\r\n0\r\n\r\n"),
        ]
        for name, want, ours, payload in cases:
            t0 = time.time()
            resp = raw(srv, payload, limit=5)
            status, err, b = status_and_error(resp)
            check(status == want and (not ours or (err and err.get("message"))) and time.time() - t0 < 3,
                  f"{name}: {resp[:200]!r}")
        # Chunked bodies still work.
        resp = raw(srv, b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                   b"f\r\n" + body + b"\r\n0\r\n\r\n")
        check(resp.startswith(b"HTTP/1.1 200") and b'"tokens"' in resp, f"a chunked body: {resp[:200]!r}")
        # A Content-Length that is not a number: libmicrohttpd answers before the server sees the request.
        for cl in (b"abc", b"-1", b"0x10", b"99999999999999999999999"):
            resp = raw(srv, b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: " + cl + b"\r\n\r\n{}")
            status, _, _ = status_and_error(resp)
            check(status in (400, 413) and not resp.endswith(b"<timeout>"), f"Content-Length {cl!r}: {resp[:200]!r}")
            if mhd_version() >= (1, 0):
                check(resp.count(b"HTTP/1.1 ") == 1, f"Content-Length {cl!r}: the status line twice")
        st, _, _ = http(srv, "GET", "/health")
        check(st == 200, "the server is down after the framing cases")
        note = "" if mhd_version() >= (1, 0) else \
            " (malformed Content-Length: libmicrohttpd 0.9.75 answers with its status line twice; 1.0 fixes it)"
        te = "400 (libmicrohttpd's own)" if te_by_mhd else "501"
        print(f"   duplicate Content-Length 400, Transfer-Encoding identity/gzip {te}, TE+CL 400, chunked 200{note}")
    finally:
        srv.kill()


# 8 -------------------------------------------------------------------------

def metrics_and_head():
    path = keys_file("sk-m m\n")
    srv = Server("--api-keys", path, "-c", "256")
    try:
        st, _, _ = http(srv, "GET", "/metrics")
        check(st == 401, f"/metrics without a key: {st}")
        st, _, _ = http(srv, "GET", "/metrics", headers=auth("sk-m"))
        check(st == 200, f"/metrics with the key: {st}")
        resp = raw(srv, b"HEAD /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        check(resp.startswith(b"HTTP/1.1 200"), f"HEAD /health: {resp[:100]!r}")
        st, _, _ = http(srv, "GET", "/health")
        check(st == 200, f"/health without a key: {st}")
    finally:
        srv.kill()
    srv = Server("--api-key", "sk-m", "--metrics-public", "-c", "256")
    try:
        st, _, _ = http(srv, "GET", "/metrics")
        check(st == 200, f"/metrics with --metrics-public: {st}")
    finally:
        srv.kill()
        os.unlink(path)
    print("   /metrics: 401 without the key, 200 with it or --metrics-public; HEAD /health 200")


# 9 -------------------------------------------------------------------------

def smaller():
    for args, what in ((["--port", "99999"], "99999"), (["--port", "abc"], "abc"), (["-c", "-5"], "-5"),
                       (["--max-requests", "0"], "0"), (["--temp", "hot"], "hot")):
        p = subprocess.run([f"{BUILD}/hetero-server", *args], capture_output=True, text=True, timeout=30)
        check(p.returncode == 2 and what in p.stderr and args[0] in p.stderr,
              f"{' '.join(args)}: exit {p.returncode}, {p.stderr[-200:]!r}")
    # llama-server's flags with no meaning here are refused by name, with what to use instead
    p = subprocess.run([f"{BUILD}/hetero-server", "-fa", "on"], capture_output=True, text=True, timeout=30)
    check(p.returncode == 2 and "attention" in p.stderr, f"-fa: {p.returncode} {p.stderr[-200:]!r}")
    p = subprocess.run([f"{BUILD}/hetero-server", "-ctk", "q8_0"], capture_output=True, text=True, timeout=30)
    check(p.returncode == 2 and "-ctv" in p.stderr, f"-ctk alone: {p.returncode} {p.stderr[-200:]!r}")
    # The port is taken before the model loads: a busy port fails before any loading.
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    p = subprocess.run([f"{BUILD}/hetero-server", "--port", str(busy.getsockname()[1]), "-t", "1", "--devices", "cpu"],
                       capture_output=True, text=True, timeout=60)
    busy.close()
    check(p.returncode == 1 and "listen" in p.stderr and "context" not in p.stderr,
          f"a busy port: {p.returncode} {p.stderr[-300:]!r}")
    # llama-server's request defaults: -n, --temp, --seed; -ctk/-ctv naming one type.
    srv = Server("-c", "256", "-n", "3", "--temp", "0.7", "--seed", "5", "-ctk", "q8_0", "-ctv", "q8_0")
    try:
        outs = [http(srv, "POST", "/v1/completions", {"prompt": "Once", "ignore_eos": True}) for _ in range(2)]
        check(all(st == 200 and r["usage"]["completion_tokens"] == 3 for st, _, r in outs),
              f"-n 3: {[r for _, _, r in outs]}")
        check(outs[0][2]["choices"][0]["text"] == outs[1][2]["choices"][0]["text"], "--seed 5: two answers differ")
        st, _, r = http(srv, "POST", "/v1/completions", {"prompt": "Once", "max_tokens": 5, "ignore_eos": True})
        check(st == 200 and r["usage"]["completion_tokens"] == 5, f"max_tokens over -n: {r}")
    finally:
        srv.kill()
    srv = Server("--host", "localhost", "-c", "256", "--max-requests", "1")
    try:
        st, _, _ = http(srv, "GET", "/health")
        check(st == 200, f"--host localhost: {st}")
        # A 503 says when to come back.
        s = stream_open(srv, {"prompt": "Once", "max_tokens": 400, "temperature": 1, "ignore_eos": True})
        first_event(s)
        st, hdrs, e = http(srv, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 2})
        s.close()
        check(st == 503 and hdrs.get("Retry-After"), f"503 over --max-requests: {st}, Retry-After "
              f"{hdrs.get('Retry-After')}")
        # Several prompts in one request are a batch, each prompt one of --max-requests (1 here):
        # the whole answer, or a 503 that says when to come back, never a partial one.
        st, hdrs, e = http(srv, "POST", "/v1/completions", {"prompt": ["a", "b"], "max_tokens": 2})
        check((st == 200 and len(e["choices"]) == 2) or (st == 503 and hdrs.get("Retry-After")),
              f"prompt [a, b] over --max-requests 1: {st} {e}")
        # top_logprobs keyed by text: of tokens that read alike (128 byte tokens read U+FFFD),
        # the most likely keeps the key, so the sampled token's own logprob never exceeds it.
        time.sleep(0.3)
        st, _, r = http(srv, "POST", "/v1/completions", {"prompt": "Once upon", "max_tokens": 40, "logprobs": 20,
                                                          "temperature": 1.5, "seed": 11})
        check(st == 200, f"logprobs: {st} {r}")
        lp = r["choices"][0]["logprobs"]
        seen = bad = 0
        for t, l, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
            if t in top:
                seen += 1
                bad += top[t] < l - 1e-6
        check(seen and not bad, f"top_logprobs: {bad} of {seen} keys hold less than the sampled token's logprob")
    finally:
        srv.kill()
    print("   bad option values exit 2 naming them; llama-server options refused by name; the port before the "
          "model; --host localhost; 503 Retry-After; several prompts; top_logprobs keep the most likely")


CHECKS = [("1-cross-tenant", cross_tenant_prefix), ("2-idle-connections", idle_connections),
          ("3-tenant-queue", tenant_queue_slots), ("4-key-file", key_file_parsing),
          ("5-tokens-per-minute", tokens_per_minute), ("6-shutdown", bounded_shutdown),
          ("7-http-framing", http_framing), ("8-metrics-head", metrics_and_head), ("9-smaller", smaller)]


def main():
    t0, failed = time.time(), []
    for name, fn in CHECKS:
        if ONLY and not any(o in name for o in ONLY):
            continue
        t1 = time.time()
        try:
            fn()
            print(f"ok {name} ({time.time() - t1:.1f} s)")
        except (Fail, OSError, ValueError, KeyError, TypeError, subprocess.TimeoutExpired) as e:
            failed.append(name)
            print(f"FAIL {name}: {type(e).__name__ if not isinstance(e, Fail) else ''} {e}"[:900])
        sys.stdout.flush()
    print(f"server_attack: {'all passed' if not failed else 'FAILED: ' + ', '.join(failed)} "
          f"in {time.time() - t0:.1f} s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

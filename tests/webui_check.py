#!/usr/bin/env python3
"""hetero-server's web page in a real headless Chromium, driven over the
Chrome DevTools protocol: the page and its files with their content types
and Content-Security-Policy; /machine behind the keys; the page asks for
the key, shows a refused request's error, keeps the key; a message typed
and sent streams its answer into the page (several lengths seen on the way,
the whole the same as the server's own greedy answer), with the request's
settings and key; the live panel's counters move (decode tokens/s, KV blocks
in use, the device's busy share) and agree with the server's; Stop aborts
the stream and the server cancels the request; no script error and no CSP
violation; without keys the page asks for none; --no-webui answers 404.
Screenshots go to BUILD/webui/.

    webui_check.py BUILD_DIR MODEL.gguf

Exit status: 0 passed, 1 a check failed (its FAIL line says which), 3 the
websocket-client package is missing, 4 no Chromium (the caller skips).
"""
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

try:
    import websocket
except ImportError:
    print("webui_check: the websocket-client package is missing (pip install -r tests/requirements.txt)")
    sys.exit(3)

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
MODEL = sys.argv[2] if len(sys.argv) > 2 else None
KEY = "sk-webui-check-key"
THINK_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "think-chatml.jinja")
SHOTS = os.path.join(BUILD, "webui")


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok:", msg, flush=True)


def find_chromium():
    """HX_CHROMIUM when set (and only it), else Chromium or Chrome on PATH."""
    names = [os.environ["HX_CHROMIUM"]] if os.environ.get("HX_CHROMIUM") else \
        ["chromium", "chromium-browser", "google-chrome"]
    return next((shutil.which(n) for n in names if shutil.which(n)), None)


class Server:
    """hetero-server on a free port of 127.0.0.1, stopped by SIGTERM."""

    def __init__(self, *args):
        self.p = subprocess.Popen([f"{BUILD}/hetero-server", "--port", "0", "-t", "2", "--devices", "cpu", *args],
                                  stderr=subprocess.PIPE, text=True)
        self.port, lines = None, []
        deadline = time.time() + 90
        while time.time() < deadline:
            line = self.p.stderr.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if not self.port:
            fail("hetero-server did not start: " + "".join(lines))
        self.err = lines
        threading.Thread(target=lambda: [self.err.append(x) for x in self.p.stderr], daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"

    def get(self, path, key=None, method="GET", body=None):
        """(status, headers, body bytes)"""
        req = urllib.request.Request(self.url + path, method=method, data=body)
        if key:
            req.add_header("Authorization", "Bearer " + key)
        if body is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def machine(self):
        st, _, body = self.get("/machine", KEY)
        if st != 200:
            fail(f"/machine answered {st}: {body[:200]!r}")
        return json.loads(body)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(timeout=60)
        if rc != 0:
            fail(f"hetero-server exited {rc} after SIGTERM: {''.join(self.err[-5:])}")


class Browser:
    """Headless Chromium and one page of it, over the DevTools protocol."""

    def __init__(self, exe):
        self.dir = tempfile.mkdtemp(prefix="hx-webui-")
        # --no-sandbox: the tests may run as root (CI); --disable-dev-shm-usage: containers' /dev/shm is small.
        self.p = subprocess.Popen([exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                   "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                                   "--disable-sync", "--disable-background-networking", "--disable-component-update",
                                   "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
                                   f"--user-data-dir={self.dir}", "--window-size=1280,860", "about:blank"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port, lines, deadline = None, [], time.time() + 60
        while time.time() < deadline:
            line = self.p.stderr.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                port = int(m.group(1))
                break
        if not port:
            self.close()
            fail("Chromium did not start: " + "".join(lines[-10:]))
        threading.Thread(target=lambda: [None for _ in self.p.stderr], daemon=True).start()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            pages = [t for t in json.load(r) if t["type"] == "page"]
        if not pages:
            fail("Chromium has no page to drive")
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events = []
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(domain + ".enable")
        self.call("Emulation.setDeviceMetricsOverride", width=1280, height=800, deviceScaleFactor=1, mobile=False)

    def call(self, method, **params):
        self.next_id += 1
        my = self.next_id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my:
                if "error" in msg:
                    fail(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def js(self, expr):
        """The value of a JavaScript expression in the page (promises awaited)."""
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            fail(f"{expr}: {r['exceptionDetails'].get('exception', {}).get('description', r['exceptionDetails'])}")
        return r["result"].get("value")

    def wait(self, expr, what, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = self.js(expr)
            if v:
                return v
            time.sleep(0.1)
        fail(f"{what}: not so after {timeout} s (page: {self.js('document.body.innerText')[:600]!r})")

    def navigate(self, url):
        self.call("Page.navigate", url=url)
        self.wait("document.readyState === 'complete' && !!document.getElementById('machine-status')",
                  "the page loaded")

    def click(self, selector):
        """A real mouse click in the middle of the element."""
        box = self.js(f"(() => {{ const r = document.querySelector('{selector}').getBoundingClientRect();"
                      f" return [r.x + r.width / 2, r.y + r.height / 2]; }})()")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def type(self, selector, text):
        """Focus then keyboard input, as a user types."""
        self.click(selector)
        self.js(f"document.querySelector('{selector}').select && document.querySelector('{selector}').select()")
        self.call("Input.insertText", text=text)

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        print("screenshot:", path, flush=True)

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def http_checks(srv):
    st, h, body = srv.get("/")
    check(st == 200 and h["Content-Type"].startswith("text/html") and b"<title>hetero-server</title>" in body,
          "GET / is the page, text/html")
    csp = h.get("Content-Security-Policy", "")
    check("default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp,
          "the page has its Content-Security-Policy: " + csp)
    check(h.get("X-Content-Type-Options") == "nosniff", "the page says nosniff")
    for path, kind in (("/app.js", "text/javascript"), ("/style.css", "text/css"), ("/index.html", "text/html"),
                       ("/favicon.svg", "image/svg+xml")):
        st, h, _ = srv.get(path)
        check(st == 200 and h["Content-Type"].startswith(kind), f"GET {path}: 200, {kind}")
    st, _, _ = srv.get("/", method="POST", body=b"{}")
    check(st == 405, f"POST / is 405 (got {st})")
    st, _, _ = srv.get("/machine", KEY, method="POST", body=b"{}")
    check(st == 405, f"POST /machine is 405 (got {st})")
    st, _, body = srv.get("/machine")
    check(st == 401 and b"invalid_api_key" in body, "/machine without the key: 401")
    st, _, _ = srv.get("/machine", "sk-wrong")
    check(st == 401, "/machine with a wrong key: 401")
    m = srv.machine()
    check(m["model"] and m["devices"] and m["kv"]["blocks_total"] > 0 and "generated_tokens" in m["engine"],
          f"/machine with the key: {len(m['devices'])} device(s), {m['kv']['blocks_total']} KV blocks")
    check(all(0 <= d["busy_recent"] <= 1 and 0 <= d["busy_total"] <= 1 for d in m["devices"]),
          "every device's busy share is within 0..1")


# Samples the panel and the answer every 50 ms, in the page (the test reads them afterwards).
SAMPLER = """(() => {
  const v = (id) => Number(document.getElementById(id).dataset.value);
  window.__samples = [];
  window.__sampler = setInterval(() => {
    const answers = document.querySelectorAll('#log li.assistant .text');
    const busy = [...document.querySelectorAll('#devices output')].map((o) => Number(o.dataset.value));
    window.__samples.push({t: performance.now(), answer: answers.length ? answers[answers.length - 1].textContent : '',
      n_answers: answers.length, live: !document.getElementById('stop').disabled,
      decode: v('m-decode'), prefill: v('m-prefill'), kv_used: v('m-kv-used'), kv_cached: v('m-kv-cached'),
      running: v('m-running'), busy: Math.max(0, ...busy)});
  }, 50);
  return true;
})()"""


def browser_checks(srv, b):
    b.navigate(srv.url + "/")
    b.wait("!document.getElementById('key-form').hidden && "
           "/needs an API key/.test(document.getElementById('machine-status').textContent)",
           "the page asks for the API key when /machine says 401")
    print("ok: the page asks for the API key", flush=True)
    time.sleep(2.5)
    b.js("1")  # collects the events that came meanwhile
    polls = [e for e in b.events if e["method"] == "Network.requestWillBeSent" and
             e["params"]["request"]["url"].endswith("/machine")]
    check(len(polls) == 1, f"refused, the page stops reading /machine until a key is given ({len(polls)} reads)")

    # Without the key, a message's 401 is shown as it is.
    b.type("#prompt", "Hello?")
    b.click("#send")
    err = b.wait("!document.getElementById('error').hidden && document.getElementById('error').textContent",
                 "the error of a request without the key is shown")
    check("401" in err and "API key" in err, f"a refused request's error is shown: {err!r}")
    check(b.js("document.getElementById('prompt').value") == "Hello?" and
          b.js("document.querySelectorAll('#log li').length") == 0,
          "the refused message goes back to the box, the log stays empty")

    b.type("#api-key", KEY)
    b.click("#key-save")
    model = b.wait("document.getElementById('model').textContent", "the panel reads /machine with the key")
    check(b.js(f"localStorage.getItem('hetero.apiKey') === '{KEY}'"), "the key is kept in localStorage")
    b.wait("document.querySelectorAll('#devices li').length > 0 && "
           "Number(document.getElementById('m-kv-total').dataset.value) > 0", "the panel shows devices and the KV pool")
    print(f"ok: the panel shows model {model!r}, devices and the KV pool", flush=True)
    before = srv.machine()

    # The settings: greedy, a bounded answer, a seed.
    b.click("#settings summary")
    b.type("#temperature", "0")
    b.type("#max_tokens", "48")
    b.type("#seed", "7")
    question = "Write a short poem about the sea."
    b.js(SAMPLER)
    b.type("#prompt", question)
    b.call("Input.dispatchKeyEvent", type="keyDown", key="Enter", code="Enter", windowsVirtualKeyCode=13,
           text="\r")
    b.call("Input.dispatchKeyEvent", type="keyUp", key="Enter", code="Enter", windowsVirtualKeyCode=13)
    b.wait("!document.getElementById('stop').disabled", "Enter sends: Stop is enabled while it streams", 10)
    b.wait("document.getElementById('stop').disabled && !!document.querySelector('#log li.assistant .note')",
           "the answer ends", 180)
    answer = b.js("document.querySelector('#log li.assistant .text').textContent")
    note = b.js("document.querySelector('#log li.assistant .note').textContent")
    check(answer.strip() != "" and re.match(r"\d+ tokens, [0-9.]+ s, length$", note),
          f"the answer: {answer[:60]!r}... ({note})")

    # The request the page sent: the key, the settings, streaming.
    sent = [e["params"]["request"] for e in b.events if e["method"] == "Network.requestWillBeSent"
            and e["params"]["request"]["url"].endswith("/v1/chat/completions")]
    req = sent[-1]
    body = json.loads(req.get("postData", "{}"))
    check(req["headers"].get("Authorization") == "Bearer " + KEY, "the chat request carries the key")
    check(body.get("stream") is True and body.get("temperature") == 0 and body.get("max_tokens") == 48 and
          body.get("seed") == 7 and body["messages"][-1] == {"role": "user", "content": question} and
          "top_k" not in body, "the chat request: stream, the settings given, none of those left empty")

    # The same request whole, from the server: the streamed text is the answer, nothing lost or doubled.
    st, _, whole = srv.get("/v1/chat/completions", KEY, "POST", json.dumps(
        {k: body[k] for k in ("model", "messages", "temperature", "max_tokens", "seed") if k in body}).encode())
    check(st == 200, f"the same request, not streamed: {st}")
    expect = json.loads(whole)["choices"][0]["message"]["content"]
    check(answer == expect, f"the streamed answer in the page is the server's greedy answer ({len(expect)} chars)")

    # The panel's rates come from two readings around the work, so they show however fast it went.
    time.sleep(2.5)
    samples = b.js("window.__samples")
    after = srv.machine()
    decode = max(s["decode"] for s in samples)
    check(decode > 0, f"the panel's decode rate went above 0: {decode:.1f} tokens/s at most")
    check(max(s["prefill"] for s in samples) > 0, "the panel's prefill rate went above 0")
    gen = b.js("Number(document.getElementById('m-generated').dataset.value)")
    check(before["engine"]["generated_tokens"] < gen <= after["engine"]["generated_tokens"],
          f"the panel's generated tokens are the server's: {before['engine']['generated_tokens']} -> {gen} "
          f"(server now {after['engine']['generated_tokens']})")
    cached = b.wait("Number(document.getElementById('m-kv-cached').dataset.value)",
                    "the panel shows the answer's KV blocks kept in the prefix cache", 10)
    check(cached > 0 and after["kv"]["blocks_cached"] > 0, f"the prefix cache holds {cached} blocks, shown")

    # A long answer: while it streams, the text grows in the page and the panel shows the machine at
    # work (KV blocks in use, the request running, a device busy, the decode rate).
    cancelled = after["engine"]["cancelled"]
    b.type("#max_tokens", "1500")
    b.js("window.__samples = [], true")
    b.type("#prompt", "Tell me a long story about a lighthouse keeper.")
    b.click("#send")
    used0 = after["kv"]["blocks_used"]
    live = ("window.__samples.filter((s) => s.live && s.n_answers === 2)")
    seen = (f"(() => {{ const l = {live}; return new Set(l.map((s) => s.answer.length)).size >= 3 &&"
            f" l.some((s) => s.kv_used > {used0}) && l.some((s) => s.running >= 1) && l.some((s) => s.busy > 0) &&"
            f" l.some((s) => s.decode > 0) && l.some((s) => s.answer.length > 250); }})()")
    b.wait(f"{seen} || document.getElementById('stop').disabled", "the long answer streams", 180)
    live = b.js(live)
    ok = b.js(seen) and b.js("!document.getElementById('stop').disabled")
    check(ok, "while the answer streams: its text grows, and the panel shows KV blocks in use, the request "
          "running, a device busy and the decode rate" + ("" if ok else f" (the last samples: {live[-3:]})"))
    print(f"ok: seen while streaming: {len({len(s['answer']) for s in live})} lengths of the answer, "
          f"KV blocks in use {used0} -> {max(s['kv_used'] for s in live)}, running "
          f"{max(s['running'] for s in live)}, busy {max(s['busy'] for s in live):.0%}, decode "
          f"{max(s['decode'] for s in live):.1f} tokens/s", flush=True)
    os.makedirs(SHOTS, exist_ok=True)
    b.click("#settings summary")  # folded, for the picture
    b.screenshot(os.path.join(SHOTS, "streaming.png"))

    # Stop: the stream is aborted, the server cancels the request.
    b.click("#stop")
    b.wait("document.getElementById('stop').disabled", "Stop ends the stream", 10)
    check(b.js("document.querySelectorAll('#log li.assistant .note')[1].textContent") == "stopped",
          "the stopped answer says so")
    deadline = time.time() + 15
    while srv.machine()["engine"]["cancelled"] <= cancelled and time.time() < deadline:
        time.sleep(0.2)
    check(srv.machine()["engine"]["cancelled"] > cancelled, "the server cancelled the stopped request")
    time.sleep(1.5)
    b.screenshot(os.path.join(SHOTS, "stopped.png"))
    b.js("clearInterval(window.__sampler), true")

    # A reload keeps the key: the panel works at once.
    b.navigate(srv.url + "/")
    b.wait("document.getElementById('model').textContent", "after a reload the kept key reads /machine")
    check(b.js("document.getElementById('api-key').value") == KEY, "after a reload the key is still there")

    def problems():
        return [e["params"]["entry"] if "entry" in e["params"] else e["params"] for e in b.events
                if e["method"] == "Runtime.exceptionThrown" or
                (e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error" and
                 "401" not in e["params"]["entry"].get("text", ""))]
    check(not problems(), f"no script error and no CSP violation in the page ({problems()[:2]})")

    # The policy holds in the browser: an injected inline script does not run, and is reported
    # where the check above looks.
    b.js("(() => { const s = document.createElement('script'); s.textContent = 'window.__inline = 1';"
         " document.body.append(s); return true; })()")
    time.sleep(0.5)
    b.js("1")  # collects the events that came meanwhile
    check(b.js("window.__inline === undefined") and
          any("Content Security Policy" in p.get("text", "") for p in problems()),
          "an inline script is refused by the page's CSP, and the refusal is seen")


def thought_checks(srv, b):
    """A template that opens a thought (<think>) and a budget of 4 tokens:
    the page shows the streamed thought folded above the answer, as the
    server's reasoning_content and content, and sends it back with the
    next turn."""
    b.navigate(srv.url + "/")
    b.wait("document.getElementById('model').textContent", "the thinking server's page reads /machine")
    b.click("#settings summary")
    b.type("#temperature", "0")
    b.type("#max_tokens", "24")
    b.type("#prompt", "Tell me a story.")
    b.click("#send")
    b.wait("document.getElementById('stop').disabled && !!document.querySelector('#log li.assistant .note')",
           "the thinking answer ends", 120)
    shown = b.js("(() => { const t = document.querySelector('#log li.assistant details.thought span');"
                 " return t ? t.textContent : null; })()")
    answer = b.js("document.querySelector('#log li.assistant .text').textContent")
    st, _, whole = srv.get("/v1/chat/completions", None, "POST", json.dumps(
        {"messages": [{"role": "user", "content": "Tell me a story."}], "temperature": 0,
         "max_tokens": 24}).encode())
    m = json.loads(whole)["choices"][0]["message"]
    check(st == 200 and m.get("reasoning_content") and shown == m["reasoning_content"] and answer == m["content"],
          f"the page shows the thought {shown!r} folded above the answer {answer[:40]!r}..., as the server's "
          f"reasoning_content and content")
    check(b.js("!document.querySelector('#log li.assistant details.thought').open"),
          "the thought folds once the answer begins")
    b.type("#prompt", "And then?")
    b.click("#send")
    b.wait("document.querySelectorAll('#log li.assistant .note').length == 2", "the second answer ends", 120)
    sent = [e["params"]["request"] for e in b.events if e["method"] == "Network.requestWillBeSent"
            and e["params"]["request"]["url"].endswith("/v1/chat/completions")]
    back = json.loads(sent[-1].get("postData", "{}"))["messages"][-2]
    check(back == {"role": "assistant", "content": answer, "reasoning_content": shown},
          "the next turn sends the thought back as the assistant's reasoning_content")


def main():
    if not MODEL:
        fail("usage: webui_check.py BUILD_DIR MODEL.gguf")
    exe = find_chromium()
    if not exe:
        print("webui_check: no Chromium" + (f" at HX_CHROMIUM={os.environ['HX_CHROMIUM']}" if
              os.environ.get("HX_CHROMIUM") else " on PATH (apt-get install chromium, or HX_CHROMIUM=PATH)"))
        sys.exit(4)
    srv = Server("-m", MODEL, "-c", "4096", "--api-key", KEY)
    b = None
    try:
        http_checks(srv)
        b = Browser(exe)
        browser_checks(srv, b)
        srv.stop()
        # No keys: the page asks for none, the panel reads /machine at once.
        srv = Server()
        check(srv.get("/machine")[0] == 200, "no keys: /machine answers without a key")
        b.navigate(srv.url + "/")
        b.wait("document.getElementById('model').textContent && "
               "Number(document.getElementById('m-kv-total').dataset.value) > 0", "no keys: the panel reads /machine")
        check(b.js("document.getElementById('key-form').hidden"), "no keys: the page shows no key field")
        srv.stop()
        srv = Server("-m", MODEL, "-c", "2048", "--chat-template-file", THINK_TEMPLATE, "--reasoning-budget", "4")
        thought_checks(srv, b)
    finally:
        if b:
            b.close()
        srv.stop()
    off = Server("--no-webui")
    try:
        for path in ("/", "/app.js", "/index.html"):
            st, _, _ = off.get(path)
            check(st == 404, f"--no-webui: GET {path} is 404")
        check(off.get("/machine")[0] == 200, "--no-webui: /machine still answers")
    finally:
        off.stop()
    print("webui_check: all passed", flush=True)


if __name__ == "__main__":
    main()

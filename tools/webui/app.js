// hetero-server's page: a chat streamed from /v1/chat/completions, and the
// machine at work from /machine, read about once a second.  No framework,
// no build step: the server embeds this file as it is.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY = "hetero.apiKey";
const conversation = [];   // {role, content}, oldest first
let model = "";            // /machine's model name, sent with each request
let controller = null;     // the streaming request's AbortController

function headers(extra) {
  const h = Object.assign({}, extra);
  const key = localStorage.getItem(KEY);
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function showError(text) {
  const e = $("error");
  e.textContent = text;
  e.hidden = !text;
}

// The server's error object ({"error":{"message"}}) as a sentence.
async function errorText(res) {
  let msg = res.statusText;
  try {
    const body = await res.json();
    if (body && body.error && body.error.message) msg = body.error.message;
  } catch (_) { /* not JSON: the status line says enough */ }
  return "HTTP " + res.status + ": " + msg;
}

function needKey(why) {
  $("key-form").hidden = false;
  $("machine-status").textContent = why;
}

// ---- the chat ---------------------------------------------------------

function addMessage(role, text) {
  const li = document.createElement("li");
  li.className = role;
  const label = document.createElement("span");
  label.className = "role";
  label.textContent = role;
  const body = document.createElement("span");
  body.className = "text";
  body.textContent = text;
  li.append(label, body);
  $("log").append(li);
  li.scrollIntoView({block: "end"});
  return li;
}

function note(li, text) {
  const n = document.createElement("span");
  n.className = "note";
  n.textContent = text;
  li.append(n);
}

// The settings the user filled in; an empty field is left to the server.
function settings() {
  const out = {};
  for (const [id, int] of [["temperature", false], ["top_k", true], ["top_p", false], ["min_p", false],
                           ["max_tokens", true], ["seed", true]]) {
    const v = $(id).value.trim();
    if (v === "") continue;
    const n = Number(v);
    if (!Number.isFinite(n) || (int && !Number.isInteger(n))) throw new Error(id + " must be a" +
        (int ? " whole number" : " number") + ", not '" + v + "'");
    out[id] = n;
  }
  return out;
}

function busy(on) {
  $("send").disabled = on;
  $("stop").disabled = !on;
}

// Reads the SSE stream: "data: {chunk}" events, "data: [DONE]" last.
async function readStream(res, onChunk) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buf += decoder.decode(value, {stream: true});
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, end);
      buf = buf.slice(end + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") return true;
        onChunk(JSON.parse(data));
      }
    }
  }
  return false;
}

async function send(text) {
  showError("");
  let opts;
  try { opts = settings(); } catch (e) { showError(e.message); return; }
  const messages = [];
  const system = $("system").value.trim();
  if (system) messages.push({role: "system", content: system});
  conversation.push({role: "user", content: text});
  messages.push(...conversation);
  addMessage("user", text);
  const li = addMessage("assistant", "");
  li.setAttribute("aria-busy", "true");
  const out = li.querySelector(".text");
  const body = Object.assign({model: model || undefined, messages, stream: true,
                              stream_options: {include_usage: true}}, opts);
  controller = new AbortController();
  busy(true);
  const t0 = performance.now();
  let answer = "", thought = "", usage = null, finish = null;
  let thoughtText = null;  // the thought's box, made at its first delta
  try {
    const res = await fetch("/v1/chat/completions", {method: "POST", signal: controller.signal,
        headers: headers({"Content-Type": "application/json"}), body: JSON.stringify(body)});
    if (!res.ok) {
      if (res.status === 401) needKey("This server needs an API key.");
      throw new Error(await errorText(res));
    }
    const complete = await readStream(res, (chunk) => {
      if (chunk.error) throw new Error("The server: " + chunk.error.message);
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices || []) {
        if (c.delta && c.delta.reasoning_content) {
          // The model's thought (the server reads it out of <think>...</think>): shown folded above the answer
          if (!thoughtText) {
            const box = document.createElement("details");
            box.className = "thought";
            box.open = true;
            const summary = document.createElement("summary");
            summary.textContent = "Thought";
            thoughtText = document.createElement("span");
            box.append(summary, thoughtText);
            out.before(box);
          }
          thought += c.delta.reasoning_content;
          thoughtText.textContent = thought;
        }
        if (c.delta && c.delta.content) {
          answer += c.delta.content;
          out.textContent = answer;
          if (thoughtText) thoughtText.parentElement.open = false;
        }
        if (c.finish_reason) finish = c.finish_reason;
      }
    });
    if (!complete) throw new Error("The stream ended before its end ([DONE] never came).");
    conversation.push(thought ? {role: "assistant", content: answer, reasoning_content: thought}
                              : {role: "assistant", content: answer});
    const secs = (performance.now() - t0) / 1000;
    note(li, (usage ? usage.completion_tokens + " tokens, " : "") + secs.toFixed(1) + " s" +
         (finish ? ", " + finish : ""));
  } catch (e) {
    if (e.name === "AbortError") {
      note(li, "stopped");
      if (answer) conversation.push({role: "assistant", content: answer});
      else conversation.pop();   // the question got no answer: ask it again
    } else {
      // Nothing was answered: the question goes back to the box, to send again.
      conversation.pop();
      li.previousSibling.remove();
      li.remove();
      if (!$("prompt").value) $("prompt").value = text;
      showError(e.message);
    }
  } finally {
    li.removeAttribute("aria-busy");
    controller = null;
    busy(false);
    $("prompt").focus();
  }
}

$("send-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("prompt").value.trim();
  if (!text || controller) return;
  $("prompt").value = "";
  send(text);
});
$("prompt").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    $("send-form").requestSubmit();
  }
});
$("stop").addEventListener("click", () => controller && controller.abort());
$("clear").addEventListener("click", () => {
  if (controller) controller.abort();
  conversation.length = 0;
  $("log").replaceChildren();
  showError("");
});
$("key-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const key = $("api-key").value.trim();
  if (key) localStorage.setItem(KEY, key); else localStorage.removeItem(KEY);
  showError("");
  poll();
});

// ---- the machine --------------------------------------------------------

let last = null;           // the previous reading, for rates
let timer = null;
const series = [];         // [decode, prefill] tokens/s, one a reading, the last minute

function set(id, value, text) {
  const o = $(id);
  o.dataset.value = String(value);
  o.textContent = text === undefined ? String(value) : text;
}

function devices(list) {
  const ul = $("devices");
  while (ul.children.length > list.length) ul.lastChild.remove();
  list.forEach((d, i) => {
    let li = ul.children[i];
    if (!li) {
      li = document.createElement("li");
      const name = document.createElement("span");
      name.className = "name";
      const meter = document.createElement("meter");
      meter.min = 0; meter.max = 1;
      const pct = document.createElement("output");
      li.append(name, meter, pct);
      ul.append(li);
    }
    const [name, meter, pct] = li.children;
    const label = d.name + " (" + d.kind + (d.emulated ? ", emulated" : "") + (d.retired ? ", retired" : "") + ")";
    name.textContent = label;
    meter.value = d.busy_recent;
    meter.setAttribute("aria-label", label + " busy");
    pct.dataset.value = String(d.busy_recent);
    pct.textContent = Math.round(d.busy_recent * 100) + "%";
    li.dataset.device = String(d.index);
  });
}

function chart() {
  const cv = $("chart"), g = cv.getContext("2d");
  g.clearRect(0, 0, cv.width, cv.height);
  const top = Math.max(1, ...series.map((s) => Math.max(s[0], s[1])));
  const colors = ["#2563eb", "#d97706"];
  for (const k of [1, 0]) {
    g.strokeStyle = colors[k];
    g.lineWidth = 2;
    g.beginPath();
    series.forEach((s, i) => {
      const x = cv.width - (series.length - 1 - i) * (cv.width / 59);
      const y = cv.height - 4 - (s[k] / top) * (cv.height - 16);
      if (i) g.lineTo(x, y); else g.moveTo(x, y);
    });
    g.stroke();
  }
  g.fillStyle = getComputedStyle(document.body).color;
  g.font = "11px system-ui";
  g.fillText("max " + Math.round(top) + " tok/s", 4, 11);
  g.fillStyle = colors[0]; g.fillText("decode", cv.width - 90, 11);
  g.fillStyle = colors[1]; g.fillText("prefill", cv.width - 45, 11);
}

function show(m) {
  model = m.model;
  $("model").textContent = m.model;
  const e = m.engine, kv = m.kv;
  if (last && m.uptime_s > last.uptime_s) {
    const dt = m.uptime_s - last.uptime_s;
    const decode = Math.max(0, e.generated_tokens - last.engine.generated_tokens) / dt;
    const prefill = Math.max(0, e.prompt_tokens - last.engine.prompt_tokens) / dt;
    set("m-decode", decode, decode.toFixed(1));
    set("m-prefill", prefill, prefill.toFixed(1));
    series.push([decode, prefill]);
    if (series.length > 60) series.shift();
    chart();
  }
  last = m;
  set("m-generated", e.generated_tokens);
  set("m-waiting", e.waiting);
  set("m-running", e.running);
  set("m-finished", e.finished);
  set("m-kv-used", kv.blocks_used);
  set("m-kv-total", kv.blocks_total);
  set("m-kv-cached", kv.blocks_cached);
  set("m-kv-reused", kv.tokens_reused);
  $("kv-meter").value = kv.blocks_total ? kv.blocks_used / kv.blocks_total : 0;
  devices(m.devices);
  $("machine-status").textContent = "up " + Math.round(m.uptime_s) + " s, " + kv.block_tokens +
      " tokens a KV block";
}

let polls = 0;             // the newest poll chain's number: an older one stops
async function poll() {
  clearTimeout(timer);
  const mine = ++polls;
  try {
    const res = await fetch("/machine", {headers: headers(), cache: "no-store"});
    if (res.status === 401) {
      // No more readings until a key is given (the key form calls poll).
      needKey(localStorage.getItem(KEY) ? "The API key was refused: enter another." : "This server needs an API key.");
      return;
    } else if (!res.ok) {
      $("machine-status").textContent = await errorText(res);
    } else {
      show(await res.json());
    }
  } catch (e) {
    $("machine-status").textContent = "The server does not answer: " + e.message;
  }
  if (mine === polls) timer = setTimeout(poll, 1000);
}

$("api-key").value = localStorage.getItem(KEY) || "";
if ($("api-key").value) $("key-form").hidden = false;
poll();

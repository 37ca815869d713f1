// kstate ui: helpers every part of the page uses: DOM building, formatting (as the CLI
// prints), colours, and the one way to ask the server (util.js, loaded first).
"use strict";

const $ = (s, root = document) => root.querySelector(s);
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null) continue;
    if (k === "class") e.className = v;
    // Through the CSSOM: the page's policy refuses style attributes.
    else if (k === "style") for (const d of String(v).split(";")) { const i = d.indexOf(":"); if (i > 0) e.style.setProperty(d.slice(0, i).trim(), d.slice(i + 1).trim()); }
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
};
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

const UI = { meta: null, st: null, lanes: null, gen: 0 };
window.kstateUi = UI;

// ---------- formatting (as the CLI's text output) ----------
const secs = (x) => Math.max(0, x).toFixed(9);
function fmtDur(ns) {
  // Truncated as the CLI prints (kstate_analyze::filter::fmt_dur).
  ns = Math.round(ns);
  const part = (unit, digits) => `${Math.floor(ns / unit)}.${String(Math.floor((ns % unit) / (unit / 10 ** digits))).padStart(digits, "0")}`;
  if (ns < 1e3) return ns + "ns";
  if (ns < 1e6) return part(1e3, 3) + "us";
  if (ns < 1e9) return part(1e6, 3) + "ms";
  return part(1e9, 6) + "s";
}
function fmtShort(ns, digits = 3) {
  if (ns < 1e3) return Math.round(ns) + "ns";
  if (ns < 1e6) return +(ns / 1e3).toPrecision(digits) + "us";
  if (ns < 1e9) return +(ns / 1e6).toPrecision(digits) + "ms";
  return +(ns / 1e9).toPrecision(digits) + "s";
}
function fmtBytes(b) {
  // Binary units, as free(1) -h: 1.5 GiB reads better than 1610612736.
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(b) >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i ? b.toFixed(Math.abs(b) < 10 ? 2 : 1) : String(Math.round(b))) + " " + u[i];
}
const fmtVal = (unit, v) => (v == null ? "-" : unit === "ns" ? fmtDur(v) : unit === "bytes" ? fmtBytes(v) : String(Math.round(v * 100) / 100));
// A ratio as kstate compare prints it: x3.02 for growth, /277 for shrinking (a ratio of
// 0.0036 read as x0.00 said nothing).
function fmtRatio(r) {
  if (r == null || !isFinite(r)) return "-";
  if (r === 0) return "/\u221e";
  const f = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
  return r >= 1 ? "x" + f(r) : "/" + f(1 / r);
}
// A time on the axis, with as many decimals as the view needs.
function fmtT(s) {
  const span = UI.view ? UI.view[1] - UI.view[0] : 1;
  const d = span < 1e-4 ? 9 : span < 0.01 ? 6 : span < 1 ? 4 : span < 100 ? 3 : 1;
  return s.toFixed(d) + " s";
}
// A length of time given in seconds, for people.
const fmtSpan = (s) => fmtDur(Math.max(0, s) * 1e9);

function niceStep(x) {
  const p = Math.pow(10, Math.floor(Math.log10(x)));
  const m = x / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}
// `text` cut to `w` pixels in the canvas's current font.
function fit(g, text, w) {
  if (w <= 6) return "";
  if (g.measureText(text).width <= w) return text;
  let lo = 0, hi = text.length;
  while (lo < hi) {
    const m = (lo + hi + 1) >> 1;
    if (g.measureText(text.slice(0, m) + "\u2026").width <= w) lo = m; else hi = m - 1;
  }
  return lo ? text.slice(0, lo) + "\u2026" : "";
}

// A stable colour for a name (processes, system calls, frames).
function hue(name) {
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  return (h >>> 0) % 360;
}
const nameColour = (name, l = 62) => `hsl(${hue(name)},55%,${l}%)`;

// ---------- asking the server ----------
// Requests go through one queue: at most NET.max at once (Chromium opens six connections
// to a host; the timeline's must not wait behind a row of panels), the timeline's and the
// list's first. A request with a slot supersedes the one before it in that slot: that one
// is aborted (or never sent), and the server drops it if it has not begun.
class Superseded extends Error {}
// Chromium opens six connections to a host: three at most for the analysis passes
// (panels, comparisons, flame graphs: seconds each on a big file), the others kept for
// the timeline, the list and the clicks (a long pass never holds a view).
const NET = { max: 6, maxSlow: 3, inflight: 0, slow: 0, queue: [], seq: {}, ctl: {},
  // Slots are this page's: another page (or a reload) numbers its own from 1.
  page: [...crypto.getRandomValues(new Uint8Array(6))].map((b) => b.toString(16).padStart(2, "0")).join("") };

function api(ep, params, opts = {}) {
  const { slot = null, prio = 1 } = opts;
  params = new URLSearchParams(params);
  if (slot) {
    const seq = (NET.seq[slot] = (NET.seq[slot] || 0) + 1);
    params.set("slot", NET.page + ":" + slot);
    params.set("seq", seq);
    // The older request of the slot: out of the queue, or aborted.
    NET.queue = NET.queue.filter((q) => {
      if (q.slot !== slot) return true;
      q.reject(new Superseded(slot));
      return false;
    });
    if (NET.ctl[slot]) NET.ctl[slot].abort();
  }
  return new Promise((resolve, reject) => {
    NET.queue.push({ ep, params, slot, prio, resolve, reject });
    NET.queue.sort((a, b) => a.prio - b.prio);
    pump();
  });
}

function pump() {
  while (NET.inflight < NET.max) {
    const i = NET.queue.findIndex((q) => q.prio === 0 || NET.slow < NET.maxSlow);
    if (i < 0) return;
    const q = NET.queue.splice(i, 1)[0];
    const slow = q.prio > 0;
    NET.inflight++;
    if (slow) NET.slow++;
    const ctl = new AbortController();
    if (q.slot) NET.ctl[q.slot] = ctl;
    fetchJson(q.ep, q.params, ctl.signal).then(q.resolve, q.reject).finally(() => {
      NET.inflight--;
      if (slow) NET.slow--;
      if (q.slot && NET.ctl[q.slot] === ctl) delete NET.ctl[q.slot];
      pump();
    });
  }
}

async function fetchJson(ep, params, signal) {
  let r;
  try {
    r = await fetch(`api/${ep}?${params.toString()}`, { signal });
  } catch (e) {
    if (e.name === "AbortError") throw new Superseded(ep);
    throw e;
  }
  // 204: the server dropped it, a newer request of its slot having come.
  if (r.status === 204) throw new Superseded(ep);
  let j;
  try { j = await r.json(); } catch (e) {
    if (e.name === "AbortError") throw new Superseded(ep);
    throw new Error(`${ep}: the server's answer is not JSON (${r.status})`);
  }
  if (!r.ok) throw new Error(j.error || `${ep}: HTTP ${r.status}`);
  return j;
}

// Whether an error is only a superseded request (nothing to show).
const superseded = (e) => e instanceof Superseded;

// The page has settled: nothing asked of the server or waiting to be asked, for three
// frames running (what `kstate bench ui --browser` and the tests wait for). Resolves
// with the time it settled.
UI.timers = new Set();
UI.later = (fn, ms, name) => {
  clearTimeout(UI["_t_" + name]);
  UI.timers.add(name);
  UI["_t_" + name] = setTimeout(() => { UI.timers.delete(name); fn(); }, ms);
};
UI.settled = () => new Promise((resolve) => {
  let quiet = 0;
  const tick = () => {
    const busy = NET.inflight || NET.queue.length || UI.timers.size;
    if (busy) quiet = 0;
    else if (++quiet >= 3) return resolve(performance.now());
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
});

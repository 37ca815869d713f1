// kstate ui: presentation only. Every number on the page comes from the server's
// answers (the engine's own JSON); this file lays them out, draws the overview and keeps
// the state (window, zoom, filters, mode) in the URL's fragment.
"use strict";

const $ = (s, el = document) => el.querySelector(s);
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
};

const UI = { meta: null, st: null, lanes: null, gen: 0 };
window.kstateUi = UI;

// ---------- state in the URL fragment ----------
const GLOBAL = ["pid", "tid", "comm", "cpu"];

function readState() {
  const p = new URLSearchParams(location.hash.slice(1));
  const st = { mode: p.get("m") || "one", f: +(p.get("f") || 0), win: null, view: null,
               g: {}, keys: {}, sort: {} };
  const span = (s, what) => {
    if (!s) return null;
    const m = /^(\d+(?:\.\d+)?):(\d+(?:\.\d+)?)$/.exec(s);
    if (!m || +m[2] <= +m[1]) throw new Error(`the link's ${what} "${s}" is not FROM:TO seconds`);
    return [+m[1], +m[2]];
  };
  st.metric = p.get("r") || "p99";
  if (!["count", "total", "avg", "p99"].includes(st.metric)) throw new Error(`the link's metric "${st.metric}" is not count, total, avg or p99`);
  st.win = span(p.get("w"), "window");
  st.view = span(p.get("v"), "zoom");
  for (const g of GLOBAL) if (p.get(g)) st.g[g] = p.get(g);
  for (const [k, v] of p) {
    if (k.startsWith("k.")) st.keys[k.slice(2)] = v;
    if (k.startsWith("s.")) st.sort[k.slice(2)] = v;
  }
  if (!["one", "inout", "ab"].includes(st.mode)) throw new Error(`the link's mode "${st.mode}" is not one, inout or ab`);
  if (!Number.isInteger(st.f) || st.f < 0) throw new Error(`the link's file "${p.get("f")}" is not a file number`);
  return st;
}

function writeState() {
  const st = UI.st, p = new URLSearchParams();
  if (st.mode !== "one") p.set("m", st.mode);
  if (st.f) p.set("f", st.f);
  if (st.metric && st.metric !== "p99") p.set("r", st.metric);
  if (st.win) p.set("w", `${secs(st.win[0])}:${secs(st.win[1])}`);
  if (st.view) p.set("v", `${secs(st.view[0])}:${secs(st.view[1])}`);
  for (const [k, v] of Object.entries(st.g)) p.set(k, v);
  for (const [k, v] of Object.entries(st.keys)) p.set("k." + k, v);
  for (const [k, v] of Object.entries(st.sort)) p.set("s." + k, v);
  const h = "#" + p.toString();
  if (location.hash !== h) history.replaceState(null, "", h);
}

const secs = (x) => Math.max(0, x).toFixed(9);

// ---------- formatting (as the CLI's text output) ----------
function fmtDur(ns) {
  // Truncated as the CLI prints (kstate_analyze::filter::fmt_dur).
  ns = Math.round(ns);
  const part = (unit, digits) => `${Math.floor(ns / unit)}.${String(Math.floor((ns % unit) / (unit / 10 ** digits))).padStart(digits, "0")}`;
  if (ns < 1e3) return ns + "ns";
  if (ns < 1e6) return part(1e3, 3) + "us";
  if (ns < 1e9) return part(1e6, 3) + "ms";
  return part(1e9, 6) + "s";
}
function fmtShort(ns) {
  if (ns < 1e3) return Math.round(ns) + "ns";
  if (ns < 1e6) return +(ns / 1e3).toPrecision(3) + "us";
  if (ns < 1e9) return +(ns / 1e6).toPrecision(3) + "ms";
  return +(ns / 1e9).toPrecision(3) + "s";
}
function fmtBytes(b) {
  // Binary units, as free(1) -h: 1.5 GiB reads better than 1610612736.
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(b) >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i ? b.toFixed(Math.abs(b) < 10 ? 2 : 1) : String(Math.round(b))) + " " + u[i];
}
const fmtVal = (unit, v) => (v == null ? "-" : unit === "ns" ? fmtDur(v) : unit === "bytes" ? fmtBytes(v) : String(v));
// Snapshot analyzers (sysinfo) sample a level now and then: a sum of samples means nothing.
const colsOf = (a) => (a.snapshots ? COLS.filter((c) => c !== "total") : COLS);
const defaultSort = (a) => (a.snapshots ? "max" : "total");
const fmtRatio = (r) => (r == null ? "-" : "x" + (r >= 100 ? r.toFixed(0) : r.toFixed(2)));
function fmtT(s) {
  const span = UI.view ? UI.view[1] - UI.view[0] : 1;
  const d = span < 0.01 ? 6 : span < 1 ? 4 : span < 100 ? 3 : 1;
  return s.toFixed(d) + " s";
}

// ---------- requests ----------
async function api(ep, params) {
  const r = await fetch(`api/${ep}?${params.toString()}`);
  let j;
  try { j = await r.json(); } catch (e) { throw new Error(`${ep}: the server's answer is not JSON (${r.status})`); }
  if (!r.ok) throw new Error(j.error || `${ep}: HTTP ${r.status}`);
  return j;
}

// The filters of one analyzer's panel, as `kstate analyze` flags.
function filterParams(analyzer, extra = {}) {
  const st = UI.st, p = new URLSearchParams();
  for (const [k, v] of Object.entries(st.g)) p.set(k, v);
  if (analyzer && st.keys[analyzer]) p.set("key", st.keys[analyzer]);
  if (st.win) p.set("window", UI.machines ? `@${hostSecs(st.win[0])}:@${hostSecs(st.win[1])}` : `${secs(st.win[0])}:${secs(st.win[1])}`);
  for (const [k, v] of Object.entries(extra)) if (v != null) p.set(k, v);
  return p;
}

// A host and its guests share one axis whose 0 is the first event of any of them: a
// window is sent as host-clock times (@S), which every machine's file resolves alike
// (each file's own first event would otherwise be its 0). Integer ns, so no digit is lost.
function hostSecs(t) {
  const ns = goodFile(0).start + Math.round(Math.max(0, t) * 1e9);
  return `${Math.floor(ns / 1e9)}.${String(ns % 1e9).padStart(9, "0")}`;
}
const MACHINE_COLOURS = ["#3f6fb5", "#d9822b", "#3a9a5b", "#8e5bb5"];
const machineColour = (f) => MACHINE_COLOURS[f % MACHINE_COLOURS.length];
const fileTag = (i) => (UI.machines ? files()[i].machine : files().length > 1 ? (i ? "B" : "A") : "file");

// The window lies after the recording's end (a pasted link of a longer recording, or a
// typed one): say so, rather than leaving every panel to say "no samples".
function outsideNote() {
  const f = goodFile(UI.st.mode === "ab" ? 0 : UI.st.f);
  if (!f || !UI.st.win) return null;
  let end = (f.end - f.start) / 1e9;
  if (UI.st.mode === "ab" && goodFile(1)) end = Math.max(end, (goodFile(1).end - goodFile(1).start) / 1e9);
  if (UI.st.win[0] <= end) return null;
  return `the window lies outside the recording (0\u2013${+end.toPrecision(3)} s)`;
}

function showError(msg) {
  const e = $("#error");
  if (!msg) { e.hidden = true; e.textContent = ""; return; }
  e.hidden = false;
  e.textContent = msg;
}

// ---------- header, chips, modes ----------
function files() { return UI.meta.files; }
function goodFile(i) { const f = files()[i]; return f && !f.error ? f : null; }

function drawHeader() {
  const fs = files(), box = $("#files");
  box.textContent = "";
  fs.forEach((f, i) => {
    const tag = el("span", { class: "tag " + (i ? "b" : "a"), "data-file": i }, fileTag(i));
    if (UI.machines) tag.style.background = machineColour(i);
    box.append(tag, f.label + (i + 1 < fs.length ? "   " : ""));
  });
  for (const b of document.querySelectorAll("#modes button")) {
    b.classList.toggle("on", b.dataset.mode === UI.st.mode);
    b.disabled = b.dataset.mode === "ab" && (fs.length < 2 || UI.machines);
    if (b.dataset.mode === "ab") b.title = UI.machines ? "A host and its guests are one timeline: kstate ui --compare A B compares two files" : "Each panel for file A against file B";
    b.onclick = () => { UI.st.mode = b.dataset.mode; update(); };
  }
  const sel = $("#filesel");
  sel.textContent = "";
  if (fs.length > 1 && UI.st.mode !== "ab") {
    // A host and its guests share the axis: the window and the zoom stay.
    if (UI.machines) sel.append(el("span", { class: "what" }, "panels of: "));
    fs.forEach((f, i) => sel.append(el("button", {
      class: UI.st.f === i ? "on" : "", "data-file": i,
      onclick: () => { UI.st.f = i; if (!UI.machines) { UI.st.view = null; UI.st.win = null; } update(); },
    }, fileTag(i))));
  }
}

function drawChips() {
  const box = $("#chips"), st = UI.st;
  box.textContent = "";
  const chip = (label, drop, id) => box.append(el("span", { class: "chip", "data-chip": id }, label,
    el("button", { title: "remove this filter", onclick: () => { drop(); update(); } }, "\u00d7")));
  if (st.win) chip(`window ${secs(st.win[0])}:${secs(st.win[1])}`, () => { st.win = null; }, "window");
  const out = outsideNote();
  if (out) box.append(el("span", { class: "warn", id: "outside" }, out));
  for (const [k, v] of Object.entries(st.g)) chip(`${k}=${v}`, () => { delete st.g[k]; }, k);
  for (const [a, v] of Object.entries(st.keys)) chip(`${a}: key=${v}`, () => { delete st.keys[a]; }, "key." + a);
  if (!box.childNodes.length) box.append(el("span", { class: "none" }, "none (the whole recording)"));
}

// A row's key as the filter it stands for: tasks become tid/comm/cpu filters for every
// panel; other keys filter their own analyzer.
function addKeyFilter(a, key) {
  const st = UI.st, by = a.by;
  let m;
  if ((by === "pid" || by === "thread" || by === "tid") && (m = /-(\d+)(?:\s|$)/.exec(key))) st.g.tid = m[1];
  else if (by === "comm") st.g.comm = key;
  else if (by === "cpu" && (m = /(\d+)/.exec(key))) st.g.cpu = m[1];
  else st.keys[a.name] = key;
  update();
}

// ---------- the overview ----------
const LABEL_W = 132, AXIS_H = 22;

function viewSpan() {
  const f = goodFile(UI.st.mode === "ab" ? 0 : UI.st.f);
  const whole = [0, f ? (f.end - f.start) / 1e9 : 1];
  if (UI.st.mode === "ab" && goodFile(1)) whole[1] = Math.max(whole[1], (goodFile(1).end - goodFile(1).start) / 1e9);
  let v = UI.st.view || whole;
  v = [Math.max(0, v[0]), Math.min(whole[1], v[1])];
  if (!(v[1] > v[0])) v = whole;
  return { v, whole };
}

async function loadLanes() {
  const gen = ++UI.lanesGen;
  const canvas = $("#lanes");
  const width = Math.max(200, canvas.parentElement.clientWidth);
  const bins = Math.max(50, Math.floor(width - LABEL_W - 8));
  const { v } = viewSpan();
  UI.view = v;
  const fileIdx = UI.machines ? files().map((_, i) => i) : UI.st.mode === "ab" ? [0, 1] : [UI.st.f];
  if (!fileIdx.some(goodFile)) return;
  try {
    const res = [];
    let asked = "";
    for (const f of fileIdx) {
      if (!goodFile(f)) continue;
      // The task and CPU filters apply to the overview, and the syscall panel's key to
      // the system-call lane (the calls it scatters); other panels' keys are theirs.
      const p = filterParams("syscall", { f, from: secs(v[0]), to: secs(v[1]), w: bins });
      p.delete("window");
      asked = p.toString();
      res.push({ f, lanes: await api("lanes", p) });
    }
    if (gen !== UI.lanesGen) return;
    UI.lanes = res;
    // The last question the overview answers (for tests: which filters it drew).
    UI.lanesAsked = asked;
    drawLanes();
  } catch (e) {
    if (gen === UI.lanesGen) showError("overview: " + e.message);
  }
}

function laneLayout() {
  const rows = [];
  const multi = UI.lanes.length > 1;
  for (const { f, lanes } of UI.lanes) {
    const tag = multi ? fileTag(f) + " " : "";
    // Each machine's events, first to last, on the host's clock.
    const file = files()[f];
    if (UI.machines && file.first != null) rows.push({ kind: "span", h: 10, label: `${file.machine}: events`, f, lanes, first: file.first, last: file.last, events: file.events });
    const group = (list, kind, h, title) => {
      if (!list.length) return;
      const peak = Math.max(1, ...list.map((l) => l.peak));
      for (const l of list) rows.push({ kind, h, lane: l, peak, label: tag + title(l), f, lanes });
    };
    group(lanes.busy, "busy", 16, (l) => `${l.name} busy`);
    group(lanes.runq, "level", 26, (l) => `${l.name} queued`);
    group(lanes.blk, "level", 30, (l) => `${l.name.replace(/^0000/, "")} in flight`);
    // No calls for these filters: one line that says so, not an empty chart.
    if (lanes.syscalls) rows.push(lanes.syscalls.calls
      ? { kind: "scatter", h: 130, sc: lanes.syscalls, label: tag + "syscalls" + syscallKey(), f, lanes }
      : { kind: "empty", h: 14, label: tag + "syscalls" + syscallKey() + ": no calls for these filters", f, lanes });
    group(lanes.lost, "lost", 14, (l) => `${l.name} lost`);
  }
  return rows;
}

// The syscall panel's key filter, which the system-call lane shows alone.
const syscallKey = () => (UI.st.keys.syscall ? ` (${UI.st.keys.syscall})` : "");

function drawLanes() {
  if (!UI.lanes) return;
  const canvas = $("#lanes");
  const width = canvas.parentElement.clientWidth;
  const rows = laneLayout();
  const height = AXIS_H + rows.reduce((s, r) => s + r.h + 4, 0) + 4;
  const dpr = window.devicePixelRatio || 1;
  canvas.width = width * dpr; canvas.height = height * dpr;
  canvas.style.height = height + "px";
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, width, height);
  const x0 = LABEL_W, x1 = width - 8, [v0, v1] = UI.view;
  const X = (t) => x0 + ((t - v0) / (v1 - v0)) * (x1 - x0);
  UI.geom = { x0, x1, height, X, T: (x) => v0 + ((x - x0) / (x1 - x0)) * (v1 - v0), rows };
  // Axis.
  g.font = "11px system-ui, sans-serif"; g.fillStyle = "#5d6878"; g.strokeStyle = "#e3e7ed";
  const step = niceStep((v1 - v0) / 8);
  for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
    const x = X(t);
    g.beginPath(); g.moveTo(x, AXIS_H - 4); g.lineTo(x, height); g.stroke();
    g.fillText(fmtT(t), x + 2, 12);
  }
  g.fillText("time (s)", 4, 12);
  let y = AXIS_H;
  for (const r of rows) {
    g.fillStyle = "#1d2430"; g.font = "11px system-ui, sans-serif";
    if (r.kind === "empty") {
      g.fillStyle = "#5d6878"; g.font = "italic 11px system-ui, sans-serif";
      g.fillText(r.label, 4, y + 11);
      r.y = y; y += r.h + 4;
      continue;
    }
    // The scatter's y-axis labels take the label column's right end: its label stops short.
    g.fillText(fit(g, r.label, (r.kind === "scatter" ? x0 - 40 : x0) - 8), 4, y + Math.min(r.h, 16) - 3);
    g.fillStyle = "#f3f5f8"; g.fillRect(x0, y, x1 - x0, r.h);
    const n = r.lane ? r.lane.values.length : r.lanes.bins;
    const bw = (x1 - x0) / n;
    const color = UI.machines ? machineColour(r.f) : r.f && UI.lanes.length > 1 ? "#d9822b" : "#3f6fb5";
    if (r.kind === "span") {
      const start = goodFile(r.f).start;
      const a = Math.max(x0, X((r.first - start) / 1e9)), b = Math.min(x1, X((r.last - start) / 1e9));
      g.fillStyle = color;
      if (b >= a) g.fillRect(a, y + 1, Math.max(b - a, 1), r.h - 2);
      r.y = y; y += r.h + 4;
      continue;
    }
    if (r.kind === "busy" || r.kind === "level" || r.kind === "lost") {
      g.fillStyle = r.kind === "lost" ? "#c0392b" : color;
      const top = r.kind === "busy" ? 1 : r.peak;
      r.lane.values.forEach((val, i) => {
        if (val <= 0) return;
        const hh = r.kind === "lost" ? r.h : Math.max(1, (Math.min(val, top) / top) * r.h);
        g.fillRect(x0 + i * bw, y + r.h - hh, Math.max(bw, 1), hh);
      });
      if (r.kind === "level") {
        g.fillStyle = "#5d6878"; g.font = "10px system-ui, sans-serif";
        g.fillText(`peak ${r.lane.peak}`, 4, y + r.h - 2);
      }
    } else if (r.kind === "scatter") {
      const sc = r.sc, rh = r.h / Math.max(sc.rows, 1);
      const maxN = Math.max(1, ...sc.cells.map((c) => c[2]));
      for (const [b, row, cnt] of sc.cells) {
        g.globalAlpha = 0.35 + 0.65 * (Math.log(1 + cnt) / Math.log(1 + maxN));
        g.fillStyle = color;
        g.fillRect(x0 + b * bw, y + r.h - (row + 1) * rh, Math.max(bw, 1.5), Math.max(rh, 1.5));
      }
      g.globalAlpha = 1;
      g.fillStyle = "#5d6878"; g.font = "10px system-ui, sans-serif";
      for (let row = 0; row < sc.rows; row++) {
        const abs = sc.row0 + row;
        if (abs % sc.rows_per_decade === 0) {
          const yy = y + r.h - row * rh;
          g.textAlign = "right";
          g.fillText(fmtShort(Math.pow(10, abs / sc.rows_per_decade)), x0 - 4, Math.max(yy, y + 9));
          g.textAlign = "left";
          g.strokeStyle = "#e3e7ed"; g.beginPath(); g.moveTo(x0, yy); g.lineTo(x1, yy); g.stroke();
        }
      }
      g.fillText(`${sc.calls} calls`, 4, y + 28);
    }
    r.y = y;
    y += r.h + 4;
  }
  // kstate watch's log (alarms, escalations, shedding, losses): a marker each.
  for (const { f } of UI.lanes) {
    const file = goodFile(f);
    for (const e of (file && file.watch_log) || []) {
      const x = X((e.ts - file.start) / 1e9);
      if (x < x0 || x > x1) continue;
      g.strokeStyle = "#d35400"; g.lineWidth = 1; g.setLineDash([4, 3]);
      g.beginPath(); g.moveTo(x, AXIS_H); g.lineTo(x, height); g.stroke();
      g.setLineDash([]);
      g.font = "10px system-ui, sans-serif";
      g.fillStyle = "rgba(255,255,255,0.9)"; g.fillRect(x + 1, AXIS_H, g.measureText(e.kind).width + 3, 12);
      g.fillStyle = "#d35400"; g.fillText(e.kind, x + 2, AXIS_H + 9);
    }
  }
  // The selected window, and the brush being drawn.
  const sel = UI.drag && UI.drag.kind === "brush" ? [UI.geom.T(Math.min(UI.drag.a, UI.drag.b)), UI.geom.T(Math.max(UI.drag.a, UI.drag.b))] : UI.st.win;
  if (sel) {
    const a = Math.max(x0, X(sel[0])), b = Math.min(x1, X(sel[1]));
    if (b > a - 1) {
      g.fillStyle = "rgba(63,111,181,0.16)"; g.fillRect(a, AXIS_H, Math.max(b - a, 2), height - AXIS_H);
      g.strokeStyle = "#3f6fb5"; g.lineWidth = 1;
      g.beginPath(); g.moveTo(a, AXIS_H); g.lineTo(a, height); g.moveTo(b, AXIS_H); g.lineTo(b, height); g.stroke();
    }
  }
}

// `text` cut to `w` pixels in the canvas's current font.
function fit(g, text, w) {
  if (g.measureText(text).width <= w) return text;
  let t = text;
  while (t.length > 1 && g.measureText(t + "\u2026").width > w) t = t.slice(0, -1);
  return t + "\u2026";
}

function niceStep(x) {
  const p = Math.pow(10, Math.floor(Math.log10(x)));
  const m = x / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

function setupBrush() {
  const c = $("#lanes"), tip = $("#tip");
  const xOf = (ev) => ev.clientX - c.getBoundingClientRect().left;
  c.addEventListener("mousedown", (ev) => {
    if (!UI.geom || ev.button !== 0) return;
    const x = xOf(ev);
    if (x < UI.geom.x0) return;
    UI.drag = { kind: ev.shiftKey ? "pan" : "brush", a: x, b: x, view: UI.view.slice() };
    ev.preventDefault();
  });
  window.addEventListener("mousemove", (ev) => {
    if (UI.geom) hover(ev);
    if (!UI.drag) return;
    UI.drag.b = Math.max(UI.geom.x0, Math.min(UI.geom.x1, xOf(ev)));
    if (UI.drag.kind === "pan") {
      const dt = ((UI.drag.a - UI.drag.b) / (UI.geom.x1 - UI.geom.x0)) * (UI.drag.view[1] - UI.drag.view[0]);
      const { whole } = viewSpan();
      let v = [UI.drag.view[0] + dt, UI.drag.view[1] + dt];
      if (v[0] < 0) v = [0, v[1] - v[0]];
      if (v[1] > whole[1]) v = [v[0] - (v[1] - whole[1]), whole[1]];
      UI.view = v;
    }
    drawLanes();
  });
  window.addEventListener("mouseup", () => {
    const d = UI.drag;
    if (!d) return;
    UI.drag = null;
    if (d.kind === "pan") { UI.st.view = UI.view.slice(); writeState(); loadLanes(); return; }
    if (Math.abs(d.b - d.a) < 3) { drawLanes(); return; }
    const a = UI.geom.T(Math.min(d.a, d.b)), b = UI.geom.T(Math.max(d.a, d.b));
    UI.st.win = [a, b];
    update({ lanes: false });
  });
  c.addEventListener("wheel", (ev) => {
    if (!UI.geom) return;
    ev.preventDefault();
    const t = UI.geom.T(xOf(ev)), k = ev.deltaY > 0 ? 1.25 : 0.8;
    const { whole } = viewSpan();
    let v = [t - (t - UI.view[0]) * k, t + (UI.view[1] - t) * k];
    v = [Math.max(0, v[0]), Math.min(whole[1], v[1])];
    UI.st.view = v;
    writeState();
    clearTimeout(UI.wheelTimer);
    UI.view = v; drawLanes();
    UI.wheelTimer = setTimeout(loadLanes, 120);
  }, { passive: false });
  c.addEventListener("mouseleave", () => { tip.hidden = true; });
  function hover(ev) {
    const rect = c.getBoundingClientRect();
    const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    if (x < UI.geom.x0 || x > UI.geom.x1 || y < 0 || y > UI.geom.height) { tip.hidden = true; return; }
    const t = UI.geom.T(x);
    let text = fmtT(t);
    const r = UI.geom.rows.find((r) => y >= r.y && y < r.y + r.h);
    if (r && r.kind !== "empty") {
      const n = r.lane ? r.lane.values.length : r.lanes.bins;
      const i = Math.floor(((x - UI.geom.x0) / (UI.geom.x1 - UI.geom.x0)) * n);
      if (r.kind === "span") text += `  ${r.label}: ${r.events} from ${(r.first / 1e9).toFixed(9)} to ${(r.last / 1e9).toFixed(9)} s (host clock)`;
      else if (r.kind === "busy") text += `  ${r.label}: ${Math.round(r.lane.values[i] * 100)}%`;
      else if (r.kind === "level") text += `  ${r.label}: max ${r.lane.values[i]}`;
      else if (r.kind === "lost") text += `  ${r.label}: ${r.lane.values[i]}`;
      else if (r.kind === "scatter") {
        const l = r.sc.longest[i];
        text += l ? `  longest: ${l[1]} ${fmtDur(l[0])}` : "  no calls";
      }
    }
    tip.textContent = text;
    tip.hidden = false;
    tip.style.left = Math.min(x + 12, rect.width - tip.offsetWidth - 4) + "px";
    tip.style.top = y + 14 + "px";
  }
  $("#zoomsel").onclick = () => { if (UI.st.win) { UI.st.view = UI.st.win.slice(); update(); } };
  $("#zoomout").onclick = () => {
    const { whole } = viewSpan(), v = UI.view, c2 = (v[0] + v[1]) / 2, h = v[1] - v[0];
    UI.st.view = [Math.max(0, c2 - h), Math.min(whole[1], c2 + h)];
    update();
  };
  $("#zoomall").onclick = () => { UI.st.view = null; update(); };
}

// ---------- panels ----------
const COLS = ["count", "total", "avg", "min", "max", "p50", "p99"];

function panelAnalyzers() {
  const st = UI.st;
  if (st.mode === "ab") {
    const a = goodFile(0), b = goodFile(1);
    if (!a || !b) return [];
    return a.analyzers.filter((x) => b.analyzers.some((y) => y.name === x.name));
  }
  const f = goodFile(st.f);
  return f ? f.analyzers : [];
}

// A and B share no analyzer: what each has, one line a side, rather than one line of
// two paths and every reason.
function nothingInCommon() {
  const side = (i) => {
    const f = files()[i];
    const has = f.error ? "cannot be read (see above)" : f.analyzers.length ? "analyzers: " + f.analyzers.map((a) => a.name).join(", ") : "no analyzer applies";
    return el("li", {}, el("span", { class: "tag " + (i ? "b" : "a") }, i ? "B" : "A"), " ", el("code", {}, f.label), el("br"), has);
  };
  return el("div", { class: "error nothing" }, el("strong", {}, "Nothing to compare: no analyzer applies to both recordings."),
    el("ul", {}, side(0), side(1)),
    "Record both with the same events (kstate record -e …) to compare them.");
}

async function loadPanels() {
  const gen = ++UI.panelsGen;
  const box = $("#panels");
  const list = panelAnalyzers();
  const st = UI.st;
  if (!list.length) {
    box.textContent = "";
    if (st.mode === "ab") box.append(nothingInCommon());
    return;
  }
  // Keep the cards (and their scroll) across updates; drop those no longer wanted.
  for (const c of [...box.children]) if (!list.some((a) => "panel-" + a.name === c.id)) c.remove();
  list.forEach((a) => {
    let card = document.getElementById("panel-" + a.name);
    if (!card) {
      card = el("div", { class: "panel", id: "panel-" + a.name, "data-analyzer": a.name });
      box.append(card);
    }
    card.dataset.state = "loading";
  });
  const mode = st.mode === "inout" && !st.win ? "one" : st.mode;
  // A comparison's table is 13 columns wide: one panel a row.
  box.classList.toggle("compare", mode !== "one");
  for (const a of list) {
    if (gen !== UI.panelsGen) return;
    const card = document.getElementById("panel-" + a.name);
    try {
      if (mode === "one") await panelOne(card, a);
      else await panelCompare(card, a, mode);
      if (gen === UI.panelsGen) card.dataset.state = "ready";
    } catch (e) {
      if (gen !== UI.panelsGen) return;
      card.textContent = "";
      card.append(panelHead(a), el("div", { class: "error" }, e.message));
      card.dataset.state = "error";
    }
  }
}

function panelHead(a, tools) {
  return el("h3", {}, a.name, el("span", { class: "about" }, a.about), tools || null);
}

function describe(j) {
  const p = j.pairs || {};
  const lost = Object.values(j.lost_events || {}).reduce((s, n) => s + (n || 0), 0);
  return `key: ${j.by}; ${p.selected ?? "?"} selected, ${p.filtered_out ?? 0} filtered out` +
    (lost ? `, ${lost} events lost` : "") + (p.broken_by_loss ? `, ${p.broken_by_loss} broken by loss` : "");
}

function sortRows(rows, a, get) {
  const col = UI.st.sort[a.name] || defaultSort(a);
  const asc = col === "key";
  const val = (r) => (col === "key" ? r.key : get(r, col));
  return rows.slice().sort((x, y) => {
    const vx = val(x), vy = val(y);
    if (asc) return vx < vy ? -1 : vx > vy ? 1 : 0;
    return (vy ?? -1) - (vx ?? -1) || (x.key < y.key ? -1 : 1);
  });
}

function header(a, cols, groups) {
  const col = UI.st.sort[a.name] || defaultSort(a);
  const tr = el("tr");
  for (const c of cols) {
    const th = el("th", { class: (c.cls || "") + (c.sort === col ? " sorted" + (c.sort === "key" ? " asc" : "") : ""), "data-col": c.sort || "" }, c.label);
    if (c.sort) th.onclick = () => { UI.st.sort[a.name] = c.sort; writeState(); loadPanels(); };
    tr.append(th);
  }
  const thead = el("thead");
  if (groups) thead.append(groups);
  thead.append(tr);
  return thead;
}

function keyCell(a, key) {
  return el("td", { class: "key", title: `${key}: click to filter by it` },
    el("a", { onclick: () => addKeyFilter(a, key) }, key));
}

async function panelOne(card, a) {
  const st = UI.st;
  const p = filterParams(a.name, { f: st.f, a: a.name, mode: "stat" });
  const j = await api("panel", p);
  p.set("mode", "dist");
  const d = await api("panel", p);
  const u = a.unit, flag = j.rows.length && Object.keys(j.rows[0]).find((k) => !["key", "count"].includes(k) && !/_(\w+)$/.test(k));
  const get = (r, c) => (c === "count" ? r.count : r[`${c}_${u}`]);
  const shown = colsOf(a);
  const cols = [{ label: "key", sort: "key" }, ...shown.map((c) => ({ label: c, sort: c }))];
  if (flag) cols.push({ label: flag });
  const tbody = el("tbody");
  const sorted = sortRows(j.rows, a, get);
  for (const r of sorted) {
    const tr = el("tr", { "data-key": r.key }, keyCell(a, r.key));
    for (const c of shown) tr.append(el("td", { "data-col": c }, c === "count" ? String(r.count) : fmtVal(u, get(r, c))));
    if (flag) tr.append(el("td", {}, String(r[flag])));
    tbody.append(tr);
  }
  const tools = el("span", { class: "tools" });
  if (u === "ns") tools.append(el("button", { onclick: () => longest(card, a), title: "The longest samples (kstate analyze --log --sort value --top 20)" }, "longest"));
  card.textContent = "";
  card.append(panelHead(a, tools), el("div", { class: "meta" }, describe(j)),
    el("div", { class: "tablewrap" }, el("table", { class: "stat" }, header(a, cols), tbody)));
  if (!j.rows.length) card.append(el("div", { class: "none" }, outsideNote() ? `no samples: ${outsideNote()}` : "no samples for these filters"));
  card.append(distChart(a, [{ j: d, cls: "a", label: "" }], sorted[0]?.key));
  const notes = [...(j.notes || []), ...(j.errors || [])];
  if (notes.length) card.append(el("div", { class: "notes" }, notes.join(" \u00b7 ")));
  // Numbers for tests and for whoever reads the page's data.
  card._stat = j;
}

async function longest(card, a) {
  const st = UI.st;
  const p = filterParams(a.name, { f: st.f, a: a.name, mode: "log" });
  const box = card.querySelector(".longest") || card.appendChild(el("div", { class: "longest" }));
  box.textContent = "";
  const j = await api("panel", p);
  const start = goodFile(st.f).start;
  const rows = j.rows.map((r) => ({ ...r, t: (r.ts - start) / 1e9, v: r.dur_ns }));
  const tb = el("tbody");
  for (const r of rows) tb.append(el("tr", {}, el("td", { class: "key" }, r.key), el("td", {}, fmtT(r.t)), el("td", {}, fmtDur(r.v)),
    el("td", {}, String(r.tid)), el("td", {}, r.comm)));
  const [t0, t1] = stallWindow(rows), k = rows.filter((r) => r.t < t1 && r.t + r.v / 1e9 > t0).length;
  box.append(el("div", { class: "meta" }, `the ${rows.length} longest; the longest and the ${k - 1} overlapping it span ${fmtT(t0)} to ${fmtT(t1)} `,
    rows.length ? el("button", { class: "select-longest", title: "The longest sample and the long ones overlapping it: the stall, not the whole spread of the 20", onclick: () => { UI.st.win = [t0, t1]; update(); } }, "select their window") : null),
    el("div", { class: "tablewrap" }, el("table", { class: "log" },
      el("thead", {}, el("tr", {}, ...["key", "start", a.value || "value", "tid", "comm"].map((h) => el("th", {}, h)))), tb)));
  box._rows = rows;
}

// The stall: the longest sample's span, grown by every listed sample that overlaps it
// (and those overlapping them). The 20 longest writes may spread over most of a trace;
// the ones that waited together are the stall.
function stallWindow(rows) {
  if (!rows.length) return [0, 0];
  let a = rows[0].t, b = rows[0].t + rows[0].v / 1e9, grown = true;
  while (grown) {
    grown = false;
    for (const r of rows) {
      const s = r.t, e = r.t + r.v / 1e9;
      if (s < b && e > a && (s < a || e > b)) { a = Math.min(a, s); b = Math.max(b, e); grown = true; }
    }
  }
  return [a, b];
}

async function panelCompare(card, a, mode) {
  const st = UI.st;
  const p = filterParams(a.name, { a: a.name, kind: mode, f: st.f, metric: st.metric });
  const c = await api("compare", p);
  const sides = mode === "ab" ? ["A", "B"] : ["outside", "inside"];
  // The distributions of both sides, on the same buckets.
  const dists = [];
  for (const [i, side] of [0, 1].entries()) {
    const q = mode === "ab" ? filterParams(a.name, { f: i, a: a.name, mode: "dist" }) : filterParams(a.name, { f: st.f, a: a.name, mode: "dist" });
    if (mode === "inout" && i === 0) { q.set("not_window", q.get("window")); q.delete("window"); }
    dists.push({ j: await api("panel", q), cls: side ? "b" : "a", label: sides[i] });
  }
  const diff = c.analyzers[0];
  const u = diff.unit;
  const metrics = ["p99", "avg", "count", "total"].filter((m) => !(a.snapshots && m === "total"));
  const groups = el("tr", {}, el("th", { class: "grp" }, ""), ...metrics.map((m) => el("th", { class: "grp", colspan: 3 }, m)));
  const cols = [{ label: "key", sort: "key" }];
  for (const m of metrics) cols.push({ label: sides[0], cls: "a", sort: m }, { label: sides[1], cls: "b" }, { label: mode === "ab" ? "B/A" : "in/out" });
  const get = (r, m) => (r.b || r.a || {})[m];
  const tbody = el("tbody");
  const sorted = sortRows(diff.rows, a, get);
  for (const r of sorted) {
    // The verdict sits beside the key, where it is seen whatever the table's width.
    const key = keyCell(a, r.key);
    const verdict = r.regressed ? el("span", { class: "badge", title: `${c.metric} of ${sides[1]} >= ${c.threshold} x ${sides[0]}'s` }, `${c.metric} REGRESSED`) :
      !r.a ? `only ${sides[1]}` : !r.b ? `only ${sides[0]}` : !r.compared ? "few samples" : null;
    if (verdict) key.append(typeof verdict === "string" ? el("span", { class: "verdict" }, verdict) : verdict);
    const tr = el("tr", { "data-key": r.key, class: r.regressed ? "regressed" : "" }, key);
    for (const m of metrics) {
      const f = (n) => (n ? (m === "count" ? String(n[m]) : fmtVal(u, n[m])) : "-");
      const ratio = r.ratio[m];
      tr.append(el("td", { class: "a", "data-col": m + "_a" }, f(r.a)), el("td", { class: "b", "data-col": m + "_b" }, f(r.b)),
        el("td", { class: "ratio" + (r.compared && ratio != null ? (ratio >= 1.5 ? " up" : ratio <= 1 / 1.5 ? " down" : "") : ""), "data-col": m + "_ratio" }, fmtRatio(ratio)));
    }
    tbody.append(tr);
  }
  card.textContent = "";
  // Inside vs outside: the sides' labels already say which is which ("outside 1:2").
  const head = mode === "ab" ? `A: ${c.a} \u00b7 B: ${c.b}` : `${c.a} \u00b7 ${c.b}`;
  card.append(panelHead(a), el("div", { class: "meta" }, head),
    el("div", { class: "tablewrap" }, el("table", { class: "compare" }, header(a, cols, groups), tbody)));
  if (!diff.rows.length) card.append(el("div", { class: "none" }, "no samples for these filters"));
  card.append(distChart(a, dists, sorted[0]?.key));
  card._compare = c;
}

// One key's distribution (the first row: the largest total, or the filtered key) of one or
// two sides, as shares of their samples on the same decimal buckets.
function distChart(a, sides, first) {
  const key = first ?? (sides.find((s) => s.j.rows.length) || { j: { rows: [] } }).j.rows[0]?.key;
  const box = el("div", { class: "dist" });
  if (key == null) return box;
  const series = sides.map((s) => {
    const row = s.j.rows.find((r) => r.key === key);
    const total = row ? row.count : 0;
    return { ...s, buckets: row ? row.buckets : [], total };
  });
  const lo = (b) => b["lo_" + a.unit], hi = (b) => b["hi_" + a.unit];
  for (const s of series) s.buckets = s.buckets.map((b) => ({ lo: lo(b), hi: hi(b), count: b.count }));
  const edges = [...new Set(series.flatMap((s) => s.buckets.map((b) => b.lo)))].sort((x, y) => x - y);
  if (!edges.length) return box;
  const W = 520, H = 120, pad = 18, n = edges.length, bw = Math.min(90, (W - 10) / n);
  const maxShare = Math.max(...series.flatMap((s) => s.buckets.map((b) => b.count / Math.max(1, s.total))), 0.01);
  let svg = `<svg viewBox="0 0 ${W} ${H}" preserveAspectRatio="none" role="img" aria-label="distribution of ${esc(key)}">`;
  series.forEach((s, si) => {
    for (const b of s.buckets) {
      const i = edges.indexOf(b.lo), share = b.count / Math.max(1, s.total);
      const h = (share / maxShare) * (H - pad - 14);
      const w = series.length > 1 ? bw * 0.42 : bw * 0.8;
      const x = 5 + i * bw + (series.length > 1 ? (si ? bw * 0.5 : bw * 0.08) : bw * 0.1);
      svg += `<rect x="${x.toFixed(1)}" y="${(H - pad - h).toFixed(1)}" width="${w.toFixed(1)}" height="${h.toFixed(1)}" fill="${si ? "#d9822b" : "#3f6fb5"}" fill-opacity="0.85"><title>${esc(s.label)} ${b.count} (${(share * 100).toFixed(1)}%)</title></rect>`;
    }
  });
  edges.forEach((lo, i) => {
    const top = bucketHi(series, lo), show = (v) => (a.unit === "ns" ? fmtShort(v) : a.unit === "bytes" ? fmtBytes(v) : String(v));
    const label = top === Infinity ? ">" + show(lo) : "\u2264" + show(top);
    svg += `<text x="${(5 + i * bw + bw / 2).toFixed(1)}" y="${H - 4}" font-size="10" text-anchor="middle" fill="#5d6878">${esc(label)}</text>`;
  });
  svg += `</svg>`;
  const legend = el("div", { class: "legend" }, `distribution of ${key} (share of its samples)`);
  for (const s of series) if (s.label) legend.append(el("span", { class: "sw " + s.cls }), `${s.label} (${s.total})`);
  box.append(legend);
  const holder = el("div");
  holder.innerHTML = svg;
  box.append(holder);
  return box;
}
function bucketHi(series, lo) {
  for (const s of series) for (const b of s.buckets) if (b.lo === lo) return b.hi == null ? Infinity : b.hi;
  return lo;
}
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

// ---------- what changed most ----------
async function loadChanges() {
  const st = UI.st, sec = $("#changes"), body = $("#changes-body");
  const mode = st.mode;
  if (mode === "one" || (mode === "inout" && !st.win)) {
    sec.hidden = mode !== "inout";
    body.textContent = "";
    if (mode === "inout") body.append(el("div", { class: "none" }, "Select a time window in the overview: each panel then shows inside it against outside it."));
    return;
  }
  sec.hidden = false;
  const title = $("#changes-title");
  title.textContent = mode === "ab" ? "What changed most (B against A)" : "What changed most (inside the window against outside it)";
  const pick = el("select", { id: "metric", title: "The metric a key regressed by (kstate compare --metric)", onchange: (ev) => { st.metric = ev.target.value; update(); } },
    ...["p99", "avg", "total", "count"].map((m) => { const o = el("option", { value: m }, "regressed by " + m); if (m === st.metric) o.selected = true; return o; }));
  title.append(" ", pick);
  const gen = ++UI.changesGen;
  if (!panelAnalyzers().length) {
    // Nothing to compare: the panels say why; asking the server would only get its 400.
    body.textContent = "";
    body.append(el("div", { class: "none" }, "No analyzer applies to both sides."));
    return;
  }
  const p = filterParams(null, { a: "*", kind: mode, f: st.f, metric: st.metric });
  body.textContent = "";
  body.append(el("div", { class: "loading" }, "comparing every analyzer\u2026"));
  try {
    const c = await api("compare", p);
    if (gen !== UI.changesGen) return;
    const units = Object.fromEntries(c.analyzers.map((x) => [x.analyzer, x.unit]));
    const sides = mode === "ab" ? ["A", "B"] : ["outside", "inside"];
    const tb = el("tbody");
    for (const ch of c.changes.slice(0, 15)) {
      const u = ch.metric === "count" ? "" : units[ch.analyzer];
      tb.append(el("tr", { class: ch.regressed ? "regressed" : "", "data-analyzer": ch.analyzer, "data-key": ch.key },
        el("td", { class: "key" }, el("a", { onclick: () => document.getElementById("panel-" + ch.analyzer)?.scrollIntoView({ behavior: "smooth" }) }, `${ch.analyzer} ${ch.key}`)),
        el("td", {}, ch.metric), el("td", { class: "a" }, fmtVal(u, ch.a)), el("td", { class: "b" }, fmtVal(u, ch.b)),
        el("td", { class: "ratio " + (ch.ratio >= 1 ? "up" : "down") }, fmtRatio(ch.ratio)),
        el("td", {}, ch.regressed ? el("span", { class: "badge", title: `${c.metric} of ${sides[1]} >= ${c.threshold} x ${sides[0]}'s` }, `${c.metric} REGRESSED`) : "")));
    }
    body.textContent = "";
    if (!c.changes.length) body.append(el("div", { class: "none" }, "No key has enough samples on both sides to compare."));
    else body.append(el("table", { class: "changes" }, el("thead", {}, el("tr", {}, ...["analyzer and key", "metric", sides[0], sides[1], "ratio", ""].map((h, i) => el("th", { class: i === 2 ? "a" : i === 3 ? "b" : "" }, h)))), tb));
    body.append(el("div", { class: "notes" }, `Ranked by how far the ratio is from 1; keys need ${c.min_count} samples on each side; REGRESSED: ${c.metric} of ${sides[1]} \u2265 ${c.threshold} \u00d7 ${sides[0]}'s (durations). The rules of kstate compare.`));
  } catch (e) {
    if (gen === UI.changesGen) { body.textContent = ""; body.append(el("div", { class: "error" }, e.message)); }
  }
}

// ---------- the loop ----------
function update(opts = {}) {
  writeState();
  drawHeader();
  drawChips();
  showError(null);
  const badFiles = files().filter((f) => f.error);
  if (badFiles.length) showError(badFiles.map((f) => `Cannot read ${f.error.startsWith(f.label) ? f.error : f.label + ": " + f.error}`).join("\n"));
  $("#overview").hidden = !goodFile(UI.st.mode === "ab" ? 0 : UI.st.f);
  if (opts.lanes === false) drawLanes(); else loadLanes();
  loadChanges();
  loadPanels();
}

async function start() {
  UI.lanesGen = 0; UI.panelsGen = 0; UI.changesGen = 0;
  setupBrush();
  try {
    UI.meta = await api("meta", new URLSearchParams());
    UI.machines = UI.meta.layout === "machines";
    if (UI.meta.layout_error) showError(UI.meta.layout_error);
  } catch (e) {
    showError("cannot load the recordings: " + e.message);
    return;
  }
  try {
    UI.st = readState();
  } catch (e) {
    UI.st = { mode: "one", f: 0, metric: "p99", win: null, view: null, g: {}, keys: {}, sort: {} };
    drawHeader();
    showError(`This link's state cannot be restored: ${e.message}. Showing the whole recording instead.`);
    UI.stateError = e.message;
    writeStateLater();
    loadLanes(); loadPanels();
    return;
  }
  if (UI.st.f >= files().length) UI.st.f = 0;
  if (UI.st.mode === "ab" && (files().length < 2 || UI.machines)) UI.st.mode = "one";
  update();
}
function writeStateLater() { setTimeout(writeState, 0); }

window.addEventListener("resize", () => { clearTimeout(UI.rs); UI.rs = setTimeout(() => UI.st && loadLanes(), 200); });
window.addEventListener("hashchange", () => {
  try { const st = readState(); UI.st = st; update(); } catch (e) { showError(`This link's state cannot be restored: ${e.message}`); }
});
start();

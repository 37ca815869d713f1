// kstate ui: presentation only. Every number on the page comes from the server's
// answers (the engine's own JSON); these scripts lay them out, draw the overview, the
// timeline and the flame graphs, and keep the state (window, zoom, filters, mode, tracks,
// markers) in the URL's fragment, one history entry per view, so Back and Forward move
// through them. Scripts: util.js (helpers, requests), app.js (state, header, overview,
// the loop), timeline.js, events.js, flame.js, panels.js.
"use strict";

// ---------- state in the URL fragment ----------
const GLOBAL = ["pid", "tid", "comm", "cpu"];

function readState() {
  const p = new URLSearchParams(location.hash.slice(1));
  const st = { mode: p.get("m") || "one", f: +(p.get("f") || 0), win: null, view: null,
               g: {}, keys: {}, sort: {}, markers: [], pin: [], hide: [], q: "", sel: null, group: true };
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
  const list = (k) => (p.get(k) ? p.get(k).split(",").filter(Boolean) : []);
  st.markers = list("mk").map(Number);
  if (st.markers.some((x) => !isFinite(x) || x < 0)) throw new Error(`the link's markers "${p.get("mk")}" are not times in seconds`);
  st.pin = list("pin");
  st.hide = list("hide");
  st.q = p.get("q") || "";
  st.group = p.get("grp") !== "0";
  if (p.get("sel")) {
    const m = /^([a-z]+:-?\d+\.\d+)@(\d+(?:\.\d+)?)$/.exec(p.get("sel"));
    if (!m) throw new Error(`the link's selection "${p.get("sel")}" is not ROW@SECONDS`);
    st.sel = { row: m[1], t: +m[2] };
  }
  if (!["one", "inout", "ab"].includes(st.mode)) throw new Error(`the link's mode "${st.mode}" is not one, inout or ab`);
  if (!Number.isInteger(st.f) || st.f < 0) throw new Error(`the link's file "${p.get("f")}" is not a file number`);
  return st;
}

function stateHash() {
  const st = UI.st, p = new URLSearchParams();
  if (st.mode !== "one") p.set("m", st.mode);
  if (st.f) p.set("f", st.f);
  if (st.metric && st.metric !== "p99") p.set("r", st.metric);
  if (st.win) p.set("w", `${secs(st.win[0])}:${secs(st.win[1])}`);
  if (st.view) p.set("v", `${secs(st.view[0])}:${secs(st.view[1])}`);
  for (const [k, v] of Object.entries(st.g)) p.set(k, v);
  for (const [k, v] of Object.entries(st.keys)) p.set("k." + k, v);
  for (const [k, v] of Object.entries(st.sort)) p.set("s." + k, v);
  if (st.markers.length) p.set("mk", st.markers.map((x) => x.toFixed(9)).join(","));
  if (st.pin.length) p.set("pin", st.pin.join(","));
  if (st.hide.length) p.set("hide", st.hide.join(","));
  if (st.q) p.set("q", st.q);
  if (!st.group) p.set("grp", "0");
  if (st.sel) p.set("sel", `${st.sel.row}@${st.sel.t.toFixed(9)}`);
  return "#" + p.toString();
}

// Each view its own history entry (Back returns to it); `replace` for steps of one
// gesture (a wheel, a pan) that make no view of their own.
function writeState(replace = false) {
  const h = stateHash();
  if (location.hash === h) return;
  UI.wrote = h;
  if (replace || !UI.started) history.replaceState(null, "", h);
  else history.pushState(null, "", h);
}

// Snapshot analyzers (sysinfo) sample a level now and then: a sum of samples means nothing.
const COLS = ["count", "total", "avg", "min", "max", "p50", "p99"];
const colsOf = (a) => (a.snapshots ? COLS.filter((c) => c !== "total") : COLS);
const defaultSort = (a) => (a.snapshots ? "max" : "total");

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
// A file's length in seconds (its first to its last event).
const fileSpan = (f) => { const x = goodFile(f); return x ? (x.end - x.start) / 1e9 : 1; };

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
    b.setAttribute("aria-pressed", String(b.dataset.mode === UI.st.mode));
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
      onclick: () => { UI.st.f = i; if (!UI.machines) { UI.st.view = null; UI.st.win = null; } UI.st.sel = null; update(); },
    }, fileTag(i))));
  }
}

function drawChips() {
  const box = $("#chips"), st = UI.st;
  box.textContent = "";
  const chip = (label, drop, id) => box.append(el("span", { class: "chip", "data-chip": id }, label,
    el("button", { title: "remove this filter", "aria-label": "remove " + label, onclick: () => { drop(); update(); } }, "\u00d7")));
  if (st.win) chip(`window ${secs(st.win[0])}:${secs(st.win[1])} (${fmtSpan(st.win[1] - st.win[0])})`, () => { st.win = null; }, "window");
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

// The view (zoom) the overview and the timeline share: a wheel or a drag moves it in
// small steps (one history entry when it comes to rest).
function setView(v) {
  const { whole } = viewSpan();
  v = [Math.max(0, v[0]), Math.min(whole[1], v[1])];
  if (!(v[1] > v[0])) return;
  UI.st.view = v[0] <= 0 && v[1] >= whole[1] ? null : v;
  UI.view = v;
  // The gesture's first step makes the history entry, the others update it.
  writeState(!!UI.gesture);
  UI.gesture = true;
  drawLanes();
  tlViewChanged();
  UI.later(() => {
    UI.gesture = false;
    loadLanes();
    evViewChanged();
  }, 150, "view");
}

// The overview from the keyboard: Left/Right move a cursor, Shift extends a brush from
// it, Enter makes the brush the window, Escape drops it.
function setupKeyboardBrush(c) {
  c.tabIndex = 0;
  c.setAttribute("role", "slider");
  c.setAttribute("aria-label", "overview: arrows move the cursor, shift+arrows select a window, Enter applies it");
  c.addEventListener("keydown", (ev) => {
    if (!UI.view) return;
    const [v0, v1] = UI.view, step = (v1 - v0) / (ev.altKey ? 200 : 40);
    const kb = UI.kb || (UI.kb = { cur: UI.st.win ? UI.st.win[0] : v0, anchor: null });
    if (ev.key === "ArrowLeft" || ev.key === "ArrowRight") {
      const d = ev.key === "ArrowLeft" ? -step : step;
      if (ev.shiftKey && kb.anchor == null) kb.anchor = kb.cur;
      if (!ev.shiftKey) kb.anchor = null;
      kb.cur = Math.max(v0, Math.min(v1, kb.cur + d));
      UI.kbBrush = kb.anchor == null ? null : [Math.min(kb.anchor, kb.cur), Math.max(kb.anchor, kb.cur)];
      drawLanes();
      ev.preventDefault();
    } else if (ev.key === "Enter" && UI.kbBrush && UI.kbBrush[1] > UI.kbBrush[0]) {
      UI.st.win = UI.kbBrush.slice();
      UI.kbBrush = null; kb.anchor = null;
      update({ lanes: false });
      ev.preventDefault();
    } else if (ev.key === "Escape") {
      UI.kbBrush = null; kb.anchor = null;
      drawLanes();
    }
  });
}

// ---------- the overview ----------
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
      // The task and CPU filters apply to every lane, and the syscall panel's key to the
      // system-call lane (the calls it scatters); other panels' keys are theirs. A file
      // shorter than the view (A against a longer B) is asked for its part of it.
      const to = Math.min(v[1], fileSpan(f));
      if (!(to > v[0])) continue;
      const w = Math.max(1, Math.round((bins * (to - v[0])) / (v[1] - v[0])));
      const p = filterParams("syscall", { f, from: secs(v[0]), to: secs(to), w });
      p.delete("window");
      asked = p.toString();
      res.push({ f, lanes: await api("lanes", p, { slot: "lanes" + f, prio: 1 }) });
    }
    if (gen !== UI.lanesGen) return;
    UI.lanes = res;
    // The last question the overview answers (for tests: which filters it drew).
    UI.lanesAsked = asked;
    drawLanes();
  } catch (e) {
    if (gen === UI.lanesGen && !superseded(e)) showError("overview: " + e.message);
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
    // Each answer's bins cover its own span (a shorter file's, part of the view).
    const lx0 = X(r.lanes.from), bw = (X(r.lanes.to) - lx0) / n;
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
        g.fillRect(lx0 + i * bw, y + r.h - hh, Math.max(bw, 1), hh);
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
        g.fillRect(lx0 + b * bw, y + r.h - (row + 1) * rh, Math.max(bw, 1.5), Math.max(rh, 1.5));
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
  const sel = UI.drag && UI.drag.kind === "brush" ? [UI.geom.T(Math.min(UI.drag.a, UI.drag.b)), UI.geom.T(Math.max(UI.drag.a, UI.drag.b))] : UI.kbBrush || UI.st.win;
  // The keyboard's cursor, while the overview has the focus.
  if (UI.kb && document.activeElement === canvas) {
    const x = X(UI.kb.cur);
    g.strokeStyle = "#1d2430"; g.lineWidth = 1; g.setLineDash([2, 2]);
    g.beginPath(); g.moveTo(x, AXIS_H); g.lineTo(x, height); g.stroke(); g.setLineDash([]);
  }
  if (sel) {
    const a = Math.max(x0, X(sel[0])), b = Math.min(x1, X(sel[1]));
    if (b > a - 1) {
      g.fillStyle = "rgba(63,111,181,0.16)"; g.fillRect(a, AXIS_H, Math.max(b - a, 2), height - AXIS_H);
      g.strokeStyle = "#3f6fb5"; g.lineWidth = 1;
      g.beginPath(); g.moveTo(a, AXIS_H); g.lineTo(a, height); g.moveTo(b, AXIS_H); g.lineTo(b, height); g.stroke();
    }
  }
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
    if (d.kind === "pan") { setView(UI.view.slice()); return; }
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
    setView(v);
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
      const i = Math.floor(((t - r.lanes.from) / (r.lanes.to - r.lanes.from)) * n);
      if (i < 0 || i >= n) text += `  ${r.label}: past this file's end`;
      else if (r.kind === "span") text += `  ${r.label}: ${r.events} from ${(r.first / 1e9).toFixed(9)} to ${(r.last / 1e9).toFixed(9)} s (host clock)`;
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
  setupKeyboardBrush(c);
}

// ---------- the loop ----------
function update(opts = {}) {
  writeState(!!opts.replace);
  drawHeader();
  drawChips();
  showError(null);
  const badFiles = files().filter((f) => f.error);
  if (badFiles.length) showError(badFiles.map((f) => `Cannot read ${f.error.startsWith(f.label) ? f.error : f.label + ": " + f.error}`).join("\n"));
  $("#overview").hidden = !goodFile(UI.st.mode === "ab" ? 0 : UI.st.f);
  if (opts.lanes === false) drawLanes(); else loadLanes();
  tlUpdate();
  evUpdate();
  flameUpdate();
  loadChanges();
  loadPanels();
}

async function start() {
  UI.lanesGen = 0; UI.panelsGen = 0; UI.changesGen = 0;
  setupBrush();
  try {
    UI.meta = await api("meta", new URLSearchParams(), { prio: 0 });
    UI.machines = UI.meta.layout === "machines";
    if (UI.meta.layout_error) showError(UI.meta.layout_error);
  } catch (e) {
    showError("cannot load the recordings: " + e.message);
    return;
  }
  try {
    UI.st = readState();
  } catch (e) {
    UI.st = { mode: "one", f: 0, metric: "p99", win: null, view: null, g: {}, keys: {}, sort: {}, markers: [], pin: [], hide: [], q: "", sel: null, group: true };
    drawHeader();
    showError(`This link's state cannot be restored: ${e.message}. Showing the whole recording instead.`);
    UI.stateError = e.message;
    setTimeout(() => writeState(true), 0);
    loadLanes(); tlUpdate(); evUpdate(); loadPanels();
    UI.started = true;
    return;
  }
  if (UI.st.f >= files().length) UI.st.f = 0;
  if (UI.st.mode === "ab" && (files().length < 2 || UI.machines)) UI.st.mode = "one";
  update({ replace: true });
  UI.started = true;
}

// Back and Forward: the view of that history entry.
function restore() {
  if (location.hash === UI.wrote) return;
  try {
    UI.st = readState();
    UI.wrote = location.hash;
    update({ replace: true });
  } catch (e) {
    showError(`This link's state cannot be restored: ${e.message}`);
  }
}
window.addEventListener("popstate", restore);
window.addEventListener("hashchange", restore);
window.addEventListener("resize", () => UI.later(() => { if (UI.st) { loadLanes(); tlResize(); } }, 200, "resize"));
document.addEventListener("DOMContentLoaded", start);

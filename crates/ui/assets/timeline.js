// kstate ui: the timeline. Per-CPU tracks (the task on the CPU, coloured by process; hard
// and soft interrupts), per-thread tracks (running, runnable with its waker, sleeping in S
// or D with the system call it slept in; its system calls), block devices (requests in the
// device, queued), drawn on one canvas from the server's level-of-detail answers (at most
// one drawable per pixel column and row, whatever the zoom). Only the tracks in sight are
// asked for. Click a slice for what it is, the events behind it as `kstate dump` prints
// them and the analyzers' rows it belongs to; drag to select a window; Ctrl+wheel or W/S
// to zoom, Shift+wheel or A/D to pan, M for a marker. Tracks can be pinned, hidden,
// grouped by process and searched.
"use strict";

const TL = {
  f: null, tracks: null, byId: {}, loading: null, error: null, items: [], height: 0,
  data: null, extra: new Map(), sel: null, arrows: [], hover: null, drag: null, collapsed: new Set(),
  showHidden: false, drawn: 0, viewKey: "",
};
UI.tl = TL;
const TL_AXIS = 22, TL_LABEL = 220, TL_GROUP_H = 18;
const ROW_H = { cpu: [16, 6, 6], thread: [12, 7], device: [10, 6] };
const K = { running: 0, runnable: 1, preempted: 2, sleeping: 3, blocked: 4, idle: 5, off: 6, syscall: 8, task: 16, irq: 17, softirq: 18, queued: 24, device: 25 };
const KIND_COLOUR = { 0: "#2e9a52", 1: "#e39b2d", 2: "#f1cd6e", 3: "#c5d3e8", 4: "#c0392b", 5: "#e9edf2", 6: "#b39ddb", 17: "#a33f3f", 18: "#7d5ba6" };
const DIR_COLOUR = ["#3f6fb5", "#d9822b", "#8e8e8e", "#5b5b5b", "#a0a0a0"];

// Rows other analyses add under a thread's rows (why.js: the critical path), fed from
// their own endpoints. A provider is { name, height, applies(track),
// load(track, from, to, cols) -> Promise<[c0, c1, kind, label, arg, fill, ...]>, labels },
// and optionally key() (more of what its answer depends on than the view), draw(g, box,
// track, geom) (it draws its row itself) and click(item, row, x, y).
UI.rowProviders = [];
UI.addRowProvider = (p) => { UI.rowProviders.push(p); tlRelayout(); };

const tlFile = () => (UI.st.mode === "ab" ? (UI.st.tlf || 0) : UI.st.f);

async function tlUpdate() {
  const f = tlFile(), sec = $("#timeline");
  sec.hidden = !goodFile(f);
  if (sec.hidden) return;
  drawTlBar();
  if (TL.f !== f) {
    TL.f = f; TL.tracks = null; TL.data = null; TL.sel = null; TL.arrows = []; TL.extra.clear();
    TL.loading = api("tracks", new URLSearchParams({ f }), { slot: "tracks", prio: 0 });
    $("#tl-note").textContent = "indexing the timeline\u2026";
    try {
      const t = await TL.loading;
      if (TL.f !== f) return;
      TL.tracks = t.tracks;
      TL.byId = Object.fromEntries(t.tracks.map((x) => [x.id, x]));
      TL.meta = t;
      $("#tl-note").textContent = t.missing.length ? t.missing.join("; ") : "";
    } catch (e) {
      if (superseded(e)) return;
      TL.error = e.message;
      $("#tl-note").textContent = "timeline: " + e.message;
      return;
    }
  }
  if (!TL.tracks) return;
  tlRelayout();
  tlRestoreSelection();
}

function tlRelayout() {
  if (!TL.tracks) return;
  tlLayout();
  $("#tl-spacer").style.height = Math.max(0, TL.height - tlViewH() + TL_AXIS) + "px";
  tlDraw();
  tlFetchSoon(0);
}

function tlViewH() { return $("#tl-scroll").clientHeight; }

// The tracks to show, in order: pinned, CPUs, devices, then processes (busiest first)
// with their threads, each track its rows.
function tlLayout() {
  const st = UI.st, q = (st.q || "").toLowerCase(), g = st.g;
  const hidden = new Set(st.hide), pinned = new Set(st.pin);
  const match = (t) => !q || t.name.toLowerCase().includes(q) || (t.tid != null && (String(t.tid) === q || String(t.tgid) === q));
  const keep = (t) => {
    if (hidden.has(t.id) && !TL.showHidden) return false;
    if (t.kind === "thread") {
      if (g.tid && !g.tid.split(",").includes(String(t.tid))) return false;
      if (g.pid && !g.pid.split(",").includes(String(t.tgid ?? t.tid))) return false;
      if (g.comm && !g.comm.split(",").includes(t.comm)) return false;
    } else if (q && !match(t)) return false;
    if (t.kind === "cpu" && g.cpu && !g.cpu.split(",").includes(t.id.slice(4))) return false;
    return t.kind !== "thread" || match(t);
  };
  const items = [];
  let y = 0;
  const track = (t, indent = 0) => {
    const hs = ROW_H[t.kind];
    const rows = t.rows.map((r) => ({ key: `${t.id}.${r.row}`, name: r.name, h: hs[r.row] || 8 }));
    for (const p of UI.rowProviders) if (p.applies(t)) rows.push({ key: `${t.id}.p:${p.name}`, name: p.name, h: p.height || 8, provider: p });
    let ry = 2;
    for (const r of rows) { r.y = ry; ry += r.h + 1; }
    const h = Math.max(ry + 2, 14);
    items.push({ type: "track", t, y, h, rows, indent, pinned: pinned.has(t.id), hidden: hidden.has(t.id) });
    y += h;
  };
  const header = (label, key, n) => {
    items.push({ type: "group", key, y, h: TL_GROUP_H, label, n, collapsed: TL.collapsed.has(key) });
    y += TL_GROUP_H;
  };
  const pins = st.pin.map((id) => TL.byId[id]).filter((t) => t && (!hidden.has(t.id) || TL.showHidden));
  if (pins.length) { header("pinned", "pinned", pins.length); if (!TL.collapsed.has("pinned")) pins.forEach((t) => track(t)); }
  const rest = TL.tracks.filter((t) => !pinned.has(t.id) && keep(t));
  const byBusy = (a, b) => b.busy_ns - a.busy_ns || (a.id < b.id ? -1 : 1);
  const cpus = rest.filter((t) => t.kind === "cpu");
  if (cpus.length) { header("CPUs", "cpus", cpus.length); if (!TL.collapsed.has("cpus")) cpus.forEach((t) => track(t)); }
  const devs = rest.filter((t) => t.kind === "device");
  if (devs.length) { header("block devices", "devices", devs.length); if (!TL.collapsed.has("devices")) devs.forEach((t) => track(t)); }
  const threads = rest.filter((t) => t.kind === "thread");
  if (st.group) {
    const procs = new Map();
    for (const t of threads) {
      const k = t.tgid ?? t.tid;
      if (!procs.has(k)) procs.set(k, { tgid: k, threads: [], busy: 0 });
      const p = procs.get(k);
      p.threads.push(t); p.busy += t.busy_ns;
    }
    const list = [...procs.values()].sort((a, b) => b.busy - a.busy || a.tgid - b.tgid);
    for (const p of list) {
      p.threads.sort(byBusy);
      const lead = p.threads.find((t) => t.tid === p.tgid) || p.threads[0];
      const key = "proc:" + p.tgid;
      header(`${lead.comm} (pid ${p.tgid})`, key, p.threads.length);
      if (!TL.collapsed.has(key)) p.threads.forEach((t) => track(t, 10));
    }
  } else {
    threads.sort(byBusy).forEach((t) => track(t));
  }
  TL.items = items;
  TL.height = y;
  const shown = items.filter((i) => i.type === "track").length;
  $("#tl-count").textContent = `${shown} of ${TL.tracks.length} tracks` + (st.hide.length ? ` \u00b7 ${st.hide.length} hidden` : "");
  $("#tl-showhidden").hidden = !st.hide.length;
  $("#tl-showhidden").textContent = TL.showHidden ? "hide the hidden" : `show ${st.hide.length} hidden`;
}

// The geometry of the plot: time <-> x.
function tlGeom() {
  const c = $("#tl-canvas"), w = c.clientWidth;
  const [v0, v1] = UI.view || [0, fileSpan(TL.f)];
  const x0 = TL_LABEL, x1 = Math.max(x0 + 50, w - 6);
  return { x0, x1, v0, v1, X: (t) => x0 + ((t - v0) / (v1 - v0)) * (x1 - x0), T: (x) => v0 + ((x - x0) / (x1 - x0)) * (v1 - v0) };
}

function tlVisibleRows(overscan) {
  const top = $("#tl-scroll").scrollTop - overscan, bottom = top + tlViewH() + 2 * overscan;
  const keys = [];
  for (const it of TL.items) {
    if (it.type !== "track" || it.y + it.h < top || it.y > bottom) continue;
    for (const r of it.rows) if (!r.provider) keys.push(r.key);
  }
  return keys;
}

function tlFetchSoon(delay = 60) {
  UI.later(tlFetch, delay, "timeline");
}

async function tlFetch() {
  if (!TL.tracks || !UI.view) return;
  const gm = tlGeom(), cols = Math.max(1, Math.round(gm.x1 - gm.x0));
  const [v0, v1] = [UI.view[0], Math.min(UI.view[1], fileSpan(TL.f))];
  const view = `${secs(v0)}|${secs(v1)}|${cols}`;
  const want = tlVisibleRows(tlViewH());
  const have = TL.data && TL.data.view === view ? TL.data.rows : null;
  const missing = have ? want.filter((k) => !have.has(k)) : want;
  tlLoadProviders(v0, v1, cols);
  if (!missing.length) {
    if (have) { TL.viewKey = view; TL.drawn++; }
    return;
  }
  const p = new URLSearchParams({ f: TL.f, from: secs(v0), to: secs(v1), w: cols, rows: missing.join(",") });
  const asked = performance.now();
  try {
    const j = await api("timeline", p, { slot: "timeline", prio: 0 });
    const rows = have && TL.data.view === view ? TL.data.rows : new Map();
    const labels = have && TL.data.view === view ? TL.data.labels : [];
    // Each answer numbers its labels from 0: renumbered into the view's list.
    const base = labels.length;
    labels.push(...j.labels);
    for (const r of j.rows) {
      const d = r.d.slice();
      for (let i = 3; i < d.length; i += 6) d[i] += base;
      rows.set(`${r.id}.${r.row}`, d);
    }
    TL.data = { view, from: j.from, to: j.to, cols: j.cols, exact: j.exact, rows, labels };
    TL.viewKey = view;
    tlDraw();
    TL.drawn++;
    UI.timing = Object.assign(UI.timing || {}, { timeline: performance.now() - asked });
    // Rows scrolled into sight meanwhile.
    if (tlVisibleRows(0).some((k) => !rows.has(k))) tlFetchSoon(0);
  } catch (e) {
    if (!superseded(e)) $("#tl-note").textContent = "timeline: " + e.message;
  }
}

async function tlLoadProviders(v0, v1, cols) {
  for (const it of TL.items) {
    if (it.type !== "track") continue;
    for (const r of it.rows) {
      if (!r.provider) continue;
      const key = `${r.key}|${v0}|${v1}|${cols}` + (r.provider.key ? "|" + r.provider.key() : "");
      if (TL.extra.has(key)) continue;
      TL.extra.set(key, null);
      r.provider.load(it.t, v0, v1, cols).then((d) => { TL.extra.set(key, d); tlDraw(); }, () => {});
    }
  }
}

function tlResize() { tlDraw(); tlFetchSoon(0); }
function tlViewChanged() { tlDraw(); tlFetchSoon(); }

function drawColour(kind, label, labelText, arg) {
  if (kind === K.task) {
    const m = /-(\d+)$/.exec(labelText || ""), t = m && TL.byId["tid:" + m[1]];
    return nameColour(String(t ? t.tgid ?? t.tid : labelText), 58);
  }
  if (kind === K.syscall) return nameColour(labelText || String(label), 55);
  if (kind === K.device || kind === K.queued) return DIR_COLOUR[label] || "#888";
  return KIND_COLOUR[kind] || "#888";
}

function tlDraw() {
  const c = $("#tl-canvas");
  if (!c || !TL.tracks || $("#timeline").hidden) return;
  const dpr = window.devicePixelRatio || 1, w = c.clientWidth, h = tlViewH();
  if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
    c.width = Math.round(w * dpr); c.height = Math.round(h * dpr); c.style.height = h + "px";
  }
  const g = c.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  const gm = tlGeom(), { x0, x1, X } = gm, top = $("#tl-scroll").scrollTop;
  TL.geom = gm;
  const D = TL.data;
  const tOf = D ? (col) => D.from + (col * (D.to - D.from)) / D.cols : null;
  g.save();
  g.beginPath(); g.rect(0, TL_AXIS, w, h - TL_AXIS); g.clip();
  for (const it of TL.items) {
    const y = TL_AXIS + it.y - top;
    if (y + it.h < TL_AXIS || y > h) continue;
    if (it.type === "group") {
      g.fillStyle = "#eef1f5"; g.fillRect(0, y, w, it.h);
      g.fillStyle = "#1d2430"; g.font = "600 11px system-ui, sans-serif";
      g.fillText(`${it.collapsed ? "\u25b8" : "\u25be"} ${it.label}  \u00b7 ${it.n} ${it.key === "cpus" ? "CPUs" : it.key === "devices" ? "devices" : it.key === "pinned" ? "pinned" : "threads"}`, 4, y + 13);
      continue;
    }
    const t = it.t;
    g.fillStyle = it.pinned ? "#fff8e6" : it.hidden ? "#f6f0f0" : "#fff";
    g.fillRect(0, y, x0, it.h);
    g.fillStyle = "#1d2430"; g.font = (it.pinned ? "600 " : "") + "11px system-ui, sans-serif";
    g.fillText(fit(g, t.name, x0 - 44 - it.indent), 4 + it.indent, y + 11);
    // Pin and hide, at the label's right end.
    g.fillStyle = it.pinned ? "#c98a00" : "#aab3c0"; g.font = "11px system-ui, sans-serif";
    g.fillText("\u25cf", x0 - 34, y + 11);
    g.fillStyle = "#aab3c0"; g.fillText("\u00d7", x0 - 18, y + 11);
    g.fillStyle = "#8a94a3"; g.font = "9px system-ui, sans-serif";
    for (const r of it.rows) if (r.h >= 7 && it.rows.length > 1) g.fillText(r.name, x0 - 36 - g.measureText(r.name).width - 4, y + r.y + r.h - 1);
    g.strokeStyle = "#eef1f5"; g.beginPath(); g.moveTo(0, y + it.h - 0.5); g.lineTo(w, y + it.h - 0.5); g.stroke();
    for (const r of it.rows) {
      const ry = y + r.y;
      g.fillStyle = "#f7f8fa"; g.fillRect(x0, ry, x1 - x0, r.h);
      if (r.provider && r.provider.draw) { r.provider.draw(g, { y: ry, h: r.h }, t, gm); continue; }
      let d = r.provider ? TL.extra.get(`${r.key}|${UI.view[0]}|${Math.min(UI.view[1], fileSpan(TL.f))}|${Math.round(x1 - x0)}`) : D && D.rows.get(r.key);
      if (!d) continue;
      const labels = r.provider ? r.provider.labels || [] : D.labels;
      for (let i = 0; i < d.length; i += 6) {
        const [c0, c1, kind, label, arg, fill] = [d[i], d[i + 1], d[i + 2], d[i + 3], d[i + 4], d[i + 5]];
        const a = r.provider ? x0 + c0 : X(tOf(c0)), b = r.provider ? x0 + c1 : X(tOf(c1));
        if (b < x0 || a > x1) continue;
        const text = labels[label];
        g.globalAlpha = 0.3 + 0.7 * (fill / 255);
        g.fillStyle = drawColour(kind, label, text, arg);
        const xa = Math.max(a, x0), xb = Math.min(b, x1);
        g.fillRect(xa, ry, Math.max(xb - xa, 1), r.h);
        if (xb - xa > 36 && r.h >= 10 && text) {
          g.globalAlpha = 1; g.fillStyle = kind === K.sleeping || kind === K.idle || kind === K.preempted ? "#3c4654" : "#fff";
          g.font = "10px system-ui, sans-serif";
          g.fillText(fit(g, text, xb - xa - 4), xa + 2, ry + r.h - 2.5);
        }
      }
      g.globalAlpha = 1;
    }
  }
  tlOverlay(g, gm, top, w, h);
  g.restore();
  tlAxis(g, gm, w);
  tlReadout();
}

// The y (canvas) of a track's row, or null when it is not in sight.
function tlRowY(id, row) {
  const it = TL.items.find((i) => i.type === "track" && i.t.id === id);
  if (!it) return null;
  const r = it.rows.find((x) => x.key === `${id}.${row}`) || it.rows[0];
  return TL_AXIS + it.y - $("#tl-scroll").scrollTop + r.y + r.h / 2;
}

function tlOverlay(g, gm, top, w, h) {
  const { x0, x1, X } = gm, st = UI.st;
  // The window (and the brush being drawn).
  const win = TL.drag && TL.drag.moved ? [gm.T(Math.min(TL.drag.a, TL.drag.b)), gm.T(Math.max(TL.drag.a, TL.drag.b))] : TL.kbBrush || st.win;
  if (win) {
    const a = Math.max(x0, X(win[0])), b = Math.min(x1, X(win[1]));
    if (b > a - 1) {
      g.fillStyle = "rgba(63,111,181,0.13)"; g.fillRect(a, TL_AXIS, Math.max(b - a, 2), h);
      g.strokeStyle = "#3f6fb5"; g.beginPath(); g.moveTo(a, TL_AXIS); g.lineTo(a, h); g.moveTo(b, TL_AXIS); g.lineTo(b, h); g.stroke();
    }
  }
  // The selected slice.
  if (TL.sel && TL.sel.slice) {
    const s = TL.sel.slice, y = tlRowY(s.id, s.row);
    if (y != null) {
      const it = TL.items.find((i) => i.type === "track" && i.t.id === s.id);
      const r = it.rows.find((x) => x.key === `${s.id}.${s.row}`) || it.rows[0];
      const a = Math.max(x0, X(s.start)), b = Math.min(x1, X(s.end));
      g.strokeStyle = "#111"; g.lineWidth = 2;
      g.strokeRect(a - 1, y - r.h / 2 - 1, Math.max(b - a, 1) + 2, r.h + 2);
      g.lineWidth = 1;
    }
  }
  // Wake-up arrows: from the waker (its thread, or the CPU where it ran) to the woken.
  for (const ar of TL.arrows) {
    const x = X(ar.t);
    if (x < x0 - 2 || x > x1 + 2) continue;
    const y1 = tlRowY(ar.to, 0);
    if (y1 == null) continue;
    let y0 = tlRowY(ar.from, 0), label = null;
    // The waker not in sight (hidden, filtered, scrolled away): the arrow comes from the
    // plot's edge, named.
    if (y0 == null || y0 < TL_AXIS) { y0 = TL_AXIS + 2; label = ar.name || ar.from; }
    else if (y0 > h) { y0 = h - 2; label = ar.name || ar.from; }
    const x2 = Math.min(x1, X(ar.run ?? ar.t));
    g.strokeStyle = ar.main ? "#d0342c" : "rgba(208,52,44,0.55)"; g.fillStyle = g.strokeStyle; g.lineWidth = ar.main ? 1.6 : 1;
    g.beginPath(); g.moveTo(x, y0); g.lineTo(x, y1); g.stroke();
    const dir = y1 > y0 ? -1 : 1;
    g.beginPath(); g.moveTo(x, y1); g.lineTo(x - 4, y1 + 6 * dir); g.lineTo(x + 4, y1 + 6 * dir); g.fill();
    if (x2 > x + 2) { g.setLineDash([3, 2]); g.beginPath(); g.moveTo(x, y1); g.lineTo(x2, y1); g.stroke(); g.setLineDash([]); }
    if (label && ar.main) {
      g.font = "10px system-ui, sans-serif";
      const text = "woken by " + label, tw = g.measureText(text).width;
      g.fillStyle = "rgba(255,255,255,0.9)"; g.fillRect(x + 2, y0 > TL_AXIS + 10 ? y0 - 12 : y0, tw + 4, 12);
      g.fillStyle = "#d0342c"; g.fillText(text, x + 4, y0 > TL_AXIS + 10 ? y0 - 3 : y0 + 9);
    }
    g.lineWidth = 1;
  }
  // Markers.
  st.markers.forEach((m, i) => {
    const x = X(m);
    if (x < x0 || x > x1) return;
    g.strokeStyle = "#d35400"; g.setLineDash([4, 3]);
    g.beginPath(); g.moveTo(x, TL_AXIS); g.lineTo(x, h); g.stroke(); g.setLineDash([]);
  });
  // The cursor.
  if (TL.hover != null) {
    const x = X(TL.hover);
    if (x >= x0 && x <= x1) { g.strokeStyle = "rgba(29,36,48,0.45)"; g.beginPath(); g.moveTo(x, TL_AXIS); g.lineTo(x, h); g.stroke(); }
  }
  if (TL.listT != null) {
    const x = X(TL.listT);
    if (x >= x0 && x <= x1) { g.strokeStyle = "#2f7d32"; g.lineWidth = 1.5; g.beginPath(); g.moveTo(x, TL_AXIS); g.lineTo(x, h); g.stroke(); g.lineWidth = 1; }
  }
}

function tlAxis(g, gm, w) {
  const { x0, x1, v0, v1, X } = gm;
  g.fillStyle = "#fff"; g.fillRect(0, 0, w, TL_AXIS);
  g.strokeStyle = "#d9dee6"; g.beginPath(); g.moveTo(0, TL_AXIS - 0.5); g.lineTo(w, TL_AXIS - 0.5); g.stroke();
  g.font = "11px system-ui, sans-serif"; g.fillStyle = "#5d6878";
  const step = niceStep((v1 - v0) / Math.max(2, (x1 - x0) / 110));
  for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
    const x = X(t);
    g.fillRect(x, TL_AXIS - 5, 1, 5);
    g.fillText(fmtT(t), x + 2, 12);
  }
  g.fillText(TL.data && TL.data.exact ? "time (s) \u00b7 exact" : "time (s)", 4, 12);
  UI.st.markers.forEach((m, i) => {
    const x = X(m);
    if (x < x0 || x > x1) return;
    g.fillStyle = "#d35400"; g.fillRect(x - 7, 2, 14, 12);
    g.fillStyle = "#fff"; g.font = "bold 9px system-ui, sans-serif"; g.fillText("M" + (i + 1), x - 6, 11);
  });
}

function tlReadout() {
  const st = UI.st, v = UI.view || [0, 0], parts = [];
  parts.push(`view ${fmtT(v[0])} \u2013 ${fmtT(v[1])} (${fmtSpan(v[1] - v[0])})`);
  const win = TL.drag && TL.drag.moved && TL.geom ? [TL.geom.T(Math.min(TL.drag.a, TL.drag.b)), TL.geom.T(Math.max(TL.drag.a, TL.drag.b))] : TL.kbBrush || st.win;
  if (win) parts.push(`selection ${fmtSpan(win[1] - win[0])}`);
  if (TL.hover != null) parts.push(`cursor ${fmtT(TL.hover)}`);
  $("#tl-readout").textContent = parts.join(" \u00b7 ");
  const mk = $("#tl-markers");
  mk.textContent = "";
  st.markers.forEach((m, i) => {
    const d = i ? ` (+${fmtSpan(m - st.markers[i - 1])})` : "";
    mk.append(el("span", { class: "marker", "data-marker": i }, `M${i + 1} ${fmtT(m)}${d}`,
      el("button", { title: "remove this marker", "aria-label": `remove marker ${i + 1}`, onclick: () => { st.markers.splice(i, 1); writeState(); tlDraw(); } }, "\u00d7")));
  });
}

function drawTlBar() {
  const box = $("#tl-files");
  box.textContent = "";
  if (files().length > 1) {
    files().forEach((f, i) => box.append(el("button", {
      class: tlFile() === i ? "on" : "", "data-file": i,
      onclick: () => { if (UI.st.mode === "ab") UI.st.tlf = i; else UI.st.f = i; UI.st.sel = null; update(); },
    }, fileTag(i))));
  }
  $("#tl-search").value = UI.st.q || "";
  $("#tl-group").checked = UI.st.group;
}

function addMarker(t) {
  const st = UI.st;
  if (t == null || st.markers.some((m) => Math.abs(m - t) < 1e-9)) return;
  st.markers.push(t);
  st.markers.sort((a, b) => a - b);
  writeState();
  tlDraw();
}

// ---------- selecting a slice ----------
async function tlSelect(rowKey, t, tolS) {
  const p = new URLSearchParams({ f: TL.f, row: rowKey, t: secs(t), tol: secs(tolS) });
  try {
    const j = await api("slice", p, { slot: "slice", prio: 0 });
    TL.sel = j.slice ? j : null;
    TL.arrows = [];
    if (j.slice) {
      UI.st.sel = { row: rowKey, t };
      writeState(true);
      const s = j.slice;
      if (s.from) TL.arrows.push({ from: s.from.id, t: s.from.t, to: s.id, run: s.kind === "runnable" ? s.end : null, main: true, name: (s.facts.find((x) => x[0] === "waker") || [])[1] });
      if (s.id.startsWith("tid:")) tlWakeups(s.id);
      evAnchor(s.start, s.id);
    }
    tlDetails();
    tlDraw();
  } catch (e) {
    if (!superseded(e)) showError("timeline: " + e.message);
  }
}

function tlRestoreSelection() {
  const s = UI.st.sel;
  if (!s) { if (TL.sel) { TL.sel = null; TL.arrows = []; tlDetails(); } return; }
  if (TL.sel && TL.sel.slice && `${TL.sel.slice.id}.${TL.sel.slice.row}` === s.row && s.t >= TL.sel.slice.start && s.t <= TL.sel.slice.end) return;
  tlSelect(s.row, s.t, 0);
}

// Who woke the selected thread in sight: an arrow each.
async function tlWakeups(id) {
  const v = UI.view;
  const p = new URLSearchParams({ f: TL.f, tid: id.slice(4), from: secs(v[0]), to: secs(Math.min(v[1], fileSpan(TL.f))) });
  try {
    const j = await api("wakeups", p, { slot: "wakeups", prio: 1 });
    const main = TL.arrows.filter((a) => a.main);
    TL.arrows = main.concat(j.wakeups.filter((w) => !main.some((m) => Math.abs(m.t - w.t) < 1e-9)).map((w) => ({ from: w.from, t: w.t, to: id, run: w.run, name: w.waker })));
    tlDraw();
  } catch (e) { /* arrows are extra */ }
}

function tlDetails() {
  const box = $("#tl-side");
  box.textContent = "";
  const j = TL.sel;
  if (!j) {
    box.append(el("div", { class: "none" }, "Click a slice for what it is and the events behind it; drag to select a window."));
    return;
  }
  const s = j.slice, track = TL.byId[s.id];
  box.append(el("h3", {}, s.what),
    el("div", { class: "meta" }, `${track ? track.name : s.id} \u00b7 ${s.kind}`));
  const facts = el("table", { class: "facts" });
  const row = (k, v) => facts.append(el("tr", {}, el("th", {}, k), el("td", {}, v)));
  row("start", fmtT(s.start));
  row("end", fmtT(s.end));
  row("duration", fmtDur(s.dur_ns));
  for (const [k, v] of s.facts) row(k, v);
  box.append(facts);
  const tools = el("div", { class: "tools" },
    el("button", { onclick: () => { const pad = (s.end - s.start) * 0.1 || 1e-6; setView([s.start - pad, s.end + pad]); } }, "zoom to it"),
    el("button", { onclick: () => { UI.st.win = [s.start, Math.max(s.end, s.start + 1e-9)]; update({ lanes: false }); } }, "select it as the window"),
    el("button", { onclick: () => { addMarker(s.start); addMarker(s.end); } }, "markers at its ends"));
  for (const add of UI.sliceTools || []) add(s, tools);
  box.append(tools);
  if (s.rows.length) {
    box.append(el("h4", {}, "In the analyzers' rows"));
    const ul = el("ul", { class: "rows" });
    for (const r of s.rows) {
      const info = (goodFile(TL.f).analyzers || []).find((a) => a.name === r.analyzer);
      ul.append(el("li", {}, el("a", {
        href: "#", "data-analyzer": r.analyzer, "data-key": r.key,
        onclick: (ev) => { ev.preventDefault(); if (info) { UI.st.keys[r.analyzer] = r.key; update(); setTimeout(() => document.getElementById("panel-" + r.analyzer)?.scrollIntoView(), 50); } },
        title: info ? "filter the panel by this key" : "this analyzer does not apply to the file",
      }, `${r.analyzer}: ${r.key}`)));
    }
    box.append(ul);
  }
  if (j.events.length) {
    box.append(el("h4", {}, "Events at its start and end (kstate dump)"));
    for (const e of j.events) box.append(eventDetails(e));
  }
}

// One event: its dump line, and its fields (as kstate dump --json) when opened.
function eventDetails(e) {
  const d = el("details", { class: "event" }, el("summary", { class: "line", title: e.line }, e.line.trimStart()));
  const t = el("table", { class: "fields" });
  for (const [k, v] of e.fields) t.append(el("tr", {}, el("th", {}, k), el("td", {}, v)));
  d.append(t);
  return d;
}

// ---------- the pointer and the keyboard ----------
function tlHit(x, y) {
  const top = $("#tl-scroll").scrollTop, cy = y - TL_AXIS + top;
  const it = TL.items.find((i) => cy >= i.y && cy < i.y + i.h);
  if (!it) return null;
  if (it.type === "group") return { group: it };
  const r = it.rows.find((r) => cy - it.y >= r.y - 1 && cy - it.y < r.y + r.h + 1) || it.rows[0];
  return { it, r };
}

function setupTimeline() {
  const c = $("#tl-canvas"), sc = $("#tl-scroll");
  const xy = (ev) => { const b = c.getBoundingClientRect(); return [ev.clientX - b.left, ev.clientY - b.top]; };
  sc.addEventListener("scroll", () => { tlDraw(); tlFetchSoon(); });
  c.addEventListener("mousedown", (ev) => {
    if (ev.button !== 0 || !TL.geom) return;
    const [x, y] = xy(ev);
    c.focus();
    if (y < TL_AXIS) {
      // A marker's flag: removed.
      const i = UI.st.markers.findIndex((m) => Math.abs(TL.geom.X(m) - x) < 8);
      if (i >= 0) { UI.st.markers.splice(i, 1); writeState(); tlDraw(); }
      return;
    }
    const h = tlHit(x, y);
    if (h && h.group) { TL.collapsed.has(h.group.key) ? TL.collapsed.delete(h.group.key) : TL.collapsed.add(h.group.key); tlRelayout(); return; }
    if (x < TL.geom.x0) {
      if (!h) return;
      const id = h.it.t.id, st = UI.st;
      if (x >= TL.geom.x0 - 38 && x < TL.geom.x0 - 22) {
        const pinning = !st.pin.includes(id);
        st.pin = pinning ? st.pin.concat(id) : st.pin.filter((p) => p !== id);
        writeState(); tlRelayout();
        // A pinned track goes on top: show it there.
        if (pinning) { $("#tl-scroll").scrollTop = 0; tlDraw(); }
      } else if (x >= TL.geom.x0 - 22) {
        st.hide = st.hide.includes(id) ? st.hide.filter((p) => p !== id) : st.hide.concat(id);
        writeState(); tlRelayout();
      } else if (UI.onTrackName) UI.onTrackName(h.it.t);
      return;
    }
    TL.drag = { a: x, b: x, y, moved: false, pan: ev.shiftKey, view: UI.view.slice() };
    ev.preventDefault();
  });
  window.addEventListener("mousemove", (ev) => {
    if (!TL.geom) return;
    const [x, y] = xy(ev);
    const inside = x >= TL.geom.x0 && x <= TL.geom.x1 && y >= 0 && y <= c.clientHeight;
    const hv = inside ? TL.geom.T(x) : null;
    if (TL.drag) {
      TL.drag.b = Math.max(TL.geom.x0, Math.min(TL.geom.x1, x));
      if (Math.abs(TL.drag.b - TL.drag.a) >= 3) TL.drag.moved = true;
      if (TL.drag.pan && TL.drag.moved) {
        const d = TL.drag, dt = ((d.a - d.b) / (TL.geom.x1 - TL.geom.x0)) * (d.view[1] - d.view[0]);
        setView([d.view[0] + dt, d.view[1] + dt]);
        return;
      }
      TL.hover = hv;
      tlDraw();
    } else if (hv !== TL.hover) {
      TL.hover = hv;
      tlDraw();
      tlTip(ev, x, y);
    }
  });
  window.addEventListener("mouseup", () => {
    const d = TL.drag;
    if (!d) return;
    TL.drag = null;
    if (d.pan) return;
    if (!d.moved) {
      const h = tlHit(d.a, d.y);
      if (h && h.r && !h.r.provider) tlSelect(h.r.key, TL.geom.T(d.a), 3 * (TL.geom.v1 - TL.geom.v0) / (TL.geom.x1 - TL.geom.x0));
      else if (h && h.r && h.r.provider.click) h.r.provider.click(h.it, h.r, d.a, d.y);
      return;
    }
    const a = TL.geom.T(Math.min(d.a, d.b)), b = TL.geom.T(Math.max(d.a, d.b));
    UI.st.win = [a, b];
    update({ lanes: false });
  });
  c.addEventListener("dblclick", () => { const s = TL.sel && TL.sel.slice; if (s) { const pad = (s.end - s.start) * 0.1 || 1e-6; setView([s.start - pad, s.end + pad]); } });
  c.addEventListener("mouseleave", () => { TL.hover = null; $("#tl-tip").hidden = true; tlDraw(); });
  c.addEventListener("wheel", (ev) => {
    if (!TL.geom) return;
    const [x] = xy(ev);
    const [v0, v1] = UI.view;
    if (ev.ctrlKey || ev.metaKey) {
      ev.preventDefault();
      const t = x >= TL.geom.x0 ? TL.geom.T(x) : (v0 + v1) / 2, k = ev.deltaY > 0 ? 1.25 : 0.8;
      setView([t - (t - v0) * k, t + (v1 - t) * k]);
    } else if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) {
      ev.preventDefault();
      const d = ((ev.shiftKey ? ev.deltaY : ev.deltaX) / (TL.geom.x1 - TL.geom.x0)) * (v1 - v0);
      tlPan(d);
    }
  }, { passive: false });
  c.addEventListener("keydown", tlKey);
  $("#tl-search").addEventListener("input", (ev) => {
    UI.later(() => { UI.st.q = ev.target.value.trim(); writeState(true); tlRelayout(); evQueryChanged(); }, 150, "search");
  });
  $("#tl-group").addEventListener("change", (ev) => { UI.st.group = ev.target.checked; writeState(); tlRelayout(); });
  $("#tl-showhidden").onclick = () => { TL.showHidden = !TL.showHidden; tlRelayout(); };
  $("#tl-marker").onclick = () => addMarker(TL.hover ?? (UI.st.win ? UI.st.win[0] : (UI.view[0] + UI.view[1]) / 2));
}

function tlPan(d) {
  const [v0, v1] = UI.view, whole = fileSpan(TL.f);
  let v = [v0 + d, v1 + d];
  if (v[0] < 0) v = [0, v1 - v0];
  if (v[1] > whole) v = [whole - (v1 - v0), whole];
  setView(v);
}

function tlKey(ev) {
  if (!UI.view) return;
  const [v0, v1] = UI.view, span = v1 - v0, mid = TL.hover ?? (v0 + v1) / 2;
  const kb = TL.kb || (TL.kb = { cur: TL.hover ?? v0, anchor: null });
  switch (ev.key) {
    case "w": case "W": setView([mid - (mid - v0) * 0.7, mid + (v1 - mid) * 0.7]); break;
    case "s": case "S": setView([mid - (mid - v0) / 0.7, mid + (v1 - mid) / 0.7]); break;
    case "a": case "A": tlPan(-span * 0.15); break;
    case "d": case "D": tlPan(span * 0.15); break;
    case "m": case "M": addMarker(TL.hover ?? kb.cur); break;
    case "ArrowLeft": case "ArrowRight": {
      const step = span / (ev.altKey ? 400 : 50) * (ev.key === "ArrowLeft" ? -1 : 1);
      if (ev.shiftKey && kb.anchor == null) kb.anchor = kb.cur;
      if (!ev.shiftKey) kb.anchor = null;
      kb.cur = Math.max(v0, Math.min(v1, kb.cur + step));
      TL.hover = kb.cur;
      TL.kbBrush = kb.anchor == null ? null : [Math.min(kb.anchor, kb.cur), Math.max(kb.anchor, kb.cur)];
      tlDraw();
      break;
    }
    case "Enter":
      if (TL.kbBrush && TL.kbBrush[1] > TL.kbBrush[0]) { UI.st.win = TL.kbBrush.slice(); TL.kbBrush = null; kb.anchor = null; update({ lanes: false }); }
      break;
    case "Escape": TL.kbBrush = null; kb.anchor = null; TL.sel = null; TL.arrows = []; UI.st.sel = null; writeState(true); tlDetails(); tlDraw(); break;
    default: return;
  }
  ev.preventDefault();
}

function tlTip(ev, x, y) {
  const tip = $("#tl-tip"), h = TL.geom && x >= TL.geom.x0 ? tlHit(x, y) : null;
  const D = TL.data;
  if (!h || !h.r || !D) { tip.hidden = true; return; }
  const d = h.r.provider ? null : D.rows.get(h.r.key);
  if (!d) { tip.hidden = true; return; }
  const t = TL.geom.T(x), col = Math.floor(((t - D.from) / (D.to - D.from)) * D.cols);
  let text = null;
  for (let i = 0; i < d.length; i += 6) if (col >= d[i] && col < d[i + 1]) { text = `${D.labels[d[i + 3]]}${d[i + 5] < 250 ? ` (${Math.round((d[i + 5] / 255) * 100)}% of the pixel)` : ""}`; break; }
  if (!text) { tip.hidden = true; return; }
  tip.textContent = `${h.it.t.name}: ${text} \u00b7 ${fmtT(t)}`;
  tip.hidden = false;
  const b = $("#tl-scroll").getBoundingClientRect();
  tip.style.left = Math.min(x + 14, b.width - tip.offsetWidth - 4) + "px";
  tip.style.top = y + 16 + "px";
}

document.addEventListener("DOMContentLoaded", setupTimeline);

// kstate ui: a thread's critical path (`kstate why`) as a lane under its track. For every
// moment of the thread's time in the window (the selected one, else the view), what it
// was doing or waiting on: its own running and waiting, or, while it was blocked, the
// path of the thread that woke it (one level lower in the lane per hop), or what an
// interrupt served (disk, timer, softirq, IRQ). Arrows are the hops: at each wake-up,
// from the waker's level up to the thread it woke. Opened by "why?" in a thread slice's
// details or by a click on a thread's name; a click on a segment says what it was.
// The server walks the path (api/why, the same walk as the CLI) and merges what is
// shorter than a pixel column.
"use strict";

const WHY_COLOUR = {
  running: "#2e9a52", runnable: "#e39b2d", sleep: "#8fb3de", disk: "#c0392b",
  irq: "#a33f3f", softirq: "#7d5ba6", net: "#1f8a9e", unknown: "#a6a6a6",
};
const WHY_LEVEL_H = 10, WHY_LEVELS = 6;

// The lane's state, for the page and its tests: the thread, the answer drawn, the
// segment selected, the arrows drawn last (canvas coordinates), and when the last answer
// was asked, came and was first drawn (performance.now()).
const WHY = { gen: 0, tid: null, data: null, error: null, sel: null, arrows: [], drawn: 0, asked: null, answered: null, shown: null, loads: 0 };
UI.why = WHY;

const whyLevel = (d) => Math.min(d, WHY_LEVELS - 1);
const whyTask = (comm, tid) => `${comm}-${tid}`;

// The stretch walked: the selected window where there is one, else the view.
function whyRange(v0, v1) {
  const w = UI.st.win, end = fileSpan(TL.f);
  if (w && w[1] > w[0]) return [Math.max(0, w[0]), Math.min(w[1], end)];
  return [v0, Math.min(v1, end)];
}

const whyLane = {
  name: "critical path",
  height: WHY_LEVEL_H + 2,
  applies: (t) => t.kind === "thread" && t.tid === WHY.tid,
  key: () => `${WHY.gen}|${WHY.tid}|${UI.st.win ? UI.st.win.join(",") : ""}`,
  async load(t, v0, v1, cols) {
    const [a, b] = whyRange(v0, v1);
    // As many columns as the stretch covers on screen: what is shorter than one is merged.
    const w = Math.max(1, Math.min(8192, Math.round((cols * (b - a)) / Math.max(v1 - v0, 1e-12))));
    const p = new URLSearchParams({ f: TL.f, tid: t.tid, from: secs(a), to: secs(b), w });
    WHY.asked = performance.now();
    WHY.error = null;
    whyLegend();
    try {
      const j = await api("why", p, { slot: "why", prio: 1 });
      WHY.answered = performance.now();
      WHY.shown = null;
      WHY.data = j;
      WHY.loads++;
      const h = (whyLevel(j.depth) + 1) * WHY_LEVEL_H + 2;
      if (h !== whyLane.height) { whyLane.height = h; tlRelayout(); }
      whyLegend();
      return [];
    } catch (e) {
      if (!superseded(e)) { WHY.error = e.message; whyLegend(); tlDraw(); }
      throw e;
    }
  },
  draw(g, box, t, gm) {
    const D = WHY.data, { x0, x1, X } = gm;
    if (!D || D.tid !== t.tid) {
      g.fillStyle = "#5d6878"; g.font = "10px system-ui, sans-serif";
      g.fillText(WHY.error ? "critical path: " + WHY.error : "walking the critical path\u2026", x0 + 4, box.y + 9);
      WHY.arrows = [];
      return;
    }
    const yOf = (d) => box.y + 1 + whyLevel(d) * WHY_LEVEL_H;
    g.font = "9px system-ui, sans-serif";
    for (const s of D.segments) {
      const a = X(s.start), b = X(s.end);
      if (b < x0 || a > x1) continue;
      const xa = Math.max(a, x0), xb = Math.min(b, x1), y = yOf(s.depth);
      g.globalAlpha = s.merged > 1 ? 0.7 : 1;
      g.fillStyle = WHY_COLOUR[s.state] || "#888";
      g.fillRect(xa, y, Math.max(xb - xa, 1), WHY_LEVEL_H - 1);
      g.globalAlpha = 1;
      if (xb - xa > 40) {
        g.fillStyle = s.state === "sleep" || s.state === "unknown" ? "#1d2430" : "#fff";
        g.fillText(fit(g, whyTask(s.comm, s.tid) + " " + s.state, xb - xa - 4), xa + 2, y + WHY_LEVEL_H - 2);
      }
    }
    const sel = WHY.sel;
    if (sel) {
      const a = Math.max(x0, X(sel.start)), b = Math.min(x1, X(sel.end));
      g.strokeStyle = "#111"; g.lineWidth = 2;
      g.strokeRect(a - 1, yOf(sel.depth) - 1, Math.max(b - a, 1) + 2, WHY_LEVEL_H + 1);
      g.lineWidth = 1;
    }
    // The hops: from the waker's level up to the thread it woke.
    WHY.arrows = [];
    for (const w of D.wakes) {
      const x = X(w.t);
      if (x < x0 || x > x1) continue;
      // From the bottom of the waker's level to the top of the woken thread's, outlined
      // in white to stand out on the segments it crosses.
      const y0 = yOf(w.from_depth) + WHY_LEVEL_H - 2, y1 = yOf(w.to_depth) + 1;
      const hot = !!sel && ((sel.start_ns === w.t_ns && sel.tid === w.to) || (sel.end_ns === w.t_ns && sel.tid === w.from));
      const arrow = (colour, width, grow) => {
        g.strokeStyle = g.fillStyle = colour; g.lineWidth = width;
        g.beginPath(); g.moveTo(x, y0 + grow); g.lineTo(x, y1 + 4); g.stroke();
        g.beginPath(); g.moveTo(x, y1 - grow); g.lineTo(x - 3.5 - grow, y1 + 6 + grow); g.lineTo(x + 3.5 + grow, y1 + 6 + grow); g.fill();
      };
      arrow("#fff", hot ? 4 : 3, 1);
      arrow(hot ? "#d0342c" : "#1d2430", hot ? 2 : 1.2, 0);
      g.lineWidth = 1;
      WHY.arrows.push({ t: w.t, from: w.from, to: w.to, x, y0, y1, hot });
    }
    WHY.drawn++;
    if (WHY.shown == null) WHY.shown = performance.now();
  },
  click(it, r, x, y) {
    const D = WHY.data;
    if (!D || !TL.geom) return;
    const gm = TL.geom, t = gm.T(x), tol = (3 * (gm.v1 - gm.v0)) / (gm.x1 - gm.x0);
    const top = $("#tl-scroll").scrollTop, level = Math.floor((y - TL_AXIS + top - it.y - r.y - 1) / WHY_LEVEL_H);
    // The segment under the pointer at its level, else the path's at that moment.
    const near = D.segments.filter((s) => s.start - tol <= t && t <= s.end + tol);
    const dist = (s) => (t < s.start ? s.start - t : t > s.end ? t - s.end : 0);
    near.sort((a, b) => (whyLevel(a.depth) !== level) - (whyLevel(b.depth) !== level) || dist(a) - dist(b));
    WHY.sel = near[0] || null;
    whyDetails();
    tlDraw();
  },
};
UI.addRowProvider(whyLane);

function whyOpen(tid) {
  WHY.gen++; WHY.tid = tid; WHY.data = null; WHY.sel = null; WHY.error = null; WHY.arrows = [];
  whyLane.height = WHY_LEVEL_H + 2;
  tlRelayout();
  whyLegend();
  // The thread's track in sight.
  const it = TL.items.find((i) => i.type === "track" && i.t.tid === tid && i.t.kind === "thread");
  const sc = $("#tl-scroll");
  if (it && (it.y < sc.scrollTop || it.y + it.h > sc.scrollTop + sc.clientHeight - TL_AXIS)) { sc.scrollTop = Math.max(0, it.y - 40); tlDraw(); }
}

function whyClose() {
  WHY.tid = null; WHY.data = null; WHY.sel = null; WHY.arrows = [];
  tlRelayout();
  whyLegend();
}

// "why?" beside a thread slice's tools; a click on a thread's name opens (or closes) it.
(UI.sliceTools = UI.sliceTools || []).push((s, tools) => {
  if (!s.id.startsWith("tid:")) return;
  const tid = +s.id.slice(4);
  tools.append(el("button", { "data-why": tid, title: "the critical path of this thread's time: what it ran, waited for, and who woke it", onclick: () => whyOpen(tid) }, "why? (critical path)"));
});
UI.onTrackName = (t) => { if (t.kind === "thread") (WHY.tid === t.tid ? whyClose() : whyOpen(t.tid)); };

// Above the timeline while a path is shown: whose, over what, the states' colours with
// their time on the path, and a way to close it.
function whyLegend() {
  let box = $("#why-legend");
  if (WHY.tid == null) { if (box) box.remove(); return; }
  if (!box) { box = el("div", { id: "why-legend", class: "notes", role: "status" }); $("#tl-note").after(box); }
  box.textContent = "";
  const D = WHY.data && WHY.data.tid === WHY.tid ? WHY.data : null;
  const track = TL.byId["tid:" + WHY.tid];
  const name = D ? whyTask(D.comm, D.tid) : track ? track.name : "tid " + WHY.tid;
  box.append(el("b", {}, `critical path of ${name}`), " ");
  if (D) box.append(`${fmtT(D.from)} \u2013 ${fmtT(D.to)} (${fmtDur(D.wall_ns)} of wall time): `);
  else box.append(WHY.error ? WHY.error + " " : "walking\u2026 ");
  const ns = Object.fromEntries(D ? D.by_state.map((x) => [x.state, x.ns]) : []);
  for (const [state, colour] of Object.entries(WHY_COLOUR)) {
    const share = D && D.wall_ns ? ` ${fmtDur(ns[state] || 0)} ${(((ns[state] || 0) * 100) / D.wall_ns).toFixed(1)} %` : "";
    box.append(el("span", { class: "why-key", "data-state": state, style: "display:inline-flex;align-items:center;gap:3px;margin-right:10px" },
      el("span", { style: `display:inline-block;width:11px;height:11px;border-radius:2px;background:${colour}` }), state + share));
  }
  if (D) {
    const parts = [`${D.segments.length} drawn of ${D.segments_total} segments`];
    if (D.merged) parts.push(`${D.merged} shorter than a pixel merged`);
    if (D.segments_left_out) parts.push(`${D.segments_left_out} earliest left out`);
    parts.push(`${D.wakes.length} hops (arrows)`);
    box.append(el("span", { class: "muted" }, parts.join(" \u00b7 ")), " ");
    for (const n of D.notes) box.append(el("div", { class: "muted" }, n));
  }
  box.append(el("button", { id: "why-close", onclick: whyClose }, "close the critical path"));
}

// The selected segment in the side panel.
function whyDetails() {
  const box = $("#tl-side"), s = WHY.sel, D = WHY.data;
  box.textContent = "";
  if (!s || !D) return;
  box.append(el("h3", {}, `${s.state}${s.detail ? ": " + s.detail : ""}`),
    el("div", { class: "meta" }, `critical path of ${whyTask(D.comm, D.tid)} \u00b7 hop ${s.depth}${s.merged > 1 ? ` \u00b7 ${s.merged} segments merged` : ""}`));
  const facts = el("table", { class: "facts", id: "why-facts" });
  const row = (k, v) => facts.append(el("tr", {}, el("th", {}, k), el("td", {}, v)));
  row("thread", whyTask(s.comm, s.tid));
  row("state", s.state);
  if (s.detail) row(s.merged > 1 ? "merged" : "waited on", s.detail);
  row("start", fmtT(s.start));
  row("end", fmtT(s.end));
  row("duration", fmtDur(s.end_ns - s.start_ns));
  for (const w of D.wakes) {
    if (w.t_ns === s.start_ns && w.to === s.tid) row("woken by", `${whyTask(w.from_comm, w.from)} at ${fmtT(w.t)}`);
    if (w.t_ns === s.end_ns && w.from === s.tid) row("then woke", `${whyTask(w.to_comm, w.to)} at ${fmtT(w.t)}`);
  }
  box.append(facts);
  box.append(el("div", { class: "tools" },
    el("button", { onclick: () => { const pad = (s.end - s.start) * 0.1 || 1e-6; setView([s.start - pad, s.end + pad]); } }, "zoom to it"),
    el("button", { onclick: () => { UI.st.win = [s.start, Math.max(s.end, s.start + 1e-9)]; update({ lanes: false }); } }, "select it as the window")));
}

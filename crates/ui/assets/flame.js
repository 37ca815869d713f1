// kstate ui: flame graphs of the CPU samples (recordings made with `kstate record
// --sample`): the samples in the selection (window, tasks, CPUs), and A against B as a
// differential flame graph: each frame as wide as its share of B's samples, red where its
// share grew, blue where it shrank (frames B lacks are listed under it). Same engine as
// `kstate profile --flame` and `kstate diff`; click a frame to zoom into it.
"use strict";

const FL = { data: null, focus: [], gen: 0, hover: null };
UI.fl = FL;
const FL_ROW = 17;

function flameMode() {
  const st = UI.st;
  if (st.mode === "ab") return goodFile(0) && goodFile(1) && goodFile(0).samples && goodFile(1).samples ? "ab" : null;
  const f = goodFile(st.f);
  return f && f.samples ? "one" : null;
}

async function flameUpdate() {
  const mode = flameMode(), sec = $("#flame");
  sec.hidden = !mode;
  if (!mode) return;
  const gen = ++FL.gen;
  const p = filterParams(null, { f: UI.st.f, kind: mode });
  $("#fl-title").textContent = mode === "ab" ? "Differential flame graph (B against A: width = B's samples; red grew, blue shrank)" :
    `Flame graph of the CPU samples${UI.st.win ? " in the window" : ""}`;
  $("#fl-note").textContent = "profiling\u2026";
  try {
    const j = await api("flame", p, { slot: "flame", prio: 2 });
    if (gen !== FL.gen) return;
    FL.data = j;
    FL.mode = mode;
    FL.focus = [];
    const d = j.samples;
    $("#fl-note").textContent = mode === "ab" ? `${d[0]} samples of ${j.event} in A, ${d[1]} in B` : `${d[0]} samples of ${j.event}`;
    flameDraw();
  } catch (e) {
    if (!superseded(e)) $("#fl-note").textContent = "flame graph: " + e.message;
  }
}

// The frame zoomed into (its path from the root), and its subtree.
function flameRoot() {
  let node = FL.data.tree;
  for (const name of FL.focus) {
    const c = node[3].find((x) => x[0] === name);
    if (!c) break;
    node = c;
  }
  return node;
}

function flameDraw() {
  const c = $("#fl-canvas");
  if (!FL.data || $("#flame").hidden) return;
  const root = flameRoot(), ab = FL.mode === "ab";
  const side = ab ? 2 : 1;
  const totals = FL.data.samples;
  const W = c.clientWidth || 800;
  // Lay out: each frame as wide as its samples (B's in a differential graph).
  const boxes = [];
  let depth = 0;
  const lay = (n, x, w, d) => {
    if (w < 0.5) return;
    boxes.push({ n, x, w, d });
    depth = Math.max(depth, d);
    const tot = n[side] || 0;
    let cx = x;
    for (const ch of n[3]) {
      const cw = tot ? (w * (ch[side] || 0)) / tot : 0;
      lay(ch, cx, cw, d + 1);
      cx += cw;
    }
  };
  lay(root, 0, W, 0);
  const H = (depth + 1) * FL_ROW + 4;
  const dpr = window.devicePixelRatio || 1;
  c.width = W * dpr; c.height = H * dpr; c.style.height = H + "px";
  const g = c.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, W, H);
  g.font = "11px system-ui, sans-serif";
  for (const b of boxes) {
    const y = b.d * FL_ROW;
    g.fillStyle = ab ? diffColour(b.n, totals) : frameColour(b.n[0]);
    g.fillRect(b.x, y, Math.max(b.w - 0.5, 0.5), FL_ROW - 1);
    if (b.w > 30) { g.fillStyle = "#1d2430"; g.fillText(fit(g, b.n[0], b.w - 4), b.x + 2, y + 12); }
  }
  FL.boxes = boxes;
  // Frames B lacks (all their samples in A) do not show in B's widths: listed instead.
  const gone = $("#fl-gone");
  gone.textContent = "";
  if (ab) {
    const lost = [];
    // Each named by its caller and itself (the whole path is in the tooltip of B's graph).
    const walk = (n, path) => { if (n[1] > 0 && n[2] === 0) lost.push([path.concat(n[0]).slice(-2).join(" \u2192 "), n[1]]); else n[3].forEach((c) => walk(c, path.concat(n[0]))); };
    walk(root, []);
    lost.sort((a, b) => b[1] - a[1]);
    if (lost.length) gone.append(el("div", { class: "notes" }, "Only in A (not drawn): " + lost.slice(0, 6).map(([p, n]) => `${p} (${((n / Math.max(1, totals[0])) * 100).toFixed(1)}% of A)`).join("; ")));
  }
  const crumbs = $("#fl-crumbs");
  crumbs.textContent = "";
  crumbs.append(el("button", { onclick: () => { FL.focus = []; flameDraw(); }, disabled: FL.focus.length ? null : "" }, "all"));
  FL.focus.forEach((name, i) => crumbs.append(" \u203a ", el("button", { onclick: () => { FL.focus = FL.focus.slice(0, i + 1); flameDraw(); } }, name)));
}

function frameColour(name) {
  if (name === "all") return "#d9dee6";
  if (name === "[other]") return "#ccc";
  return name.endsWith("_[k]") ? `hsl(${25 + (hue(name) % 20)},85%,62%)` : `hsl(${hue(name) % 50},75%,66%)`;
}

// Red where the frame's share of the samples grew from A to B, blue where it shrank.
function diffColour(n, totals) {
  const a = n[1] / Math.max(1, totals[0]), b = n[2] / Math.max(1, totals[1]);
  const d = b - a, k = Math.min(1, Math.abs(d) * 8);
  if (Math.abs(d) < 0.001) return "#e8e8e8";
  return d > 0 ? `rgb(255,${Math.round(230 - 150 * k)},${Math.round(230 - 150 * k)})` : `rgb(${Math.round(230 - 150 * k)},${Math.round(230 - 120 * k)},255)`;
}

function setupFlame() {
  const c = $("#fl-canvas"), tip = $("#fl-tip");
  const hit = (ev) => {
    const r = c.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
    const d = Math.floor(y / FL_ROW);
    return (FL.boxes || []).find((b) => b.d === d && x >= b.x && x < b.x + b.w);
  };
  c.addEventListener("click", (ev) => {
    const b = hit(ev);
    if (!b || b.d === 0) return;
    // The path from the shown root to the frame.
    const path = [];
    const find = (n, want, acc) => { if (n === want) { path.push(...acc); return true; } return n[3].some((c) => find(c, want, acc.concat(c[0]))); };
    find(flameRoot(), b.n, []);
    FL.focus = FL.focus.concat(path);
    flameDraw();
  });
  c.addEventListener("mousemove", (ev) => {
    const b = hit(ev);
    if (!b) { tip.hidden = true; return; }
    const t = FL.data.samples, n = b.n;
    const pct = (x, tot) => `${((x / Math.max(1, tot)) * 100).toFixed(2)}%`;
    tip.textContent = FL.mode === "ab" ? `${n[0]}: A ${n[1]} (${pct(n[1], t[0])}), B ${n[2]} (${pct(n[2], t[1])}), share ${((n[2] / Math.max(1, t[1]) - n[1] / Math.max(1, t[0])) * 100).toFixed(2)} points` :
      `${n[0]}: ${n[1]} samples (${pct(n[1], t[0])})`;
    tip.hidden = false;
    const r = c.getBoundingClientRect();
    tip.style.left = Math.min(ev.clientX - r.left + 12, r.width - 320) + "px";
    tip.style.top = ev.clientY - r.top + 14 + "px";
  });
  c.addEventListener("mouseleave", () => { tip.hidden = true; });
  window.addEventListener("resize", () => flameDraw());
}

document.addEventListener("DOMContentLoaded", setupFlame);

// kstate ui: a panel per analyzer (its statistics as `kstate analyze NAME --format json`
// gives them, its distribution on bars that fit the values), comparisons (A/B, inside a
// window against outside it, per second of each) and "what changed most" in the order of
// impact `kstate compare` ranks by. Tables show every row but build only those in sight
// (virtual scrolling), and a panel far from the screen keeps its numbers, not its nodes.
"use strict";

const ROW_PX = 21, TABLE_ROWS = 12;

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
    "Record both with the same events (kstate record -e \u2026) to compare them.");
}

// Cards render their tables only near the screen: the page's DOM stays small however
// many panels and rows there are.
const cardObserver = new IntersectionObserver((entries) => {
  for (const e of entries) {
    const card = e.target;
    card._near = e.isIntersecting;
    if (e.isIntersecting && card._render && !card._rendered) { card._rendered = true; card._render(); }
    else if (!e.isIntersecting && card._rendered && card._render) {
      // Far away: the numbers stay (card._stat, card._compare), the nodes go.
      const h = card.offsetHeight;
      card._rendered = false;
      card.textContent = "";
      card.style.minHeight = h + "px";
      card.append(el("h3", {}, card.dataset.analyzer));
    }
  }
}, { rootMargin: "600px 0px" });

// Puts `render` in the card now if the card is near the screen, else when it comes near.
function show(card, render) {
  card._render = () => { card.textContent = ""; card.style.minHeight = ""; render(); };
  card._rendered = false;
  if (card._near !== false) { card._rendered = true; card._render(); }
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
  for (const c of [...box.children]) if (!list.some((a) => "panel-" + a.name === c.id)) { cardObserver.unobserve(c); c.remove(); }
  list.forEach((a) => {
    let card = document.getElementById("panel-" + a.name);
    if (!card) {
      card = el("div", { class: "panel", id: "panel-" + a.name, "data-analyzer": a.name });
      box.append(card);
      cardObserver.observe(card);
    }
    card.dataset.state = "loading";
  });
  const mode = st.mode === "inout" && !st.win ? "one" : st.mode;
  box.classList.toggle("compare", mode !== "one");
  for (const a of list) {
    if (gen !== UI.panelsGen) return;
    const card = document.getElementById("panel-" + a.name);
    try {
      if (mode === "one") await panelOne(card, a, gen);
      else await panelCompare(card, a, mode, gen);
      if (gen === UI.panelsGen) card.dataset.state = "ready";
    } catch (e) {
      if (gen !== UI.panelsGen || superseded(e)) return;
      card._render = null;
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

// A panel's sort: `col` (largest first) or `col:asc`.
function sortOf(a, fallback) {
  const s = UI.st.sort[a.name] || fallback;
  const [col, dir] = s.split(":");
  return { col, asc: dir === "asc" || (col === "key" && dir !== "desc") };
}

function sortRows(rows, a, get, fallback) {
  const { col, asc } = sortOf(a, fallback);
  const val = (r) => (col === "key" ? r.key : get(r, col));
  return rows.slice().sort((x, y) => {
    const vx = val(x), vy = val(y);
    if (col === "key") return (vx < vy ? -1 : vx > vy ? 1 : 0) * (asc ? 1 : -1);
    // Missing values last, whichever way.
    if (vx == null || vy == null) return (vx == null) - (vy == null) || (x.key < y.key ? -1 : 1);
    return (asc ? vx - vy : vy - vx) || (x.key < y.key ? -1 : 1);
  });
}

// A sortable header: clicking a column sorts by it (largest first), again the other way.
function header(a, cols, groups, fallback) {
  const { col, asc } = sortOf(a, fallback);
  const tr = el("tr");
  for (const c of cols) {
    const on = c.sort && c.sort === col;
    const th = el("th", {
      class: (c.cls || "") + (on ? " sorted" + (asc ? " asc" : "") : ""), "data-col": c.sort || "",
      "aria-sort": on ? (asc ? "ascending" : "descending") : null, title: c.title || null,
    }, c.label);
    if (c.sort) {
      th.tabIndex = 0;
      const act = () => {
        const again = on ? (asc ? (c.sort === "key" ? "key:desc" : c.sort) : c.sort + ":asc") : c.sort;
        UI.st.sort[a.name] = again;
        writeState(true);
        rerender(a);
      };
      th.onclick = act;
      th.onkeydown = (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); act(); } };
    }
    tr.append(th);
  }
  const thead = el("thead");
  if (groups) thead.append(groups);
  thead.append(tr);
  return thead;
}

// Re-sorts a panel from the numbers it holds (no request).
function rerender(a) {
  if (a.redraw) return a.redraw();
  const card = document.getElementById("panel-" + a.name);
  if (card && card._draw) { card._draw(); card._rendered = true; }
}

function keyCell(a, key) {
  return el("td", { class: "key", title: `${key}: click (or Enter) to filter by it` },
    el("a", { href: "#", onclick: (ev) => { ev.preventDefault(); addKeyFilter(a, key); } }, key));
}

// A table that builds only the rows in sight: all of `rows` scroll, TABLE_ROWS show.
function vtable(cls, thead, rows, rowOf) {
  const tbody = el("tbody");
  const table = el("table", { class: cls }, thead, tbody);
  const wrap = el("div", { class: "tablewrap", style: `max-height:${ROW_PX * TABLE_ROWS + 46}px` }, table);
  const draw = () => {
    const first = Math.max(0, Math.floor(wrap.scrollTop / ROW_PX) - 4);
    const n = TABLE_ROWS + 10;
    tbody.textContent = "";
    if (first > 0) tbody.append(el("tr", { class: "spacer", style: `height:${first * ROW_PX}px` }));
    for (const r of rows.slice(first, first + n)) tbody.append(rowOf(r));
    const rest = rows.length - first - n;
    if (rest > 0) tbody.append(el("tr", { class: "spacer", style: `height:${rest * ROW_PX}px` }));
  };
  let pending = false;
  wrap.addEventListener("scroll", () => { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; draw(); }); } });
  draw();
  wrap._rows = rows;
  return wrap;
}

async function panelOne(card, a, gen) {
  const st = UI.st;
  const p = filterParams(a.name, { f: st.f, a: a.name, mode: "stat" });
  const j = await api("panel", p, { slot: "panel-" + a.name, prio: 2 });
  if (gen !== UI.panelsGen) return;
  card._stat = j;
  const u = a.unit, flag = j.rows.length && Object.keys(j.rows[0]).find((k) => !["key", "count"].includes(k) && !/_(\w+)$/.test(k));
  const get = (r, c) => (c === "count" ? r.count : r[`${c}_${u}`]);
  const shown = colsOf(a);
  const cols = [{ label: "key", sort: "key" }, ...shown.map((c) => ({ label: c, sort: c }))];
  if (flag) cols.push({ label: flag, sort: flag });
  const getF = (r, c) => (c === flag ? r[flag] : get(r, c));
  const first = sortRows(j.rows, a, getF, defaultSort(a))[0]?.key;
  // The distribution of the first row (or the filtered key), on bars that fit it.
  const key = st.keys[a.name] || first;
  const hist = key != null ? await api("hist", filterParams(a.name, { f: st.f, a: a.name, kind: "one", key }), { slot: "hist-" + a.name, prio: 2 }) : null;
  if (gen !== UI.panelsGen) return;
  card._hist = hist;
  const draw = () => {
    const sorted = sortRows(j.rows, a, getF, defaultSort(a));
    card.textContent = "";
    const tools = el("span", { class: "tools" });
    if (u === "ns") tools.append(el("button", { onclick: () => longest(card, a), title: "The longest samples (kstate analyze --log --sort value --top 20)" }, "longest"));
    card.append(panelHead(a, tools), el("div", { class: "meta" }, describe(j) + (j.rows.length > TABLE_ROWS ? ` \u00b7 ${j.rows.length} rows` : "")));
    card.append(vtable("stat", header(a, cols, null, defaultSort(a)), sorted, (r) => {
      const tr = el("tr", { "data-key": r.key }, keyCell(a, r.key));
      for (const c of shown) tr.append(el("td", { "data-col": c }, c === "count" ? String(r.count) : fmtVal(u, get(r, c))));
      if (flag) tr.append(el("td", { "data-col": flag }, String(r[flag])));
      return tr;
    }));
    if (!j.rows.length) card.append(el("div", { class: "none" }, outsideNote() ? `no samples: ${outsideNote()}` : "no samples for these filters"));
    if (hist) card.append(histChart(a, hist));
    const notes = [...(j.notes || []), ...(j.errors || [])];
    if (notes.length) card.append(el("div", { class: "notes" }, notes.join(" \u00b7 ")));
    if (card._longest) card.append(card._longest);
  };
  card._draw = draw;
  show(card, draw);
}

async function longest(card, a) {
  const st = UI.st;
  const p = filterParams(a.name, { f: st.f, a: a.name, mode: "log" });
  const box = card.querySelector(".longest") || card.appendChild(el("div", { class: "longest" }));
  card._longest = box;
  box.textContent = "";
  const j = await api("panel", p, { slot: "longest-" + a.name, prio: 1 });
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

// Ratios coloured where they mean a change: compared keys, whose rates (inside vs
// outside: per second) differ by half again.
function ratioClass(r, ratio) {
  if (!r.compared || ratio == null) return "ratio";
  return "ratio" + (ratio >= 1.5 ? " up" : ratio <= 1 / 1.5 ? " down" : "");
}

async function panelCompare(card, a, mode, gen) {
  const st = UI.st;
  const p = filterParams(a.name, { a: a.name, kind: mode, f: st.f, metric: st.metric });
  const c = await api("compare", p, { slot: "panel-" + a.name, prio: 2 });
  if (gen !== UI.panelsGen) return;
  card._compare = c;
  const sides = mode === "ab" ? ["A", "B"] : ["outside", "inside"];
  const diff = c.analyzers[0];
  const u = diff.unit;
  const perS = c.per_second;
  const metrics = ["p99", "avg", "count", "total"].filter((m) => !(a.snapshots && m === "total"));
  const isRate = (m) => perS && (m === "count" || m === "total");
  // A side's value of m: per second of its stretch for counts and totals inside vs outside.
  const val = (r, m, side) => {
    const n = r[side];
    if (!n) return null;
    return isRate(m) && r.per_s && r.per_s[side] ? r.per_s[side][m] : n[m];
  };
  const get = (r, col) => {
    const [m, which] = col.split("_");
    if (which === "a") return val(r, m, "a");
    if (which === "b") return val(r, m, "b");
    if (which === "ratio") return r.ratio[m];
    if (col === "added") return r.added_ns_per_s;
    return val(r, col, "b") ?? val(r, col, "a");
  };
  const fallback = "total_b";
  const first = sortRows(diff.rows, a, get, fallback)[0]?.key;
  const key = st.keys[a.name] || first;
  const hist = key != null ? await api("hist", filterParams(a.name, { f: st.f, a: a.name, kind: mode, key }), { slot: "hist-" + a.name, prio: 2 }) : null;
  if (gen !== UI.panelsGen) return;
  card._hist = hist;
  const groups = el("tr", {}, el("th", { class: "grp" }, ""), ...metrics.map((m) => el("th", { class: "grp", colspan: 3 }, isRate(m) ? `${m} per second` : m)));
  const cols = [{ label: "key", sort: "key" }];
  for (const m of metrics) cols.push({ label: sides[0], cls: "a", sort: m + "_a" }, { label: sides[1], cls: "b", sort: m + "_b" },
    { label: mode === "ab" ? "B/A" : "in/out", sort: m + "_ratio", title: isRate(m) ? "ratio of the rates per second" : "ratio" });
  const draw = () => {
    const sorted = sortRows(diff.rows, a, get, fallback);
    card.textContent = "";
    const head = mode === "ab" ? `A: ${c.a} \u00b7 B: ${c.b}` : `${c.a} \u00b7 ${c.b}${perS ? " \u00b7 counts and totals per second of each" : ""}`;
    card.append(panelHead(a), el("div", { class: "meta" }, head));
    card.append(vtable("compare", header(a, cols, groups, fallback), sorted, (r) => {
      // The verdict sits beside the key, where it is seen whatever the table's width.
      const keyTd = keyCell(a, r.key);
      const verdict = r.regressed ? el("span", { class: "badge", title: `${c.metric} of ${sides[1]} >= ${c.threshold} x ${sides[0]}'s` }, `${c.metric} REGRESSED`) :
        !r.a ? `only ${sides[1]}` : !r.b ? `only ${sides[0]}` : !r.compared ? "few samples" : null;
      if (verdict) keyTd.append(typeof verdict === "string" ? el("span", { class: "verdict" }, verdict) : verdict);
      const tr = el("tr", { "data-key": r.key, class: r.regressed ? "regressed" : "" }, keyTd);
      for (const m of metrics) {
        const f = (side) => { const v = val(r, m, side); return v == null ? "-" : m === "count" ? (isRate(m) ? fmtRate(v) : String(v)) : isRate(m) ? fmtVal(u, v) + "/s" : fmtVal(u, v); };
        const ratio = r.ratio[m];
        tr.append(el("td", { class: "a", "data-col": m + "_a" }, f("a")), el("td", { class: "b", "data-col": m + "_b" }, f("b")),
          el("td", { class: ratioClass(r, ratio), "data-col": m + "_ratio" }, fmtRatio(ratio)));
      }
      return tr;
    }));
    if (!diff.rows.length) card.append(el("div", { class: "none" }, "no samples for these filters"));
    if (hist) card.append(histChart(a, hist));
  };
  card._draw = draw;
  show(card, draw);
}
const fmtRate = (v) => (v >= 100 ? Math.round(v).toLocaleString("en-US") : v.toPrecision(3)) + "/s";

// One key's distribution (the first row, or the filtered key) of one or two sides, as
// shares of their samples on bars that fit the values, with a y axis in per cent.
function histChart(a, h) {
  const box = el("div", { class: "dist" });
  if (!h.bars.length) return box;
  const labelOf = (v) => (a.unit === "ns" ? fmtShort(v) : a.unit === "bytes" ? fmtBytes(v) : String(v));
  const legend = el("div", { class: "legend" }, `distribution of ${h.key} (share of its samples${h.exact ? "" : "; bars within 1/128 of their edges"})`);
  for (const [i, s] of h.sides.entries()) if (s.label) legend.append(el("span", { class: "sw " + (i ? "b" : "a") }), `${s.label} (${s.count})`);
  box.append(legend);
  const c = el("canvas", { class: "histc", role: "img", "aria-label": `distribution of ${h.key}` });
  box.append(c);
  const tip = el("div", { class: "histtip", hidden: "" });
  box.append(tip);
  const W = 640, H = 150, L = 38, B = 30, T = 6;
  const shares = h.sides.map((s) => s.counts.map((n) => n / Math.max(1, s.count)));
  const top = Math.max(0.01, ...shares.flat());
  const ymax = niceStep(top / 4) * Math.ceil(top / niceStep(top / 4));
  requestAnimationFrame(() => {
    const dpr = window.devicePixelRatio || 1;
    c.width = W * dpr; c.height = H * dpr; c.style.width = W + "px"; c.style.height = H + "px";
    const g = c.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.font = "10px system-ui, sans-serif";
    const n = h.bars.length, bw = (W - L - 6) / n;
    const Y = (s) => T + (H - T - B) * (1 - s / ymax);
    // The y axis: per cent of each side's samples.
    g.strokeStyle = "#e3e7ed"; g.fillStyle = "#5d6878"; g.textAlign = "right";
    for (let i = 0; i <= 4; i++) {
      const s = (ymax * i) / 4, y = Y(s);
      g.beginPath(); g.moveTo(L, y); g.lineTo(W - 4, y); g.stroke();
      g.fillText(`${+(s * 100).toPrecision(3)}%`, L - 3, y + 3);
    }
    g.textAlign = "center";
    const every = Math.ceil(n / 12);
    // Tick labels with the digits it takes to tell neighbours apart (bars of a narrow
    // span all printed "5.1ms" at three).
    const ticks = h.bars.filter((_, i) => i % every === 0).map(([lo]) => lo);
    let digits = 3, labels;
    do labels = ticks.map((v) => (a.unit === "ns" ? fmtShort(v, digits) : labelOf(v)));
    while (digits++ < 12 && labels.some((t, i) => i && t === labels[i - 1]));
    h.bars.forEach((_, i) => {
      shares.forEach((sh, si) => {
        const w = shares.length > 1 ? bw * 0.42 : bw * 0.8;
        const x = L + i * bw + (shares.length > 1 ? (si ? bw * 0.5 : bw * 0.08) : bw * 0.1);
        g.fillStyle = si ? "#d9822b" : "#3f6fb5";
        const y = Y(sh[i]);
        g.fillRect(x, y, w, H - B - y);
      });
      if (i % every === 0) {
        g.fillStyle = "#5d6878";
        g.fillText(labels[i / every], L + i * bw + bw / 2, H - B + 12);
      }
    });
    g.fillText(h.scale === "values" ? "value" : `from (${h.scale} bars)`, L + (W - L) / 2, H - 4);
  });
  c.addEventListener("mousemove", (ev) => {
    const r = c.getBoundingClientRect(), i = Math.floor(((ev.clientX - r.left - L) / (W - L - 6)) * h.bars.length);
    if (i < 0 || i >= h.bars.length) { tip.hidden = true; return; }
    const [lo, hi] = h.bars[i];
    tip.textContent = `${lo === hi ? labelOf(lo) : labelOf(lo) + " \u2013 " + labelOf(hi)}: ` +
      h.sides.map((s, si) => `${s.label ? s.label + " " : ""}${s.counts[i]} (${((shares[si][i] || 0) * 100).toFixed(1)}%)`).join(", ");
    tip.hidden = false;
    tip.style.left = ev.clientX - r.left + 10 + "px";
  });
  c.addEventListener("mouseleave", () => { tip.hidden = true; });
  return box;
}

// ---------- what changed most ----------
async function loadChanges() {
  const st = UI.st, sec = $("#changes"), body = $("#changes-body");
  const mode = st.mode;
  if (mode === "one" || (mode === "inout" && !st.win)) {
    sec.hidden = mode !== "inout";
    body.textContent = "";
    if (mode === "inout") body.append(el("div", { class: "none" }, "Select a time window in the overview or the timeline: each panel then shows inside it against outside it."));
    return;
  }
  sec.hidden = false;
  const title = $("#changes-title");
  title.textContent = mode === "ab" ? "What changed most (B against A)" : "What changed most (inside the window against outside it, per second of each)";
  const pick = el("select", { id: "metric", title: "The metric a key regressed by (kstate compare --metric)", onchange: (ev) => { st.metric = ev.target.value; update(); } },
    ...["p99", "avg", "total", "count"].map((m) => { const o = el("option", { value: m }, "regressed by " + m); if (m === st.metric) o.selected = true; return o; }));
  title.append(" ", pick);
  const gen = ++UI.changesGen;
  if (!panelAnalyzers().length) {
    body.textContent = "";
    body.append(el("div", { class: "none" }, "No analyzer applies to both sides."));
    return;
  }
  const p = filterParams(null, { a: "*", kind: mode, f: st.f, metric: st.metric });
  body.textContent = "";
  body.append(el("div", { class: "loading" }, "comparing every analyzer\u2026"));
  try {
    const c = await api("compare", p, { slot: "changes", prio: 1 });
    if (gen !== UI.changesGen) return;
    const units = Object.fromEntries(c.analyzers.map((x) => [x.analyzer, x.unit]));
    const sides = mode === "ab" ? ["A", "B"] : ["outside", "inside"];
    // The engine's order (impact), unless a column was clicked.
    const chA = { name: "changes" };
    const rows = c.changes.map((ch, i) => ({ ...ch, rank: i }));
    const get = (r, col) => (col === "rank" ? -r.rank : col === "added" ? r.added_ns_per_s : col === "tail" ? r.tail_ns_per_s : col === "ratio" ? r.ratio : null);
    const cols = [{ label: "analyzer and key", sort: "key" }, { label: "added per second", sort: "added", title: "wall time added per second of recording (B's total per second minus A's)" },
      { label: "p99 growth \u00d7 rate", sort: "tail", title: "p99 B - p99 A, times the calls per second" },
      { label: "metric" }, { label: sides[0], cls: "a" }, { label: sides[1], cls: "b" }, { label: "ratio", sort: "ratio" }, { label: "" }];
    const draw = () => {
      const sorted = sortRows(rows, chA, get, "rank");
      body.textContent = "";
      if (!c.changes.length) { body.append(el("div", { class: "none" }, "No key has enough samples to compare.")); return; }
      body.append(vtable("changes", header(chA, cols, null, "rank"), sorted, (ch) => {
        const u = ch.metric === "count" ? "" : units[ch.analyzer];
        return el("tr", { class: ch.regressed ? "regressed" : "", "data-analyzer": ch.analyzer, "data-key": ch.key, "data-rank": ch.rank },
          el("td", { class: "key" }, el("a", { href: "#panel-" + ch.analyzer, onclick: (ev) => { ev.preventDefault(); document.getElementById("panel-" + ch.analyzer)?.scrollIntoView({ behavior: "smooth" }); } }, `${ch.analyzer} ${ch.key}`)),
          el("td", { "data-col": "added" }, ch.added_ns_per_s == null ? "-" : fmtPerS(ch.added_ns_per_s)),
          el("td", { "data-col": "tail" }, ch.tail_ns_per_s == null ? "-" : fmtPerS(ch.tail_ns_per_s)),
          el("td", {}, ch.metric), el("td", { class: "a" }, fmtVal(u, ch.a)), el("td", { class: "b" }, fmtVal(u, ch.b)),
          el("td", { class: "ratio " + (ch.ratio == null ? "" : ch.ratio >= 1 ? "up" : "down"), "data-col": "ratio" }, ch.ratio == null ? (ch.a == null ? `only ${sides[1]}` : `only ${sides[0]}`) : fmtRatio(ch.ratio)),
          el("td", {}, ch.regressed ? el("span", { class: "badge", title: `${c.metric} of ${sides[1]} >= ${c.threshold} x ${sides[0]}'s` }, `${c.metric} REGRESSED`) : ""));
      }));
      body.append(el("div", { class: "notes" }, `Ranked by the wall time each key added per second of ${mode === "ab" ? "recording" : "each stretch"}, then by its p99 growth times its calls per second (the order of kstate compare); ratios need ${c.min_count} samples on each side; REGRESSED: ${c.metric} of ${sides[1]} \u2265 ${c.threshold} \u00d7 ${sides[0]}'s (durations). Click a column to sort by it.`));
    };
    UI.changesDraw = draw;
    document.getElementById("changes")._rerender = draw;
    chA.redraw = draw;
    draw();
    UI.changes = c;
  } catch (e) {
    if (gen === UI.changesGen && !superseded(e)) { body.textContent = ""; body.append(el("div", { class: "error" }, e.message)); }
  }
}
// Wall time per second: +212.4ms/s.
function fmtPerS(ns) { return (ns < 0 ? "-" : "+") + fmtShort(Math.abs(ns)) + "/s"; }

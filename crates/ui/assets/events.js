// kstate ui: the event list, as `kstate dump` prints the events, for the timeline's view
// (and its filters): a page at a time from a point in time, more as it scrolls (at most
// EV_KEEP rows in the page at once). Synced both ways: a slice clicked in the timeline
// brings its first event to the top of the list; an event clicked here puts the
// timeline's cursor on it and opens its fields.
"use strict";

const EV = { rows: [], more: false, moreBefore: false, anchor: null, only: null, gen: 0, busy: false };
UI.ev = EV;
const EV_PAGE = 100, EV_KEEP = 300;

function evParams(extra) {
  const v = UI.view || [0, fileSpan(tlFile())];
  const p = new URLSearchParams({ f: tlFile(), from: secs(v[0]), to: secs(Math.min(v[1], fileSpan(tlFile()))), limit: EV_PAGE });
  const st = UI.st;
  for (const k of ["tid", "cpu"]) if (st.g[k]) p.set(k, st.g[k]);
  if (EV.only && EV.only.startsWith("tid:")) p.set("tid", EV.only.slice(4));
  if (EV.only && EV.only.startsWith("cpu:")) p.set("cpu", EV.only.slice(4));
  const names = evEventFilter();
  if (names) p.set("event", names);
  for (const [k, v] of Object.entries(extra)) p.set(k, v);
  return p;
}

// The search box names events too: `sched_switch` (or several, comma-separated) lists
// only those.
function evEventFilter() {
  const q = (UI.st.q || "").trim();
  if (!q || !/^[a-z_][a-z0-9_:,]*$/.test(q) || !q.includes("_")) return "";
  return q;
}

function evUpdate() {
  const sec = $("#events");
  sec.hidden = !goodFile(tlFile());
  if (sec.hidden) return;
  evLoad(null);
}
function evViewChanged() { evLoad(EV.anchor && UI.view && EV.anchor >= UI.view[0] && EV.anchor <= UI.view[1] ? EV.anchor : null); }
function evQueryChanged() { evLoad(null); }

// The list from `t` (absolute ns; null: the view's start).
async function evLoad(t) {
  const gen = ++EV.gen;
  const extra = t == null ? {} : { at: t, skip: 0 };
  try {
    const j = await api("events", evParams(extra), { slot: "events", prio: 0 });
    if (gen !== EV.gen) return;
    EV.rows = j.events;
    EV.more = j.more;
    EV.moreBefore = t != null;
    evDraw(true);
  } catch (e) {
    if (!superseded(e)) evNote("events: " + e.message);
  }
}

// A slice was clicked in the timeline: its first events at the top.
function evAnchor(startS, trackId) {
  const f = goodFile(tlFile());
  if (!f) return;
  EV.anchor = f.start + Math.round(startS * 1e9);
  evLoad(EV.anchor);
}

async function evMore(before) {
  if (EV.busy || !EV.rows.length) return;
  if (before ? !EV.moreBefore : !EV.more) return;
  EV.busy = true;
  const gen = EV.gen;
  try {
    let extra;
    if (before) extra = { before: EV.rows[0].ts };
    else {
      const last = EV.rows[EV.rows.length - 1];
      const skip = EV.rows.filter((r) => r.ts === last.ts).length;
      extra = { at: last.ts, skip };
    }
    const j = await api("events", evParams(extra), { slot: "events-more", prio: 0 });
    if (gen !== EV.gen) return;
    const box = $("#ev-scroll"), h0 = box.scrollHeight, top0 = box.scrollTop;
    if (before) {
      EV.rows = j.events.concat(EV.rows);
      EV.moreBefore = j.more;
      if (EV.rows.length > EV_KEEP) { EV.rows = EV.rows.slice(0, EV_KEEP); EV.more = true; }
      evDraw(false);
      box.scrollTop = top0 + (box.scrollHeight - h0);
    } else {
      EV.rows = EV.rows.concat(j.events);
      EV.more = j.more;
      if (EV.rows.length > EV_KEEP) {
        const cut = EV.rows.length - EV_KEEP;
        EV.rows = EV.rows.slice(cut);
        EV.moreBefore = true;
        evDraw(false);
        box.scrollTop = Math.max(0, top0 - cut * 18);
      } else evDraw(false);
    }
  } catch (e) {
    if (!superseded(e)) evNote("events: " + e.message);
  } finally {
    EV.busy = false;
  }
}

function evNote(msg) { $("#ev-note").textContent = msg; }

function evDraw(toTop) {
  const tb = $("#ev-body");
  tb.textContent = "";
  const f = goodFile(tlFile());
  for (const [i, r] of EV.rows.entries()) {
    const tr = el("tr", { "data-i": i, "data-ts": r.ts, tabindex: -1 },
      el("td", { class: "t" }, fmtT(r.t)), el("td", {}, String(r.cpu)), el("td", {}, String(r.pid)),
      el("td", { class: "ev" }, r.event), el("td", { class: "line" }, r.line));
    if (EV.anchor != null && r.ts >= EV.anchor && (i === 0 || EV.rows[i - 1].ts < EV.anchor)) tr.classList.add("anchor");
    tb.append(tr);
  }
  const v = UI.view || [0, 0];
  const what = evEventFilter() ? ` \u00b7 only ${evEventFilter()}` : "";
  const only = EV.only ? ` \u00b7 only ${TL.byId[EV.only] ? TL.byId[EV.only].name : EV.only}` : "";
  evNote(EV.rows.length ? `${EV.rows.length} events shown from ${fmtT(EV.rows[0].t)}${EV.more ? " (more as you scroll)" : ""}${what}${only}` :
    `no events in ${fmtT(v[0])} \u2013 ${fmtT(v[1])}${what}${only}`);
  $("#ev-only").textContent = EV.only ? "all tracks" : "only the selected track";
  $("#ev-only").disabled = !EV.only && !(TL.sel && TL.sel.slice);
  if (toTop) $("#ev-scroll").scrollTop = 0;
  if (f) UI.evDrawn = (UI.evDrawn || 0) + 1;
}

function setupEvents() {
  const box = $("#ev-scroll");
  box.addEventListener("scroll", () => {
    if (box.scrollTop + box.clientHeight > box.scrollHeight - 60) evMore(false);
    else if (box.scrollTop < 40) evMore(true);
  });
  $("#ev-body").addEventListener("click", (ev) => {
    const tr = ev.target.closest("tr");
    if (!tr) return;
    const r = EV.rows[+tr.dataset.i];
    for (const x of document.querySelectorAll("#ev-body tr.on")) x.classList.remove("on");
    tr.classList.add("on");
    TL.listT = r.t;
    tlDraw();
    const side = $("#tl-side");
    side.textContent = "";
    side.append(el("h3", {}, `${r.event} at ${fmtT(r.t)}`), el("div", { class: "meta" }, `CPU ${r.cpu} \u00b7 pid ${r.pid}`));
    const d = eventDetails(r);
    d.open = true;
    side.append(d);
  });
  $("#ev-body").addEventListener("mouseover", (ev) => {
    const tr = ev.target.closest("tr");
    if (!tr) return;
    TL.listT = EV.rows[+tr.dataset.i].t;
    tlDraw();
  });
  $("#ev-only").onclick = () => {
    EV.only = EV.only ? null : TL.sel && TL.sel.slice ? TL.sel.slice.id : null;
    evLoad(EV.anchor);
  };
}

document.addEventListener("DOMContentLoaded", setupEvents);

"""The browser half of tests/cli/ui_why.rs: a thread's critical path as a lane of the
timeline of `kstate ui` in headless Chromium (Debian's, through Playwright), checked
against `kstate why --tid A --window FROM:TO --format json` on the same file and window.

Usage: ui_why.py KSTATE SHOTS URL FILE A_TID B_TID C_TID

Prints one JSON object of what it measured; exits non-zero with the reason on failure.
"""
import json
import sys
import time
import urllib.error
import urllib.request

from playwright.sync_api import sync_playwright

from ui_common import check, open_page, report, run

KSTATE, SHOTS, URL, FILE = sys.argv[1:5]
A, B, C = (int(x) for x in sys.argv[5:8])
LANE = f"tid:{A}.p:critical path"
STATES = ["running", "runnable", "sleep", "disk", "irq", "softirq", "net", "unknown"]


def ask(q):
    """Status and JSON answer of an API request."""
    try:
        r = urllib.request.urlopen(URL + "api/" + q)
        return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def cli_why(frm, to):
    """`kstate why` over FROM:TO (seconds from the recording's start), and its wall time."""
    t0 = time.monotonic()
    code, out, err = run(KSTATE, "why", FILE, "--tid", str(A), "--window", f"{frm:.9f}:{to:.9f}", "--format", "json")
    check(code == 0, f"kstate why: {err}")
    return json.loads(out), time.monotonic() - t0


def key(s):
    return (s["start_ns"], s["end_ns"], s["tid"], s["comm"], s["state"], s["detail"])


def same_path(lane, cli, what):
    """The lane is the CLI's path: its totals, each segment drawn as the walk gave it,
    and each run merged under a pixel the CLI's segments it stands for."""
    for k in ("window", "wall_ns", "by_state", "segments_total", "segments_left_out"):
        check(lane[k] == cli[k], f"{what}: {k} {lane[k]} in the page, {cli[k]} from kstate why")
    segs, got = cli["segments"], lane["segments"]
    check(got and segs, f"{what}: no segments")
    if not lane["px_ns"]:
        check([key(s) for s in got] == [key(s) for s in segs], f"{what}: the segments differ from kstate why's")
        return
    check(len(got) <= 3 * (lane["wall_ns"] // lane["px_ns"] + 1), f"{what}: {len(got)} drawables for {lane['px_ns']} ns columns")
    check(got[0]["start_ns"] == segs[0]["start_ns"] and got[-1]["end_ns"] == segs[-1]["end_ns"], f"{what}: the lane's ends")
    check(all(x["end_ns"] == y["start_ns"] for x, y in zip(got, got[1:])), f"{what}: the lane has gaps")
    exact, at = set(map(key, segs)), {s["start_ns"]: i for i, s in enumerate(segs)}
    for s in got:
        if s["merged"] == 1:
            check(key(s) in exact, f"{what}: the segment {key(s)} is not kstate why's")
            continue
        i = at.get(s["start_ns"])
        check(i is not None, f"{what}: a run starts at {s['start_ns']}, where no segment of kstate why does")
        run_ = segs[i:i + s["merged"]]
        check(run_[-1]["end_ns"] == s["end_ns"], f"{what}: the run at {s['start_ns']} is not {s['merged']} segments")
        check(all(x["end_ns"] - x["start_ns"] < lane["px_ns"] for x in run_), f"{what}: a run merged a segment of a column or more")
        by = {st: sum(x["end_ns"] - x["start_ns"] for x in run_ if x["state"] == st) for st in STATES}
        most = max(STATES, key=lambda st: (by[st], -STATES.index(st)))
        check(s["state"] == most, f"{what}: the run at {s['start_ns']} is {s['state']}, its segments most {most}: {by}")


def tree_edges(node, out):
    for w in node["wakers"]:
        out.add((w["tid"], node["tid"]))
        tree_edges(w, out)
    return out


def lane_y(page, level):
    """Page coordinates of the lane's `level` (its top), the track scrolled into sight."""
    return page.evaluate("""([key, level]) => {
        const it = kstateUi.tl.items.find(i => i.type === 'track' && i.rows.some(r => r.key === key));
        if (!it) return null;
        const r = it.rows.find(r => r.key === key), sc = document.getElementById('tl-scroll');
        if (it.y < sc.scrollTop || it.y + it.h > sc.scrollTop + sc.clientHeight - 30) { sc.scrollTop = Math.max(0, it.y - 60); tlDraw(); }
        const c = document.getElementById('tl-canvas').getBoundingClientRect();
        return [c.left, c.top + 22 + it.y - sc.scrollTop + r.y + 1 + level * 10];
    }""", [LANE, level])


def page_x(page, t):
    return page.evaluate("(t) => document.getElementById('tl-canvas').getBoundingClientRect().left + kstateUi.tl.geom.X(t)", t)


def lane_answer(page, loads):
    """Waits for the lane's answer after `loads` answers: the answer, drawn."""
    page.wait_for_function(f"() => kstateUi.why.loads > {loads} && kstateUi.why.drawn > 0", timeout=300_000)
    page.evaluate("() => kstateUi.settled()")
    return page.evaluate("() => kstateUi.why.data")


with sync_playwright() as p:
    browser, page, errors = open_page(p, URL, 1500, 1100)
    page.wait_for_function("() => window.kstateUi && kstateUi.tl && kstateUi.tl.drawn > 0", timeout=180_000)
    page.evaluate("() => kstateUi.settled()")
    meta = ask("meta")[1]["files"][0]
    span = (meta["end"] - meta["start"]) / 1e9

    # Bad requests: a clear 400, as the other timeline requests.
    for q, says in ((f"why?from=0&to={span / 2:.6f}", '"tid"'),
                    (f"why?tid=x&from=0&to={span / 2:.6f}", 'tid: "x" is not a thread id'),
                    (f"why?tid={A}&from={span / 2:.3f}&to={span / 4:.3f}", "must be later"),
                    (f"why?tid={A}&from=0&to={span / 2:.6f}&w=9000", "at most 8192"),
                    (f"why?tid={A}&from=0&to={span + 100:.3f}", "outside the recording"),
                    (f"why?tid=999999&from=0&to={span / 2:.6f}", "999999")):
        code, j = ask(q)
        check(code == 400 and says in j.get("error", ""), f"{q}: {code} {j}")

    # Select thread A: a click on its track, then "why?" in the slice's details.
    tracks = {t["id"]: t for t in ask("tracks")[1]["tracks"]}
    ta = tracks.get(f"tid:{A}")
    check(ta, f"thread A ({A}) has no track")
    t_mid = (ta["first"] + ta["last"]) / 2
    xy = page.evaluate("""([id, t]) => {
        const it = kstateUi.tl.items.find(i => i.type === 'track' && i.t.id === id), sc = document.getElementById('tl-scroll');
        sc.scrollTop = Math.max(0, it.y - 60); tlDraw();
        const c = document.getElementById('tl-canvas').getBoundingClientRect();
        return [c.left + kstateUi.tl.geom.X(t), c.top + 22 + it.y - sc.scrollTop + it.rows[0].y + 3];
    }""", [f"tid:{A}", t_mid])
    page.mouse.click(xy[0], xy[1])
    page.wait_for_selector("#tl-side button[data-why]", timeout=60_000)
    page.evaluate("() => kstateUi.settled()")
    # The lane's first answer, cold (the server never walked this path): from the click
    # to the lane drawn, in the page's clock; and the request alone.
    t0 = page.evaluate("() => { const t = performance.now(); document.querySelector('#tl-side button[data-why]').click(); return t; }")
    lane = lane_answer(page, 0)
    timing = page.evaluate("() => [kstateUi.why.asked, kstateUi.why.answered, kstateUi.why.shown]")
    report["first_lane_ms"] = round(timing[2] - t0, 1)
    report["first_answer_ms"] = round(timing[1] - timing[0], 1)
    check(lane["tid"] == A, f"the lane is thread {lane['tid']}'s")
    cli, cli_s = cli_why(lane["from"], lane["to"])
    report["cli_why_s"] = round(cli_s, 3)
    report["segments"] = {"path": cli["segments_total"], "drawn": len(lane["segments"]), "merged": lane["merged"]}
    same_path(lane, cli, "the whole view")
    page.screenshot(path=f"{SHOTS}/1-lane.png", full_page=False, clip=page.locator("#timeline").bounding_box())
    legend = page.locator("#why-legend").inner_text()
    for st in STATES:
        check(st in legend, f"the legend lacks {st}: {legend}")

    # The same question without a resolution: kstate why's segments one for one, and the
    # hops: at each, the waker's segment ends and the woken thread's begins, and each is
    # an edge of the CLI's tree.
    code, exact = ask(f"why?tid={A}&from={lane['from']:.9f}&to={lane['to']:.9f}")
    check(code == 200, f"why without w: {exact}")
    same_path(exact, cli, "no resolution")
    ends = {s["end_ns"]: s for s in exact["segments"]}
    starts = {s["start_ns"]: s for s in exact["segments"]}
    edges = tree_edges(cli["tree"], set())
    for w in exact["wakes"]:
        check(ends[w["t_ns"]]["tid"] == w["from"] and starts[w["t_ns"]]["tid"] == w["to"], f"the hop {w} is not where the path passes from {w['from']} to {w['to']}")
        check((w["from"], w["to"]) in edges, f"the hop {w['from']} -> {w['to']} is not in kstate why's tree {edges}")
    report["hops"] = sorted({(w["from"], w["to"]) for w in exact["wakes"]})
    report["arrows_whole_view"] = page.evaluate("() => kstateUi.why.arrows.length")
    check(report["arrows_whole_view"] > 0, "no arrow drawn")

    # Zoom to where B woke A: the lane walks the new view; click B's segment that ended
    # with the wake-up.
    w = next((w for w in exact["wakes"] if w["from"] == B and w["to"] == A), None)
    check(w, f"no hop from B ({B}) to A in {exact['wakes'][:10]}")
    before = ends[w["t_ns"]]
    d = max((before["end_ns"] - before["start_ns"]) * 3e-9, 5e-5)
    mid = (before["start"] + before["end"]) / 2
    loads = page.evaluate("() => kstateUi.why.loads")
    t0 = page.evaluate(f"() => {{ const t = performance.now(); setView([{mid - d}, {mid + d}]); return t; }}")
    zoomed = lane_answer(page, loads)
    timing = page.evaluate("() => [kstateUi.why.asked, kstateUi.why.answered, kstateUi.why.shown]")
    report["zoom_lane_ms"] = round(timing[2] - t0, 1)
    report["zoom_answer_ms"] = round(timing[1] - timing[0], 1)
    cli_z, _ = cli_why(zoomed["from"], zoomed["to"])
    same_path(zoomed, cli_z, "the zoomed view")
    seg = next((s for s in zoomed["segments"] if s["end_ns"] == w["t_ns"] and s["tid"] == B), None)
    check(seg and seg["merged"] == 1, f"B's segment before the wake-up at {w['t_ns']}: {seg}")
    x = page_x(page, (max(seg["start"], mid - d) + min(seg["end"], mid + d)) / 2)
    y = lane_y(page, min(seg["depth"], 5))
    page.mouse.click(x, y[1] + 5)
    page.evaluate("() => kstateUi.settled()")
    sel = page.evaluate("() => kstateUi.why.sel")
    check(sel and key(sel) == key(seg), f"clicked {sel and key(sel)}, not B's segment {key(seg)}")
    facts = page.locator("#why-facts").inner_text()
    check(f"why-a-{A}" in facts and "then woke" in facts, f"the details do not say B then woke A: {facts}")
    check(seg["detail"] == "" or seg["detail"] in facts, f"the details lack {seg['detail']!r}: {facts}")
    arrows = page.evaluate("() => kstateUi.why.arrows")
    hot = [a for a in arrows if a["hot"]]
    check(any(a["from"] == B and a["to"] == A and a["y1"] < a["y0"] for a in hot), f"no arrow drawn from B up to A: {arrows}")
    report["selected"] = {"state": sel["state"], "ns": sel["end_ns"] - sel["start_ns"], "detail": sel["detail"]}
    page.screenshot(path=f"{SHOTS}/2-segment-selected.png", full_page=False, clip=page.locator("#timeline").bounding_box())

    # Closed: the lane goes.
    page.locator("#why-close").click()
    page.evaluate("() => kstateUi.settled()")
    check(not page.evaluate(f"() => kstateUi.tl.items.some(i => i.type === 'track' && i.rows.some(r => r.key === '{LANE}'))"), "the lane stayed")
    check(not errors, f"page errors: {errors}")
    browser.close()

print(json.dumps(report, indent=1))

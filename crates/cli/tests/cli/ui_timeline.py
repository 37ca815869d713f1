"""The browser half of tests/ui_timeline.rs: the timeline, the event list, the flame
graphs and the triage order of `kstate ui` in headless Chromium (Debian's, through
Playwright), checked against the kstate CLI on the same files.

Usage: ui_timeline.py KSTATE SHOTS DEMO_URL DEMO AB_URL A B

Prints one JSON object of what it measured; exits non-zero with the reason on failure.
"""
import json
import sys
import urllib.error
import urllib.request

from playwright.sync_api import sync_playwright

from ui_common import ARGS, check, fail, report, run

KSTATE, SHOTS, URL, DEMO, AB_URL, FILE_A, FILE_B = sys.argv[1:8]


def cli(*args):
    code, out, err = run(KSTATE, *args)
    check(code == 0, f"kstate {' '.join(args)}: {err}")
    return out


def api(base, q):
    try:
        return json.loads(urllib.request.urlopen(base + "api/" + q).read())
    except urllib.error.HTTPError as e:
        fail(f"{q}: {e.code} {e.read()}")


def settle(page):
    page.evaluate("() => kstateUi.settled()")


def shot(page, name, selector=None):
    if selector:
        page.locator(selector).screenshot(path=f"{SHOTS}/{name}.png")
    else:
        page.screenshot(path=f"{SHOTS}/{name}.png", full_page=True)


def watch(page, errors):
    page.on("console", lambda m: m.type == "error" and errors.append(f"console: {m.text}"))
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))


def canvas_point(page, t, row_key):
    """Page coordinates of time t (seconds) on a timeline row, scrolled into sight."""
    return page.evaluate("""([t, key]) => {
        const it = kstateUi.tl.items.find(i => i.type === 'track' && i.rows.some(r => r.key === key));
        if (!it) return null;
        const r = it.rows.find(r => r.key === key);
        const sc = document.getElementById('tl-scroll');
        sc.scrollTop = Math.max(0, it.y - 60);
        tlDraw();
        const c = document.getElementById('tl-canvas').getBoundingClientRect();
        return [c.left + kstateUi.tl.geom.X(t), c.top + 22 + it.y - sc.scrollTop + r.y + r.h / 2];
    }""", [t, row_key])


with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
    errors = []
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    watch(page, errors)
    page.goto(URL)
    page.wait_for_function("() => window.kstateUi && kstateUi.tl && kstateUi.tl.drawn > 0", timeout=180_000)
    settle(page)
    shot(page, "1-timeline", "#timeline")
    meta = api(URL, "meta")["files"][0]
    start = meta["start"]
    tracks = api(URL, "tracks")
    kinds = {t["kind"] for t in tracks["tracks"]}
    check({"cpu", "thread"} <= kinds, f"tracks of kinds {kinds}")
    report["tracks"] = len(tracks["tracks"])
    span = (meta["end"] - start) / 1e9

    # Any range: at most one drawable per column and row, in order, within the columns.
    rows = [f"{t['id']}.{r['row']}" for t in sorted(tracks["tracks"], key=lambda t: -t["busy_ns"])[:30] for r in t["rows"]]
    for (a, b, w) in ((0, span, 700), (span * 0.4, span * 0.41, 900), (span * 0.5, span * 0.5 + 2e-5, 500)):
        v = api(URL, f"timeline?from={a:.9f}&to={b:.9f}&w={w}&rows={','.join(rows)}")
        for r in v["rows"]:
            d = r["d"]
            cols = [(d[i], d[i + 1]) for i in range(0, len(d), 6)]
            check(len(cols) <= w, f"{r['id']}.{r['row']}: {len(cols)} drawables in {w} columns")
            check(all(0 <= c0 < c1 <= w for c0, c1 in cols), f"{r['id']}: columns out of range")
            check(all(cols[i][1] <= cols[i + 1][0] for i in range(len(cols) - 1)), f"{r['id']}: drawables overlap")
    report["exact_view"] = v["exact"]
    check(v["exact"], "a 20 us view was not re-read exactly")

    # A system call slice is the syscall analyzer's row, to the nanosecond, and its events
    # are kstate dump's lines.
    busiest = max((t for t in tracks["tracks"] if t["kind"] == "thread" and any(r["row"] == 1 for r in t["rows"])),
                  key=lambda t: t["slices"])
    tid = busiest["tid"]
    log = json.loads(cli("analyze", "syscall", DEMO, "--tid", str(tid), "--log", "--sort", "value", "--top", "5", "--format", "json"))
    call = log["rows"][0]
    mid = (call["ts"] + call["dur_ns"] // 2 - start) / 1e9
    got = api(URL, f"slice?row=tid:{tid}.1&t={mid:.9f}")["slice"]
    check(got and got["start_ns"] == call["ts"] and got["dur_ns"] == call["dur_ns"],
          f"the slice at {mid} s is {got and (got['start_ns'], got['dur_ns'])}, kstate analyze's call {(call['ts'], call['dur_ns'])}")
    check({"analyzer": "syscall", "key": call["key"]} in got["rows"], f"the slice's rows {got['rows']}")
    sl = api(URL, f"slice?row=tid:{tid}.1&t={mid:.9f}")
    ts = sl["slice"]["start_ns"]
    dump = cli("dump", DEMO, "--ns", "--from", f"{ts / 1e9:.9f}", "--to", f"{ts / 1e9:.9f}").splitlines()
    first = sl["events"][0]
    report["slice_event"] = first["line"]
    dump_us = cli("dump", DEMO, "--from", f"{(ts - 1000) / 1e9:.9f}", "--to", f"{(ts + 1000) / 1e9:.9f}").splitlines()
    check(first["line"] in dump_us, f"the slice's first event {first['line']!r} is not a line of kstate dump: {dump_us[:6]}")
    check(first["event"] == "sys_enter" and first["ts"] == ts, f"the slice's first event: {first}")

    # Clicking in the canvas: the slice under the pointer, its events, and the event list
    # moves to it.
    t_mid = (call["ts"] + call["dur_ns"] // 2 - start) / 1e9
    pad = max(call["dur_ns"] / 1e9 * 3, 2e-5)
    page.evaluate(f"() => setView([{t_mid - pad}, {t_mid + pad}])")
    settle(page)
    pt = canvas_point(page, t_mid, f"tid:{tid}.1")
    check(pt, f"thread {tid}'s syscall row is not on the timeline")
    page.mouse.click(pt[0], pt[1])
    settle(page)
    sel = page.evaluate("() => kstateUi.tl.sel && kstateUi.tl.sel.slice")
    check(sel and sel["start_ns"] == call["ts"], f"clicked {sel}, not the call at {call['ts']}")
    check(page.locator("#tl-side h3").inner_text() == call["key"], "the details do not name the call")
    check(page.locator("#tl-side details.event").count() >= 2, "the details show no events")
    ev0 = page.evaluate("() => kstateUi.ev.rows[0]")
    check(ev0 and ev0["ts"] >= call["ts"], f"the event list did not move to the slice: {ev0}")
    check("k.syscall" not in page.evaluate("() => location.hash"), "a click filtered the panels")
    shot(page, "2-slice-selected", "#timeline")
    shot(page, "3-event-list", "#events")
    # The list scrolls on: a next page.
    before = page.evaluate("() => kstateUi.ev.rows.length")
    page.evaluate("() => { const s = document.getElementById('ev-scroll'); s.scrollTop = s.scrollHeight; }")
    page.wait_for_function(f"() => kstateUi.ev.rows.length > {before} || !kstateUi.ev.more", timeout=60_000)
    settle(page)
    # A click in the list puts the timeline's cursor on the event and opens its fields.
    # Bringing the row into view near the list's top loads earlier events and redraws the
    # rows; the click waits for that, or it lands on a row being replaced.
    page.locator("#ev-body tr").nth(2).scroll_into_view_if_needed()
    settle(page)
    page.locator("#ev-body tr").nth(2).click()
    try:
        page.wait_for_selector("#tl-side details.event[open]", timeout=10_000)
    except Exception:
        pass
    check(page.locator("#tl-side details.event[open]").count() == 1, "a list click did not open the event")
    check(page.evaluate("() => kstateUi.tl.listT") is not None, "a list click did not mark the timeline")

    # Wake-up arrows: a runnable slice's waker.
    page.evaluate("() => { UI.st.view = null; update(); }")
    settle(page)
    runnable = None
    for t in sorted((t for t in tracks["tracks"] if t["kind"] == "thread" and any(r["row"] == 0 for r in t["rows"])), key=lambda t: -t["slices"])[:10]:
        v = api(URL, f"timeline?from=0&to={span:.9f}&w=4000&rows={t['id']}.0")
        d = v["rows"][0]["d"]
        for i in range(0, len(d), 6):
            if d[i + 2] == 1 and v["labels"][d[i + 3]].startswith("runnable, woken by") and d[i + 5] == 255:
                # The drawable can join runnable stretches with the same waker around a
                # running one shorter than a column: ask at the middle of each column.
                for c in range(d[i], d[i + 1]):
                    t_c = (c + 0.5) / 4000 * span
                    got = api(URL, f"slice?row={t['id']}.0&t={t_c:.9f}")["slice"]
                    if got and got["kind"] == "runnable":
                        runnable = (t, t_c)
                        break
            if runnable:
                break
        if runnable:
            break
    check(runnable, "no runnable slice with a waker in the recording")
    t_run = runnable[1]
    got = api(URL, f"slice?row={runnable[0]['id']}.0&t={t_run:.9f}")["slice"]
    check(got["kind"] == "runnable" and got["from"], f"the runnable slice has no waker: {got}")
    waker = next(v for k, v in got["facts"] if k == "waker")
    page.evaluate(f"() => setView([{got['start'] - 1e-4}, {got['end'] + 1e-4}])")
    settle(page)
    pt = canvas_point(page, (got["start"] + got["end"]) / 2, f"{runnable[0]['id']}.0")
    page.mouse.click(pt[0], pt[1])
    settle(page)
    arrows = page.evaluate("() => kstateUi.tl.arrows")
    check(any(a.get("main") and a["from"] == got["from"]["id"] for a in arrows), f"no arrow from the waker {waker}: {arrows}")
    report["wakeup"] = {"woken": runnable[0]["name"], "waker": waker, "arrows": len(arrows)}
    shot(page, "4-wakeup-arrow", "#timeline")

    # Markers, the duration readout, the keyboard.
    page.locator("#tl-canvas").focus()
    page.mouse.move(pt[0] - 100, pt[1])
    page.keyboard.press("m")
    page.mouse.move(pt[0] + 100, pt[1])
    page.keyboard.press("m")
    check(page.evaluate("() => kstateUi.st.markers.length") == 2, "two M presses did not set two markers")
    check("mk=" in page.evaluate("() => location.hash"), "the markers are not in the URL")
    marks = page.locator("#tl-markers").inner_text()
    check("M2" in marks and "(+" in marks, f"no duration between the markers: {marks}")
    # A drag selects a window: the readout says how long it is.
    pt = canvas_point(page, (got["start"] + got["end"]) / 2, f"{runnable[0]['id']}.0")
    page.mouse.move(pt[0] - 150, pt[1])
    page.mouse.down()
    page.mouse.move(pt[0] - 50, pt[1], steps=4)
    page.mouse.move(pt[0] + 150, pt[1], steps=4)
    page.mouse.up()
    settle(page)
    win = page.evaluate("() => kstateUi.st.win")
    check(win and win[1] > win[0], "the drag selected no window")
    readout = page.locator("#tl-readout").inner_text()
    check("selection" in readout, f"no selection in the readout: {readout}")
    report["readout"] = readout
    shot(page, "5-markers-selection", "#timeline")

    # Pin, hide, group, search.
    first_thread = page.evaluate("() => kstateUi.tl.items.find(i => i.type === 'track' && i.t.kind === 'thread').t.id")
    xy = page.evaluate("""(id) => { const it = kstateUi.tl.items.find(i => i.type === 'track' && i.t.id === id);
        const sc = document.getElementById('tl-scroll'); sc.scrollTop = Math.max(0, it.y - 60); tlDraw();
        const c = document.getElementById('tl-canvas').getBoundingClientRect();
        return [c.left + kstateUi.tl.geom.x0 - 30, c.top + 22 + it.y - sc.scrollTop + 8]; }""", first_thread)
    page.mouse.click(xy[0], xy[1])
    settle(page)
    check(page.evaluate("() => kstateUi.st.pin") == [first_thread], f"pinning {first_thread} failed")
    check(page.evaluate("() => kstateUi.tl.items[0].key") == "pinned", "the pinned track is not on top")
    check("pin=" in page.evaluate("() => location.hash"), "the pin is not in the URL")
    xy = page.evaluate("""() => { const it = kstateUi.tl.items.find(i => i.type === 'track' && !i.pinned && i.t.kind === 'thread');
        const sc = document.getElementById('tl-scroll'); sc.scrollTop = Math.max(0, it.y - 60); tlDraw();
        const c = document.getElementById('tl-canvas').getBoundingClientRect();
        return [c.left + kstateUi.tl.geom.x0 - 14, c.top + 22 + it.y - sc.scrollTop + 8, it.t.id]; }""")
    page.mouse.click(xy[0], xy[1])
    settle(page)
    check(xy[2] in page.evaluate("() => kstateUi.st.hide"), "hiding a track failed")
    check(not page.evaluate(f"() => kstateUi.tl.items.some(i => i.type === 'track' && i.t.id === '{xy[2]}')"), "the hidden track is still shown")
    shot(page, "6-pinned-hidden", "#timeline")
    page.locator("#tl-group").uncheck()
    settle(page)
    check(not page.evaluate("() => kstateUi.tl.items.some(i => i.type === 'group' && i.key.startsWith('proc:'))"), "ungrouped, processes still head groups")
    page.locator("#tl-group").check()
    comm = busiest["comm"]
    page.locator("#tl-search").fill(comm)
    settle(page)
    shown = page.evaluate("() => kstateUi.tl.items.filter(i => i.type === 'track' && !i.pinned).map(i => i.t.name)")
    check(shown and all(comm.lower() in n.lower() for n in shown), f"searching {comm!r} shows {shown}")
    shot(page, "7-search", "#timeline")
    page.locator("#tl-search").fill("sched_switch")
    settle(page)
    evs = page.evaluate("() => kstateUi.ev.rows.map(r => r.event)")
    check(evs and set(evs) == {"sched_switch"}, f"searching an event name lists {set(evs)}")
    page.locator("#tl-search").fill("")
    settle(page)

    # Back and Forward move through views.
    page.evaluate("() => { UI.st.win = null; update(); }")
    settle(page)
    h0 = page.evaluate("() => location.hash")
    page.evaluate("() => { UI.st.g.tid = '%d'; update(); }" % tid)
    settle(page)
    page.go_back()
    settle(page)
    check(page.evaluate("() => kstateUi.st.g.tid") is None, "Back did not undo the filter")
    check(page.evaluate("() => location.hash") == h0, "Back did not return to the view before")
    page.go_forward()
    settle(page)
    check(page.evaluate("() => kstateUi.st.g.tid") == str(tid), "Forward did not redo the filter")
    page.evaluate("() => { delete UI.st.g.tid; update(); }")
    settle(page)

    # The overview from the keyboard, over the whole recording: a window from the
    # arrows, Enter applies it.
    page.evaluate("() => { UI.st.view = null; update(); }")
    settle(page)
    page.locator("#lanes").focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    for _ in range(5):
        page.keyboard.press("Shift+ArrowRight")
    page.keyboard.press("Enter")
    settle(page)
    win = page.evaluate("() => kstateUi.st.win")
    check(win and win[1] > win[0], "the keyboard brush set no window")
    # Keys are links the keyboard reaches.
    page.locator("#panel-syscall").scroll_into_view_if_needed()
    page.wait_for_selector("#panel-syscall td.key a", timeout=300_000)
    check(page.evaluate("() => document.querySelector('#panel-syscall td.key a').hasAttribute('href')"), "keys have no href")

    # The flame graph of the window's samples is kstate profile's.
    w = "%.9f:%.9f" % tuple(win)
    prof = json.loads(cli("profile", DEMO, "--json", "--window", w))
    page.wait_for_function("() => kstateUi.fl && kstateUi.fl.data", timeout=300_000)
    settle(page)
    fl = page.evaluate("() => kstateUi.fl.data")
    check(fl["samples"][0] == prof["samples"] == fl["tree"][1], f"flame graph {fl['samples']} samples, kstate profile {prof['samples']}")
    report["flame_samples"] = fl["samples"][0]
    page.locator("#flame").scroll_into_view_if_needed()
    shot(page, "8-flame", "#flame")

    # Distributions fit their values, with a y axis: the bars hold every sample.
    page.locator("#panel-syscall").scroll_into_view_if_needed()
    page.wait_for_selector("#panel-syscall canvas.histc", timeout=300_000)
    h = page.evaluate("() => document.getElementById('panel-syscall')._hist")
    st = page.evaluate("() => document.getElementById('panel-syscall')._stat")
    row = next(r for r in st["rows"] if r["key"] == h["key"])
    check(sum(h["sides"][0]["counts"]) == row["count"], f"{h['key']}: bars hold {sum(h['sides'][0]['counts'])} of {row['count']}")
    shot(page, "9-panel", "#panel-syscall")
    dom = page.evaluate("() => document.getElementsByTagName('*').length")
    report["dom_nodes"] = dom
    check(dom <= 5000, f"{dom} DOM nodes")
    shot(page, "10-page")
    check(errors == [], f"{len(errors)} console errors, the first: {errors[:3]}")
    page.close()

    # A against B: the stall first, in kstate compare's text and JSON and on the page;
    # and the differential flame graph of the two profiles.
    cmp_json = json.loads(cli("compare", FILE_A, FILE_B, "--format", "json"))
    top = cmp_json["changes"][0]
    report["top_change"] = top
    check((top["analyzer"], top["key"]) == ("syscall", "clock_nanosleep"), f"the stall is not first: {cmp_json['changes'][:3]}")
    text = cli("compare", FILE_A, FILE_B).splitlines()
    at = next(i for i, l in enumerate(text) if l.startswith("What changed most"))
    check(text[at + 1].split()[:2] == ["syscall", "clock_nanosleep"], f"the text's first change: {text[at + 1]}")
    errors = []
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    watch(page, errors)
    page.goto(AB_URL + "#m=ab")
    page.wait_for_selector("#changes-body tr[data-rank='0']", timeout=300_000)
    first_row = page.locator("#changes-body tr[data-rank='0']")
    check((first_row.get_attribute("data-analyzer"), first_row.get_attribute("data-key")) == ("syscall", "clock_nanosleep"),
          "the page's first change is not the stall")
    # Ratio columns sort; small ratios read as /N.
    order = page.evaluate("() => UI.changes.changes.map(c => c.key)")
    check(order == [c["key"] for c in cmp_json["changes"]], "the page's order is not kstate compare's")
    page.locator("#changes-body th[data-col='ratio']").click()
    ratios = page.evaluate("() => [...document.querySelectorAll('#changes-body td[data-col=ratio]')].map(t => t.textContent)")
    check(not any(r.startswith("x0.") for r in ratios), f"small ratios print as x0.xx: {ratios}")
    page.wait_for_function("() => kstateUi.fl && kstateUi.fl.data && kstateUi.fl.mode === 'ab'", timeout=300_000)
    settle(page)
    fl = page.evaluate("() => kstateUi.fl.data")
    pa = json.loads(cli("profile", FILE_A, "--json"))
    pb = json.loads(cli("profile", FILE_B, "--json"))
    check(fl["samples"] == [pa["samples"], pb["samples"]], f"differential {fl['samples']}, kstate profile {pa['samples']}, {pb['samples']}")
    report["diff_flame"] = fl["samples"]
    page.locator("#changes").scroll_into_view_if_needed()
    shot(page, "11-changes", "#changes")
    page.locator("#flame").scroll_into_view_if_needed()
    shot(page, "12-diff-flame", "#flame")
    shot(page, "13-ab-page")
    check(errors == [], f"{len(errors)} console errors, the first: {errors[:3]}")
    browser.close()

print(json.dumps(report, indent=1))

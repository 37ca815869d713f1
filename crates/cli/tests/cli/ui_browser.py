"""The browser half of ui_browser.rs: drives `kstate ui` in headless Chromium
(Debian's, through Playwright) and checks the page's numbers against the kstate CLI's.

Usage: ui_browser.py KSTATE SHOTS_DIR STALL_URL STALL_FILE AB_URL FILE_A FILE_B BAD_URL DISJOINT_URL
       STALL_DISK SCHED_FILE (the trace beside FILE_A at DISJOINT_URL, whose times trace-cmd reports)

Prints one JSON object of what it measured; exits non-zero with the reason on failure.
"""
import json
import re
import subprocess
import sys
import urllib.error
import urllib.request

from playwright.sync_api import sync_playwright

KSTATE, SHOTS, STALL_URL, STALL, AB_URL, FILE_A, FILE_B, BAD_URL, DISJOINT_URL, STALL_DISK, SCHED = sys.argv[1:12]
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run",
        "--disable-default-apps", "--disable-extensions"]
report = {}


def fail(msg):
    print(json.dumps(report, indent=1))
    sys.exit("FAIL: " + msg)


def check(cond, msg):
    if not cond:
        fail(msg)


def cli(*args):
    out = subprocess.run([KSTATE, *args], capture_output=True, text=True)
    return out.returncode, out.stdout, out.stderr


def cli_json(*args):
    code, out, err = cli(*args, "--format", "json")
    check(code == 0, f"kstate {' '.join(args)}: {err}")
    return json.loads(out)


def fmt_dur(ns):
    """The CLI's text format of a duration (kstate_analyze::filter::fmt_dur)."""
    if ns < 1000:
        return f"{ns}ns"
    if ns < 1_000_000:
        return f"{ns // 1000}.{ns % 1000:03}us"
    if ns < 1_000_000_000:
        return f"{ns // 1_000_000}.{ns % 1_000_000 // 1000:03}ms"
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000 // 1000:06}s"


def origin(url):
    return url.split("/", 3)[:3]


def watch(page, url, errors, requests):
    host = "/".join(origin(url))
    page.on("console", lambda m: m.type == "error" and errors.append(f"console: {m.text}"))
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.on("request", lambda r: requests.append(r.url))
    return host


def ready(page, timeout=120_000):
    """Waits until every panel has its answer (or its error) and the overview is drawn."""
    page.wait_for_function(
        """() => window.kstateUi && kstateUi.geom && document.querySelectorAll('.panel').length > 0 &&
              [...document.querySelectorAll('.panel')].every(p => p.dataset.state === 'ready' || p.dataset.state === 'error')
              && !document.querySelector('#changes-body .loading')""",
        timeout=timeout)


def brush(page, t0, t1):
    """Drags the mouse across the overview from time t0 to t1 (seconds)."""
    box = page.locator("#lanes").bounding_box()
    x0 = page.evaluate(f"kstateUi.geom.X({t0})")
    x1 = page.evaluate(f"kstateUi.geom.X({t1})")
    y = box["y"] + 60
    page.mouse.move(box["x"] + x0, y)
    page.mouse.down()
    page.mouse.move(box["x"] + (x0 + x1) / 2, y, steps=4)
    page.mouse.move(box["x"] + x1, y, steps=4)
    page.mouse.up()


def state_window(page):
    w = page.evaluate("kstateUi.st.win && kstateUi.st.win.map(x => x.toFixed(9)).join(':')")
    check(w, "no window selected after brushing")
    return w


with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)

    # 1. The write-stall drill-down on six O_DIRECT writers.
    errors, requests = [], []
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    host = watch(page, STALL_URL, errors, requests)
    page.goto(STALL_URL)
    ready(page)
    page.screenshot(path=f"{SHOTS}/1-overview.png", full_page=True)
    # The syscall panel's numbers are `kstate analyze syscall --format json`'s.
    panel = page.evaluate("document.getElementById('panel-syscall')._stat")
    cli_syscall = cli_json("analyze", "syscall", STALL)
    check(panel["rows"] == cli_syscall["rows"], "the syscall panel's rows differ from kstate analyze's")
    lane_calls_all = page.evaluate("kstateUi.lanes[0].lanes.syscalls.calls")
    # Find the longest write calls: click `write` (a filter), then the panel's longest.
    page.locator("#panel-syscall tr[data-key='write'] td.key a").click()
    ready(page)
    check(page.locator("[data-chip='key.syscall']").count() == 1, "no chip for the write filter")
    check(page.evaluate("location.hash").find("k.syscall=write") > 0, "the write filter is not in the URL")
    # The key narrows the system-call lane too: it scatters the write calls alone, as many
    # as kstate analyze counts over the whole recording.
    page.wait_for_function("(kstateUi.lanesAsked || '').includes('key=write')")
    sc = page.evaluate("kstateUi.lanes[0].lanes.syscalls")
    cli_write = [r for r in cli_syscall["rows"] if r["key"] == "write"][0]
    check(sc["calls"] == cli_write["count"], f"the write-filtered lane scatters {sc['calls']} calls, kstate analyze counts {cli_write['count']} writes")
    check({l[1] for l in sc["longest"] if l} == {"write"}, "the write-filtered lane's longest calls are not all writes")
    check(sc["calls"] < lane_calls_all, f"the write filter did not narrow the lane ({sc['calls']} of {lane_calls_all} calls)")
    report["lane_calls_all"], report["lane_calls_write"] = lane_calls_all, sc["calls"]
    page.locator("#panel-syscall .tools button").click()
    page.wait_for_selector("#panel-syscall .longest table.log tbody tr")
    rows = page.evaluate("document.querySelector('#panel-syscall .longest')._rows")
    check(all(r["key"] == "write" for r in rows), "the longest list holds other calls than write")
    cli_longest = cli_json("analyze", "syscall", STALL, "--key", "write", "--log", "--sort", "value", "--top", "20")
    check([r["dur_ns"] for r in rows] == [r["dur_ns"] for r in cli_longest["rows"]],
          "the longest writes differ from kstate analyze --log --sort value --top 20")
    page.screenshot(path=f"{SHOTS}/2-longest-writes.png", full_page=True)
    # Their window: the longest write and the long writes overlapping it.
    a, b = rows[0]["t"], rows[0]["t"] + rows[0]["v"] / 1e9
    grown = True
    while grown:
        grown = False
        for r in rows:
            s, e = r["t"], r["t"] + r["v"] / 1e9
            if s < b and e > a and (s < a or e > b):
                a, b, grown = min(a, s), max(b, e), True
    # The page's "select their window" picks the same stall, not the 20 writes' spread.
    page.locator("#panel-syscall .select-longest").click()
    ready(page)
    sel = page.evaluate("kstateUi.st.win")
    check(abs(sel[0] - a) < 1e-6 and abs(sel[1] - b) < 1e-6,
          f"'select their window' chose {sel}, not the longest write and those overlapping it {a:.6f}:{b:.6f}")
    span = max(r["t"] + r["v"] / 1e9 for r in rows) - min(r["t"] for r in rows)
    report["stall_window_s"], report["longest_20_span_s"] = b - a, span
    # ... and a brush across the overview sets it as well.
    page.locator("[data-chip='window'] button").click()
    ready(page)
    brush(page, a, b)
    ready(page)
    win = state_window(page)
    lo, hi = (float(x) for x in win.split(":"))
    check(abs(lo - a) < (b - a) * 0.1 + 0.002 and abs(hi - b) < (b - a) * 0.1 + 0.002,
          f"the brushed window {win} is not the writes' window {a:.6f}:{b:.6f}")
    check(page.evaluate("location.hash").find("w=" + win.replace(":", "%3A")) > 0, f"the window {win} is not in the URL")
    report["window"] = win
    report["longest_writes_ns"] = [r["v"] for r in rows[:5]]
    page.screenshot(path=f"{SHOTS}/3-brushed.png", full_page=True)
    # Every panel now has the window: the blkqueue panel is `kstate analyze blkqueue --window`.
    q_page = page.evaluate("document.getElementById('panel-blkqueue')._stat")
    q_cli = cli_json("analyze", "blkqueue", STALL, "--window", win)
    check(q_page["rows"] == q_cli["rows"] and q_page["queue"] == q_cli["queue"],
          "the blkqueue panel differs from kstate analyze blkqueue --window")
    # A windowed syscall panel reads only around the window, and so does the CLI: the
    # server's answer and kstate analyze's are the same bytes, counts and notes included.
    # (The server derives a key filter's answer from the unkeyed one: the same bytes too.)
    for w, key in ((win, None), (win, "write"), ("50:60", None)):
        q, flags = f"a=syscall&window={w}", ["--window", w]
        if key:
            q, flags = q + f"&key={key}", flags + ["--key", key]
        body = urllib.request.urlopen(f"{STALL_URL}api/panel?{q}").read().decode()
        code, out, err = cli("analyze", "syscall", STALL, *flags, "--format", "json")
        check(code == 0, f"kstate analyze syscall {flags}: {err}")
        check(body == out, f"{q}: the panel's JSON differs from kstate analyze's:\n{body}\n{out}")
    past = json.loads(body)
    check(past["rows"] == [] and past["pairs"]["selected"] == 0, f"a window past the end selected something: {past}")
    q_all = cli_json("analyze", "blkqueue", STALL)
    peak_in = max((q["max_len"] for q in q_cli["queue"]), default=0)
    peak_all = max((q["max_len"] for q in q_all["queue"]), default=0)
    report["blkqueue_peak_inside"], report["blkqueue_peak_whole"] = peak_in, peak_all
    report["blkqueue_peaks"] = {q["key"]: [q["max_len"], next((x["max_len"] for x in q_all["queue"] if x["key"] == q["key"]), None)]
                                for q in q_cli["queue"]}
    # The overview's block lanes, for the zoomed-out view: the peak's time.
    lanes = page.evaluate("kstateUi.lanes[0].lanes.blk")
    report["blk_lane_peaks"] = [(l["name"], l["peak"], l["peak_at"]) for l in lanes]
    # Inside vs outside: biotime p99 inside the window against outside it.
    page.locator("#modes button[data-mode='inout']").click()
    ready(page)
    page.screenshot(path=f"{SHOTS}/4-inside-vs-outside.png", full_page=True)
    c = page.evaluate("document.getElementById('panel-biotime')._compare")
    bi_in = cli_json("analyze", "biotime", STALL, "--window", win)
    bi_out = cli_json("analyze", "biotime", STALL, "--not-window", win)
    by_key = lambda rows: {r["key"]: r for r in rows}
    rows_c = by_key(c["analyzers"][0]["rows"])
    for key, r in by_key(bi_in["rows"]).items():
        check(rows_c[key]["b"]["p99"] == r["p99_ns"], f"biotime {key} p99 inside differs from the CLI's")
        cell = page.locator(f"#panel-biotime tr[data-key='{key}'] td[data-col='p99_b']").inner_text()
        check(cell == fmt_dur(r["p99_ns"]), f"biotime {key}: the page shows {cell}, the CLI {fmt_dur(r['p99_ns'])}")
    for key, r in by_key(bi_out["rows"]).items():
        check(rows_c[key]["a"]["p99"] == r["p99_ns"], f"biotime {key} p99 outside differs from the CLI's")
    # The writes of the disk that stalled (STALL_DISK: its key's beginning).
    w_key = next((r["key"] for r in bi_in["rows"] if r["key"].startswith(STALL_DISK)), None)
    check(w_key, f"biotime counts no write of the stalling disk {STALL_DISK} in the window: {[r['key'] for r in bi_in['rows']]}")
    if w_key:
        inside, outside = rows_c[w_key]["b"]["p99"], (rows_c[w_key]["a"] or {}).get("p99")
        report["biotime_p99_inside_ns"], report["biotime_p99_outside_ns"] = inside, outside
        report["biotime_key"] = w_key
        # The difference is marked: the ratio cell says which way it went.
        ratio_cell = page.locator(f"#panel-biotime tr[data-key='{w_key}'] td[data-col='p99_ratio']")
        r = rows_c[w_key]["ratio"]["p99"]
        if r is not None and rows_c[w_key]["compared"] and r >= 1.5:
            check("up" in ratio_cell.get_attribute("class"), "a p99 1.5 x larger inside is not marked")
    check(page.locator("#changes-body table.changes tbody tr").count() > 0, "no 'what changed most' rows inside vs outside")
    # The state lives in the URL: a reload restores it.
    url = page.url
    page.goto("about:blank")
    page.goto(url)
    ready(page)
    check(state_window(page) == win, "reloading the URL lost the window")
    check(page.evaluate("kstateUi.st.mode") == "inout", "reloading the URL lost the mode")
    # Removing the chip removes the filter from every panel.
    page.locator("[data-chip='key.syscall'] button").click()
    ready(page)
    check(page.locator("[data-chip='key.syscall']").count() == 0, "the write chip did not go")
    check(errors == [], f"{len(errors)} console errors, the first: {errors[:3]}")
    report["requests_stall"] = len(requests)
    check(all(r.startswith(host + "/") or r.startswith("data:") for r in requests),
          f"a request left {host}: {[r for r in requests if not r.startswith(host)]}")
    page.close()

    # 2. A/B: one writer against six.
    errors, requests = [], []
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    host = watch(page, AB_URL, errors, requests)
    page.goto(AB_URL + "#m=ab")
    ready(page)
    page.screenshot(path=f"{SHOTS}/5-a-vs-b.png", full_page=True)
    row = page.locator("#panel-syscall tr[data-key='write']")
    check(row.count() == 1, "no write row in the A/B syscall panel")
    check("regressed" in (row.get_attribute("class") or ""), "write is not flagged as regressed in the page")
    changed = page.locator("#changes-body tr[data-analyzer='syscall'][data-key='write']")
    check(changed.count() == 1 and changed.locator(".badge").count() == 1,
          "write is not flagged in 'what changed most'")
    badge = changed.locator(".badge").inner_text()
    check(badge == "p99 REGRESSED", f"the badge does not name p99: {badge!r}")
    c = page.evaluate("document.getElementById('panel-syscall')._compare")
    code, out, err = cli("compare", FILE_A, FILE_B, "--analyzer", "syscall", "--metric", "p99", "--format", "json")
    check(code == 0, err)
    cli_c = json.loads(out)
    check(c["analyzers"][0]["rows"] == cli_c["analyzers"][0]["rows"], "the A/B panel differs from kstate compare")
    code, out, _ = cli("compare", FILE_A, FILE_B, "--analyzer", "syscall", "--key", "write", "--metric", "p99", "--threshold", "1.5")
    check(code == 3, f"kstate compare --threshold 1.5 exited {code}:\n{out}")
    wr = [r for r in c["analyzers"][0]["rows"] if r["key"] == "write"][0]
    report["ab_write"] = {"a": wr["a"], "b": wr["b"], "ratio": wr["ratio"]}
    # The distributions are overlaid: two series in the write panel's chart.
    check(page.locator("#panel-syscall .dist .legend .sw").count() == 2, "the A/B distribution is not two series")
    check(errors == [], f"{len(errors)} console errors, the first: {errors[:3]}")
    check(all(r.startswith(host + "/") for r in requests), "a request left 127.0.0.1")
    page.close()

    # 3. Bad input: a file that does not parse, and a link whose state is malformed.
    errors, requests = [], []
    page = browser.new_page(viewport={"width": 1400, "height": 700})
    watch(page, BAD_URL, errors, requests)
    page.goto(BAD_URL)
    page.wait_for_selector("#error:not([hidden])")
    msg = page.locator("#error").inner_text()
    check("bad magic" in msg or "not a trace" in msg, f"the unreadable file's message is unclear: {msg}")
    page.screenshot(path=f"{SHOTS}/6-bad-file.png", full_page=True)
    page.close()
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors = []
    watch(page, STALL_URL, errors, requests)
    page.goto(STALL_URL + "#w=oops&m=zz")
    page.wait_for_selector("#error:not([hidden])")
    msg = page.locator("#error").inner_text()
    check("cannot be restored" in msg, f"a malformed link's message is unclear: {msg}")
    ready(page)
    page.screenshot(path=f"{SHOTS}/7-bad-link.png", full_page=True)
    check(errors == [], f"{len(errors)} console errors, the first: {errors[:3]}")
    page.close()
    # A window past the recording's end: the page says so, no panel fails.
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors = []
    watch(page, STALL_URL, errors, requests)
    page.goto(STALL_URL + "#w=50:60")
    ready(page)
    note = page.locator("#outside").inner_text()
    check(note.startswith("the window lies outside the recording (0\u2013"), f"a window past the end: {note!r}")
    check(page.locator(".panel[data-state='error']").count() == 0, "a window past the end made a panel fail")
    page.screenshot(path=f"{SHOTS}/9-window-past-the-end.png", full_page=True)
    check(errors == [], f"{len(errors)} console errors, the first: {errors[:3]}")
    page.close()
    # Two recordings with no analyzer in common: the page says so, the server serves on.
    page = browser.new_page(viewport={"width": 1400, "height": 700})
    errors = []
    watch(page, DISJOINT_URL, errors, requests)
    page.goto(DISJOINT_URL + "#m=ab")
    page.wait_for_selector("#panels .error")
    msg = page.locator("#panels .error").inner_text()
    check("no analyzer applies to both" in msg, f"two recordings with nothing in common: {msg}")
    # One line a side, naming what each has (scheduling against system calls), not one
    # line of both paths and every reason.
    sides = page.locator("#panels .error li").all_inner_texts()
    check(len(sides) == 2 and "runq" in sides[0] and "syscall" not in sides[0] and "syscall" in sides[1],
          f"the sides of nothing in common: {sides}")
    page.screenshot(path=f"{SHOTS}/8-nothing-in-common.png", full_page=True)
    check(errors == [], f"{len(errors)} console errors, the first: {errors[:3]}")
    page.close()
    browser.close()

# The server's own answers: a wrong token is refused, bad questions get a message.
base = STALL_URL.rsplit("/", 2)[0]
try:
    urllib.request.urlopen(base + "/0123456789abcdef0123456789abcdef/api/meta")
    fail("a wrong token was served")
except urllib.error.HTTPError as e:
    check(e.code == 403, f"a wrong token got {e.code}")
try:
    urllib.request.urlopen(STALL_URL + "api/panel?a=nosuch")
    fail("an unknown analyzer was answered")
except urllib.error.HTTPError as e:
    body = json.loads(e.read())
    check(e.code == 400 and "no analyzer" in body["error"], f"unknown analyzer: {e.code} {body}")
# Two recordings with nothing in common, asked anyway: which analyzers each has, a line a
# side, not one line of every analyzer's reason.
try:
    urllib.request.urlopen(DISJOINT_URL + "api/compare?kind=ab&a=*")
    fail("two recordings with nothing in common were compared")
except urllib.error.HTTPError as e:
    lines = json.loads(e.read())["error"].splitlines()
    check(e.code == 400 and len(lines) == 4 and "no analyzer in common" in lines[0]
          and lines[1].startswith("  A ") and "runq" in lines[1] and "syscall" not in lines[1]
          and lines[2].startswith("  B ") and "syscall" in lines[2] and "runq" not in lines[2],
          f"nothing in common, asked: {lines}")
# api/meta runs no analysis pass: the time range is the file's first and last event,
# trace-cmd's (whose report prints microseconds).
sched = json.loads(urllib.request.urlopen(DISJOINT_URL + "api/meta").read())["files"][0]
report_txt = subprocess.run(["trace-cmd", "report", "-i", SCHED], capture_output=True, text=True,
                            check=True).stdout
stamps = [float(m.group(1)) for m in (re.search(r"\]\s+(\d+\.\d+):", l) for l in report_txt.splitlines()) if m]
check(abs(sched["start"] / 1e9 - stamps[0]) < 1e-6 and abs(sched["end"] / 1e9 - stamps[-1]) < 1e-6,
      f"the range {sched['start']}..{sched['end']}, trace-cmd's {stamps[0]}..{stamps[-1]}")
# ... and the server still serves.
check(json.loads(urllib.request.urlopen(STALL_URL + "api/meta").read())["files"], "the server stopped serving")
print(json.dumps(report, indent=1))

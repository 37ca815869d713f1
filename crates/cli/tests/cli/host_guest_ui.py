"""The browser half of host_guest_views.rs: `kstate ui host.dat guest.dat` in
headless Chromium (Debian's, through Playwright).

Usage: host_guest_ui.py KSTATE SHOTS MACHINES_URL GUEST_FILE AB_URL FORCED_URL EXPECT_JSON

EXPECT_JSON: per file (host, then guest) what trace-cmd report -i host -i guest printed:
{"events", "first", "last"} (ns, host clock). Prints one JSON object of what it measured;
exits non-zero with the reason on failure.
"""
import json
import subprocess
import sys
import urllib.request

from playwright.sync_api import sync_playwright

KSTATE, SHOTS, URL, GUEST, AB_URL, FORCED_URL, EXPECT = sys.argv[1:8]
EXPECT = json.loads(EXPECT)
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


def get(url, ep):
    with urllib.request.urlopen(url + ep, timeout=300) as r:
        return json.load(r)


def ready(page, timeout=180_000):
    page.wait_for_function(
        """() => window.kstateUi && kstateUi.geom && document.querySelectorAll('.panel').length > 0 &&
              [...document.querySelectorAll('.panel')].every(p => p.dataset.state === 'ready' || p.dataset.state === 'error')""",
        timeout=timeout)


# The server's answers: one axis for both machines, each machine's events and first and
# last event as trace-cmd prints them.
meta = get(URL, "api/meta")
check(meta["layout"] == "machines", f"layout {meta['layout']}, not machines")
files = meta["files"]
check([f["machine"] for f in files] == ["host", "guest 1"], f"machines {[f.get('machine') for f in files]}")
for f, want in zip(files, EXPECT):
    got = {k: f[k] for k in ("events", "first", "last")}
    report[f["machine"]] = got
    check(got == want, f"{f['machine']}: page {got}, trace-cmd {want}")
check(files[0]["start"] == files[1]["start"] == min(e["first"] for e in EXPECT), "the machines' axes differ")
check(files[0]["end"] == files[1]["end"] == max(e["last"] for e in EXPECT), "the axis does not end at the last event")
start = files[0]["start"]
whole = (files[0]["end"] - start) / 1e9

# The guest's lanes are drawn where its events are on the host's clock: its CPUs are busy
# only between its first and last event; the host's before the guest starts.
bins = 1000
lanes = [get(URL, f"api/lanes?f={i}&from=0&to={whole:.9f}&w={bins}") for i in (0, 1)]
bin_s = whole / bins


def busy_bins(l):
    on = [i for i in range(bins) if any(c["values"][i] > 0 for c in l["busy"])]
    return (on[0], on[-1]) if on else None


hb, gb = busy_bins(lanes[0]), busy_bins(lanes[1])
check(gb is not None and hb is not None, "no busy bins")
g0, g1 = (EXPECT[1]["first"] - start) / 1e9, (EXPECT[1]["last"] - start) / 1e9
report["guest_busy_s"] = [gb[0] * bin_s, (gb[1] + 1) * bin_s]
report["guest_events_s"] = [g0, g1]
check(gb[0] * bin_s >= g0 - bin_s and (gb[1] + 1) * bin_s <= g1 + 2 * bin_s,
      f"guest busy {report['guest_busy_s']} s outside its events {g0:.6f}..{g1:.6f} s")
check(hb[0] * bin_s < g0, "the host is not busy before the guest starts")

with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
    errors = []
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.on("console", lambda m: m.type == "error" and errors.append(f"console: {m.text}"))
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.goto(URL)
    ready(page)
    labels = page.evaluate("kstateUi.geom.rows.map(r => r.label)")
    report["lanes"] = labels
    wants = ["host: events", "host syscalls", "guest 1: events", "guest 1 syscalls"]
    # A busy lane for each CPU whose switches the machine's recording holds, as the lanes
    # API names them (a recording of a few milliseconds may hold none on one CPU).
    for machine, l in zip(["host", "guest 1"], lanes):
        check(l["busy"], f"{machine}: no CPU busy lane from the API")
        wants += [f"{machine} {c['name']} busy" for c in l["busy"]]
    for want in wants:
        check(want in labels, f"no lane {want!r} in {labels}")
    # The guest's events row spans its first to last event on the shared axis.
    xs = page.evaluate(f"[kstateUi.geom.X({g0}), kstateUi.geom.X({g1}), kstateUi.geom.x0, kstateUi.geom.x1]")
    check(xs[2] < xs[0] < xs[1] <= xs[3] + 0.5, f"guest span at x {xs}")
    page.screenshot(path=f"{SHOTS}/ui-host-guest.png", full_page=True)
    check(page.locator("#modes button[data-mode='ab']").is_disabled(), "A vs B offered for a host and its guest")

    # A window inside the guest's time, and the guest's panels: the syscall panel holds
    # what `kstate analyze syscall GUEST --window @A:@B` says (host-clock window).
    a, b = g0 + (g1 - g0) * 0.25, g0 + (g1 - g0) * 0.75
    page.evaluate(f"kstateUi.st.win = [{a}, {b}]")
    page.locator("#filesel button[data-file='1']").click()
    ready(page)
    panel = page.evaluate("document.getElementById('panel-syscall')._stat")
    win = page.evaluate("new URLSearchParams(location.hash.slice(1)).get('w')")
    abs_win = page.evaluate(f"'@' + hostSecs({a}) + ':@' + hostSecs({b})")
    out = subprocess.run([KSTATE, "analyze", "syscall", GUEST, "--window", abs_win, "--format", "json"],
                         capture_output=True, text=True)
    check(out.returncode == 0, out.stderr)
    cli = json.loads(out.stdout)
    report["guest_window"] = abs_win
    report["guest_window_calls"] = sum(r["count"] for r in panel["rows"])
    check(panel["rows"] == cli["rows"], "the guest's syscall panel differs from kstate analyze --window")
    check(report["guest_window_calls"] > 0, "no guest system calls in the window")
    page.screenshot(path=f"{SHOTS}/ui-guest-panels.png", full_page=True)
    check(not errors, f"page errors: {errors}")
    browser.close()

# Two files that are not a host and its guest, or --compare: A/B as before.
check(get(AB_URL, "api/meta")["layout"] == "files", "two plain recordings are not A/B")
check(get(FORCED_URL, "api/meta")["layout"] == "files", "--compare is not A/B")
print(json.dumps(report))

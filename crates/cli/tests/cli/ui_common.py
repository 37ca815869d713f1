"""What the browser halves of the UI tests share (ui_browser.py, ui_timeline.py,
host_guest_ui.py): Chromium's flags for a quiet, offline headless run, and failing with
what was measured so far.
"""
import json
import subprocess
import sys

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-default-apps", "--disable-extensions"]

# What a test measured: printed as JSON when it ends, passed or failed.
report = {}


def fail(msg):
    print(json.dumps(report, indent=1))
    sys.exit("FAIL: " + msg)


def check(cond, msg):
    if not cond:
        fail(msg)


def run(*cmd):
    """Exit status, standard output and standard error of a command."""
    out = subprocess.run(list(cmd), capture_output=True, text=True)
    return out.returncode, out.stdout, out.stderr


def open_page(p, url, width, height):
    """Debian's Chromium (Playwright `p`) with a page on `url`: the browser, the page, and
    the list its console errors and uncaught exceptions collect in."""
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
    errors = []
    page = browser.new_page(viewport={"width": width, "height": height})
    page.on("console", lambda m: m.type == "error" and errors.append(f"console: {m.text}"))
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.goto(url)
    return browser, page, errors

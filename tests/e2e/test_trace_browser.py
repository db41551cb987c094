"""The trace-view page in headless Chromium (Debian's `chromium`): it loads without script errors
and draws its charts. A bench trace with preemption is rendered; Chromium dumps the DOM (the
page's script writes the charts' page boxes into <body data-layout>, which proves it ran) and takes
a screenshot; each chart's box in the PNG (decoded here with zlib) must hold the colours of what it
draws. The same for the comparison page (`trace-view --compare`) of that trace (recorded with
--trace-requests) and its `nanovllm replay` under other flags. Skips (exit 77) with a reason when
chromium is absent. TRACE_SCREENSHOT=PATH / TRACE_COMPARE_SCREENSHOT=PATH keep the PNGs.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

sys.path.insert(0, os.path.dirname(__file__))
from cdp_util import FLAGS, chromium_path  # noqa: E402
from server_util import SKIP, check, make_tmpdir, nanovllm_bin  # noqa: E402

CHROMIUM_FLAGS = FLAGS + ["--enable-logging=stderr", "--v=0"]


def decode_png(data):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB/RGBA non-interlaced PNG."""
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG")
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            check(depth == 8 and color in (2, 6) and interlace == 0, f"unsupported PNG {depth} {color} {interlace}")
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride, rows, prev = w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


def hex_rgb(h):
    return tuple(int(h[i:i + 2], 16) for i in (1, 3, 5))


def region_stats(rows, box):
    x, y, w, h = box
    colours, non_bg = {}, 0
    for yy in range(y, y + h):
        for xx in range(x, x + w):
            p = rows[yy][xx]
            colours[p] = colours.get(p, 0) + 1
            if p not in ((255, 255, 255), (252, 252, 252)):
                non_bg += 1
    return colours, non_bg / float(w * h)


def browse_and_check(chromium, tmp, page, name, want, keep_env, min_fill, min_elements):
    """Loads `page` in headless Chromium: no console output, the script ran (data-layout), the
    charts `want` names are all there and each shows its colours in a screenshot; nothing is drawn
    below the last chart. The PNG is copied to $keep_env when that is set."""
    url = "file://" + os.path.abspath(page)

    def browse(extra, run):
        profile = os.path.join(tmp, f"profile-{name}-{run}")  # a fresh profile each run
        return subprocess.run([chromium] + CHROMIUM_FLAGS + ["--user-data-dir=" + profile] + extra + [url],
                              capture_output=True, text=True, timeout=120)

    width = 1240  # the same window width for both runs: the layout depends on it
    dom = browse(["--dump-dom", f"--window-size={width},2000"], "dom")
    check(dom.returncode == 0, f"chromium --dump-dom exit {dom.returncode}: {dom.stderr[-1500:]}")
    console = [l for l in dom.stderr.splitlines() if "CONSOLE" in l]
    check(not console, f"console output (script errors?): {console}")
    m = re.search(r'data-layout="([^"]*)"', dom.stdout)
    check(m, "the page's script did not run (no data-layout on <body>): " + dom.stdout[:300] + dom.stderr[-800:])
    layout = json.loads(m.group(1).replace("&quot;", '"'))
    check(set(layout) == set(want), f"charts {sorted(layout)}")
    elements = dom.stdout.count("<rect") + dom.stdout.count("<polyline")
    check(elements > min_elements, f"{elements} SVG rects and polylines in the DOM, expected > {min_elements}")
    bottom = max(b[1] + b[3] for b in layout.values())
    check(max(b[0] + b[2] for b in layout.values()) <= width, f"charts wider than the window: {layout}")

    png = os.path.join(tmp, f"{name}.png")
    shot = browse(["--screenshot=" + png, f"--window-size={width},{bottom + 40}"], "shot")
    check(shot.returncode == 0 and os.path.exists(png), f"screenshot failed: {shot.stderr[-1500:]}")
    console = [l for l in shot.stderr.splitlines() if "CONSOLE" in l]
    check(not console, f"console output (script errors?): {console}")
    w, h, rows = decode_png(open(png, "rb").read())
    check(w >= width and h >= bottom, f"screenshot {w}x{h} smaller than the page's charts")
    for chart, box in layout.items():
        colours, filled = region_stats(rows, box)
        print(f"{name} {chart}: box {box}, {filled:.1%} non-background, {len(colours)} colours")
        check(filled > min_fill, f"chart {chart} is (nearly) blank: {filled:.1%} drawn")
        for c in want[chart]:
            n = colours.get(hex_rgb(c), 0)
            check(n >= 20, f"chart {chart}: colour {c} drawn on {n} pixels only")
    # Outside the charts, below the last one, the page is blank (nothing overflows).
    _, below = region_stats(rows, (0, bottom + 8, w, min(20, h - bottom - 8)))
    check(below < 0.01, f"drawing below the charts ({below:.1%})")
    keep = os.environ.get(keep_env)
    if keep:
        shutil.copyfile(png, keep)


def no_external_urls(page):
    """The page loads nothing: no URL, no src/href attribute, no CSS url() or @import."""
    html = open(page).read().replace('xmlns="http://www.w3.org/2000/svg"', "")  # a name, not fetched
    for needle in ("http://", "https://", " src=", " href=", "url(", "@import"):
        check(needle not in html, f"{os.path.basename(page)} holds {needle!r}")


def main():
    chromium = chromium_path()
    if not chromium:
        print("SKIP: chromium is not installed (Debian package `chromium`, see scripts/deps.sh)")
        return SKIP
    binary = nanovllm_bin()
    build = os.environ.get("NANOVLLM_BUILD_DIR", "/tmp")
    tmp = make_tmpdir("trace_browser_")
    trace, page = os.path.join(tmp, "t.json"), os.path.join(tmp, "t.html")
    # --trace-requests: the compare page below replays this recording under other flags.
    r = subprocess.run([binary, "bench", "--random-model", "tiny", "--dtype", "f32", "--cache-dir",
                        os.path.join(build, "test-models", "bench-cache"), "--num-seqs", "16", "--min-input-len", "20",
                        "--max-input-len", "80", "--min-output-len", "8", "--max-output-len", "40", "--no-progress",
                        "--threads", "1", "--num-kvcache-blocks", "20", "--block-size", "16", "--trace", trace,
                        "--trace-requests"],
                       capture_output=True, text=True, timeout=600)
    check(r.returncode == 0, f"bench failed: {r.stderr[-2000:]}")
    r = subprocess.run([binary, "trace-view", trace, "-o", page], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"trace-view failed: {r.stderr}")
    # Colours each chart must show (the page's CSS classes): prefill, decode, KV used, queued, ...
    browse_and_check(chromium, tmp, page, "page",
                     {"steps": ["#e8803a", "#3b78d8", "#5a9e57", "#8a6bbf"],
                      "kv": ["#9cc0ef", "#2f9e6e", "#d8342c"],
                      "requests": ["#c9c9c9", "#e8803a", "#3b78d8"]}, "TRACE_SCREENSHOT", 0.04, 100)
    no_external_urls(page)
    print("PASS: trace-view page renders in headless Chromium")

    # The compare page: the recording against its replay with a larger KV cache and at most 4
    # sequences per step (issue 33): every chart shows both runs' colours (A blue, B orange).
    replayed, cmp = os.path.join(tmp, "b.json"), os.path.join(tmp, "compare.html")
    r = subprocess.run([binary, "replay", trace, "--no-progress", "--threads", "1", "--max-num-seqs", "4",
                        "--num-kvcache-blocks", "64", "--trace", replayed], capture_output=True, text=True, timeout=600)
    check(r.returncode == 0, f"replay failed: {r.stderr[-2000:]}")
    r = subprocess.run([binary, "trace-view", "--compare", trace, replayed, "-o", cmp], capture_output=True, text=True,
                       timeout=120)
    check(r.returncode == 0, f"trace-view --compare failed: {r.stderr}")
    both = ["#3b78d8", "#e8803a"]
    browse_and_check(chromium, tmp, cmp, "compare",
                     {c: both for c in ("ttft_cdf", "itl_cdf", "e2e_cdf", "throughput", "queues", "kv")},
                     "TRACE_COMPARE_SCREENSHOT", 0.01, 20)
    no_external_urls(cmp)
    print("PASS: trace-view --compare page renders in headless Chromium")
    return 0


if __name__ == "__main__":
    sys.exit(main())

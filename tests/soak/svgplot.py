"""svgplot.py: line plots as SVG files, for the soak's report.

SVG is text: the plot is a few elements (the axes, each series as a
polyline or as points, the ranges, a legend and the title) that any
browser shows, with no library to install and no encoder of our own.
plot(path, title, xlabel, series, dots=False), series [(name, [(x, y),
...])].  Nothing here reads a network or a file but the one it writes.
"""
from xml.sax.saxutils import escape

W, H = 800, 300
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 70, 10, 26, 34
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
# A series of more points than this is thinned to it (every k-th point):
# a soak's minutes of samples would otherwise make files of megabytes.
MAX_POINTS = 4000


def _fmt(v):
    if abs(v) >= 1e6:
        return "%.1fM" % (v / 1e6)
    if abs(v) >= 1e4:
        return "%.0fK" % (v / 1e3)
    if abs(v) >= 100 or v == int(v):
        return "%d" % v
    return "%.2g" % v


def _range(series, i):
    vals = [p[i] for _, pts in series for p in pts]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
    if i == 1:
        lo = min(lo, 0.0)
    return (lo, hi if hi > lo else lo + 1.0)


def plot(path, title, xlabel, series, dots=False):
    """Writes series to path as an SVG line plot (dots: points, not
    lines); returns "svg"."""
    (x0, x1), (y0, y1) = _range(series, 0), _range(series, 1)
    pw, ph = W - MARGIN_L - MARGIN_R, H - MARGIN_T - MARGIN_B

    def sx(x):
        return MARGIN_L + (x - x0) / (x1 - x0) * pw

    def sy(y):
        return MARGIN_T + ph - (y - y0) / (y1 - y0) * ph

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="16" font-size="13">%s</text>' % (MARGIN_L, escape(title)),
           '<path d="M%d %d V%d H%d" fill="none" stroke="black"/>'
           % (MARGIN_L, MARGIN_T, MARGIN_T + ph, MARGIN_L + pw)]
    for v, y in ((y0, MARGIN_T + ph), (y1, MARGIN_T + 4)):
        out.append('<text x="%d" y="%d" text-anchor="end">%s</text>'
                   % (MARGIN_L - 4, y, _fmt(v)))
    for v, x, anchor in ((x0, MARGIN_L, "start"), (x1, MARGIN_L + pw, "end")):
        out.append('<text x="%d" y="%d" text-anchor="%s">%s</text>'
                   % (x, MARGIN_T + ph + 14, anchor, _fmt(v)))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>'
               % (MARGIN_L + pw // 2, H - 6, escape(xlabel)))
    for k, (name, pts) in enumerate(series):
        colour = COLOURS[k % len(COLOURS)]
        step = max(1, len(pts) // MAX_POINTS)
        xy = [(sx(x), sy(y)) for x, y in pts[::step]]
        if dots:
            out += ['<circle cx="%.1f" cy="%.1f" r="1.5" fill="%s"/>' % (x, y, colour) for x, y in xy]
        elif xy:
            out.append('<polyline points="%s" fill="none" stroke="%s"/>'
                       % (" ".join("%.1f,%.1f" % p for p in xy), colour))
        out.append('<text x="%d" y="%d" fill="%s" text-anchor="end">%s</text>'
                   % (W - MARGIN_R, MARGIN_T + 12 * (k + 1), colour, escape(name)))
    out.append("</svg>\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    return "svg"

"""pngplot.py: line plots as PNG files, for the soak's report.

matplotlib (Debian's python3-matplotlib) draws them when it is installed;
otherwise a small writer of our own does: a white canvas, axes, the
series as polylines or points, and the axis ranges and the title in a 3x5 pixel
font.  Both take the same call: plot(path, title, xlabel, series) with
series [(name, [(x, y), ...])].  Nothing here reads a network or a file
but the one it writes.
"""
import struct
import zlib

W, H = 800, 300
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 60, 10, 22, 22
COLOURS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189), (255, 127, 14)]

# 3x5 glyphs, rows top to bottom, 3 bits a row (4 = left pixel).
FONT = {
    "0": (7, 5, 5, 5, 7), "1": (2, 6, 2, 2, 7), "2": (7, 1, 7, 4, 7), "3": (7, 1, 7, 1, 7),
    "4": (5, 5, 7, 1, 1), "5": (7, 4, 7, 1, 7), "6": (7, 4, 7, 5, 7), "7": (7, 1, 1, 1, 1),
    "8": (7, 5, 7, 5, 7), "9": (7, 5, 7, 1, 7), ".": (0, 0, 0, 0, 2), "-": (0, 0, 7, 0, 0),
    " ": (0, 0, 0, 0, 0), ":": (0, 2, 0, 2, 0), "/": (1, 1, 2, 4, 4), "(": (2, 4, 4, 4, 2),
    ")": (2, 1, 1, 1, 2), "%": (5, 1, 2, 4, 5), "_": (0, 0, 0, 0, 7), ",": (0, 0, 0, 2, 4),
    "A": (2, 5, 7, 5, 5), "B": (6, 5, 6, 5, 6), "C": (7, 4, 4, 4, 7), "D": (6, 5, 5, 5, 6),
    "E": (7, 4, 6, 4, 7), "F": (7, 4, 6, 4, 4), "G": (7, 4, 5, 5, 7), "H": (5, 5, 7, 5, 5),
    "I": (7, 2, 2, 2, 7), "J": (1, 1, 1, 5, 7), "K": (5, 5, 6, 5, 5), "L": (4, 4, 4, 4, 7),
    "M": (5, 7, 7, 5, 5), "N": (6, 5, 5, 5, 5), "O": (7, 5, 5, 5, 7), "P": (7, 5, 7, 4, 4),
    "Q": (7, 5, 5, 7, 1), "R": (6, 5, 6, 5, 5), "S": (7, 4, 7, 1, 7), "T": (7, 2, 2, 2, 2),
    "U": (5, 5, 5, 5, 7), "V": (5, 5, 5, 5, 2), "W": (5, 5, 7, 7, 5), "X": (5, 5, 2, 5, 5),
    "Y": (5, 5, 2, 2, 2), "Z": (7, 1, 2, 4, 7),
}


def _fmt(v):
    if abs(v) >= 1e6:
        return "%.1fM" % (v / 1e6)
    if abs(v) >= 1e4:
        return "%.0fK" % (v / 1e3)
    if abs(v) >= 100 or v == int(v):
        return "%d" % v
    return "%.2f" % v


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray(b"\xff" * (w * h * 3))

    def dot(self, x, y, c):
        if 0 <= x < self.w and 0 <= y < self.h:
            i = (y * self.w + x) * 3
            self.px[i:i + 3] = bytes(c)

    def line(self, x0, y0, x1, y1, c):
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        for _ in range(dx - dy + 1):  # bounded: one step a pixel
            self.dot(x0, y0, c)
            if x0 == x1 and y0 == y1:
                break
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x, y, s, c=(0, 0, 0), scale=2):
        for ch in s.upper():
            rows = FONT.get(ch, FONT[" "])
            for r, bits in enumerate(rows):
                for b in range(3):
                    if bits & (4 >> b):
                        for dy in range(scale):
                            for dx in range(scale):
                                self.dot(x + b * scale + dx, y + r * scale + dy, c)
            x += 4 * scale

    def png(self):
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3])
                       for y in range(self.h))

        def chunk(kind, data):
            return (struct.pack(">I", len(data)) + kind + data
                    + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def _plot_own(path, title, xlabel, series, dots=False):
    pts = [p for _, s in series for p in s]
    c = Canvas(W, H)
    x0, x1 = (min(p[0] for p in pts), max(p[0] for p in pts)) if pts else (0, 1)
    y0, y1 = (min(0, min(p[1] for p in pts)), max(p[1] for p in pts)) if pts else (0, 1)
    if x1 <= x0:
        x1 = x0 + 1
    if y1 <= y0:
        y1 = y0 + 1
    pw, ph = W - MARGIN_L - MARGIN_R, H - MARGIN_T - MARGIN_B

    def sx(x):
        return MARGIN_L + int((x - x0) / (x1 - x0) * (pw - 1))

    def sy(y):
        return MARGIN_T + ph - 1 - int((y - y0) / (y1 - y0) * (ph - 1))
    grey = (160, 160, 160)
    c.line(MARGIN_L, MARGIN_T, MARGIN_L, MARGIN_T + ph - 1, grey)
    c.line(MARGIN_L, MARGIN_T + ph - 1, MARGIN_L + pw - 1, MARGIN_T + ph - 1, grey)
    c.text(4, MARGIN_T, _fmt(y1))
    c.text(4, MARGIN_T + ph - 10, _fmt(y0))
    c.text(MARGIN_L, H - 14, _fmt(x0))
    c.text(MARGIN_L + pw - 4 * 2 * len(_fmt(x1)), H - 14, _fmt(x1))
    c.text(MARGIN_L + pw // 2 - 40, H - 14, xlabel)
    c.text(MARGIN_L, 4, title)
    lx = MARGIN_L + 8 * (len(title) + 2)
    for i, (name, s) in enumerate(series):
        col = COLOURS[i % len(COLOURS)]
        c.text(lx, 4, name, col)
        lx += 8 * (len(name) + 2)
        prev = None
        for x, y in s:
            p = (sx(x), sy(y))
            if dots:
                for d in ((0, 0), (1, 0), (0, 1), (1, 1)):
                    c.dot(p[0] + d[0], p[1] + d[1], col)
            elif prev is not None:
                c.line(prev[0], prev[1], p[0], p[1], col)
            else:
                c.dot(p[0], p[1], col)
            prev = p
    with open(path, "wb") as f:
        f.write(c.png())


def plot(path, title, xlabel, series, dots=False):
    """Writes a PNG plot of series [(name, [(x, y)...])] to path, lines or
    (dots) points; returns the writer used ("matplotlib" or "own")."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _plot_own(path, title, xlabel, series, dots)
        return "own"
    fig, ax = plt.subplots(figsize=(W / 100, H / 100), dpi=100)
    for name, s in series:
        if dots:
            ax.scatter([p[0] for p in s], [p[1] for p in s], label=name, s=2)
        else:
            ax.plot([p[0] for p in s], [p[1] for p in s], label=name, linewidth=0.8)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return "matplotlib"

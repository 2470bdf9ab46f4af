#!/usr/bin/env python3
"""fake_providers.py: the providers' own APIs, for tests, one per process.

  --api youtube      YouTube Data API v3, GET /youtube/v3/videos (videos.list)
  --api vimeo        Vimeo API 3.4, GET /videos?uris=/videos/1,/videos/2
  --api dailymotion  Dailymotion Graph API, GET /videos?ids=x1,x2

Written from the providers' published references: the shapes of their
answers and of their errors, what each validates, how each limits.  The
server itself is tests/fake_upstream.py's (keep-alive HTTP/1.1, a control
port that answers while the data port refuses, close_after, latency_ms,
the shared faults hang / 5xx / 429 / refuse); this file adds the APIs.

Deterministic data (expected() below, which the tests import to compute
the NDJSON they must get):
  duration = 1 + crc32(id) % 7200 seconds
  poster   = the largest picture the API lists for the id, on the
             provider's own image host, its URL derived from the id
  ids starting "unk" or ending "404" (Vimeo's are numbers) are unknown
  (absent from the answer, 200); "live"
  (YouTube: P0D, liveBroadcastContent "live", thumbnails ..._live.jpg)
  and "upc" (PT0S, "upcoming"; on Dailymotion both mode "live", the first
  onair) have a poster but no runtime; "days"
  lasts P1DT2H3M4S; on Dailymotion "expl" is an explicit video, absent
  unless the call says family_filter=false.  YouTube's larger thumbnails
  (since 2026-09-11): "fhd" ids list fhd (1920 wide) too, "qhd" ids fhd
  and qhd (2560), "uhd" ids all three (uhd 3840, listed first), and ids
  starting "nw" list every thumbnail without its width (the reader then
  ranks them by name; "nwuhd" ids the larger three too).
Quirks, every answer: items in an order of their own (reversed), the
first item again at the end (a duplicate), fields nobody asked for, the
larger thumbnails missing for some ids (YouTube maxres and standard,
Dailymotion 1080), Vimeo's unlisted videos as /videos/ID:HASH, and `\\/`
for every `/` in Vimeo's and Dailymotion's JSON (their PHP encoders).

Validation, as the real APIs do it, each refusal with the API's own error
body (and counted in /_stats "refused" by reason):
  YouTube      key= must be the configured key (absent: 403 forbidden;
               wrong: 400 keyInvalid); every call with a good key costs
               1 unit of the day's quota, an invalid one too; past the
               quota: 403 quotaExceeded (quota_reason: or the older
               dailyLimitExceeded) until the control says otherwise;
               part= required and known, id= at most 50, no parameter
               the method does not take (maxResults/pageToken with id=).
  Vimeo        Authorization: bearer TOKEN (else 401, error_code 8003),
               Accept application/vnd.vimeo.*+json;version=3.4 (else
               counted bad_accept), uris= at most vm_max_uris, nothing
               beside uris and fields (sort, filter, page, per_page...:
               400 error_code 2101); X-RateLimit-Limit/-Remaining/-Reset
               on every answer, 429 past rate_limit calls per
               rate_window_s, Reset as epoch seconds or an HTTP date
               (reset_form).
  Dailymotion  ids= required, limit at most 100 (default 10: only the
               first 10 come back, has_more true), fields= known names
               (else 400 invalid_parameter).
Every request (method, path, query, and for Vimeo its Authorization and
Accept) is kept in /_stats "log" (the last LOG_KEPT), so tests can say
YouTube was never sent anything but videos.list, HEAD included.

POST /_reset zeroes the counters and the log but keeps Vimeo's rate window
(a test's reset does not give it a fresh minute); POST /_window restarts it.
Control (POST /_control on either port), besides fake_upstream.py's keys:
  {"key": "...", "token": "...", "quota": 10000, "quota_used": 0,
   "quota_reason": "quotaExceeded", "rate_limit": 600, "rate_window_s": 60,
   "reset_form": "epoch|date", "vm_max_uris": 100, "vm_untrimmed": false}
  vm_untrimmed: Vimeo ignores fields= (as an API version or a proxy that
  drops the query's tail may) and sends each video object whole, 5 to 25
  KB as recorded ones are; the poster and runtime are the same.
Usage: fake_providers.py --api NAME [--port P] [--control-port P]
                         [--ready-file F] [--key K] [--token T]
"""
import argparse
import json
import os
import sys
import time
import zlib
from email.utils import formatdate
from json.encoder import encode_basestring_ascii
from urllib.parse import quote, unquote

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_upstream as core  # noqa: E402

APIS = ("youtube", "vimeo", "dailymotion")
PATHS = {"youtube": "/youtube/v3/videos", "vimeo": "/videos", "dailymotion": "/videos"}
PROVIDER = {"youtube": "yt", "vimeo": "vm", "dailymotion": "dm"}
YT_MAX_IDS = 50
YT_FIELDS = "items(id,contentDetails/duration,snippet(thumbnails,liveBroadcastContent))"  # enrichd's
DM_MAX_LIMIT = 100
DM_DEFAULT_LIMIT = 10
LOG_KEPT = 20000
DAYS_SECONDS = 93784  # P1DT2H3M4S

API_KEYS = ("key", "token", "quota", "quota_used", "quota_reason", "rate_limit",
            "rate_window_s", "reset_form", "vm_max_uris", "vm_untrimmed")
core.settings.update(key="", token="", quota=10000, quota_used=0, quota_reason="quotaExceeded",
                     rate_limit=600, rate_window_s=60, reset_form="epoch", vm_max_uris=100,
                     vm_untrimmed=False)


def zero_api():
    return {"log": [], "refused": {}, "answered": {}, "ids_asked": 0, "max_ids": 0,
            "bad_accept": 0, "calls": 0, "window_start": 0.0, "window_calls": 0}


api = zero_api()


def crc(s):
    return zlib.crc32(s.encode("utf-8", "surrogatepass")) & 0xFFFFFFFF


# ---- the data, derived from the id --------------------------------------

YT_SIZES = [("default", 120, 90, "default"), ("medium", 320, 180, "mqdefault"),
            ("high", 480, 360, "hqdefault"), ("standard", 640, 480, "sddefault"),
            ("maxres", 1280, 720, "maxresdefault"), ("fhd", 1920, 1080, "fhddefault"),
            ("qhd", 2560, 1440, "qhddefault"), ("uhd", 3840, 2160, "uhddefault")]
YT_LARGER = {"fhd": ("fhd",), "qhd": ("fhd", "qhd"), "uhd": ("uhd", "fhd", "qhd")}
VM_WIDTHS = [100, 200, 295, 640, 960, 1280, 1920]
DM_SIZES = [("thumbnail_url", 0), ("thumbnail_480_url", 480), ("thumbnail_720_url", 720),
            ("thumbnail_1080_url", 1080)]


def runtime(vid):
    """Seconds, or None when the API gives none (live, upcoming)."""
    if vid.startswith(("live", "upc")):
        return None
    if vid.startswith("days"):
        return DAYS_SECONDS
    return 1 + crc(vid) % 7200


def yt_thumbs(vid):
    """The thumbnails YouTube lists: maxres for a quarter of the ids,
    standard for two thirds, the three small ones always."""
    c = crc(vid)
    keep = ["default", "medium", "high"]
    if c % 3:
        keep.append("standard")
    if c % 4 == 0:
        keep.append("maxres")
    larger = YT_LARGER.get(vid[2:5] if vid.startswith("nw") else vid[:3], ())
    q = quote(vid, safe="-._~")
    live = "_live" if vid.startswith(("live", "upc")) else ""
    sizes = {name: (w, h, file) for name, w, h, file in YT_SIZES}
    out = {}
    for name in list(larger[:1]) + keep + list(larger[1:]):
        w, h, file = sizes[name]
        t = {"url": "https://i.ytimg.com/vi/%s/%s%s.jpg" % (q, file, live)}
        if not vid.startswith("nw"):
            t.update(width=w, height=h)
        out[name] = t
    return out


def vm_widths(c):
    """The widths of pictures.sizes for an id of crc c, in the answer's
    order: four to seven, not sorted."""
    widths = VM_WIDTHS[:4 + c % 4]
    return widths[1:] + widths[:1]


def vm_links(c, w):
    """(link, link_with_play_button) of the size of width w."""
    return ("https://i.vimeocdn.com/video/%d-%08x-d_%dx%d?r=pad" % (c % 999983, c, w, w * 9 // 16),
            "https://i.vimeocdn.com/filter/overlay?src0=x&w=%d" % w)


def vm_uri(vid, c):
    """/videos/ID, or /videos/ID:HASH for an unlisted one (a fifth)."""
    return "/videos/%s" % vid + (":%010x" % c if c % 5 == 0 else "")


def vm_sizes(vid):
    """pictures.sizes."""
    c = crc(vid)
    return [dict(zip(("width", "height", "link", "link_with_play_button"),
                     (w, w * 9 // 16) + vm_links(c, w))) for w in vm_widths(c)]


def dm_thumbs(vid):
    """Every thumbnail field; thumbnail_1080_url null for a third of the ids."""
    c = crc(vid)
    q = quote(vid, safe="-._~")
    out = {}
    for name, h in DM_SIZES:
        out[name] = "https://s%d.dmcdn.net/v/%s/x%d" % (1 + c % 2, q, h or 240)
    if c % 3 == 0:
        out["thumbnail_1080_url"] = None
    return out


def poster(api_name, vid):
    if api_name == "youtube":
        t = yt_thumbs(vid)  # the widest, by width or by the width its name stands for
        named = {name: w for name, w, h, file in YT_SIZES}
        return max(t.values(), key=lambda x: x.get("width") or named[
            next(n for n in t if t[n] is x)])["url"]
    if api_name == "vimeo":
        return max(vm_sizes(vid), key=lambda s: s["width"])["link"]
    t = dm_thumbs(vid)
    return next(t[n] for n in ("thumbnail_1080_url", "thumbnail_720_url", "thumbnail_480_url",
                               "thumbnail_url") if t.get(n))


def known(vid):
    """False for the ids every API says it does not know."""
    return not (vid.startswith("unk") or vid.endswith("404"))


def expected(api_name, vid):
    """(poster, runtime in seconds or None) the API gives for vid, or None
    when it does not know it (unknown; Dailymotion's explicit videos only
    when asked with family_filter on)."""
    if not known(vid):
        return None
    return poster(api_name, vid), runtime(vid)


def iso8601(secs, vid):
    if vid.startswith("live"):
        return "P0D"
    if vid.startswith("upc"):
        return "PT0S"
    d, rest = divmod(secs, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    t = "".join("%d%s" % (v, u) for v, u in ((h, "H"), (m, "M"), (s, "S")) if v)
    return ("P%dD" % d if d else "P") + ("T" + t if t else "")


def quirky(items):
    """Reversed, and the first item once more at the end."""
    items = list(reversed(items))
    return items + items[:1] if items else items


# json.dumps(separators=...) makes an encoder a call: made once instead.
_compact = json.JSONEncoder(separators=(",", ":"))


def php_json(doc):
    """JSON as PHP's json_encode writes it: `/` escaped everywhere."""
    return _compact.encode(doc).replace("/", "\\/").encode()


# ---- writing answers fast ------------------------------------------------
#
# The fakes are the far end of the latency goal (a batch waits for its
# slowest call), so an answer must cost little: json.dumps(indent=2) runs
# the pure-Python encoder, ~40 us an item.  The bytes stay exactly
# json.dumps's (tests/integration/test_fake_providers.py holds them to
# the first version's): an indented value is written through a template
# per shape (json.dumps of the shape itself, once), its leaves by the C
# encoder, and each id's item text is kept (bounded; the data is a
# function of the id).  A compact document is written whole by the C
# encoder, its items made anew: kept as texts each would cost an encoder
# call (slower for the new ids every batch of the goal asks), kept as
# dicts they would weigh on every full collection of the GC.

class Raw(str):
    """A value already written as JSON, spliced in as it is."""


SLOT = "\x00"
_templates = {}
ITEMS_KEPT = 100000  # item texts kept (about 700 bytes each)
_items = {}


def _shape(o, leaves):
    """The structure of o (its keys, nesting and lengths), its leaves
    appended to leaves as JSON, in the encoder's order."""
    t = type(o)
    if t is str:
        leaves.append(encode_basestring_ascii(o))
        return None
    if t is dict:
        return (dict, tuple([(k, _shape(v, leaves)) for k, v in o.items()]))
    if t is list:
        return (list, tuple([_shape(v, leaves) for v in o]))
    leaves.append(o if t is Raw else int.__repr__(o) if t is int else json.dumps(o))
    return None


def _skeleton(shape):
    if shape is None:
        return SLOT
    kind, sub = shape
    if kind is dict:
        return {k: _skeleton(v) for k, v in sub}
    return [_skeleton(v) for v in sub]


def indented(o, depth=0, pretty=True):
    """json.dumps(o, indent=2) as it reads `depth` levels down in an
    indented document (its lines after the first indented 2 * depth);
    with pretty False, the compact form (no whitespace at all), what
    Google's APIs write when asked prettyPrint=false."""
    leaves = []
    shape = _shape(o, leaves)
    key = (shape, depth if pretty else None)
    fmt = _templates.get(key)
    if fmt is None:
        sk = _skeleton(shape)
        text = (json.dumps(sk, indent=2) if pretty else _compact.encode(sk)).replace("%", "%%")
        fmt = text.replace(json.dumps(SLOT), "%s").replace("\n", "\n" + "  " * depth)
        _templates[key] = fmt
    return fmt % tuple(leaves)


def kept(key, make):
    """The item text of key (an id and what the call asked), made once."""
    text = _items.get(key)
    if text is None:
        text = make()
        if len(_items) >= ITEMS_KEPT:
            _items.clear()
        _items[key] = text
    return text


# ---- the three APIs -----------------------------------------------------

def yt_error(code, reason, message, status, domain="youtube.parameter"):
    return code, json.dumps({"error": {"code": code, "message": message, "errors": [
        {"message": message, "domain": domain, "reason": reason}], "status": status}},
        indent=2).encode()


YT_PARTS = {"contentDetails", "snippet", "id", "statistics", "status", "player",
            "topicDetails", "recordingDetails", "liveStreamingDetails", "localizations"}
YT_PARAMS = {"part", "id", "key", "fields", "hl", "prettyPrint", "alt"}


def youtube(method, path, params, headers):
    """(status, body, extra headers, refusal reason or None, ids asked)."""
    s = core.settings
    if method != "GET" or path != PATHS["youtube"]:
        return 404, b"Not Found", {}, "not videos.list", 0
    key = params.get("key", [""])[-1]
    if not key:
        st, b = yt_error(403, "forbidden", "The request is missing a valid API key.",
                         "PERMISSION_DENIED", "global")
        return st, b, {}, "no key", 0
    if key != s["key"]:
        st, b = yt_error(400, "keyInvalid", "API key not valid. Please pass a valid API key.",
                         "INVALID_ARGUMENT", "usageLimits")
        return st, b, {}, "keyInvalid", 0
    with core.lock:  # the unit is spent whatever follows
        s["quota_used"] += 1
        spent = s["quota_used"] > s["quota"]
    if spent:
        msg = ("The request cannot be completed because you have exceeded your "
               "<a href=\"/youtube/v3/getting-started#quota\">quota</a>.")
        st, b = yt_error(403, s["quota_reason"], msg, "PERMISSION_DENIED", "youtube.quota")
        return st, b.replace(b"<", b"\\u003c").replace(b">", b"\\u003e"), {}, "quota", 0
    bad = sorted(set(params) - YT_PARAMS)
    if bad:
        st, b = yt_error(400, "unexpectedParameter",
                         "The request specifies an unexpected parameter: %s." % bad[0],
                         "INVALID_ARGUMENT")
        return st, b, {}, "parameter", 0
    parts = params.get("part", [""])[-1].split(",")
    if parts == [""] or not set(parts) <= YT_PARTS:
        st, b = yt_error(400, "missingRequiredParameter" if parts == [""] else "invalidPart",
                         "The request specifies an invalid part parameter.", "INVALID_ARGUMENT")
        return st, b, {}, "part", 0
    ids = [i for i in params.get("id", [""])[-1].split(",") if i]
    if len(ids) > YT_MAX_IDS:
        st, b = yt_error(400, "invalidFilters",
                         "The request specifies an invalid filter parameter: more than %d ids."
                         % YT_MAX_IDS, "INVALID_ARGUMENT")
        return st, b, {}, "too many ids", len(ids)
    fields = params.get("fields", [""])[-1]
    # prettyPrint (a standard parameter of Google's APIs): indented unless
    # it is false (booleans are read as Google reads them, case aside)
    pretty = params.get("prettyPrint", ["true"])[-1].lower() != "false"
    snippet, details = "snippet" in parts, "contentDetails" in parts
    items = [kept(("youtube", vid, snippet, details, fields, pretty),
                  lambda: yt_item_text(vid, snippet, details, fields, pretty))
             for vid in ids if known(vid)]
    if fields:
        doc = {"items": quirky(items)}
    else:
        doc = {"kind": "youtube#videoListResponse", "etag": "list", "items": quirky(items),
               "pageInfo": {"totalResults": len(items), "resultsPerPage": len(items)}}
    return 200, indented(doc, 0, pretty).encode(), {}, None, len(ids)


_yt_short = {}  # the trimmed item's template, by the thumbnails it lists


def yt_item_text(vid, snippet, details, fields, pretty=True):
    """The item as indented() writes it in the list.  The call enrichd
    makes (both parts, fields=YT_FIELDS) has one shape per set of
    thumbnails: its leaves are written straight from the id into that
    shape's template (the item dict and its walk cost more than the rest
    of the answer)."""
    if not (snippet and details and fields == YT_FIELDS):
        return Raw(indented(yt_item(vid, snippet, details, fields), 2, pretty))
    thumbs = yt_thumbs(vid)
    shape = (tuple(thumbs), vid.startswith("nw"), pretty)  # names, widths given or not
    fmt = _yt_short.get(shape)
    if fmt is None:
        it = yt_item(vid, snippet, details, fields)
        text = indented(it, 2, pretty)
        _yt_short[shape] = _templates[(_shape(it, []), 2 if pretty else None)]
        return Raw(text)
    leaves = [encode_basestring_ascii(vid),
              encode_basestring_ascii(iso8601(runtime(vid) or 0, vid))]
    for t in thumbs.values():
        leaves.append(encode_basestring_ascii(t["url"]))
        if "width" in t:
            leaves += (int.__repr__(t["width"]), int.__repr__(t["height"]))
    leaves.append(encode_basestring_ascii(yt_live(vid)))
    return Raw(fmt % tuple(leaves))


def yt_live(vid):
    """snippet.liveBroadcastContent."""
    return "live" if vid.startswith("live") else "upcoming" if vid.startswith("upc") else "none"


def yt_item(vid, snippet, details, fields):
    it = {"kind": "youtube#video", "etag": "e%08x" % crc(vid), "id": vid}
    if snippet:
        it["snippet"] = {"publishedAt": "2024-05-01T12:00:00Z", "channelId": "UCfake",
                         "title": "video %s" % vid, "thumbnails": yt_thumbs(vid),
                         "liveBroadcastContent": yt_live(vid)}
    if details:
        it["contentDetails"] = {"duration": iso8601(runtime(vid) or 0, vid),
                                "dimension": "2d", "definition": "hd", "caption": "false"}
    return yt_trim(it, fields) if fields else it


def yt_trim(it, fields):
    """fields=items(id,contentDetails/duration,snippet(thumbnails,
    liveBroadcastContent)) or snippet/thumbnails, as the API honours it
    (enough of the grammar for what clients send)."""
    out = {}
    if "id" in fields.replace("Details", ""):
        out["id"] = it["id"]
    if "contentDetails" in it and "contentDetails" in fields:
        cd = it["contentDetails"]
        out["contentDetails"] = {"duration": cd["duration"]} if "/duration" in fields else cd
    if "snippet" in it and "snippet" in fields:
        sn = it["snippet"]
        if "snippet(" in fields:
            sub = fields.split("snippet(", 1)[1].split(")", 1)[0].split(",")
            out["snippet"] = {k: sn[k] for k in sub if k in sn}
        else:
            out["snippet"] = {"thumbnails": sn["thumbnails"]} if "/thumbnails" in fields else sn
    return out


def vm_error(status, code, error, dev):
    return status, php_json({"error": error, "link": None, "developer_message": dev,
                             "error_code": code})


VM_PARAMS = {"uris", "fields"}
VM_FIELDS = "uri,duration,pictures.sizes"  # what enrichd asks


def vm_rate(now):
    """The rate window: (limit, remaining, reset epoch, over)."""
    s = core.settings
    with core.lock:
        if now >= api["window_start"] + s["rate_window_s"]:
            api["window_start"], api["window_calls"] = now, 0
        api["window_calls"] += 1
        limit = s["rate_limit"]
        used = api["window_calls"]
        reset = api["window_start"] + s["rate_window_s"]
    return limit, max(0, limit - used), reset, used > limit


def vimeo(method, path, params, headers):
    s = core.settings
    now = time.time()
    limit, remaining, reset, over = vm_rate(now)
    if s["reset_form"] == "date":
        form = formatdate(reset, usegmt=True)
    else:
        form = "%d" % int(reset + 0.999)
    rate = {"X-RateLimit-Limit": str(limit), "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": form}
    if method != "GET" or path != PATHS["vimeo"]:
        st, b = vm_error(404, 5000, "The requested page could not be found.",
                         "The requested resource does not exist.")
        return st, b, rate, "not videos", 0
    auth = headers.get("Authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or token != s["token"] or not token:
        st, b = vm_error(401, 8003, "Something strange occurred. Please contact the app owners.",
                         "You must provide a valid authenticated access token.")
        return st, b, rate, "token", 0
    accept = headers.get("Accept", "")
    if "application/vnd.vimeo.*+json" not in accept or "version=3.4" not in accept:
        with core.lock:
            api["bad_accept"] += 1
    if over:
        st, b = vm_error(429, 9000, "Too many API requests. Please try again later.",
                         "You have exceeded the rate limit for this application.")
        return st, b, rate, "rate", 0
    bad = sorted(set(params) - VM_PARAMS)
    if bad or "uris" not in params:
        st, b = vm_error(400, 2101, "You have provided an invalid parameter. Please contact "
                         "developer of this application.",
                         "The parameter \"%s\" is not allowed with uris."
                         % (bad[0] if bad else "uris"))
        return st, b, rate, "parameter", 0
    uris = [u for u in params["uris"][-1].split(",") if u]
    if len(uris) > s["vm_max_uris"]:
        st, b = vm_error(400, 2204, "You have provided an invalid parameter.",
                         "You may ask for at most %d uris." % s["vm_max_uris"])
        return st, b, rate, "too many ids", len(uris)
    fields = params.get("fields", [""])[-1]
    make = vm_item_text if fields == VM_FIELDS else lambda vid, f: Raw(_compact.encode(vm_item(vid, f)))
    if s["vm_untrimmed"]:
        make = kept_untrimmed
    data = [make(u[len("/videos/"):], fields)
            for u in uris if u.startswith("/videos/") and known(u[len("/videos/"):])]
    data = quirky(data)
    doc = {"total": len(data), "page": 1, "per_page": max(1, len(data)),
           "paging": {"next": None, "previous": None, "first": "/videos?page=1", "last": None},
           "data": SLOT}
    text = _compact.encode(doc).replace(json.dumps(SLOT), "[" + ",".join(data) + "]", 1)
    return 200, text.replace("/", "\\/").encode(), rate, None, len(uris)


_vm_short = {}  # the asked item's template, by its count of sizes


def vm_item_text(vid, fields):
    """vm_item(vid, VM_FIELDS) as the compact encoder writes it (before
    php_json's escapes), its leaves written straight into a template per
    count of sizes, as yt_item_text does."""
    c = crc(vid)
    n = 4 + c % 4
    fmt = _vm_short.get(n)
    if fmt is None:
        it = vm_item(vid, fields)
        fmt = _compact.encode(_skeleton(_shape(it, []))).replace("%", "%%")
        _vm_short[n] = fmt.replace(json.dumps(SLOT), "%s")
        return Raw(_compact.encode(it))
    leaves = [encode_basestring_ascii(vm_uri(vid, c)), int.__repr__(runtime(vid) or 0)]
    for w in vm_widths(c):
        link, play = vm_links(c, w)
        leaves += (int.__repr__(w), int.__repr__(w * 9 // 16), encode_basestring_ascii(link),
                   encode_basestring_ascii(play))
    return Raw(fmt % tuple(leaves))


def kept_untrimmed(vid, fields):
    return kept(("vimeo-untrimmed", vid), lambda: Raw(_compact.encode(vm_untrimmed(vid))))


def vm_untrimmed(vid):
    """The whole video object, as Vimeo sends it when fields= is not
    honoured: 4.8 to 25 KB (the recorded ones' range), most of it the
    description, the embed code, the owner and the connections."""
    c = crc(vid)
    d = vm_item(vid, "")
    uri = d["uri"]
    size = 4800 + c % 20000
    d.update(description="", link="https://vimeo.com/%s" % vid,
             embed={"html": "<iframe src=\"https://player.vimeo.com/video/%s?h=%08x\" "
                            "width=\"1920\" height=\"1080\" frameborder=\"0\" "
                            "allow=\"autoplay; fullscreen\"></iframe>" % (vid, c),
                    "badges": {"hdr": False, "live": {"streaming": False, "archived": False},
                               "staff_pick": {"normal": False}}, "interactive": False},
             created_time="2025-03-01T10:00:00+00:00", modified_time="2026-11-30T08:00:00+00:00",
             release_time="2025-03-01T10:00:00+00:00", language="fr",
             tags=[{"uri": "/tags/t%d" % i, "name": "tag %d" % i, "tag": "t%d" % i,
                    "canonical": "t%d" % i} for i in range(c % 8)],
             stats={"plays": None}, status="available", resource_key="%040x" % c,
             user={"uri": "/users/%d" % (c % 99991), "name": "Owner %d" % (c % 97),
                   "link": "https://vimeo.com/user%d" % (c % 99991), "account": "pro",
                   "pictures": {"sizes": [{"width": w, "height": w,
                                           "link": "https://i.vimeocdn.com/portrait/%d_%dx%d"
                                           % (c % 997, w, w)} for w in (30, 72, 75, 100, 144, 216,
                                                                        288, 300, 360)]}},
             metadata={"connections": {k: {"uri": "%s/%s" % (uri, k), "options": ["GET"],
                                           "total": c % 50}
                                       for k in ("comments", "credits", "likes", "pictures",
                                                 "texttracks", "related", "recommendations")}})
    # the description fills the object to its size: accented text, each
    # character written \u00e9 (6 bytes) by the encoder, as PHP's does
    rest = size - len(_compact.encode(d).replace("/", "\\/"))
    d["description"] = "\u00e9" * (max(0, rest) // 6)
    return d


def vm_item(vid, fields):
    c = crc(vid)
    uri = vm_uri(vid, c)
    if fields == VM_FIELDS:  # what enrichd asks: the rest not made to be dropped
        return {"uri": uri, "duration": runtime(vid) or 0, "pictures": {"sizes": vm_sizes(vid)}}
    d = {"uri": uri, "name": "video %s" % vid, "type": "video",
         "duration": runtime(vid) or 0, "width": 1920, "height": 1080,
         "privacy": {"view": "unlisted" if c % 5 == 0 else "anybody"},
         "pictures": {"uri": uri + "/pictures/%d" % (c % 999983), "active": True,
                      "type": "custom", "base_link": "https://i.vimeocdn.com/video/x",
                      "sizes": vm_sizes(vid)}}
    if fields:
        want = set(fields.split(","))
        d = {k: v for k, v in d.items()
             if k in want or ("pictures.sizes" in want and k == "pictures")}
        if "pictures" in d and "pictures" not in want:
            d["pictures"] = {"sizes": d["pictures"]["sizes"]}
    return d


DM_FIELDS = {"id", "title", "duration", "thumbnail_url", "thumbnail_60_url",
             "thumbnail_120_url", "thumbnail_180_url", "thumbnail_240_url", "thumbnail_360_url",
             "thumbnail_480_url", "thumbnail_720_url", "thumbnail_1080_url", "explicit",
             "created_time", "owner", "url", "channel", "mode", "onair"}
DM_PARAMS = {"ids", "fields", "limit", "family_filter", "page"}


def dm_error(message, etype="invalid_parameter", code=400):
    return code, php_json({"error": {"more_info": "https://developers.dailymotion.com/api#"
                                     "error-codes", "code": code, "message": message,
                                     "type": etype}})


def dailymotion(method, path, params, headers):
    if method != "GET" or path != PATHS["dailymotion"]:
        st, b = dm_error("Unrecognized endpoint.", "not_found", 404)
        return st, b, {}, "not videos", 0
    bad = sorted(set(params) - DM_PARAMS)
    if bad:
        st, b = dm_error("Unrecognized parameter: `%s'." % bad[0])
        return st, b, {}, "parameter", 0
    try:
        limit = int(params.get("limit", [str(DM_DEFAULT_LIMIT)])[-1])
    except ValueError:
        limit = -1
    if not 1 <= limit <= DM_MAX_LIMIT:
        st, b = dm_error("limit: must be an integer between 1 and %d." % DM_MAX_LIMIT)
        return st, b, {}, "limit", 0
    fields = [f for f in params.get("fields", ["id"])[-1].split(",") if f]
    unknown = [f for f in fields if f not in DM_FIELDS]
    if unknown:
        st, b = dm_error("Unknown field: `%s'." % unknown[0])
        return st, b, {}, "fields", 0
    ids = [i for i in params.get("ids", [""])[-1].split(",") if i]
    if not ids:
        st, b = dm_error("ids: missing required parameter.")
        return st, b, {}, "parameter", 0
    family = params.get("family_filter", ["true"])[-1] not in ("false", "0")
    shown = tuple(fields)
    items = [dm_item(vid, shown)
             for vid in ids if known(vid) and not (family and vid.startswith("expl"))]
    doc = {"page": 1, "limit": limit, "explicit": False, "total": len(items),
           "has_more": len(items) > limit, "list": quirky(items[:limit])}
    return 200, php_json(doc), {}, None, len(ids)


def dm_item(vid, fields):
    full = {"id": vid, "title": "video %s" % vid, "duration": runtime(vid) or 0,
            "explicit": vid.startswith("expl"), "created_time": 1714564800,
            "owner": "x2fake", "url": "https://www.dailymotion.com/video/" + vid,
            "mode": "live" if vid.startswith(("live", "upc")) else "vod",
            "onair": vid.startswith("live")}
    full.update(dm_thumbs(vid))
    return {k: full[k] for k in fields if k in full}


SERVE = {"youtube": youtube, "vimeo": vimeo, "dailymotion": dailymotion}


class Handler(core.Handler):
    server_version = "fake-provider/1"
    extra_control_keys = API_KEYS
    modes = ("ok", "hang", "5xx", "429", "refuse")

    def do_GET(self):
        if self.path == "/_stats":
            with core.lock:
                core.stats["requests"] += 1
                body = json.dumps(dict(core.stats, api=dict(api, log=api["log"][-LOG_KEPT:]),
                                       settings=dict(core.settings)))
            return self.reply(200, body.encode())
        return super().do_GET()

    def do_POST(self):
        if self.path == "/_reset":
            with core.lock:
                keep = api["window_start"], api["window_calls"]
                api.clear()
                api.update(zero_api())
                api["window_start"], api["window_calls"] = keep
        if self.path == "/_window":
            with core.lock:
                api["window_start"], api["window_calls"] = 0.0, 0
            return self.reply(200, b"{}")
        if self.path.startswith("/_"):
            return super().do_POST()
        return self.data_request()

    def do_HEAD(self):
        # No API answers HEAD with data, and each is a request it counts
        # (YouTube: a unit of quota): kept in the log, answered as GET's
        # status with no body.
        return self.data_request(head=True)

    def data_request(self, head=False):
        name = self.server.owner.api
        path, _, query = self.path.partition("?")
        params = {}
        for part in query.split("&") if query else []:
            k, _, v = part.partition("=")
            params.setdefault(unquote(k), []).append(unquote(v))
        # Header names are case-insensitive (HTTP/2 sends them lower case).
        hdrs = self.headers
        entry = {"method": self.command, "path": path, "query": query, "t": time.time()}
        if name == "vimeo":
            entry["authorization"] = hdrs.get("Authorization", "")
            entry["accept"] = hdrs.get("Accept", "")
        with core.lock:
            core.stats["data_requests"] += 1
            log = api["log"]
            log.append(entry)
            if len(log) > 2 * LOG_KEPT:  # trimmed now and then, not copied every request
                del log[:-LOG_KEPT]
            mode, latency = core.settings["mode"], core.settings["latency_ms"]
        if self.fault(mode, latency):
            return
        status, body, extra, refused, n = SERVE[name](self.command, path, params, hdrs)
        with core.lock:
            api["calls"] += 1
            api["ids_asked"] += n
            api["max_ids"] = max(api["max_ids"], n)
            core.stats["ids"] += n
            a = api["answered"]
            a[str(status)] = a.get(str(status), 0) + 1
            if refused:
                api["refused"][refused] = api["refused"].get(refused, 0) + 1
        self.answer(status, b"" if head else body, extra)

    def answer(self, status, body, extra):
        """reply() with the API's own headers."""
        ctype = "application/json; charset=UTF-8" if body[:1] in (b"{", b"[") else "text/html"
        self.reply(status, body, ctype=ctype, headers=extra.items())


class Fake(core.Fake):
    def __init__(self, host, port, cport, api_name):
        super().__init__(host, port, cport, PATHS[api_name], Handler)
        self.api = api_name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True, choices=APIS)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--control-port", type=int, default=0)
    ap.add_argument("--ready-file")
    ap.add_argument("--key", default="")
    ap.add_argument("--token", default="")
    ap.add_argument("--close-after", type=int, default=0)
    a = ap.parse_args()
    core.settings.update(key=a.key, token=a.token, close_after=a.close_after)
    fake = Fake(a.host, a.port, a.control_port, a.api)
    fake.start()
    core.serve(fake, a.ready_file, os.getppid())


if __name__ == "__main__":
    main()

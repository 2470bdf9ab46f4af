"""providers_fixture.py: YouTube, Vimeo and Dailymotion as enrichd meets
them, for tests and benchmarks: each API's fake (tests/fake_providers.py)
behind the machine's nginx as TLS terminator (tls_fixture.Terminator, one
listener per API, the test's own CA), optionally a network path away
(tls_fixture.DelayProxy, one process for the three).

  Providers()            the three fakes, nginx, the PKI, a key and a token
                         (random, in files 0600 for youtube_key_file and
                         vimeo_token_file); .url(api, rtt_ms) is what
                         youtube_url / vimeo_url / dailymotion_url are set
                         to, .conf(rtt_ms, **over) the enrichd.conf lines
                         of all three sources
  ApiFake                one fake: control(), stats(), reset() (those of
                         harness.FakeUpstream), log() (every request the
                         API saw: method, path, query)
  mixed_batch(tag, n)    n records of new ids over the three providers,
                         with the ids every API answers oddly (unknown,
                         live, days-long, explicit, duplicates in the batch)
  check_lines(recs, lines)  what each output line should be: the API's
                         largest poster and its runtime for a known id,
                         the local values for an unknown one
  start_env, measure, distance_runs  an enrichd on the three sources;
                         sequential batches against several at once,
                         interleaved, with latency and enriched share; the
                         providers and a control (the aggregator protocol of
                         tls_fixture.Provider) across the same path

Every process is killed by close(), which runs even when a test fails.
Traffic stays on loopback.
"""
import os
import secrets
import subprocess
import sys
import tempfile
import time
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import harness  # noqa: E402
import tls_fixture  # noqa: E402
from tls_fixture import percentile  # noqa: E402,F401
import fake_providers  # noqa: E402

APIS = fake_providers.APIS
PROVIDER = fake_providers.PROVIDER           # api -> the records' provider code
API_OF = {v: k for k, v in PROVIDER.items()}  # provider code -> api
SOURCE_KEY = {"youtube": "yt_source", "vimeo": "vm_source", "dailymotion": "dm_source"}
URL_KEY = {"youtube": "youtube_url", "vimeo": "vimeo_url", "dailymotion": "dailymotion_url"}
# The public endpoints (the table): the default *_url keep their
# path, the tests only change scheme, host and port.
PUBLIC = {"youtube": "https://www.googleapis.com/youtube/v3/videos",
          "vimeo": "https://api.vimeo.com/videos",
          "dailymotion": "https://api.dailymotion.com/videos"}


class ApiFake(harness.FakeUpstream):
    script = os.path.join(harness.ROOT, "tests", "fake_providers.py")

    def __init__(self, api, *args):
        self.api = api
        super().__init__("--api", api, *args)

    def log(self):
        return self.stats()["api"]["log"]

    def new_window(self):
        """Vimeo's rate window starts afresh (a minute's pause)."""
        return self._req("POST", "/_window", "{}")

    def api_stats(self):
        return self.stats()["api"]


def asked_ids(api, entry):
    """The ids one logged request asked for."""
    p = parse_qs(entry["query"], keep_blank_values=True)
    if api == "youtube":
        return [i for i in ",".join(p.get("id", [])).split(",") if i]
    if api == "vimeo":
        return [u.rpartition("/")[2] for u in ",".join(p.get("uris", [])).split(",") if u]
    return [i for i in ",".join(p.get("ids", [])).split(",") if i]


def default_urls(build=None):
    """{api: the built-in default of its *_url} from `enrichd -T`, the
    issue's public endpoints where the build does not say."""
    out = dict(PUBLIC)
    exe = os.path.join(build or harness.build_dir(), "enrichd")
    d = tempfile.mkdtemp(prefix="enr-deflt-")
    try:
        conf = os.path.join(d, "empty.conf")
        open(conf, "w").close()
        p = subprocess.run([exe, "-T", "-c", conf], capture_output=True, text=True, timeout=10)
        for line in p.stdout.splitlines():
            k, _, v = line.partition("=")
            for api, key in URL_KEY.items():
                if k.strip() == key and v.split("#")[0].strip().startswith("https://"):
                    out[api] = v.split("#")[0].strip()
    finally:
        harness.discard_dir(d)
    return out


def write_secret(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, (text + "\n").encode())
    os.close(fd)


class Providers(tls_fixture.Provider):
    """tls_fixture.Provider's nginx, PKI and delay proxies, with the three
    APIs' fakes behind it, one listener each (kinds: the API names).
    http2 False: the listeners speak HTTP/1.1 alone (ALPN offers no h2),
    as a TLS-terminating egress proxy or an edge without h2 does."""

    def __init__(self, close_after=0, http2=True):
        self.dir = tempfile.mkdtemp(prefix="enr-providers-")
        os.chmod(self.dir, 0o755)  # nginx's workers (www-data) create their temp dirs here
        self.fake = self.nginx = None
        self.fakes, self.proxies = {}, {}
        # The shapes of the real ones: a Google API key, a Vimeo token.
        self.key = "AIzaSy" + secrets.token_urlsafe(24)[:33]
        self.token = secrets.token_hex(16)
        self.key_file = os.path.join(self.dir, "youtube.key")
        self.token_file = os.path.join(self.dir, "vimeo.token")
        write_secret(self.key_file, self.key)
        write_secret(self.token_file, self.token)
        self.paths = {api: urlsplit(u).path for api, u in default_urls().items()}
        try:
            self.pki = tls_fixture.Pki(os.path.join(self.dir, "pki"))
            for api in APIS:
                self.fakes[api] = ApiFake(api, "--key", self.key, "--token", self.token,
                                          "--close-after", str(close_after))
                tls_fixture.renice_threads(self.fakes[api].proc.pid, tls_fixture.REMOTE_NICE)
            self.nginx = tls_fixture.Terminator(self.dir, self.pki, 0, kinds=APIS,
                                                backends={a: f.port for a, f in self.fakes.items()},
                                                http2=http2)
        except Exception:
            self.close()
            raise

    def port(self, api, rtt_ms=None):
        """The port a client connects to for api: its listener's own, or
        (rtt_ms not None) that of one delay proxy in front of all three
        (one process: the three paths of a batch's calls are delivered
        together, as the control's one path is; three proxies woke each
        on its own, and a batch waited for the latest)."""
        if rtt_ms is None:
            return self.nginx.port[api]
        key = ("apis", rtt_ms)
        if key not in self.proxies:
            self.proxies[key] = tls_fixture.DelayProxy(
                os.path.join(self.dir, "proxy-apis-%s" % rtt_ms),
                [self.nginx.port[a] for a in APIS], rtt_ms)
        return self.proxies[key].ports[APIS.index(api)]

    def url(self, api, rtt_ms=None):
        return "https://%s:%d%s" % (tls_fixture.HOST, self.port(api, rtt_ms), self.paths[api])

    def conf(self, rtt_ms=None, **over):
        """The enrichd.conf lines of the three sources (URLs, key, token,
        CA) plus over (a value None drops the key)."""
        keys = {"upstream_ca_file": self.pki.ca, "youtube_key_file": self.key_file,
                "vimeo_token_file": self.token_file,
                # The day's budget off: what a test's YouTube calls may do
                # must not depend on the hour of the Pacific day (the budget's
                # own tests and bench set it).
                "youtube_daily_quota": 0}
        for api in APIS:
            keys[SOURCE_KEY[api]] = api
            keys[URL_KEY[api]] = self.url(api, rtt_ms)
        keys.update(over)
        return "".join("%s = %s\n" % kv for kv in keys.items() if kv[1] is not None)

    def reset(self):
        for f in self.fakes.values():
            f.reset()

    def close(self):
        for f in self.fakes.values():
            f.close()
        super().close()


# ---- batches and what enrichd must answer for them -----------------------

# Of every 20 records: 8 YouTube, 6 Vimeo, 6 Dailymotion; the specials
# (unknown, live, upcoming, days-long, explicit) in fixed slots.
SLOTS = ["yt"] * 8 + ["vm"] * 6 + ["dm"] * 6
SPECIAL = {0: "unk", 3: "live", 5: "days", 7: "upc", 8: "unk", 14: "expl", 19: "unk"}


def new_id(provider, tag, i, special=""):
    """An id of the provider's shape, unique to (tag, i), mixed case where
    the provider's ids are (output ids are lower-cased: a local poster is
    never the API's)."""
    if provider == "yt":
        return "%sYt%s-%dQ" % (special, tag, i)
    if provider == "vm":
        # Vimeo ids are numbers; the fake's unknown ones end in 404.
        n = 100000000 + (hash_tag(tag) * 100003 + i) % 800000000
        return "%d404" % n if special == "unk" else str(n)
    # A letter between tag and number: "x0_1" + 23 and "x0_12" + 3 differ.
    return "%sx%sv%dK" % (special, tag, i)


def hash_tag(tag):
    return fake_providers.crc(tag)


def mixed_batch(tag, n=200, dup_every=0):
    """n records over the three providers, ids new to (tag); every
    dup_every-th record repeats the one before (the same id twice in a
    batch must be asked once)."""
    recs = []
    for i in range(n):
        if dup_every and i % dup_every == dup_every - 1 and recs:
            recs.append(dict(recs[-1]))
            continue
        p = SLOTS[i % len(SLOTS)]
        special = SPECIAL.get(i % len(SLOTS), "")
        if special == "expl" and p != "dm":
            special = ""
        recs.append({"provider": p, "id": new_id(p, tag, i, special), "duration": 0})
    return recs


def want(rec):
    """(poster, duration) the output line must carry when the record's
    API answered, or None for an id the API does not know."""
    exp = fake_providers.expected(API_OF[rec["provider"]], rec["id"])
    if exp is None:
        return None
    poster, secs = exp
    own = rec.get("duration", 0)
    return poster, (secs if own == 0 and secs is not None else own)


def check_lines(recs, lines):
    """{'known', 'enriched', 'unknown', 'unknown_local', 'wrong': [(i, rec,
    line, want)]}: known ids carrying the API's poster and runtime, and
    unknown ids keeping their local values."""
    out = {"known": 0, "enriched": 0, "unknown": 0, "unknown_local": 0, "wrong": []}
    for i, (rec, line) in enumerate(zip(recs, lines)):
        w = want(rec)
        if w is None:
            out["unknown"] += 1
            if line.get("poster") == harness.local_poster(rec["provider"], rec["id"].lower()):
                out["unknown_local"] += 1
            continue
        out["known"] += 1
        if (line.get("poster"), line.get("duration")) == w:
            out["enriched"] += 1
        elif len(out["wrong"]) < 5:
            out["wrong"].append((i, rec, {k: line.get(k) for k in ("poster", "duration")}, w))
    return out


# ---- an enrichd on the three sources, and measuring it -------------------

def start_env(prov, name, workers, rtt_ms=None, extra="", env_vars=None, **over):
    """enrichd (max_requests 0) on prov's three sources rtt_ms away, and
    its nginx: a started harness.Env."""
    env = harness.Env(name=name)
    try:
        env.start_enrichd("workers = %d\nmax_requests = 0\n" % workers
                          + prov.conf(rtt_ms, **over) + extra, env=env_vars)
        env.start_nginx()
        # Each worker warms its connections before it first waits for a
        # batch: seconds on a sanitizer build under load.
        for pid in env.wait_workers(workers):
            harness.wait_worker_listening(pid, timeout=30)
    except Exception:
        env.close()
        raise
    return env


def control_batch(tag, i, n=150):
    """The control's batch: n new ids over the three providers, for the
    aggregator protocol of the fake upstream (150: three calls of 50, what
    its shipped max_calls_per_batch and connections allow)."""
    return [{"provider": ("yt", "vm", "dm")[k % 3], "id": "Ctl-%s-%d-%d" % (tag, i, k),
             "duration": 0} for k in range(n)]


def control_check(recs, lines):
    hit = sum(1 for rec, l in zip(recs, lines)
              if l["poster"] == harness.fake_poster(rec["provider"], rec["id"]))
    return {"known": len(recs), "enriched": hit}


def measure(runs, batches, warm):
    """Sequential batches, interleaved run by run (so that the machine's
    load weighs on each alike), each run on one kept-alive connection;
    runs: [(label, env, batch(i), check(recs, lines))]; a batch's time is the
    exchange alone (harness.post_timed).  Returns {label:
    {'lat': [ms], 'known', 'enriched', 'bad', 'degraded', 'p50', 'p99',
    'share', 'first_degraded' (the first batch's, warm-ups included),
    'windows': [(start, end) of each measured batch, epoch seconds]}}."""
    import http.client
    out = {}
    conns = {label: http.client.HTTPConnection("127.0.0.1", env.port, timeout=15)
             for label, env, _, _ in runs}
    try:
        for i in range(warm + batches):
            for label, env, make, check in runs:
                res = out.setdefault(label, {"lat": [], "known": 0, "enriched": 0, "bad": 0,
                                             "degraded": 0, "windows": []})
                recs = make(i)
                w0 = time.time()
                st, h, lines, ms = harness.post_timed(env, recs, conn=conns[label])
                w1 = time.time()
                if i == 0:  # the first batch after start
                    res["first_degraded"] = harness.degraded(h) if st == 200 else len(recs)
                if i < warm:
                    continue
                res["lat"].append(ms)
                res["windows"].append((w0, w1))
                if st != 200 or len(lines) != len(recs):
                    res["bad"] += 1
                    continue
                c = check(recs, lines)
                res["known"] += c["known"]
                res["enriched"] += c["enriched"]
                res["degraded"] += harness.degraded(h)
    finally:
        for c in conns.values():
            c.close()
    for res in out.values():
        res["p50"] = percentile(res["lat"], 0.5)
        res["p99"] = percentile(res["lat"], 0.99)
        res["share"] = res["enriched"] / max(1, res["known"])
    return out


# Vimeo's rate limit while measuring latency: sequential batches of new
# ids at 50 ms make ~700 Vimeo calls a minute, over the fake's default
# (600, what a plan may allow), and enrichd rightly slows Vimeo down near
# the limit and pauses it at the 429, which the latency runs must not
# measure (test_providers' 429 test does).
RUN_RATE_LIMIT = 1000000


def far_time(res, requests):
    """Each measured batch of res (measure()'s) split at the far end:
    [(the batch's ms, its slowest call's ms as the APIs' TLS terminator
    timed it, of which the fake's answer as the terminator waited for it)],
    requests: the terminator's log lines of the batch's APIs
    (tls_fixture.Terminator.requests), a call counted in the batch whose
    window holds it (nginx logs to the millisecond)."""
    reqs = sorted(((x["at"] - x["time"], x["at"], x["time"], x.get("upstream") or 0.0)
                   for x in requests))
    out, k = [], 0
    for (w0, w1), ms in zip(res["windows"], res["lat"]):
        while k < len(reqs) and reqs[k][0] < w0 - 0.001:
            k += 1
        calls = [(t, u) for a, b, t, u in reqs[k:] if a <= w1 and b <= w1 + 0.001]
        t, u = max(calls) if calls else (0.0, 0.0)
        out.append((ms, 1000 * t, 1000 * u))
    return out


def split_p50(res, requests):
    """(the APIs' own time: the median of each batch's slowest call, the
    rest: the median of each batch's time less it, the fakes' part of the
    first: the median of the slowest call's time in its fake; ms): the
    rest is the network path, nginx both sides, enrichd and the client."""
    split = far_time(res, requests)
    return (percentile([f for _, f, _ in split], 0.5),
            percentile([ms - f for ms, f, _ in split], 0.5),
            percentile([u for _, _, u in split], 0.5))


def distance_runs(prov, agg, rtt_ms, workers):
    """Two enrichd: the three APIs rtt_ms away (the defaults plus sources,
    URLs, key, token, CA), and the control, the aggregator protocol over
    the same path (tls_fixture.Provider), the defaults plus its URL and CA.
    Vimeo's rate window starts afresh and its limit is RUN_RATE_LIMIT a
    window (until a control sets it again)."""
    prov.fakes["vimeo"].control(rate_limit=RUN_RATE_LIMIT)
    prov.fakes["vimeo"].new_window()
    a = start_env(prov, "prov-far", workers, rtt_ms)
    b = harness.Env(name="prov-ctl")
    try:
        b.start_enrichd("workers = %d\nmax_requests = 0\nupstream_url = %s\n"
                        "upstream_ca_file = %s\n"
                        % (workers, agg.url("https", rtt_ms), agg.pki.ca))
        b.start_nginx()
        for pid in b.wait_workers(workers):
            harness.wait_worker_listening(pid, timeout=30)
    except Exception:
        a.close()
        b.close()
        raise
    return a, b

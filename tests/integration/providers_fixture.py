"""providers_fixture.py: YouTube, Vimeo and Dailymotion as enrichd meets
them, for tests and benchmarks: each API's fake (tests/fake_providers.py)
behind the machine's nginx as TLS terminator (tls_fixture.Terminator, one
listener per API, the test's own CA), optionally a network path away
(tls_fixture.DelayProxy).

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

Every process is killed by close(), which runs even when a test fails.
Traffic stays on loopback.
"""
import os
import secrets
import subprocess
import sys
import tempfile
from urllib.parse import urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import harness  # noqa: E402
import tls_fixture  # noqa: E402
import fake_providers  # noqa: E402

APIS = fake_providers.APIS
PROVIDER = fake_providers.PROVIDER           # api -> the records' provider code
API_OF = {v: k for k, v in PROVIDER.items()}  # provider code -> api
SOURCE_KEY = {"youtube": "yt_source", "vimeo": "vm_source", "dailymotion": "dm_source"}
URL_KEY = {"youtube": "youtube_url", "vimeo": "vimeo_url", "dailymotion": "dailymotion_url"}
# The public endpoints (the table): the default *_url keep their
# path, the tests only change scheme, host and port.
PUBLIC = {"youtube": "https://www.googleapis.com/youtube/v3/videos",
          "vimeo": "https://api.vimeo.com/videos", "dailymotion": "https://api.dailymotion.com/videos"}


class ApiFake(harness.FakeUpstream):
    script = os.path.join(harness.ROOT, "tests", "fake_providers.py")

    def __init__(self, api, *args):
        self.api = api
        super().__init__("--api", api, *args)

    def log(self):
        return self.stats()["api"]["log"]

    def api_stats(self):
        return self.stats()["api"]


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


class Providers:
    def __init__(self, close_after=0):
        self.dir = tempfile.mkdtemp(prefix="enr-providers-")
        os.chmod(self.dir, 0o755)  # nginx's workers (www-data) create their temp dirs here
        self.fakes, self.nginx, self.proxies = {}, None, {}
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
                                                http2=True)
        except Exception:
            self.close()
            raise

    def port(self, api, rtt_ms=None):
        if rtt_ms is None:
            return self.nginx.port[api]
        if (api, rtt_ms) not in self.proxies:
            self.proxies[(api, rtt_ms)] = tls_fixture.DelayProxy(
                os.path.join(self.dir, "proxy-%s-%s" % (api, rtt_ms)), self.nginx.port[api], rtt_ms)
        return self.proxies[(api, rtt_ms)].port

    def url(self, api, rtt_ms=None):
        return "https://%s:%d%s" % (tls_fixture.HOST, self.port(api, rtt_ms), self.paths[api])

    def conf(self, rtt_ms=None, **over):
        """The enrichd.conf lines of the three sources (URLs, key, token,
        CA) plus over (a value None drops the key)."""
        keys = {"upstream_ca_file": self.pki.ca, "youtube_key_file": self.key_file,
                "vimeo_token_file": self.token_file}
        for api in APIS:
            keys[SOURCE_KEY[api]] = api
            keys[URL_KEY[api]] = self.url(api, rtt_ms)
        keys.update(over)
        return "".join("%s = %s\n" % kv for kv in keys.items() if kv[1] is not None)

    def reset(self):
        for f in self.fakes.values():
            f.reset()

    def close(self):
        for p in self.proxies.values():
            p.close()
        if self.nginx is not None:
            self.nginx.close()
        for f in self.fakes.values():
            f.close()
        harness.discard_dir(self.dir)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


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
    return "%sx%s%dK" % (special, tag, i)


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

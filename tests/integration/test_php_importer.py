#!/usr/bin/env python3
"""test_php_importer.py: the PHP of the pipeline's docs, as its authors
would run it: PHP's own curl and PDO SQLite, through the real nginx and
enrichd.  Two parts: docs/rejected.md's importer, and docs/operations.md's
Retry-After client (test_php_retry_after).

The ```php block is taken from the document as it is (so the document
cannot drift from what is tested), checked by `php -l`, and driven by a
script of the test's own: a SQLite table of videos whose first 150 rows
can never pass (the stall the document describes: an importer that
re-selects `enriched_at IS NULL` 150 at a time posts the same 150 rejects
forever), then good rows with a few bad ones scattered.  The select of
the document's last comment runs until no row is left, bounded in rounds.

Pass: it ends within the rounds the rows need (no stall); every bad row
has rejected_at and no hash; every good row has enriched_at and the hash
enrichd gives that record posted alone (so line k of the body was paired
with the right row); nothing is left unselected.
"""
# Side by side with the others on every build: nothing here is timed, and
# the 30 PHP clients that must arrive at once to be refused wait at a gate
# the test opens once every one has started, so they arrive at once
# however slowly a loaded machine starts them.
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

DOC = os.path.join(harness.ROOT, "docs", "rejected.md")
HEAD_BAD = 150     # a whole batch of rejects at the head of the select
GOOD = 260
SCATTERED = (3, 40, 41, 42, 199)  # good-row positions replaced by bad ones
MAX_ROUNDS = 12    # (HEAD_BAD + GOOD) / 150 rounds, rounded up, is 3

DRIVER = r"""
$db = new PDO('sqlite:' . $argv[1]);
$db->setAttribute(PDO::ATTR_ERRMODE, PDO::ERRMODE_EXCEPTION);
$select = $db->prepare('SELECT id, provider, external_id, title FROM videos
                        WHERE enriched_at IS NULL AND rejected_at IS NULL ORDER BY id LIMIT 150');
$rounds = 0;
for (; $rounds < (int)$argv[3]; $rounds++) {
    $select->execute();
    $rows = $select->fetchAll(PDO::FETCH_ASSOC);
    if (!$rows) break;
    enrich_batch($db, $rows, $argv[2]);
}
echo json_encode(['rounds' => $rounds]), "\n";
"""


def php_block(doc=DOC):
    with open(doc) as f:
        text = f.read()
    m = re.search(r"^```php\n(.*?)^```", text, re.S | re.M)
    return m.group(1) if m else None


def seed(path):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE videos (id INTEGER PRIMARY KEY, provider TEXT, external_id TEXT, "
               "title TEXT, hash TEXT, enriched_at TEXT, rejected_at TEXT)")
    rows = []
    for i in range(HEAD_BAD):  # a provider the contract does not know, or an empty id
        rows.append(("zz", "Bad%d" % i, "bad %d" % i) if i % 2 else ("yt", "", "no id %d" % i))
    for i in range(GOOD):
        if i in SCATTERED:
            rows.append(("nope", "Odd%d" % i, "odd %d" % i))
        else:
            rows.append((("yt", "vm", "dm")[i % 3], " Vid%04d " % i, "Title %d \u00c9t\u00e9" % i))
    db.executemany("INSERT INTO videos (provider, external_id, title) VALUES (?, ?, ?)", rows)
    db.commit()
    db.close()
    return rows


def test_php_importer(r):
    if not r.check(shutil.which("php") is not None, "php (php-cli) is installed: scripts/deps.sh test"):
        return
    code = php_block()
    if not r.check(code is not None and "function enrich_batch" in code,
                   "docs/rejected.md has the ```php importer"):
        return
    with harness.Env(name="php-importer") as env:
        script = os.path.join(env.dir, "importer.php")
        with open(script, "w") as f:
            f.write(code.rstrip() + "\n" + DRIVER)
        lint = subprocess.run(["php", "-l", script], capture_output=True, text=True, timeout=30)
        r.check(lint.returncode == 0, "php -l: %s" % (lint.stdout + lint.stderr).strip()[:300])
        dbpath = os.path.join(env.dir, "videos.sqlite")
        rows = seed(dbpath)
        env.start_enrichd("workers = 2\n")
        env.start_nginx()
        url = "http://127.0.0.1:%d/v1/enrich" % env.port
        p = subprocess.run(["php", "-d", "display_errors=stderr", script, dbpath, url,
                            str(MAX_ROUNDS)], capture_output=True, text=True, timeout=120)
        r.check(p.returncode == 0, "the importer ran: exit %d %s" % (p.returncode, p.stderr[-600:]))
        try:
            rounds = json.loads(p.stdout.strip().splitlines()[-1])["rounds"]
        except (ValueError, IndexError, KeyError):
            rounds = None
        need = -(-len(rows) // 150)
        r.check(rounds is not None and rounds <= need,
                "no stall: %r rounds of 150 for %d rows (%d of them rejects at the head)"
                % (rounds, len(rows), HEAD_BAD))
        db = sqlite3.connect(dbpath)
        got = db.execute("SELECT id, provider, external_id, title, hash, enriched_at, rejected_at "
                         "FROM videos ORDER BY id").fetchall()
        db.close()
        bad = [g for g in got if g[1] not in ("yt", "vm", "dm") or g[2] == ""]
        good = [g for g in got if g not in bad]
        r.check(len(bad) == HEAD_BAD + len(SCATTERED) and all(g[6] and not g[5] and not g[4]
                                                              for g in bad),
                "every rejected row marked rejected_at, none enriched: %d of %d"
                % (sum(1 for g in bad if g[6] and not g[5]), len(bad)))
        r.check(all(g[5] and not g[6] for g in good),
                "every good row enriched: %d of %d" % (sum(1 for g in good if g[5]), len(good)))
        # Each stored hash is enrichd's for that record alone: lines and rows paired right.
        wrong = []
        for g in good:
            one = json.dumps([{"provider": g[1], "id": g[2], "title": g[3]}],
                             ensure_ascii=False).encode()
            st, _, body = env.request("/v1/enrich", one)
            want = json.loads(body.splitlines()[0])["hash"] if st == 200 and body.strip() else None
            if want is None or want != g[4]:
                wrong.append((g[0], g[4], want))
        r.check(not wrong, "every stored hash is the one enrichd gives the record alone: %d wrong %r"
                % (len(wrong), wrong[:3]))


RETRY_DOC = os.path.join(harness.ROOT, "docs", "operations.md")
CLIENTS = 30
TRIES = 8

RETRY_DRIVER = r"""
mt_srand(getmypid());
// All at once, however long PHP took to start: the test holds the FIFO
// open (so this open does not block) until every client said it is ready,
// then closes it, and every read here ends at once.
$gate = fopen($argv[4], 'r');
fwrite(STDOUT, "ready\n");
fflush(STDOUT);
fread($gate, 1);
fclose($gate);
$ids = [];
for ($k = 0; $k < 20; $k++)
    $ids[] = ['provider' => 'yt', 'id' => sprintf('Rt%s-%d', $argv[2], $k)];
[$status, $headers, $body, $tries] = post_batch($argv[1], json_encode($ids), (int)$argv[3]);
echo json_encode(['status' => $status, 'tries' => $tries,
                  'lines' => substr_count((string)$body, "\n")]), "\n";
"""


def test_php_retry_after(r):
    """The Retry-After client of docs/operations.md, 30 processes at once
    against two workers and a provider at 300 ms: refused, they come back,
    and every one is answered."""
    if shutil.which("php") is None:
        r.check(False, "php (php-cli) is installed: scripts/deps.sh test")
        return
    code = php_block(RETRY_DOC)
    if not r.check(code is not None and "function post_batch" in code,
                   "docs/operations.md has the ```php Retry-After client"):
        return
    with harness.FakeUpstream() as fake, harness.Env(name="php-retry") as env:
        fake.control(latency_ms=300)
        script = os.path.join(env.dir, "retry.php")
        with open(script, "w") as f:
            f.write(code.rstrip() + "\n" + RETRY_DRIVER)
        env.start_enrichd("workers = 2\n" + harness.upstream_conf(
            fake, upstream_timeout_ms=1000, ids_per_call=20, breaker_failures=1000))
        env.start_nginx()
        url = "http://127.0.0.1:%d/v1/enrich" % env.port
        gate = os.path.join(env.dir, "gate")
        os.mkfifo(gate)
        held = os.open(gate, os.O_RDWR)  # a writer: the clients' opens return, their reads wait
        try:
            procs = [subprocess.Popen(["php", script, url, str(i), str(TRIES), gate],
                                      stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True) for i in range(CLIENTS)]
            ready = sum(1 for p in procs if p.stdout.readline() == "ready\n")
        finally:
            os.close(held)  # the gate opens: end of file for every client at once
        r.check(ready == CLIENTS, "every client started and waited at the gate: %d of %d"
                % (ready, CLIENTS))
        outs = []
        for p in procs:
            try:
                out, err = p.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            try:
                outs.append(json.loads(out.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                outs.append({"status": None, "err": err[-200:]})
        sts = [o.get("status") for o in outs]
        print("php retry: tries per client %r" % sorted(o.get("tries") for o in outs))
        retried = [o for o in outs if o.get("tries", 1) > 1]
        r.check(all(o.get("status") == 200 and o.get("lines") == 20 for o in outs),
                "every client answered 200 with its 20 lines within %d tries: %r"
                % (TRIES, {s: sts.count(s) for s in set(map(str, sts))}))
        r.check(len(retried) >= CLIENTS // 3,
                "most were refused first and came back after Retry-After: %d retried, tries %r"
                % (len(retried), sorted(o.get("tries") for o in outs)))
        with open(env.access_log) as f:
            logged = [json.loads(l) for l in f if l.strip()]
        n503 = sum(1 for x in logged if str(x.get("status")) == "503")
        r.check(n503 == sum(o.get("tries", 1) - 1 for o in outs),
                "each retry answers one 503 in nginx's log: %d logged, %d retries"
                % (n503, sum(o.get("tries", 1) - 1 for o in outs)))


def main():
    harness.run_tests(test_php_importer, test_php_retry_after)


if __name__ == "__main__":
    main()

#!/usr/bin/env node
// oracle.mjs: the engine's lower-casing and NFKC (CONTRACT rules 10, 12)
// held to Node's toLowerCase() and normalize("NFKC") (ICU, Unicode 17.0),
// through the real CLI: batches of records are piped to --cmd and each
// output line's id and title compared with what Node makes of the same
// input after the contract's trimming and white-space folding (rules 4.2,
// 7.2, 8).
//
//   node tests/unicode/oracle.mjs --cmd build/enrich            # every code point, every pair
//   node tests/unicode/oracle.mjs --cmd build/enrich --random 1000000 --seed 7
//
// Exhaustive mode: one record for each code point U+0000..U+10FFFF (lone
// surrogates included) whose title is the code point alone and whose id
// holds it alone, between a cased letter and a sigma, and after a sigma;
// and one for each canonical composition pair (found with Node's own
// NFD/NFC, Hangul L+V and LV+T included).  Random mode: strings biased to
// combining marks, Hangul, sigma and cased neighbours, the code points that
// changed after Unicode 15.0, white space and lone surrogates.  Ends with
// "N passed, M failed"; exit 1 on any failure.
import { spawn } from "node:child_process";

const BATCH = 20000; // records per run of the CLI
// Runs of the CLI at once: Node makes the next batch and checks the last
// one while the CLI works on another (both cores busy, not one at a time).
const IN_FLIGHT = 2;
const SHOW = 20; // failures printed

function args() {
    const a = { cmd: null, random: 0, seed: 1 };
    for (let i = 2; i < process.argv.length; i++) {
        const k = process.argv[i];
        if (k === "--cmd") a.cmd = process.argv[++i];
        else if (k === "--random") a.random = Number(process.argv[++i]);
        else if (k === "--seed") a.seed = Number(process.argv[++i]);
        else throw new Error("unknown argument " + k);
    }
    if (!a.cmd) throw new Error("usage: oracle.mjs --cmd PATH [--random N] [--seed S]");
    return a;
}

// Rule 8's 25 code points.
const WS = "[\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]";
const RUNS = new RegExp(WS + "+", "g");
const ENDS = new RegExp("^" + WS + "+|" + WS + "+$", "g");

const wantId = (s) => s.replace(ENDS, "").toLowerCase();
const wantTitle = (s) => s.normalize("NFKC").replace(RUNS, " ").replace(ENDS, "");

const cp = (n) => (n >= 0xd800 && n <= 0xdfff ? String.fromCharCode(n) : String.fromCodePoint(n));
const hex = (s) =>
    Array.from({ length: s.length }, (_, i) => s.charCodeAt(i).toString(16).padStart(4, "0")).join(" ");

// Canonical composition pairs, from Node's own normalizer.
function pairs() {
    const out = [];
    for (let n = 0; n < 0x110000; n++) {
        if (n >= 0xd800 && n <= 0xdfff) continue;
        const c = String.fromCodePoint(n);
        const d = [...c.normalize("NFD")];
        if (d.length === 2 && (d[0] + d[1]).normalize("NFC") === c) out.push([d[0], d[1]]);
        else if (n >= 0xac00 && n <= 0xd7a3 && d.length === 3)
            out.push([(d[0] + d[1]).normalize("NFC"), d[2]]); // LV + T
    }
    return out;
}

// Unicode 15.0 to 17.0 differences (CONTRACT rule 17.3) and the scripts
// they belong to: drawn from often by the random strings.
const CHANGED = [
    [0x0295, 0x0295], [0x0897, 0x0897], [0x1ac0, 0x1aeb], [0x1c89, 0x1c8a], [0xa7cb, 0xa7dc],
    [0xa7f1, 0xa7f1], [0x105c0, 0x105f3], [0x10d40, 0x10d8f], [0x10ec2, 0x10efc],
    [0x11380, 0x113e2], [0x1171e, 0x1171e], [0x11b60, 0x11b67], [0x11dd9, 0x11dd9],
    [0x11f5a, 0x11f5a], [0x16100, 0x16139], [0x16d40, 0x16d79], [0x16ea0, 0x16edf],
    [0x16ff2, 0x16ff3], [0x1ccd6, 0x1ccf9], [0x1e5d0, 0x1e5ff], [0x1e6c0, 0x1e6ff],
];

function rng(seed) {
    let s = seed >>> 0 || 1;
    return () => {
        s ^= s << 13;
        s >>>= 0;
        s ^= s >>> 17;
        s ^= s << 5;
        s >>>= 0;
        return s / 4294967296;
    };
}

function pools(pairList) {
    const marks = [], cased = [], ignorable = [];
    for (let n = 0; n < 0x110000; n++) {
        if (n >= 0xd800 && n <= 0xdfff) continue;
        const c = String.fromCodePoint(n);
        if (/\p{M}/u.test(c)) marks.push(c);
        if (/\p{Cased}/u.test(c)) cased.push(c);
        if (/\p{Case_Ignorable}/u.test(c)) ignorable.push(c);
    }
    const changed = [];
    for (const [a, b] of CHANGED) for (let n = a; n <= b; n++) changed.push(cp(n));
    const hangul = [];
    for (let n = 0x1100; n <= 0x11ff; n++) hangul.push(cp(n));
    for (let n = 0; n < 400; n++) hangul.push(cp(0xac00 + n * 28), cp(0xac00 + n * 28 + 1 + (n % 27)));
    const firsts = pairList.map((p) => p[0]), seconds = pairList.map((p) => p[1]);
    const ws = [..."\t\n \u00a0\u1680\u2000\u200a\u2028\u202f\u3000\ufeff\u00a8\ufdfa"];
    const sigma = ["\u03a3", "\u03a3", "\u03c3", "\u03c2", "A", "a", "'", ".", "\u0345", "\u02b0"];
    const lone = ["\ud800", "\udbff", "\udc00", "\udfff"];
    return [marks, cased, ignorable, changed, hangul, firsts, seconds, ws, sigma, lone];
}

function randomString(r, p) {
    const len = 1 + Math.floor(r() * 12);
    let s = "";
    for (let i = 0; i < len; i++) {
        const k = r();
        let pool;
        if (k < 0.06) {
            s += cp(Math.floor(r() * 0x110000));
            continue;
        }
        if (k < 0.3) pool = p[0]; // marks
        else if (k < 0.4) pool = p[1];
        else if (k < 0.46) pool = p[2];
        else if (k < 0.6) pool = p[3]; // changed since 15.0
        else if (k < 0.7) pool = p[4]; // Hangul
        else if (k < 0.78) pool = p[5];
        else if (k < 0.84) pool = p[6];
        else if (k < 0.88) pool = p[7];
        else if (k < 0.98) pool = p[8]; // sigma and its neighbours
        else pool = p[9];
        s += pool[Math.floor(r() * pool.length)];
    }
    return s;
}

let passed = 0, failed = 0;

function fail(what, rec, got, want) {
    failed++;
    if (failed <= SHOW)
        console.log(`FAIL ${what} of [${hex(what === "id" ? rec.id : rec.title)}]: got [${hex(got)}] want [${hex(want)}]`);
}

// Runs the CLI on recs; resolves once its output is checked.
function runBatch(cmd, recs) {
    const body = JSON.stringify(recs.map((r) => ({ provider: "yt", id: r.id, title: r.title })));
    return new Promise((resolve) => {
        const p = spawn(cmd, [], { stdio: ["pipe", "pipe", "pipe"] });
        const out = [], err = [];
        p.stdout.on("data", (d) => out.push(d));
        p.stderr.on("data", (d) => err.push(d));
        p.stdin.on("error", () => {}); // a CLI that died early: its exit status says so
        p.on("close", (status) => {
            check(cmd, recs, status, Buffer.concat(out), Buffer.concat(err));
            resolve();
        });
        p.stdin.end(body);
    });
}

function check(cmd, recs, status, stdout, stderr) {
    if (status !== 0) {
        failed += recs.length;
        console.log(`FAIL ${cmd} exited ${status}: ${String(stderr).slice(0, 200)}`);
        return;
    }
    const lines = stdout.toString("utf8").split("\n");
    if (lines.length !== recs.length + 1) {
        failed += recs.length;
        console.log(`FAIL ${lines.length - 1} lines for ${recs.length} records`);
        return;
    }
    for (let i = 0; i < recs.length; i++) {
        const o = JSON.parse(lines[i]), r = recs[i];
        const wi = wantId(r.id), wt = wantTitle(r.title);
        if (o.id === wi) passed++;
        else fail("id", r, o.id, wi);
        if (o.title === wt) passed++;
        else fail("title", r, o.title, wt);
    }
}

async function main() {
    const a = args();
    if (process.versions.unicode !== "17.0") {
        console.log(`FAIL this Node has Unicode ${process.versions.unicode} (ICU ${process.versions.icu}), the tables 17.0`);
        console.log("0 passed, 1 failed");
        process.exit(1);
    }
    const t0 = Date.now();
    const pairList = pairs();
    let recs = [];
    const running = [];
    // Starts a run of the CLI on recs; waits for the oldest when IN_FLIGHT run.
    const flush = async () => {
        running.push(runBatch(a.cmd, recs));
        recs = [];
        if (running.length >= IN_FLIGHT) await running.shift();
    };
    if (a.random > 0) {
        const r = rng(a.seed), p = pools(pairList);
        for (let i = 0; i < a.random; i++) {
            const s = randomString(r, p);
            // an id that trims to nothing is skipped (rule 4.3): "Q|" keeps it
            recs.push({ id: "Q|" + s, title: s });
            if (recs.length >= BATCH) await flush();
        }
    } else {
        for (let n = 0; n < 0x110000; n++) {
            const c = cp(n);
            recs.push({ id: "Q|" + c + "|A" + c + "\u03a3|A\u03a3" + c, title: c });
            if (recs.length >= BATCH) await flush();
        }
        for (const [x, y] of pairList) {
            recs.push({ id: "Q|" + x + y, title: x + y });
            if (recs.length >= BATCH) await flush();
        }
    }
    if (recs.length) await flush();
    await Promise.all(running);
    console.log(
        `${a.random > 0 ? a.random + " random strings (seed " + a.seed + ")" : "0x110000 code points and " + pairList.length + " composition pairs"}, ${(Date.now() - t0) / 1000} s`
    );
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(failed ? 1 : 0);
}

main();

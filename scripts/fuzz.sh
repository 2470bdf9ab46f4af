#!/bin/sh
# make fuzz: builds each libFuzzer target in tests/fuzz with ASan+UBSan and
# runs it for $1 seconds (default 60) on a corpus seeded from the
# conformance vectors, the shipped config and hand-written upstream
# replies and trace lines.  Any crash, leak or sanitizer report fails,
# and so does an input that takes more memory than a parser of ours may:
# every target runs under -rss_limit_mb=$FUZZ_RSS_MB (256) and
# -malloc_limit_mb=$FUZZ_MALLOC_MB (64), with ASan's quarantine kept small
# so the limit measures the parser, not the sanitizer.  A parser whose
# memory follows its input (the json-c tree the upstream reply parser once
# was: ~250 bytes per "{}" item) trips them.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default: all targets)
#
# Targets, one per parser the project owns:
#   engine          JSON batch reader + record rules (src/engine/engine.c & co.)
#   numtext         number text <-> double (src/engine/numfmt.c)
#   config          configuration text (enr_config_parse, src/base/config.c)
#   upstream_reply  upstream reply JSON (enr_upstream_reply_parse)
#   trace           enrich-replay's trace lines (enr_replay_trace_parse)
#   statustext      `enrichd status`'s document reader (enr_status_text_parse)
#   scan            the wide string scanners against the portable one (src/engine/scan.c)
#   fast            the engine's fast paths against its slow paths (enr_engine_set_slow)
#   fcgi_body       enrichd's FastCGI record reader, then libfcgi on what it lets through, against a plain record reading (src/fcgi/fcgi_body.c, fcgi_guard.c)
#   retry_after     a provider's Retry-After against glibc's strptime (enr_retry_after_parse)
#   upstream_header upstream_header lines, the secret's header and query, redaction (src/base/secret.c, src/upstream/upsecret.c)
#   msec            nginx's $msec in ENRICHD_QUEUED_AT against a plain reading (src/pool/shed.c)
#   api_youtube     YouTube's answers and error bodies against json-c's tree (src/upstream/api_youtube.c)
#   api_vimeo       Vimeo's, the same way (src/upstream/api_vimeo.c)
#   api_dailymotion Dailymotion's, the same way (src/upstream/api_dailymotion.c)
#   api_duration    ISO 8601 durations against the grammar, the Pacific midnight (src/upstream/api_time.c)
#   store_value     a value read back from the shared store, checked as a provider's answer, and its round trip (enr_store_value_decode)
#   store_reply     the store's MGET reply from raw bytes: hiredis's reader under the store's bounds, then the values (src/upstream/store.c, store_cache.c)
#   store_addr      the shared_store address and key prefix, and the address's round trip (src/base/storeaddr.c)
#
# Time: $1 is per target, FUZZ_JOBS (default 1) targets at a time, so the
# run takes about 19 x $1 / FUZZ_JOBS seconds plus the build (each source
# compiled once, FUZZ_JOBS at a time).  CI runs `make fuzz FUZZ_SECONDS=20
# FUZZ_JOBS=2`: every target gets its full 20 s on a corpus seeded the
# same way (a time box cut short loses coverage: at 10 s most targets
# were still finding features they found by 20 s; only msec's 40 edges
# are all found while the seeds load).
#
# FUZZ_STEP=build only builds the targets, FUZZ_STEP=run only runs them
# (built before): CI builds them while the suites run, so that the time
# boxes, beside the fleet test, begin with it.
set -eu
SECONDS_EACH=${1:-60}
JOBS=${FUZZ_JOBS:-1}
RSS_MB=${FUZZ_RSS_MB:-256}
MALLOC_MB=${FUZZ_MALLOC_MB:-64}
ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=16:malloc_context_size=8}
export ASAN_OPTIONS
[ $# -gt 0 ] && shift
TARGETS=${*:-engine numtext config upstream_reply trace statustext scan fast fcgi_body retry_after upstream_header msec api_youtube api_vimeo api_dailymotion api_duration store_value store_reply store_addr}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/build-fuzz
mkdir -p "$OUT"
CFLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I$ROOT/src $(pkg-config --cflags libcrypto json-c hiredis)"
S=$ROOT/src
# Every file of the engine layer (it uses only buf.c below it).
ENGINE="$(echo "$S"/engine/*.c) $S/base/buf.c"
ENGINE_LIBS="$(pkg-config --libs libcrypto) -lm"
# The providers' APIs: the table names every row, and the rows share one scanner.
API="$(echo "$S"/upstream/api*.c) $S/upstream/reply_scan.c $S/base/jscan.c $S/upstream/upstream_reply.c $S/upstream/quota.c $S/base/upfail.c $S/base/log.c $S/base/buf.c"

# The shared store's values and replies: the answer's check is the
# providers' (reply_scan.c); a key names its provider (the engine's) and source.
STORE="$S/upstream/store.c $S/upstream/store_cache.c $S/base/storeaddr.c $S/base/secret.c $S/base/confsource.c $(echo "$S"/engine/*.c) $API"

# Each target: the sources it needs, its libraries, its longest input.
target_srcs() {
    case $1 in
    engine | numtext | fast) echo "$ENGINE" ;;
    config) echo "$S/base/config.c $S/base/conftable.c $S/base/confhint.c $S/ops/confcheck.c $S/base/sockaddr.c $S/base/allow.c $S/base/safedir.c $S/upstream/upstream_url.c $S/upstream/curlapi.c $S/base/secret.c $S/base/config_cred.c $S/base/confsource.c $S/base/storeaddr.c" ;;
    retry_after) echo "$S/upstream/quota.c $S/base/upfail.c $S/base/log.c" ;;
    upstream_header) echo "$S/base/secret.c $S/upstream/upsecret.c" ;;
    upstream_reply) echo "$S/upstream/upstream_reply.c $S/upstream/reply_scan.c $S/base/jscan.c $S/base/buf.c" ;;
    trace) echo "$S/replay/replay_trace.c $S/base/jscan.c" ;;
    statustext) echo "$S/ops/statustext.c $S/ops/statusmodel.c $S/upstream/breaker.c $S/base/upcounters.c $S/upstream/budget.c $S/upstream/store_lease.c $S/base/safedir.c $S/base/statefile.c $API" ;;
    scan) echo "$S/engine/scan.c" ;;
    fcgi_body) echo "$S/fcgi/fcgi_body.c $S/fcgi/fcgi_guard.c $S/base/buf.c" ;;
    msec) echo "$S/pool/shed.c" ;;
    api_*) echo "$API" ;;
    store_value | store_reply) echo "$STORE" ;;
    store_addr) echo "$S/base/storeaddr.c" ;;
    *) echo "unknown fuzz target $1" >&2; exit 2 ;;
    esac
}
target_libs() {
    case $1 in
    engine | numtext | fast) echo "$ENGINE_LIBS" ;;
    config) echo "-lm -ldl $(pkg-config --libs libsystemd)" ;;
    upstream_reply) echo "$(pkg-config --libs json-c) -lm" ;;
    trace) echo "-lm" ;;
    statustext) echo "$(pkg-config --libs json-c)" ;;
    scan) echo "" ;;
    fcgi_body) echo "-lfcgi" ;;
    retry_after | upstream_header | msec) echo "" ;;
    api_*) echo "$(pkg-config --libs json-c) -lm" ;;
    store_value | store_reply) echo "$(pkg-config --libs json-c hiredis) $ENGINE_LIBS" ;;
    store_addr) echo "" ;;
    esac
}
target_max_len() {
    case $1 in
    config) echo 16384 ;;
    retry_after) echo 64 ;;
    upstream_header) echo 2048 ;;
    upstream_reply) echo 65536 ;;
    trace) echo 65536 ;;
    statustext) echo 65536 ;;
    fast) echo 65536 ;; # four engine runs an input: short ones, more of them
    fcgi_body) echo 16384 ;; # a script of 3 bytes a record builds streams up to 1 MB
    msec) echo 64 ;;
    api_youtube | api_vimeo | api_dailymotion) echo 65536 ;;
    api_duration) echo 128 ;;
    store_value) echo 4096 ;; # ENR_STORE_VALUE_MAX and more
    store_reply) echo 65536 ;;
    store_addr) echo 512 ;;
    *) echo 500000 ;;
    esac
}

seed() { # seed CORPUS NAME TEXT: one seed file, written once
    [ -e "$1/seed-$2" ] || printf '%b' "$3" > "$1/seed-$2"
}

seeds_engine() { # CORPUS TARGET: the engine's readers: the batch, number text, the wide scanners
    corpus=$1
    case $2 in
    engine | fast)
        cp -n "$ROOT"/tests/vectors/*.in.json "$corpus"/ 2>/dev/null || true
        ;;
    numtext)
        for s in 0x1F 1e400 " 12 " 0.000001 5e-324 -0 .5 5. 0b101 Infinity; do
            printf '%s' "$s" > "$corpus/seed-$(printf '%s' "$s" | od -An -tx1 | tr -d ' \n')"
        done
        ;;
    scan)
        cp -n "$ROOT"/tests/vectors/*.in.json "$corpus"/ 2>/dev/null || true
        seed "$corpus" mixed 'abc\\"def\001ghi\303\251\342\202\254 0123456789abcdef\\u00e9\\uZZ12\\n0123456789abcdef"\\\\x\\q\\'
        seed "$corpus" uesc '\\u30cb\\u30e5\\u30fc\\u30b9 0123456789abcdef0123456789abcdef0123456789abcdef0123\\u00e9\\u00E9x\\u12\\u0e40\\u0e1e\\u0e25\\u0e07 \\ud83c\\udfac\\\\u0041\\u004g"'
        ;;
    esac
}

seeds_text() { # CORPUS TARGET: the daemon's own text formats: configuration, enrich-replay's trace, `enrichd status`'s document
    corpus=$1
    case $2 in
    config)
        cp "$ROOT/conf/enrichd.conf" "$corpus/seed-shipped"
        seed "$corpus" empty ''
        seed "$corpus" tcp 'listen = 127.0.0.1:9000\nstatus_listen = 127.0.0.1:9001\nworkers = 2\nmin_ready_workers = 2\n'
        seed "$corpus" sizes 'max_body_bytes = 4m\ncache_bytes = 1G\nmax_requests = 0\nmax_requests_jitter = 0\n'
        seed "$corpus" url '# comment\nupstream_url = https://meta.example/v1?x=1#frag  # trailing\nupstream_timeout_ms = 1999\n'
        seed "$corpus" crlf 'workers = 8\r\nlisten_mode = 0600\r\nhealth_max_5xx_ratio = 1e-1\r\n'
        seed "$corpus" softhard 'rss_soft_mb = 128\nrss_hard_mb = 128\n'
        seed "$corpus" dup 'workers = 2\nworkers = 3\n'
        seed "$corpus" unknown 'no_such_key = 1\n'
        seed "$corpus" range 'listen_backlog = 70000\nhealth_window_s = 0\n'
        seed "$corpus" noeq '  listen /tmp/x.sock\n'
        seed "$corpus" ratio 'health_max_degraded_ratio = nan\n'
        seed "$corpus" group 'listen_group = root\nlisten_group = nosuchgroupxyz\n'
        ;;
    trace)
        seed "$corpus" ok '{"ts": 1700000000.5, "payload": [{"provider":"yt","id":"a"}]}\n{"ts": 1700000001, "payload": []}\n'
        seed "$corpus" raw '{"payload": "[1,\\ud800\\u00ff\\udc80", "ts": 3}\n\n{"ts":2,"payload":{"a":"}"}}'
        seed "$corpus" bad '{"ts": nan, "payload": 1}\n{"ts": 1}\n'
        ;;
    statustext)
        seed "$corpus" doc '{"pool":"enrichd","accepted conn":3,"upstream":{"breaker":"closed","fds":2},"health":{"reasons":["p99"]},"processes":[{"slot":0,"pid":12,"state":"busy","requests":3,"request_age_ms":5,"rss_kb":900,"fds":7,"request_id":"abc","last_exit":{"reason":"rss","pid":11,"request_id":"r","request_age_ms":3},"fds_by_kind":{"summary":"4 sockets"}}]}'
        seed "$corpus" ctl '{"\\u001b[2J":"\\u009b1m","processes":[{"slot":"\\u0007"}]}'
        seed "$corpus" store '{"store":{"state":"connected","address":"unix:/r.sock","rtt_us":412,"errors":[1],"lease_held":{"youtube":5,"x":null}}}'
        ;;
    esac
}

seeds_wire() { # CORPUS TARGET: what the pool reads off the wire: FastCGI records, nginx's $msec
    corpus=$1
    case $2 in
    fcgi_body)
        # 8 control bytes (max, CONTENT_LENGTH mode, first read, stage, reads, script),
        # then a script: the parameters (well-formed pairs or raw bytes), then 3
        # bytes a body record: nginx's 32 KB records and one more, padding,
        # other ids' records (zero-length too), management records, aborts;
        # and raw streams (the 24-byte GET_VALUES of 0x7ffffff0 lengths).
        seed "$corpus" nginx '\377\377\100\007\000\100\003\001\001\003\000\000\016\004\016\006\000\000\000\000\000\000\000\010\003\100\005\000\000'
        seed "$corpus" foreign '\377\377\200\003\000\003\001\001\001\002\000\014\003\001\010\000\000\000\000\000\011\001\001\016\000\000'
        seed "$corpus" raw '\377\377\100\000\000\004\000\000\001\001\000\001\000\010\000\000\000\001\000\000\000\000\000\000\001\004\000\001\000\000\000\000\001\005\000\001\000\003\005\000abc\000\000\000\000\000\001\005\000\001\000\000\000\000'
        seed "$corpus" cve '\377\377\100\000\000\004\000\000\001\011\000\000\000\010\010\000\377\377\377\360\377\377\377\360\000\000\000\000\000\000\000\000'
        ;;
    msec)
        seed "$corpus" ok '1700000000.123'
        seed "$corpus" short '1700000000.1'
        seed "$corpus" whole '1700000000'
        seed "$corpus" long '1234567890123.0000'
        seed "$corpus" sign '-1.5 '
        ;;
    esac
}

seeds_upstream() { # CORPUS TARGET: the upstream client's inputs: replies, Retry-After, header lines and the secret
    corpus=$1
    case $2 in
    upstream_reply)
        seed "$corpus" ok 'dQw4w9WgXcQ,abc\n{"items":[{"id":"dQw4w9WgXcQ","poster":"https://i.example/vi/maxres.jpg","duration":213}]}'
        seed "$corpus" both 'a,b,c\n{"items":[{"id":"a","duration":1.5e3},{"id":"b","poster":"https://x.example/p.jpg"},{"id":"zzz","duration":5}]}\n'
        seed "$corpus" dupitem 'a\n{"items":[{"id":"a","poster":"http://x/p"},{"id":"a","duration":7}]}'
        seed "$corpus" bad 'a,b\n{"items":[{"id":"a","poster":"https://h/\\u0000x","duration":-0.0},{"id":"b","duration":1e7,"poster":"https://\\u3000/"}]}'
        seed "$corpus" utf8 'a\n{"items":[{"id":"a","poster":"https://h.example/caf\0303\0251.jpg","duration":0}]}'
        seed "$corpus" notarray 'a\n{"items":{"id":"a"}}'
        seed "$corpus" trailing 'a\n{"items":[]} x'
        seed "$corpus" truncated 'a\n{"items":[{"id":"a","poster":"https://h/'
        seed "$corpus" deep 'a\n{"items":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}'
        seed "$corpus" types 'a,1\n{"items":[null,1,"a",{"id":1},{"id":"a","duration":"12","poster":5},{"id":"1","duration":1e308}]}'
        seed "$corpus" lastwins 'a,b\n{"items":[{"id":"x"}],"items":[{"poster":"https://h/p","id":"a","id":"b","duration":3,"duration":null}]}'
        seed "$corpus" escapes 'a\342\202\254,\360\237\230\200\n{"items":[{"id":"a\\u20ac","poster":"https:\\/\\/h\\/\\u00e9"},{"id":"\\ud83d\\ude00","duration":0.5e1},{"id\\u0000x":"\\ud800"}]}'
        seed "$corpus" numbers 'a,b,c\n{"items":[{"id":"a","duration":-0},{"id":"b","duration":1E-400},{"id":"c","duration":9999999.999}]}'
        [ -e "$corpus/seed-flood" ] || { printf 'a\n{"items":['; i=0; while [ $i -lt 4000 ]; do printf '{},'; i=$((i + 1)); done; printf '{}]}'; } > "$corpus/seed-flood"
        ;;
    retry_after)
        for s in 120 ' 7\r\n' 0 99999999999999999999 'Sun, 06 Nov 1994 08:49:37 GMT' \
            'Sunday, 06-Nov-94 08:49:37 GMT' 'Sun Nov  6 08:49:37 1994' 'Tue, 29 Feb 2028 00:00:10 GMT' \
            'Sat, 31 Dec 2016 23:59:60 GMT' 'Sun, 31 Feb 1994 08:49:37 GMT' '1.5' '-1'; do
            printf '%b' "$s" > "$corpus/seed-$(printf '%s' "$s" | od -An -tx1 | tr -d ' \n' | cut -c1-40)"
        done
        ;;
    upstream_header)
        seed "$corpus" line '\000X-Client: enrichd/1'
        seed "$corpus" crlf '\000X-A: v\r\nHost: evil'
        seed "$corpus" owned '\000Content-Length: 5'
        seed "$corpus" tmpl '\001Authorization: Bearer {secret}'
        seed "$corpus" tmpl2 '\001X: {secret}{secret}'
        seed "$corpus" query '\002api_key'
        seed "$corpus" url '\003https://h.example/v1?key=abc#x'
        seed "$corpus" scrub '\004k3y+/= failed https://h/?key=k3y%2B%2F%3D and k3y+/= again'
        ;;
    esac
}

seeds_api() { # CORPUS TARGET: the providers' answers and their durations
    corpus=$1
    case $2 in
    api_youtube)
        seed "$corpus" ok 'aaaaaaaaaaa,bbbbbbbbbbb,c\n{"kind":"youtube#videoListResponse","items":[{"id":"bbbbbbbbbbb","contentDetails":{"duration":"P1DT2H3M4S"},"snippet":{"thumbnails":{"default":{"url":"https://i.ytimg.com/vi/b/default.jpg","width":120},"high":{"url":"https:\\/\\/i.ytimg.com\\/vi\\/b\\/hq.jpg"}}}},{"id":"aaaaaaaaaaa","contentDetails":{"duration":"P0D"},"snippet":{"thumbnails":{"maxres":{"url":"https://i.ytimg.com/m.jpg"},"standard":{"url":"http://x/s"}}}},{"id":"aaaaaaaaaaa"}],"pageInfo":{"totalResults":2}}'
        seed "$corpus" empty 'a\n{}'
        seed "$corpus" quota '\n{"error":{"code":403,"message":"quota","errors":[{"message":"q","domain":"youtube.quota","reason":"quotaExceeded"}]}}'
        seed "$corpus" key '\n{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","errors":[{"reason":"badRequest"}],"details":[{"reason":"API_KEY_INVALID"}]}}'
        seed "$corpus" lone '\357\277\275,\355\240\200\n{"items":[{"id":"\\ud800","contentDetails":{"duration":"PT1S"}},{"id":"\\ufffd"}]}'
        ;;
    api_vimeo)
        seed "$corpus" ok '76979871,22439234,1\n{"total":2,"data":[{"uri":"\\/videos\\/22439234:0a1b2c","duration":0,"pictures":{"sizes":[{"width":100,"link":"https://i.vimeocdn.com/1_100"},{"width":1920,"link":"https://i.vimeocdn.com/1_1920?r=pad"}]}},{"uri":"/videos/76979871","duration":62,"pictures":{"sizes":[{"width":640,"link":"https://a/640"},{"width":640,"link":"https://a/640b"}]}}]}'
        seed "$corpus" error '\n{"error":"Too many API requests.","link":null,"developer_message":"rate","error_code":9000}'
        seed "$corpus" reset '2016-08-30T11:41:40+00:00\n'
        ;;
    api_dailymotion)
        seed "$corpus" ok 'x1,x2,x3\n{"page":1,"limit":3,"has_more":false,"list":[{"id":"x2","duration":12,"thumbnail_1080_url":null,"thumbnail_720_url":"https:\\/\\/s1.dmcdn.net\\/720.jpg","thumbnail_url":"https://s1.dmcdn.net/t.jpg"},{"id":"x1","duration":213,"thumbnail_1080_url":"https://s1.dmcdn.net/1080.jpg"},{"id":"x2","duration":1}]}'
        seed "$corpus" error '\n{"error":{"more_info":"https://developer.dailymotion.com/api#error-codes","code":400,"message":"Unrecognized field","type":"invalid_parameter","error_data":{"reason":"x"}}}'
        ;;
    api_duration)
        for s in PT4M13S PT1H2M3S P1DT2H3M4S P0D PT0S PT P PT1H2H PT-1S P1W PT1.5S PT1,25S P1Y PT99999999999999999999S \
            P115DT17H46M39S PT0.000000000000000000001S 2016-08-30T11:41:40+00:00; do
            printf '%s' "$s" > "$corpus/seed-$s"
        done
        ;;
    esac
}
seeds_store() { # CORPUS TARGET: what the shared store hands back, and its address
    corpus=$1
    # shellcheck disable=SC2016 # RESP's bulk lengths: a literal $
    case $2 in
    store_value) # lifetimes are the target's NOW (1700000000000 ms) and later
        seed "$corpus" neg 'E1 1700000100000 N'
        seed "$corpus" both 'E1 1700000100000 F 213 https://i.ytimg.com/vi/a/hqdefault.jpg'
        seed "$corpus" poster 'E1 1700003600000 F - https://i.vimeocdn.com/video/1_1920?r=pad'
        seed "$corpus" dur 'E1 1731536000000 F 1.5000000000000001e-05 -'
        seed "$corpus" expired 'E1 1699999999999 N'
        seed "$corpus" forged 'E1 1700000100000 F -0 http://h/\001x'
        seed "$corpus" utf8 'E1 1700000100000 F 0 https://h.example/caf\303\251\355\240\200.jpg'
        seed "$corpus" trail 'E1 1700000100000 N \nE1'
        ;;
    store_reply) # two bytes (ids asked - 1, little-endian), one (read size - 1), the bytes
        seed "$corpus" ok '\002\000\377*3\r\n$18\r\nE1 1700000100000 N\r\n$-1\r\n$45\r\nE1 1700000100000 F 12 https://h.example/p.jpg\r\n'
        seed "$corpus" split '\001\000\000*2\r\n$18\r\nE1 1700000100000 N\r\n$18\r\nE1 1700000100000 N\r\n'
        seed "$corpus" count '\002\000\377*2\r\n$-1\r\n$-1\r\n'
        seed "$corpus" types '\003\000\377*4\r\n:1\r\n+OK\r\n-ERR x\r\n*1\r\n*1\r\n*1\r\n$1\r\nx\r\n'
        seed "$corpus" deep '\000\000\377*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n'
        seed "$corpus" huge '\000\000\377*2000000000\r\n'
        seed "$corpus" wide '\377\017\377*4096\r\n*4096\r\n*4096\r\n'
        seed "$corpus" long '\000\000\377$100000\r\nE1 '
        seed "$corpus" error '\000\000\377-WRONGTYPE Operation against a key\r\n'
        ;;
    store_addr)
        seed "$corpus" tcp 'redis://10.0.0.5:6380/3'
        seed "$corpus" name 'redis://store.internal'
        seed "$corpus" v6 'redis://[fd00::5]:7000/0'
        seed "$corpus" unix 'unix:/run/redis/redis.sock'
        seed "$corpus" user 'redis://u:secret@h:6379'
        seed "$corpus" tls 'rediss://h:6379'
        seed "$corpus" range 'redis://h:65536/16'
        seed "$corpus" prefix 'enrichd:fleet-1.'
        ;;
    esac
}
# seed_corpus CORPUS TARGET: the target's seeds, from its family's function.
seed_corpus() {
    case $2 in
    engine | fast | numtext | scan) seeds_engine "$@" ;;
    config | trace | statustext) seeds_text "$@" ;;
    fcgi_body | msec) seeds_wire "$@" ;;
    upstream_reply | retry_after | upstream_header) seeds_upstream "$@" ;;
    api_*) seeds_api "$@" ;;
    store_*) seeds_store "$@" ;;
    esac
}

# fuzz_one TARGET: runs it for its time on its corpus; prints what it
# found, and fails on a crash, a leak or a limit.
fuzz_one() {
    target=$1
    corpus=$OUT/corpus-$target
    mkdir -p "$corpus"
    seed_corpus "$corpus" "$target"
    secs=$SECONDS_EACH
    if ! "$OUT/fuzz_$target" -max_total_time="$secs" -max_len="$(target_max_len "$target")" \
        -rss_limit_mb="$RSS_MB" -malloc_limit_mb="$MALLOC_MB" -print_final_stats=0 \
        -artifact_prefix="$OUT/$target-" "$corpus" >"$OUT/fuzz_$target.log" 2>&1; then
        echo "fuzz_$target: ${secs}s"
        tail -40 "$OUT/fuzz_$target.log"
        echo "fuzz_$target: FAILED"
        return 1
    fi
    echo "fuzz_$target: ${secs}s, no crash: $(grep -E '^#[0-9]+.*(DONE|pulse)' "$OUT/fuzz_$target.log" | tail -1)"
}
# The script again for one target (FUZZ_ONE set by the loop below): the
# targets are built.
if [ -n "${FUZZ_ONE:-}" ]; then
    fuzz_one "$FUZZ_ONE"
    exit
fi

# Every source is compiled once, however many targets link it (the
# engine's sources serve three targets, the APIs' four), FUZZ_JOBS at a
# time; then each target is linked.
STEP=${FUZZ_STEP:-all}
case $STEP in
all | build | run) ;;
*) echo "FUZZ_STEP: build, run or unset, not $STEP" >&2; exit 2 ;;
esac
mkdir -p "$OUT/obj"
obj() { # the object of source $1
    rel=${1#"$ROOT"/}
    echo "$OUT/obj/$(echo "${rel%.c}" | tr / _).o"
}
export CFLAGS
if [ "$STEP" != run ]; then
    for target in $TARGETS; do
        echo "$ROOT/tests/fuzz/fuzz_$target.c"
        for src in $(target_srcs "$target"); do echo "$src"; done
    done | sort -u | while read -r src; do echo "$src $(obj "$src")"; done |
        xargs -n 2 -P "$JOBS" sh -c 'clang $CFLAGS -c -o "$2" "$1"' sh
    for target in $TARGETS; do
        objs=$(obj "$ROOT/tests/fuzz/fuzz_$target.c")
        for src in $(target_srcs "$target"); do objs="$objs $(obj "$src")"; done
        # shellcheck disable=SC2086,SC2046 # word lists on purpose
        clang $CFLAGS -o "$OUT/fuzz_$target" $objs $(target_libs "$target")
    done
fi
[ "$STEP" = build ] && exit 0

# FUZZ_JOBS targets at a time (this script again, for one target each);
# each prints its lines when it ends.
status=0
for target in $TARGETS; do echo "$target"; done |
    xargs -P "$JOBS" -I{} env FUZZ_ONE={} "$ROOT/scripts/fuzz.sh" "$SECONDS_EACH" || status=1
exit $status

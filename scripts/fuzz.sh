#!/bin/sh
# make fuzz: builds each libFuzzer target in tests/fuzz with ASan+UBSan and
# runs it for $1 seconds (default 60) on a corpus seeded from the
# conformance vectors.  Any crash, leak or sanitizer report fails.
set -eu
SECONDS_EACH=${1:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/build-fuzz
mkdir -p "$OUT"
CFLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I$ROOT/src $(pkg-config --cflags icu-uc libcrypto)"
LIBS="$(pkg-config --libs icu-uc libcrypto) -lm"
ENGINE="$ROOT/src/engine.c $ROOT/src/reader.c $ROOT/src/buf.c $ROOT/src/numfmt.c $ROOT/src/unicode.c"
status=0
for target in engine numtext; do
    clang $CFLAGS -o "$OUT/fuzz_$target" "$ROOT/tests/fuzz/fuzz_$target.c" $ENGINE $LIBS
    corpus=$OUT/corpus-$target
    mkdir -p "$corpus"
    if [ "$target" = engine ]; then
        cp -n "$ROOT"/tests/vectors/*.in.json "$corpus"/ 2>/dev/null || true
    else
        for s in 0x1F 1e400 " 12 " 0.000001 5e-324 -0 .5 5. 0b101 Infinity; do
            printf '%s' "$s" > "$corpus/seed-$(printf '%s' "$s" | od -An -tx1 | tr -d ' \n')"
        done
    fi
    echo "fuzz_$target: ${SECONDS_EACH}s"
    if ! "$OUT/fuzz_$target" -max_total_time="$SECONDS_EACH" -max_len=500000 \
        -print_final_stats=0 "$corpus" > "$OUT/fuzz_$target.log" 2>&1; then
        tail -40 "$OUT/fuzz_$target.log"
        echo "fuzz_$target: FAILED"
        status=1
    else
        grep -E '^#[0-9]+.*(DONE|pulse)' "$OUT/fuzz_$target.log" | tail -1 || true
        echo "fuzz_$target: no crash"
    fi
done
exit $status

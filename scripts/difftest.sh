#!/bin/sh
# make difftest: random batches, the engine against the incumbent (needs node).
exec python3 "$(dirname "$0")/../tests/difftest.py" "$@"

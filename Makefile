# enrichd: plain Makefile.  `make` builds everything into build/.
#
# Layout: src/*.c is the library (build/libenrichd.a) that every program
# links; src/cmd/NAME.c is the main of build/NAME; tests/unit/test_*.c
# are unit tests (build/tests/); tests/fuzz/fuzz_*.c libFuzzer targets.
# SAN=1 builds the same tree with ASan+UBSan into build-san/.

CC      ?= cc
SAN     ?=
ifeq ($(SAN),1)
B       ?= build-san
SANFL   := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT     ?= -O1
else
B       ?= build
SANFL   :=
OPT     ?= -O2
endif

# libcurl: headers only; it is loaded at run time (src/curlapi.h says why).
# ICU, libcrypto and libstdc++ (ICU's) are linked statically: their
# relocations at every exec cost more than all of enrichd's start-up work
# (~4 and ~2.5 ms here), and Debian ships the .a files in the -dev packages.
PKGS    := icu-uc json-c libsystemd libcrypto
PKGCF   := $(shell pkg-config --cflags $(PKGS) libcurl 2>/dev/null)
STATIC_ENGINE_LIBS := -Wl,-Bstatic -licuuc -licudata -lcrypto -lstdc++ -Wl,-Bdynamic -lm -lpthread -ldl

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
CFLAGS  ?= $(OPT) -g
ALLCF   := -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SANFL) $(PKGCF) $(EXTRA_CFLAGS) -Isrc -MMD -MP
LDLIBS  := -lfcgi $(shell pkg-config --libs json-c libsystemd 2>/dev/null) $(STATIC_ENGINE_LIBS)
ALLLD   := $(SANFL) $(LDFLAGS)

LIBSRC  := $(wildcard src/*.c)
LIBOBJ  := $(LIBSRC:src/%.c=$(B)/obj/%.o)
CMDSRC  := $(wildcard src/cmd/*.c)
CMDS    := $(CMDSRC:src/cmd/%.c=$(B)/%)
TSTSRC  := $(wildcard tests/unit/test_*.c)
TSTS    := $(TSTSRC:tests/unit/%.c=$(B)/tests/%)
LIB     := $(B)/libenrichd.a

.PHONY: fleet-test all test hooks valgrind unit check-vectors run bench bench-engine fuzz difftest format format-check lint clean deps san-test

all: $(LIB) $(CMDS) $(TSTS)

$(B)/obj/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(ALLCF) -c -o $@ $<

$(B)/cmd/%.o: src/cmd/%.c
	@mkdir -p $(@D)
	$(CC) $(ALLCF) -c -o $@ $<

$(B)/tests/%.o: tests/unit/%.c
	@mkdir -p $(@D)
	$(CC) $(ALLCF) -Itests/unit -c -o $@ $<

$(LIB): $(LIBOBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/%: $(B)/cmd/%.o $(LIB)
	$(CC) $(ALLLD) -o $@ $< $(LIB) $(LDLIBS)

# The CLI is started once per batch by pipelines, so its cold start is its
# speed: it links nothing it does not use (~7 ms here, an empty program ~4).
$(B)/enrich: $(B)/cmd/enrich.o $(LIB)
	$(CC) $(ALLLD) -o $@ $< $(LIB) $(STATIC_ENGINE_LIBS)

$(B)/tests/%: $(B)/tests/%.o $(LIB)
	$(CC) $(ALLLD) -o $@ $< $(LIB) $(LDLIBS)

# Installs the Debian packages the build, the tests and `make run` need
# (only those missing; a no-op on a ready machine).  `make test` and
# `make run` call it first, so each works alone on a fresh Debian 12.
deps:
	@scripts/deps.sh test

# Every test: unit, conformance vectors (CLI and nginx), integration.
# Ends with "N passed, M failed"; non-zero exit on any failure.
test:
	@scripts/deps.sh test
	@$(MAKE) --no-print-directory all hooks
	@python3 tests/run.py --build $(B)

# enrichd with test-only fault injection (leaks, crashes, slow requests),
# for the recycling and crash-loop tests; never installed.
hooks:
	@$(MAKE) --no-print-directory B=build-hooks EXTRA_CFLAGS="$(EXTRA_CFLAGS) -DENR_TEST_HOOKS" build-hooks/enrichd

# A worker's request loop under valgrind: no leak per request.
valgrind: all
	@python3 tests/valgrind.py $(B)

# Every suite on an ASan+UBSan build: unit tests and vectors with leak
# checks; then the integration suites with that build's daemon (leak checks
# off: workers are killed on purpose), every sanitizer report written to
# build-san/sanitizer-logs, which must hold no error (the CVE test's
# refused huge allocation leaves a warning there, on purpose).
SANLOGS := $(CURDIR)/build-san/sanitizer-logs
san-test:
	$(MAKE) SAN=1 all
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		python3 tests/run.py --build build-san --kind unit,vectors
	@rm -rf $(SANLOGS) && mkdir -p $(SANLOGS)
	@ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:log_path=$(SANLOGS)/asan \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(SANLOGS)/ubsan \
		python3 tests/run.py --build build-san --kind integration
	@if grep -lE 'ERROR: |runtime error' $(SANLOGS)/* 2>/dev/null; then \
		cat $(SANLOGS)/*; echo "san-test: sanitizer reports above"; exit 1; fi

# Three hosts and a front nginx on a network of the test's own (network
# namespaces; root): failover, a rolling restart, Prometheus alerts and
# capacity by host count (tests/fleet/test_fleet.py, about 90 s).
fleet-test: all
	@scripts/deps.sh test
	@python3 tests/fleet/test_fleet.py

run:
	@scripts/deps.sh run
	@$(MAKE) --no-print-directory all
	@scripts/run.sh

bench: all
	@scripts/bench.sh

bench-engine: all
	@scripts/bench-engine.sh $(B)

FUZZ_SECONDS ?= 60
fuzz:
	@scripts/fuzz.sh $(FUZZ_SECONDS)

difftest: all
	@scripts/difftest.sh

FORMATTED := src/*.c src/*.h src/cmd/*.c tests/unit/*.c tests/unit/*.h tests/fuzz/*.c
format:
	clang-format -i $(FORMATTED)

format-check:
	clang-format --dry-run --Werror $(FORMATTED)

lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
		--std=c11 --inline-suppr -Isrc -D__GNUC__ --suppress=missingIncludeSystem src src/cmd

clean:
	rm -rf build build-san build-fuzz build-clang build-hooks

-include $(LIBOBJ:.o=.d) $(CMDSRC:src/cmd/%.c=$(B)/cmd/%.d) $(TSTSRC:tests/unit/%.c=$(B)/tests/%.d)

# enrichd: plain Makefile.  `make` builds everything into build/.
#
# Layout: src/LAYER/*.c is the library (build/libenrichd.a) that every
# program links (docs/architecture.md names the layers); src/cmd/NAME.c is the main of build/NAME; tests/unit/test_*.c
# are unit tests and tests/integration/test_*.c the C suites that fork or
# open sockets (both build/tests/); tests/fuzz/fuzz_*.c libFuzzer targets.
# SAN=1 builds the same tree with ASan+UBSan into build-san/.

# The release version: the only place it is written.  `enrichd -V`, the
# Debian package and the man pages take it from here.
VERSION := 0.1.0

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

# libcurl: headers only; it is loaded at run time (src/upstream/curlapi.h says why).
# libcrypto is linked statically: its relocations at every exec cost more
# than all of enrichd's start-up work, and Debian ships the .a file in
# the -dev package.  Only what is called is linked: the digests, not
# libcrypto's init (test_pool_systemd counts the relocations).  The Unicode data is the engine's own
# (src/engine/ucd_tables.inc); ICU is only the unit tests' second oracle.
PKGS    := json-c libsystemd libcrypto hiredis
PKGCF   := $(shell pkg-config --cflags $(PKGS) libcurl 2>/dev/null)
STATIC_ENGINE_LIBS := -Wl,-Bstatic -lcrypto -Wl,-Bdynamic -lm -lpthread -ldl
TEST_ICU_CF := $(shell pkg-config --cflags icu-uc 2>/dev/null)
TEST_ICU_LIBS := $(shell pkg-config --libs icu-uc 2>/dev/null)

# A fourth API for the tests (-DENR_TEST_SOURCE: src/base/sources.h's
# ENR_SOURCE_EXTRA, src/upstream/api_extra.c) changes the scoreboard's
# and the configuration's shape: only into build-extra/ (make extra).
ifneq ($(findstring ENR_TEST_SOURCE,$(EXTRA_CFLAGS)),)
ifeq ($(findstring extra,$(B)),)
$(error -DENR_TEST_SOURCE builds only into a build-extra directory (make extra), not $(B)/)
endif
endif

# The test hooks (-DENR_TEST_HOOKS) let any client stall or crash a worker
# through a header: such a binary must never be taken for the product, so
# it is built only into a directory named for it (make hooks: build-hooks/).
ifneq ($(findstring ENR_TEST_HOOKS,$(EXTRA_CFLAGS)),)
ifeq ($(findstring hooks,$(B)),)
$(error -DENR_TEST_HOOKS builds only into a build-hooks directory (make hooks), not $(B)/)
endif
endif

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
CFLAGS  ?= $(OPT) -g
ALLCF   := -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SANFL) $(PKGCF) $(EXTRA_CFLAGS) -DENR_VERSION='"$(VERSION)"' -Isrc -MMD -MP
LDLIBS  := -lfcgi $(shell pkg-config --libs json-c libsystemd hiredis 2>/dev/null) $(STATIC_ENGINE_LIBS)
# Full RELRO and immediate binding, as the Debian package's hardening
# links it (so the bench measures what ships): the master resolves every
# symbol once before it forks, so no worker's first calls through the PLT
# write its GOT (a copy-on-write fault each, on the first request's path).
BINDLD  := -Wl,-z,relro -Wl,-z,now
ALLLD   := $(SANFL) $(BINDLD) $(LDFLAGS)

LIBSRC  := $(filter-out src/cmd/%,$(wildcard src/*/*.c))
LIBOBJ  := $(LIBSRC:src/%.c=$(B)/obj/%.o)
CMDSRC  := $(wildcard src/cmd/*.c)
CMDS    := $(CMDSRC:src/cmd/%.c=$(B)/%)
# The C suites: tests/unit's are pure (no fork, no socket: make check's
# loop), tests/integration's fork or talk over sockets.  Each builds into
# $(B)/tests/NAME, its object under its folder's name ($(B)/tests/unit/,
# $(B)/tests/integration/), with tests/unit's helpers (t.h and the t_*.h
# fixtures).
UNITSRC := $(wildcard tests/unit/test_*.c)
ITSRC   := $(wildcard tests/integration/test_*.c)
TSTSRC  := $(UNITSRC) $(ITSRC)
TSTOBJ  := $(TSTSRC:tests/%.c=$(B)/tests/%.o)
UNITS   := $(UNITSRC:tests/unit/%.c=$(B)/tests/%)
ITS     := $(ITSRC:tests/integration/%.c=$(B)/tests/%)
TSTS    := $(UNITS) $(ITS)
LIB     := $(B)/libenrichd.a

.PHONY: all check test hooks extra valgrind run bench bench-engine fuzz difftest format format-check lint clean deps san-test \
	programs man install uninstall deb system-test fleet-test bench-upstream soak bench-cold system-root bench-goals

all: $(LIB) $(CMDS) $(TSTS)

$(B)/obj/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(ALLCF) -c -o $@ $<

$(B)/cmd/%.o: src/cmd/%.c
	@mkdir -p $(@D)
	$(CC) $(ALLCF) -c -o $@ $<

$(TSTOBJ): $(B)/tests/%.o: tests/%.c
	@mkdir -p $(@D)
	$(CC) $(ALLCF) $(TEST_ICU_CF) -Itests/unit -c -o $@ $<

# The programs' objects are kept: made through a pattern, make would delete
# them after linking, and the next make (which then knows them from their
# .d files) would compile them again, two makes at once writing the same
# object while the other links it.
.SECONDARY: $(CMDSRC:src/cmd/%.c=$(B)/cmd/%.o) $(TSTOBJ)

$(LIB): $(LIBOBJ)
	@rm -f $@
	ar rcs $@ $^

# The version is compiled in: a new one rebuilds the daemon's main.
$(B)/cmd/enrichd.o: Makefile

$(B)/%: $(B)/cmd/%.o $(LIB)
	$(CC) $(ALLLD) -o $@ $< $(LIB) $(LDLIBS)

# The CLI is started once per batch by pipelines, so its cold start is its
# speed: it links nothing it does not use (~7 ms here, an empty program ~4).
$(B)/enrich: $(B)/cmd/enrich.o $(LIB)
	$(CC) $(ALLLD) -o $@ $< $(LIB) $(STATIC_ENGINE_LIBS)

# The bench's socket-activation launcher (bench-activate.c says why):
# static, except on a sanitizer build, whose runtime cannot be.
$(B)/bench-activate: $(B)/cmd/bench-activate.o
	$(CC) $(ALLLD) $(if $(SANFL),,-static) -o $@ $<

$(UNITS): $(B)/tests/%: $(B)/tests/unit/%.o $(LIB)
	$(CC) $(ALLLD) -o $@ $< $(LIB) $(LDLIBS) $(TEST_ICU_LIBS)

$(ITS): $(B)/tests/%: $(B)/tests/integration/%.o $(LIB)
	$(CC) $(ALLLD) -o $@ $< $(LIB) $(LDLIBS) $(TEST_ICU_LIBS)

# Installs the Debian packages the build, the tests and `make run` need
# (only those missing; a no-op on a ready machine).  `make test` and
# `make run` call it first, so each works alone on a fresh Debian 12.
deps:
	@scripts/deps.sh test

# The developer's loop (under a minute): unit tests, the conformance
# vectors through the CLI and the Unicode sweeps against Node.
check:
	@$(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc)) all
	@python3 tests/run.py --build $(B) --kind unit,vectors

# Every test: unit, conformance vectors (CLI and nginx), integration and
# hostile, side by side (TEST_JOBS=N: how many at once; tests/run.py says
# which run alone; TEST_ARGS=--skip-alone or --alone-only: one part, as
# CI runs them).  Ends with "N passed, M failed"; non-zero exit on any
# failure.
# The build first, one job per core unless -j was given: the trees the
# suites run too (build-hooks/, build-extra/), which a suite would
# otherwise build on demand, one file at a time, beside the others.
TEST_ARGS ?=
test:
	@scripts/deps.sh test
	@$(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc)) all hooks extra
	@python3 tests/run.py --build $(B) $(TEST_ARGS)

# enrichd with test-only fault injection (leaks, crashes, slow requests),
# for the recycling and crash-loop tests; never installed.
hooks:
	@$(MAKE) --no-print-directory B=build-hooks EXTRA_CFLAGS="$(EXTRA_CFLAGS) -DENR_TEST_HOOKS" build-hooks/enrichd

# enrichd with a fourth, test-only API built from the list of sources
# (tests/integration/test_source_extra.py); never installed.
extra:
	@$(MAKE) --no-print-directory B=build-extra EXTRA_CFLAGS="$(EXTRA_CFLAGS) -DENR_TEST_SOURCE" build-extra/enrichd

# A worker's request loop under valgrind: no leak per request.
valgrind: all
	@python3 tests/valgrind.py $(B)

# Every suite on an ASan+UBSan build: unit tests and vectors with leak
# checks; then the integration suites with that build's daemon (leak checks
# off: workers are killed on purpose), every sanitizer report written to
# build-san/sanitizer-logs, which must hold no error.  ASan's
# quarantine is cut from 256 to 16 MB: the suites hold the workers to the
# product's rss_soft_mb, and a worker that serves most of a load (one
# idle worker is woken per connection) grew ~23 MB per 1,000 requests.
# SAN_KINDS: which kinds of suites (unit, vectors, integration; CI runs
# the vectors, which time nothing, on the cores its measured stages leave idle).
SANLOGS := $(CURDIR)/build-san/sanitizer-logs
SAN_KINDS ?= unit vectors integration
comma := ,
SAN_LEAKED = $(subst $() ,$(comma),$(filter unit vectors,$(SAN_KINDS)))
san-test:
	$(MAKE) SAN=1 all
	$(if $(SAN_LEAKED),@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		python3 tests/run.py --build build-san --kind $(SAN_LEAKED) $(TEST_ARGS))
	$(if $(filter integration,$(SAN_KINDS)),@rm -rf $(SANLOGS) && mkdir -p $(SANLOGS) && \
		ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:quarantine_size_mb=16:log_path=$(SANLOGS)/asan \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(SANLOGS)/ubsan \
		python3 tests/run.py --build build-san --kind integration $(TEST_ARGS) && \
		if grep -lE 'ERROR: |runtime error' $(SANLOGS)/* 2>/dev/null; then \
		cat $(SANLOGS)/*; echo "san-test: sanitizer reports above"; exit 1; fi)

# Three hosts and a front nginx on a network of the test's own (network
# namespaces; root): failover, a rolling restart, Prometheus alerts and
# capacity by host count, provider calls per 1,000 records and budget shares with three hosts against one (tests/fleet/test_fleet.py, about 150 s).
fleet-test: all
	@scripts/deps.sh test
	@python3 tests/fleet/test_fleet.py

# One long run with every fault at once (docs/soak.md): its own target, not
# part of `make test`, because it takes SOAK_S seconds (default 600) of a
# machine by itself.  The report goes to $(B)/soak/ (summary.txt, PNGs).
SOAK_S ?= 600
soak:
	@scripts/deps.sh test
	@$(MAKE) --no-print-directory all hooks
	@python3 tests/soak/soak.py --build build-hooks --enrich $(B)/enrich --seconds $(SOAK_S) --out $(B)/soak

run:
	@scripts/deps.sh run
	@$(MAKE) --no-print-directory all
	@scripts/run.sh

bench: all
	@scripts/bench.sh

bench-engine: all
	@scripts/bench-engine.sh $(B)

# The test suites' time goals (p50s, rates, how soon): each suite that has
# them run one at a time, every goal printed as value/bound and against the
# last run's (scripts/bench-goals.py; docs/testing.md).  The tests count
# only their checks: a goal missed fails no test.
bench-goals:
	@$(MAKE) --no-print-directory all hooks
	@python3 scripts/bench-goals.py --build $(B)

bench-syscalls: all
	@python3 scripts/bench-syscalls.py --build $(B)

# The bench's cold start alone (docs/benchmarks.md): BUILDS="old=DIR new=DIR"
# alternates several builds; the default is this one.
bench-cold: all
	@ENR_BUILD=$(B) python3 scripts/bench-cold.py $(BUILDS)

# Outbound enrichment, one script a section: a cached hot set against
# enrichment off; the provider across a network path (round trip 0-150 ms,
# HTTP against HTTPS, connections cycled every 100 requests); the
# providers' own APIs (calls and quota units per 1,000 records, 50 ms away).
bench-upstream: all
	@scripts/bench-upstream.sh $(B)
	@scripts/bench-upstream-net.sh $(B)
	@ENR_BUILD=$(B) scripts/bench-upstream-providers.py
	@ENR_BUILD=$(B) scripts/bench-upstream-budget.py
	@ENR_BUILD=$(B) scripts/bench-upstream-fleet.py

# FUZZ_JOBS: how many targets are built and run at a time; FUZZ_STEP=build
# or run: one half (scripts/fuzz.sh).
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 1
FUZZ_STEP ?=
fuzz:
	@FUZZ_JOBS=$(FUZZ_JOBS) FUZZ_STEP=$(FUZZ_STEP) scripts/fuzz.sh $(FUZZ_SECONDS)

# INCUMBENT=DIR: a checkout of the old Node worker (the directory with its
# server-raw.mjs); the check compares build/enrich with it on random batches.
difftest: all
	@test -n "$(INCUMBENT)" || { echo "usage: make difftest INCUMBENT=DIR (DIR: a checkout of the old Node worker, with its server-raw.mjs)"; exit 2; }
	@scripts/difftest.sh --incumbent "$(INCUMBENT)"

# Every C file of the tree but the generated tables (clang-format keeps
# their rows as written: scripts/gen-unicode-tables.py's layout).
FORMATTED := $(wildcard src/*/*.[ch] tests/*/*.[ch])
format:
	clang-format -i $(FORMATTED)

format-check:
	@clang-format --dry-run --Werror $(FORMATTED)

# The style rules a machine can check: formatting first (format-check),
# then cppcheck, the include layers, references, the size rule
# (check-size.py, its self-test first) and pyflakes.
lint: format-check
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
		--std=c11 --inline-suppr -Isrc -D__GNUC__ -DENR_VERSION='"$(VERSION)"' --suppress=missingIncludeSystem src src/cmd
	@python3 scripts/incgraph.py --self-test
	@python3 scripts/incgraph.py >/dev/null || { python3 scripts/incgraph.py; exit 1; }
	@python3 scripts/incgraph.py --check-doc docs/architecture.md
	@python3 scripts/failkinds.py --check docs/upstream.md
	@python3 scripts/check-refs.py
	@python3 scripts/check-size.py --self-test
	@python3 scripts/check-size.py
	@/usr/bin/python3 scripts/pycheck.py

clean:
	rm -rf build build-san build-fuzz build-clang build-hooks build-extra build-deb build-ci

# --- installation (GNU conventions) ---------------------------------------
# `make install` puts the programs, the configuration, the systemd units,
# the nginx site (disabled: enable it with a symlink in sites-enabled, as
# Debian does) and the man pages under PREFIX; DESTDIR stages it.  The
# units name the installed paths: sed rewrites their packaged paths
# (/usr/sbin, /etc) to SBINDIR and SYSCONFDIR at install time.
PREFIX     ?= /usr/local
EXEC_PREFIX ?= $(PREFIX)
BINDIR     ?= $(EXEC_PREFIX)/bin
SBINDIR    ?= $(EXEC_PREFIX)/sbin
DATAROOTDIR ?= $(PREFIX)/share
MANDIR     ?= $(DATAROOTDIR)/man
DOCDIR     ?= $(DATAROOTDIR)/doc/enrichd
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
NGINXDIR   ?= $(SYSCONFDIR)/nginx
INSTALL    ?= install
PROGRAMS   := $(B)/enrichd $(B)/enrich $(B)/enrich-replay
UNITS      := enrichd.socket enrichd-status.socket enrichd.service
MANPAGES   := man/enrichd.8 man/enrichd.conf.5 man/enrich.1 man/enrich-replay.1
NGINX_SNIPPETS := $(wildcard nginx/snippets/*.conf)
# The docs the man pages and the configuration cite (docs/NAME.md), all
# of them: they cite one another.  Installed as DOCDIR/docs/NAME.md.
DOCS       := $(wildcard docs/*.md)
FLEET_EXAMPLES := $(wildcard conf/prometheus/*.yml)

programs: $(PROGRAMS)

# enrichd.conf(5) is generated from conf/enrichd.conf (its keys and
# comments) and the keys' rows (src/base/confkeys.inc: its KEYS section,
# with the APIs' rows of src/base/sources.h);
# tests/integration/test_man_pages.py fails when a key of the rows is
# missing from either, or its default differs.
man/enrichd.conf.5: conf/enrichd.conf src/base/confkeys.inc src/base/sources.h scripts/gen-conf-man.py \
		scripts/confkeys.py Makefile
	python3 scripts/gen-conf-man.py --version $(VERSION) conf/enrichd.conf >$@.tmp && mv $@.tmp $@

man: $(MANPAGES)

install: $(PROGRAMS) $(MANPAGES)
	$(INSTALL) -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(SYSCONFDIR)/enrichd/conf.d \
		$(DESTDIR)$(UNITDIR) $(DESTDIR)$(NGINXDIR)/sites-available $(DESTDIR)$(NGINXDIR)/snippets \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR)/docs
	$(INSTALL) -m 755 $(B)/enrichd $(DESTDIR)$(SBINDIR)/enrichd
	$(INSTALL) -m 755 $(B)/enrich $(B)/enrich-replay $(DESTDIR)$(BINDIR)/
	@# A configuration the operator changed is never overwritten.  The
	@# installed file sets only the keys a host is set up with, the rest
	@# commented out at their defaults (scripts/gen-conffile.py).
	if [ ! -e $(DESTDIR)$(SYSCONFDIR)/enrichd/enrichd.conf ]; then \
		python3 scripts/gen-conffile.py --sysconfdir $(SYSCONFDIR) conf/enrichd.conf \
			>$(DESTDIR)$(SYSCONFDIR)/enrichd/enrichd.conf && \
		chmod 644 $(DESTDIR)$(SYSCONFDIR)/enrichd/enrichd.conf || exit 1; fi
	for u in $(UNITS); do \
		sed -e 's|/usr/sbin/enrichd|$(SBINDIR)/enrichd|g' -e 's|/etc/enrichd/|$(SYSCONFDIR)/enrichd/|g' \
			conf/systemd/$$u >$(DESTDIR)$(UNITDIR)/$$u && chmod 644 $(DESTDIR)$(UNITDIR)/$$u || exit 1; done
	$(INSTALL) -m 644 nginx/enrichd.conf $(DESTDIR)$(NGINXDIR)/sites-available/enrichd
	$(INSTALL) -m 644 nginx/enrichd-cluster.conf $(DESTDIR)$(NGINXDIR)/sites-available/enrichd-cluster
	$(INSTALL) -m 644 $(NGINX_SNIPPETS) $(DESTDIR)$(NGINXDIR)/snippets/
	@# Several hosts: the Prometheus configuration and the rolling restart.
	$(INSTALL) -m 644 $(FLEET_EXAMPLES) $(DESTDIR)$(DOCDIR)/examples/
	$(INSTALL) -m 755 scripts/rolling-restart $(DESTDIR)$(DOCDIR)/examples/
	$(INSTALL) -m 644 README.md $(DESTDIR)$(DOCDIR)/
	$(INSTALL) -m 644 $(DOCS) $(DESTDIR)$(DOCDIR)/docs/
	for m in $(MANPAGES); do s=$${m##*.}; \
		gzip -9n <$$m >$(DESTDIR)$(MANDIR)/man$$s/$$(basename $$m).gz && \
		chmod 644 $(DESTDIR)$(MANDIR)/man$$s/$$(basename $$m).gz || exit 1; done

# Leaves /etc/enrichd/enrichd.conf if it differs from the shipped one.
uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/enrichd $(DESTDIR)$(BINDIR)/enrich $(DESTDIR)$(BINDIR)/enrich-replay
	for u in $(UNITS); do rm -f $(DESTDIR)$(UNITDIR)/$$u; done
	rm -f $(DESTDIR)$(NGINXDIR)/sites-available/enrichd $(DESTDIR)$(NGINXDIR)/sites-available/enrichd-cluster
	for f in $(notdir $(NGINX_SNIPPETS)); do rm -f $(DESTDIR)$(NGINXDIR)/snippets/$$f; done
	for f in $(notdir $(FLEET_EXAMPLES)) rolling-restart; do rm -f $(DESTDIR)$(DOCDIR)/examples/$$f; done
	for f in $(notdir $(DOCS)); do rm -f $(DESTDIR)$(DOCDIR)/docs/$$f; done
	rm -f $(DESTDIR)$(DOCDIR)/README.md
	rmdir $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR)/docs $(DESTDIR)$(DOCDIR) 2>/dev/null || true
	for m in $(MANPAGES); do s=$${m##*.}; rm -f $(DESTDIR)$(MANDIR)/man$$s/$$(basename $$m).gz; done
	if python3 scripts/gen-conffile.py --sysconfdir $(SYSCONFDIR) conf/enrichd.conf | \
		cmp -s - $(DESTDIR)$(SYSCONFDIR)/enrichd/enrichd.conf; then \
		rm -f $(DESTDIR)$(SYSCONFDIR)/enrichd/enrichd.conf; \
		rmdir $(DESTDIR)$(SYSCONFDIR)/enrichd/conf.d $(DESTDIR)$(SYSCONFDIR)/enrichd 2>/dev/null || true; fi

# The Debian package, built out of tree in build-deb/ (the packaging lives
# in scripts/debian/, copied in as debian/: the top level stays the
# project's).  Needs debhelper and lintian: `scripts/deps.sh deb`.
DEB := build-deb/enrichd_$(VERSION)_amd64.deb
deb: $(DEB)
$(DEB): $(LIBSRC) $(wildcard src/*/*.h src/*/*.inc) $(CMDSRC) conf/enrichd.conf $(wildcard conf/systemd/*) \
		nginx/enrichd.conf nginx/enrichd-cluster.conf $(NGINX_SNIPPETS) $(FLEET_EXAMPLES) \
		scripts/rolling-restart $(filter-out man/enrichd.conf.5,$(MANPAGES)) README.md LICENSE $(DOCS) \
		$(wildcard scripts/debian/* scripts/debian/*/*) scripts/build-deb.sh scripts/gen-conf-man.py \
		scripts/confkeys.py scripts/gen-conffile.py Makefile
	@scripts/deps.sh deb
	@scripts/build-deb.sh $(VERSION)

# The package installed and booted under systemd as PID 1 in a Debian 12
# container (systemd-nspawn); see docs/operations.md (System test).
system-test: deb
	@scripts/deps.sh system
	@tests/system/run.sh $(DEB)

# The system test's root file system alone (debootstrap, cached): CI builds
# it beside the package.
system-root:
	@scripts/deps.sh system
	@tests/system/run.sh --root-only

-include $(LIBOBJ:.o=.d) $(CMDSRC:src/cmd/%.c=$(B)/cmd/%.d) $(TSTOBJ:.o=.d)

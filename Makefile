# lua-geoservices build. `make help` lists the targets.
SHELL := /bin/bash
# Variables follow LuaRocks' make convention so the rockspec can drive it.

LUA        ?= lua5.4
BUSTED     ?= busted
LUACHECK   ?= luacheck
PREFIX     ?= /usr/local
LUA_LIBDIR ?= $(PREFIX)/lib/lua/5.4
LUADIR     ?= $(PREFIX)/share/lua/5.4
LIBDIR     ?= $(LUA_LIBDIR)
BINDIR     ?= $(PREFIX)/bin
BUILD      ?= build
PORT       ?= 0
DATA       ?= examples/data/world.json

# Debian packages every target may need; `make deps` installs the missing ones.
DEB_PACKAGES = curl lua5.4 liblua5.4-dev libcurl4-openssl-dev lua-cjson lua-busted lua-check \
               libmicrohttpd-dev pkg-config luarocks valgrind clang libclang-rt-14-dev lua-argparse lua-ldoc lua-luv openssl \
               libsqlite3-dev gdal-bin

CFLAGS     ?= -O2 -g
WARNFLAGS   = -std=c99 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
              -Wcast-qual -Wwrite-strings -Wpointer-arith -Wundef
ifeq ($(WERROR),1)
WARNFLAGS  += -Werror
endif
LIBFLAG    ?= -shared
PKG_CONFIG ?= pkg-config
ifdef LUA_INCDIR
LUA_CFLAGS ?= -I$(LUA_INCDIR)
else
LUA_CFLAGS ?= $(shell $(PKG_CONFIG) --cflags lua5.4 2>/dev/null || echo -I/usr/include/lua5.4)
endif
ifdef CURL_INCDIR
CURL_CFLAGS ?= -I$(CURL_INCDIR)
CURL_LIBS   ?= -L$(CURL_LIBDIR) -lcurl
else
CURL_CFLAGS ?= $(shell $(PKG_CONFIG) --cflags libcurl 2>/dev/null)
CURL_LIBS   ?= $(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null || echo -lcurl)
endif
ifdef MHD_INCDIR
MHD_CFLAGS ?= -I$(MHD_INCDIR)
MHD_LIBS   ?= -L$(MHD_LIBDIR) -lmicrohttpd
else
MHD_CFLAGS ?= $(shell $(PKG_CONFIG) --cflags libmicrohttpd 2>/dev/null)
MHD_LIBS   ?= $(shell $(PKG_CONFIG) --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)
endif
# libsqlite3: the replica store (csrc/store/) writes GeoPackages with it.
SQLITE_CFLAGS ?= $(shell $(PKG_CONFIG) --cflags sqlite3 2>/dev/null)
SQLITE_LIBS   ?= $(shell $(PKG_CONFIG) --libs sqlite3 2>/dev/null || echo -lsqlite3)
# _POSIX_C_SOURCE: -std=c99 hides fileno/strdup/clock_gettime otherwise.
ALLCFLAGS   = $(WARNFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden -D_POSIX_C_SOURCE=200809L \
              -DCURL_NO_OLDIES $(SANFLAGS)

CORE_SRC   = csrc/core.c csrc/class.c csrc/buf.c csrc/sys.c \
             $(sort $(wildcard csrc/net/*.c)) $(sort $(wildcard csrc/json/*.c)) \
             $(sort $(wildcard csrc/store/*.c))
HTTPD_SRC  = csrc/emulator/httpd.c csrc/buf.c csrc/class.c
CORE_SO    = $(BUILD)/geoservices/core.so
HTTPD_SO   = $(BUILD)/geoservices/httpd.so
CTESTS     = $(BUILD)/tests/test_buf $(BUILD)/tests/test_urlencode $(BUILD)/tests/test_jsonstream \
             $(BUILD)/tests/test_records $(BUILD)/tests/test_numbers \
             $(BUILD)/tests/test_geom $(BUILD)/tests/test_store_apply
HEADERS    = $(wildcard csrc/*.h csrc/net/*.h csrc/json/*.h csrc/store/*.h)

.PHONY: torture all core httpd deps test lint ctest busted demo emulator install install-emulator uninstall clean asan \
        help fuzz bench docs

# Two parts, two rocks: the client (rockspec/geoservices-scm-1.rockspec: `core`
# and `install`, libcurl only) and the emulator
# (rockspec/geoservices-emulator-scm-1.rockspec: `httpd` and `install-emulator`,
# libmicrohttpd). `all` builds both, for developers.
all: core httpd
core: $(CORE_SO)
httpd: $(HTTPD_SO)

help:
	@echo "make demo      build, start the emulator, run examples/tour.lua, stop it"
	@echo "make test      deps + build + luacheck + C unit tests (valgrind) + busted"
	@echo "make emulator  run the emulator in the foreground (PORT=0 DATA=$(DATA) ARGS='--verbose ...')"
	@echo "make asan      the whole test suite under AddressSanitizer + UBSan"
	@echo "make install   the client: LUA_LIBDIR=... LUADIR=... BINDIR=... (defaults under $(PREFIX))"
	@echo "make install-emulator  the emulator (httpd.so, its modules, the example world, geoservices-emulator)"
	@echo "make docs      the API reference (lua-ldoc) into $(BUILD)/docs/"

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
	  echo "installing:$$missing"; \
	  log=$$(mktemp); \
	  if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends$$missing; } >$$log 2>&1; then \
	    tail -n 30 $$log; echo "make deps: apt-get failed (full log: $$log)"; exit 1; \
	  fi; rm -f $$log; \
	else \
	  echo "missing Debian packages; run as root:"; echo "  apt-get install -y$$missing"; exit 1; \
	fi

$(CORE_SO): $(CORE_SRC) $(HEADERS) | $(BUILD)/geoservices
	$(CC) $(ALLCFLAGS) -Icsrc $(LUA_CFLAGS) $(CURL_CFLAGS) $(SQLITE_CFLAGS) $(LIBFLAG) -o $@ $(CORE_SRC) $(CURL_LIBS) \
	  $(SQLITE_LIBS) $(LDFLAGS)

$(HTTPD_SO): $(HTTPD_SRC) $(HEADERS) | $(BUILD)/geoservices
	$(CC) $(ALLCFLAGS) -Icsrc $(LUA_CFLAGS) $(MHD_CFLAGS) $(LIBFLAG) -o $@ $(HTTPD_SRC) $(MHD_LIBS) $(LDFLAGS)

PURE_C_SRC = csrc/buf.c csrc/net/urlencode.c csrc/json/jsonstream.c csrc/json/jsonnum.c csrc/json/records.c \
             csrc/store/geom.c csrc/store/isotime.c
$(BUILD)/tests/test_%: csrc/tests/test_%.c csrc/tests/check.h $(HEADERS) $(PURE_C_SRC) | $(BUILD)/tests
	$(CC) $(ALLCFLAGS) -Icsrc -o $@ $< $(PURE_C_SRC) $(LDFLAGS)
# The store's apply path needs libsqlite3 (no Lua): its tests and fuzz target link it.
STORE_SQL_SRC = csrc/store/apply.c
$(BUILD)/tests/test_store_%: csrc/tests/test_store_%.c csrc/tests/check.h $(HEADERS) $(PURE_C_SRC) $(STORE_SQL_SRC) \
  | $(BUILD)/tests
	$(CC) $(ALLCFLAGS) -Icsrc $(SQLITE_CFLAGS) -o $@ $< $(PURE_C_SRC) $(STORE_SQL_SRC) $(SQLITE_LIBS) $(LDFLAGS)

$(BUILD)/geoservices $(BUILD)/tests:
	mkdir -p $@

lint: deps
	$(LUACHECK) -q .
	luarocks lint rockspec/geoservices-scm-1.rockspec
	luarocks lint rockspec/geoservices-emulator-scm-1.rockspec

# Each C test runs natively, then under valgrind (which emulates x87 with
# doubles, so the parser's extended-precision fast path is only exercised
# natively).
ctest: $(CTESTS)
	@for t in $(CTESTS); do \
	  $$t || exit 1; \
	  if command -v valgrind >/dev/null && [ -z "$(SANFLAGS)" ]; then \
	    valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=all $$t > /dev/null || exit 1; \
	  fi; \
	done

busted: all
	@mkdir -p $(BUILD)
	$(BUSTED) -o TAP $(BUSTED_FLAGS) | tee $(BUILD)/busted.tap; exit $${PIPESTATUS[0]}

test: deps
	$(MAKE) WERROR=1 all
	$(MAKE) lint
	$(MAKE) WERROR=1 ctest
	$(MAKE) fuzz FUZZ_SECONDS=10
	$(MAKE) busted

# The crash torture of client:sync: RUNS client processes killed with SIGKILL
# at random (and the emulator in a share of them), then the tally; exit 1 on
# any duplicated, lost or skipped change. `make test` runs 15 (spec/torture_spec.lua).
RUNS ?= 200
torture: deps all
	LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='$(BUILD)/?.so;;' $(LUA) spec/torture/run.lua $(RUNS)

# Benchmarks: ratios against baselines measured in the same run (see README).
# BENCH_SIZES="10000 100000" shortens it.
bench: deps all
	LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='$(BUILD)/?.so;;' BENCH_DIR=$(BUILD)/bench $(LUA) spec/bench/run.lua
	@echo
	BUILD=$(BUILD) BENCH_DIR=$(BUILD)/bench $(LUA) spec/bench/concurrency.lua

# libFuzzer targets (clang, ASan + UBSan) over the pure C parts, each run for
# FUZZ_SECONDS; new inputs go to build/fuzz/, the seed corpus stays as it is.
FUZZ_SECONDS ?= 200
FUZZ_TARGETS  = jsonstream records urlencode gpkg_geom store_apply
FUZZ_CC      ?= clang
fuzz: deps
	@mkdir -p $(BUILD)/fuzz
	@for t in $(FUZZ_TARGETS); do \
	  $(FUZZ_CC) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Icsrc \
	    -D_POSIX_C_SOURCE=200809L -o $(BUILD)/fuzz/fuzz_$$t csrc/fuzz/fuzz_$$t.c $(PURE_C_SRC) \
	    $(STORE_SQL_SRC) $(SQLITE_CFLAGS) $(SQLITE_LIBS) || exit 1; \
	  mkdir -p $(BUILD)/fuzz/corpus_$$t; \
	  $(BUILD)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    $(BUILD)/fuzz/corpus_$$t csrc/fuzz/corpus/$$t > $(BUILD)/fuzz/$$t.log 2>&1; \
	  status=$$?; \
	  runs=$$(sed -n 's/^stat::number_of_executed_units: *//p' $(BUILD)/fuzz/$$t.log); \
	  echo "fuzz_$$t: $$runs executions in $(FUZZ_SECONDS) s, exit $$status"; \
	  if [ $$status -ne 0 ]; then tail -n 40 $(BUILD)/fuzz/$$t.log; exit 1; fi; \
	done

# The suite again, every C file built with ASan+UBSan into its own tree. Lua
# itself is not instrumented, so the runtime is preloaded; leak checking stays
# off there because lua5.4 exits without closing its state (valgrind covers leaks
# in `make ctest`).
ASAN_LIB = $(shell $(CC) -print-file-name=libasan.so)
asan: deps
	$(MAKE) BUILD=build/asan WERROR=1 CFLAGS="-O1 -g -fno-omit-frame-pointer" \
	  SANFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all" all ctest
	LD_PRELOAD=$(ASAN_LIB) ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(BUSTED) --cpath='build/asan/?.so' -o TAP | tee build/asan/busted.tap; exit $${PIPESTATUS[0]}

# The same program and options as `geoservices emulator` (geoservices.emulator.main);
# ARGS adds any of them: make emulator ARGS='--state-file state.json --verbose'.
emulator: deps all
	LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='$(BUILD)/?.so;;' \
	  $(LUA) lua/geoservices/emulator/main.lua --port $(PORT) --data $(DATA) $(ARGS)

# Start the emulator on a free port, run the tour against it, stop it by PID.
demo: deps all
	@LUA='$(LUA)' BUILD='$(BUILD)' DATA='$(DATA)' sh examples/run_with_emulator.sh examples/tour.lua examples/batch_sync.lua examples/configure_org.lua \
	  examples/cli_tour.sh

# A command: rockspec/geoservices.launcher running MODULE's main(arg).
launcher = sed -e 's|@LUA@|$(LUA)|' -e 's|@LUADIR@|$(LUADIR)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@MODULE@|$(1)|g' \
	  rockspec/geoservices.launcher > $(DESTDIR)$(BINDIR)/$(2) && chmod 0755 $(DESTDIR)$(BINDIR)/$(2)

# The client: core.so, every module but the emulator's, the geoservices command.
install: core
	install -d $(DESTDIR)$(LIBDIR)/geoservices $(DESTDIR)$(LUADIR)/geoservices $(DESTDIR)$(BINDIR)
	install -m 0755 $(CORE_SO) $(DESTDIR)$(LIBDIR)/geoservices/
	cd lua && for f in $$(find geoservices -name '*.lua' -not -path 'geoservices/emulator/*'); do \
	  install -D -m 0644 $$f $(DESTDIR)$(LUADIR)/$$f || exit 1; done
	$(call launcher,geoservices.cli,geoservices)

# The emulator: httpd.so, its modules, the example world it serves by default,
# the geoservices-emulator command. Needs the client installed (core, json).
install-emulator: httpd
	install -d $(DESTDIR)$(LIBDIR)/geoservices $(DESTDIR)$(LUADIR)/geoservices/emulator/data $(DESTDIR)$(BINDIR)
	install -m 0755 $(HTTPD_SO) $(DESTDIR)$(LIBDIR)/geoservices/
	cd lua && for f in $$(find geoservices/emulator -name '*.lua'); do \
	  install -D -m 0644 $$f $(DESTDIR)$(LUADIR)/$$f || exit 1; done
	install -m 0644 examples/data/world.json examples/data/sample.prvc $(DESTDIR)$(LUADIR)/geoservices/emulator/data/
	$(call launcher,geoservices.emulator.main,geoservices-emulator)

uninstall:
	rm -rf $(DESTDIR)$(LIBDIR)/geoservices $(DESTDIR)$(LUADIR)/geoservices $(DESTDIR)$(BINDIR)/geoservices \
	  $(DESTDIR)$(BINDIR)/geoservices-emulator

# The API reference (lua-ldoc) from the doc comments of lua/geoservices.
docs: deps
	rm -rf $(BUILD)/docs
	ldoc -c rockspec/config.ld -d $(abspath $(BUILD))/docs .

clean:
	rm -rf build

# Airlock build. `make` builds everything into build/; `make SAN=1` builds
# the same with ASan+UBSan into build-san/ (what `make test` uses).
#   make run | up | down | test | bench | bench-scale | deps | fuzz | lint | clean

CC      ?= cc
SAN     ?= 0
B       := $(if $(filter 1,$(SAN)),build-san,build)

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
           -Wmissing-prototypes -Wformat=2 -Wformat-nonliteral -Wvla
CSTD    := -std=gnu17
HARDEN  := -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fPIE
OPT     := -O2 -g
SAN_ON   := -fsanitize=address,undefined -fno-omit-frame-pointer \
            -fno-sanitize-recover=undefined
SANFLAGS := $(if $(filter 1,$(SAN)),$(SAN_ON))
CPPFLAGS += -Icore -I/usr/include/postgresql -I/usr/include/luajit-2.1
CFLAGS  += $(CSTD) $(OPT) $(WARN) $(HARDEN) $(SANFLAGS) -D_GNU_SOURCE
LDFLAGS += $(SANFLAGS) -pie -Wl,-z,relro,-z,now -Wl,--as-needed

# sysfilter_gen.c is a build tool: its output, not itself, is in the library.
# A family of modules with one consumer has a subfolder (core/vm/); its
# headers are included by path from core/ ("vm/qmp.h").
CORE_SRC := $(filter-out core/sysfilter_gen.c,$(wildcard core/*.c core/*/*.c))
CORE_OBJ := $(CORE_SRC:%.c=$(B)/obj/%.o) $(B)/obj/gen/sysfilter_bpf.o
LIBAL    := $(B)/libairlock.a
CORE_LIBS := -lpq -ljson-c -lbtrfsutil -lcap -lcrypto -larchive -lluajit-5.1 \
             -lpthread -lmnl -lnftnl -lssl -levent_openssl -levent

FCGI_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(wildcard fcgi/*.c))
SHIM_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(wildcard shim/*.c))
CTL_OBJ  := $(patsubst %.c,$(B)/obj/%.o,$(wildcard controller/*.c))
CLI_OBJ  := $(patsubst %.c,$(B)/obj/%.o,$(wildcard cli/*.c))
BLD_OBJ  := $(patsubst %.c,$(B)/obj/%.o,$(wildcard builder/*.c))
GW_OBJ   := $(patsubst %.c,$(B)/obj/%.o,$(wildcard gateway/*.c))
# The agent runs inside sandboxes: static, no sanitizers, only the codec
# and error modules of core.
AGENT_SRC := $(wildcard guest/*.c) core/agentproto.c core/err.c core/log.c \
             core/hex.c core/jsonkey.c

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)

PROGS := $(B)/airlock-fcgi $(B)/airlock-shim $(B)/airlock-controller \
         $(B)/airlock $(B)/airlock-agent \
         $(if $(BLD_OBJ),$(B)/airlock-builder) \
         $(if $(GW_OBJ),$(B)/airlock-gateway) $(B)/netslot-tool \
         $(B)/netslot-bench $(B)/egress-tool $(B)/cred-tool

.PHONY: all deps run up down test unit integration bench bench-scale fuzz lint clean
all: $(PROGS)

# The headers of the packages `make deps` installs, checked once per build
# directory before anything compiles: a machine without them gets one line
# that says what to run, not a compiler error about fcgiapp.h.
DEP_HEADERS := fcgiapp.h libpq-fe.h json-c/json.h btrfsutil.h \
               sys/capability.h openssl/evp.h archive.h seccomp.h \
               curl/curl.h lua.h cmocka.h libmnl/libmnl.h libnftnl/rule.h
DEPS_OK := $(B)/.deps-ok
$(DEPS_OK):
	@missing=; for h in $(DEP_HEADERS); do \
	  printf '#include <stdarg.h>\n#include <stddef.h>\n#include <setjmp.h>\n#include <%s>\n' "$$h" | \
	    $(CC) $(CPPFLAGS) -E -x c - >/dev/null 2>&1 || \
	    missing="$$missing $$h"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "airlock: missing development headers:$$missing;" \
	    "run: make deps" >&2; \
	  exit 1; \
	fi
	@mkdir -p $(dir $@) && touch $@

$(B)/obj/%.o: %.c $(wildcard */*.h core/*/*.h) | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# The jails' seccomp programs, compiled by libseccomp when Airlock is built
# (core/sysfilter_gen.c): a jail's start then costs no filter generation.
$(B)/sysfilter-gen: core/sysfilter_gen.c | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CSTD) $(OPT) $(WARN) -D_GNU_SOURCE -o $@ $< \
	  -lseccomp
$(B)/gen/sysfilter_bpf.c: $(B)/sysfilter-gen
	@mkdir -p $(dir $@)
	$< >$@.tmp && mv $@.tmp $@
$(B)/obj/gen/sysfilter_bpf.o: $(B)/gen/sysfilter_bpf.c core/sysfilter_internal.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(LIBAL): $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/airlock-fcgi: $(FCGI_OBJ) $(LIBAL)
	$(CC) $(LDFLAGS) -o $@ $^ -lfcgi $(CORE_LIBS)
$(B)/airlock-shim: $(SHIM_OBJ) $(LIBAL)
	$(CC) $(LDFLAGS) -o $@ $^ $(CORE_LIBS)
$(B)/airlock-controller: $(CTL_OBJ) $(LIBAL)
	$(CC) $(LDFLAGS) -o $@ $^ $(CORE_LIBS)
$(B)/airlock-builder: $(BLD_OBJ) $(LIBAL)
	$(CC) $(LDFLAGS) -o $@ $^ $(CORE_LIBS)
$(B)/airlock-gateway: $(GW_OBJ) $(LIBAL)
	$(CC) $(LDFLAGS) -o $@ $^ $(CORE_LIBS)
# Its gateway command plays the controller's mint service too
# (tests/integration/gwhost.c, which bench/gwrun.c builds from as well).
$(B)/netslot-tool: tests/integration/netslot_tool.c \
                   tests/integration/gwhost.c tests/integration/gwhost.h \
                   $(B)/obj/controller/mint.o $(LIBAL)
	$(CC) $(CPPFLAGS) -Icontroller $(CFLAGS) $(LDFLAGS) -o $@ \
	  $(filter-out %.h,$^) $(CORE_LIBS)
$(B)/egress-tool: tests/integration/egress_tool.c $(LIBAL)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(CORE_LIBS)
$(B)/cred-tool: tests/integration/cred_tool.c $(LIBAL)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(CORE_LIBS)
$(B)/netslot-bench: bench/netslot.c $(LIBAL)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(CORE_LIBS)
$(B)/airlock: $(CLI_OBJ) $(LIBAL)
	$(CC) $(LDFLAGS) -o $@ $^ -lcurl $(CORE_LIBS)

$(B)/airlock-agent: $(AGENT_SRC) guest/nic.h core/agentproto.h core/err.h \
                   core/log.h core/hex.h core/jsonkey.h | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -O2 -g $(WARN) -fstack-protector-strong \
	  -D_FORTIFY_SOURCE=2 -D_GNU_SOURCE -Icore -static -o $@ \
	  $(AGENT_SRC) -l:libjson-c.a

$(B)/tests/%: tests/unit/%.c $(LIBAL)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Itests/unit $(LDFLAGS) -o $@ $< $(LIBAL) \
	  -lcmocka $(CORE_LIBS)

# The guest kernel of the vm driver comes with the other dependencies;
# without it the stack still runs, with ns only.
deps:
	@scripts/deps.sh
	@$(MAKE) -s vm-kernel || echo "deps: no guest kernel (make vm-kernel" \
	  "failed): the vm driver stays unavailable" >&2

run:
	@scripts/deps.sh && $(MAKE) -s all && scripts/stack.sh run
up:
	@scripts/deps.sh && $(MAKE) -s all && scripts/stack.sh up
down:
	@scripts/stack.sh down

unit: $(UNIT_BIN)
	@scripts/run-unit.sh $(UNIT_BIN)

# The README's test command: deps, sanitizer build, unit tests, fuzz
# regression runs, then the integration suite against a private stack.
test:
	@scripts/test.sh

# Sandbox lifecycle (ns and vm) beside bwrap and a cold QEMU boot, then
# template builds and their disk cost, then network slots (core/net)
# beside the same slot made by hand with ip and nft, then the egress
# gateway beside direct connections and squid.
bench:
	@scripts/deps.sh && $(MAKE) -s all && bench/run.sh && bench/build.sh && \
	  $(B)/netslot-bench && AIRLOCK_BUILD=$(B) bench/gateway.sh

# Issue 9's rows that hold many sandboxes at once (minutes).
bench-scale:
	@scripts/deps.sh && $(MAKE) -s all && bench/scale.sh

fuzz:
	@scripts/fuzz.sh $(FUZZ_SRC)

# Every tracked C source (core/vm/ and guest/init/ too) against
# .clang-format; scripts/format.sh applies it.
lint:
	@scripts/format.sh --check

clean:
	rm -rf build build-san

-include mk/vm.mk

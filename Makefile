# Airlock build. `make` builds everything into build/; `make SAN=1` builds
# the same with ASan+UBSan into build-san/ (what `make test` uses).
#   make run | up | down | test | bench | bench-scale | deps | fuzz | lint | clean
#   make tools: the helpers tests and benchmarks drive the libraries with

CC      ?= cc
SAN     ?= 0
B       := $(if $(filter 1,$(SAN)),build-san,build)

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
           -Wmissing-prototypes -Wformat=2 -Wformat-nonliteral -Wvla \
           -Wswitch-enum
CSTD    := -std=gnu17
HARDEN  := -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fPIE
OPT     := -O2 -g
SAN_ON   := -fsanitize=address,undefined -fno-omit-frame-pointer \
            -fno-sanitize-recover=undefined
SANFLAGS := $(if $(filter 1,$(SAN)),$(SAN_ON))
CPPFLAGS += -Icore -I/usr/include/postgresql -I/usr/include/luajit-2.1
# Another guest RAM size for every vm of a build, in a build dir of its
# own (core/vm/guest.h): make B=build-1g VM_MEM_MB=1024 build-1g/tests/...
CPPFLAGS += $(if $(VM_MEM_MB),-DAL_VM_MEM_MB=$(VM_MEM_MB))
CFLAGS  += $(CSTD) $(OPT) $(WARN) $(HARDEN) $(SANFLAGS) -D_GNU_SOURCE
LDFLAGS += $(SANFLAGS) -pie -Wl,-z,relro,-z,now -Wl,--as-needed

# core/ is one folder per domain, each a library of its own
# ($(B)/lib/libal-<folder>.a); code only the gateway uses is gateway/gw/
# (libal-gw.a). Headers are included by path from core/ ("base/err.h",
# "vm/qmp.h") or, for the gateway's, from gateway/ ("gw/http.h").
# LIB_ORDER lists every library before the ones it uses (the folder graph
# has no cycle: docs/architecture.md), which is the order a static link
# wants; each program names the libraries it needs and is linked with
# those, in that order. host/sysfilter_gen.c is a build tool: its output
# (gen/sysfilter_bpf.c), not itself, is in libal-host.a.
LIB_ORDER := sandbox template jail vm model cred net gw ca pool host \
             policy proto base
lib_src   = $(filter-out core/host/sysfilter_gen.c,$(wildcard \
              $(if $(filter gw,$(1)),gateway/gw,core/$(1))/*.c))
lib_obj   = $(patsubst %.c,$(B)/obj/%.o,$(call lib_src,$(1))) \
            $(if $(filter host,$(1)),$(B)/obj/gen/sysfilter_bpf.o)
LIB_FILE  = $(B)/lib/libal-$(1).a
# The libraries of a program, in link order.
libs_of   = $(foreach l,$(LIB_ORDER),$(if $(filter $(l),$(1)),$(call LIB_FILE,$(l))))
# Everything in one archive, for the tests, fuzzers and benchmarks.
LIBAL    := $(B)/libairlock.a
CORE_LIBS := -lpq -ljson-c -lbtrfsutil -lcap -lcrypto -larchive -lluajit-5.1 \
             -lpthread -lmnl -lnftnl -lssl -levent_openssl -levent

FCGI_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(wildcard fcgi/*.c))
SHIM_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(wildcard shim/*.c))
CTL_OBJ  := $(patsubst %.c,$(B)/obj/%.o,$(wildcard controller/*.c))
CLI_OBJ  := $(patsubst %.c,$(B)/obj/%.o,$(wildcard cli/*.c))
BLD_OBJ  := $(patsubst %.c,$(B)/obj/%.o,$(wildcard builder/*.c))
GW_OBJ   := $(patsubst %.c,$(B)/obj/%.o,$(wildcard gateway/*.c))

# Each program's libraries (what its objects call, and what those call).
FCGI_LIBS := sandbox template jail vm model cred net pool host policy \
             proto base
SHIM_LIBS := sandbox jail vm model cred net pool host policy proto base
CTL_LIBS  := sandbox jail vm model cred net ca pool host policy proto base
CLI_LIBS  := template model cred net pool host policy proto base
BLD_LIBS  := template jail vm model cred net ca pool host policy proto base
GW_LIBS   := gw cred net ca host policy proto base
# The agent runs inside sandboxes: static, no sanitizers, only the codec
# and error modules of core.
AGENT_SRC := $(wildcard guest/*.c) core/proto/agentproto.c core/base/err.c \
             core/base/log.c core/base/hex.c core/base/jsonkey.c \
             core/base/clock.c

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)

PROGS := $(B)/airlock-fcgi $(B)/airlock-shim $(B)/airlock-controller \
         $(B)/airlock $(B)/airlock-agent $(B)/airlock-builder \
         $(B)/airlock-gateway
# What the tests and benchmarks drive the libraries with (make tools).
TOOLS := $(B)/netslot-tool $(B)/netslot-bench $(B)/egress-tool \
         $(B)/cred-tool

.PHONY: all tools deps run up down test unit integration bench bench-scale \
        fuzz lint clean
all: $(PROGS)
tools: $(TOOLS) $(LIBAL)

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

# -MMD: each object's header dependencies, read back below.
$(B)/obj/%.o: %.c | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@
# The gateway's own modules, and what tests them, reach them as "gw/x.h".
$(B)/obj/gateway/%.o: CPPFLAGS += -Igateway
-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)

# The jails' seccomp programs, compiled by libseccomp when Airlock is built
# (core/host/sysfilter_gen.c): a jail's start then costs no filter generation.
$(B)/sysfilter-gen: core/host/sysfilter_gen.c | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CSTD) $(OPT) $(WARN) -D_GNU_SOURCE -o $@ $< \
	  -lseccomp
$(B)/gen/sysfilter_bpf.c: $(B)/sysfilter-gen
	@mkdir -p $(dir $@)
	$< >$@.tmp && mv $@.tmp $@
$(B)/obj/gen/sysfilter_bpf.o: $(B)/gen/sysfilter_bpf.c core/host/sysfilter_internal.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(foreach l,$(LIB_ORDER),$(eval $(call LIB_FILE,$(l)): $(call lib_obj,$(l))))
$(B)/lib/%.a:
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^
$(LIBAL): $(foreach l,$(LIB_ORDER),$(call lib_obj,$(l)))
	@rm -f $@
	ar rcs $@ $^

$(B)/airlock-fcgi: $(FCGI_OBJ) $(call libs_of,$(FCGI_LIBS))
	$(CC) $(LDFLAGS) -o $@ $^ -lfcgi $(CORE_LIBS)
$(B)/airlock-shim: $(SHIM_OBJ) $(call libs_of,$(SHIM_LIBS))
	$(CC) $(LDFLAGS) -o $@ $^ $(CORE_LIBS)
$(B)/airlock-controller: $(CTL_OBJ) $(call libs_of,$(CTL_LIBS))
	$(CC) $(LDFLAGS) -o $@ $^ $(CORE_LIBS)
$(B)/airlock-builder: $(BLD_OBJ) $(call libs_of,$(BLD_LIBS))
	$(CC) $(LDFLAGS) -o $@ $^ $(CORE_LIBS)
$(B)/airlock-gateway: $(GW_OBJ) $(call libs_of,$(GW_LIBS))
	$(CC) $(LDFLAGS) -o $@ $^ $(CORE_LIBS)
# Its gateway command plays the controller's mint service too
# (tests/integration/gwhost.c, which bench/gwrun.c builds from as well).
$(B)/netslot-tool: tests/integration/netslot_tool.c \
                   tests/integration/gwhost.c tests/integration/gwhost.h \
                   $(B)/obj/controller/mint.o $(LIBAL)
	$(CC) $(CPPFLAGS) -Icontroller -Igateway $(CFLAGS) $(LDFLAGS) -o $@ \
	  $(filter-out %.h,$^) $(CORE_LIBS)
$(B)/egress-tool: tests/integration/egress_tool.c $(LIBAL)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(CORE_LIBS)
$(B)/cred-tool: tests/integration/cred_tool.c $(LIBAL)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(CORE_LIBS)
$(B)/netslot-bench: bench/netslot.c $(LIBAL)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(CORE_LIBS)
$(B)/airlock: $(CLI_OBJ) $(call libs_of,$(CLI_LIBS))
	$(CC) $(LDFLAGS) -o $@ $^ -lcurl $(CORE_LIBS)

$(B)/airlock-agent: $(AGENT_SRC) guest/nic.h core/proto/agentproto.h \
                   core/base/err.h core/base/log.h core/base/hex.h \
                   core/base/jsonkey.h core/base/clock.h | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -O2 -g $(WARN) -fstack-protector-strong \
	  -D_FORTIFY_SOURCE=2 -D_GNU_SOURCE -Icore -static -o $@ \
	  $(AGENT_SRC) -l:libjson-c.a

$(B)/tests/%: tests/unit/%.c $(LIBAL)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Igateway $(CFLAGS) -Itests/unit $(LDFLAGS) -o $@ $< \
	  $(LIBAL) \
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
	@scripts/deps.sh && $(MAKE) -s all tools && bench/run.sh && bench/build.sh && \
	  $(B)/netslot-bench && AIRLOCK_BUILD=$(B) bench/gateway.sh

# Issue 9's rows that hold many sandboxes at once (minutes).
bench-scale:
	@scripts/deps.sh && $(MAKE) -s all tools && bench/scale.sh

fuzz:
	@scripts/fuzz.sh $(FUZZ_SRC)

# Every tracked C source (core/vm/ and guest/init/ too) against
# .clang-format; scripts/format.sh applies it.
lint:
	@scripts/format.sh --check

clean:
	rm -rf build build-san

-include mk/vm.mk

# vm driver pieces, included by the top-level Makefile.
#   make build/airlock-init   static PID 1 of the guest (guest/init/)
#   make vm-kernel            guest kernel + modules + initrd into the state
#                             dir ($AIRLOCK_STATE, default ./var)

INIT_SRC := $(wildcard guest/init/*.c) guest/nic.c core/base/hex.c
AL_STATE ?= $(or $(AIRLOCK_STATE),$(CURDIR)/var)

all: $(B)/airlock-init

# Like the agent: static, no sanitizers, runs inside the sandbox.
$(B)/airlock-init: $(INIT_SRC) guest/nic.h core/base/hex.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -O2 -g $(WARN) -fstack-protector-strong \
	  -D_FORTIFY_SOURCE=2 -D_GNU_SOURCE -Icore -static -o $@ $(INIT_SRC)

.PHONY: vm-kernel
vm-kernel: $(B)/airlock-init
	@scripts/vm-kernel.sh $(AL_STATE) $(B)/airlock-init

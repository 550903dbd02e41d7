# mepgen.mk -- `make optimize KERNEL=foo` for an application's own Makefile.
#
#   include path/to/mepgen/integrations/make/mepgen.mk
#   make optimize KERNEL=heat::diffuse_step            # extract -> mep -> optimize -> patch preview (a diff)
#   make optimize KERNEL=heat::diffuse_step APPLY=1    # ... and apply the patch (backup kept, then validated)
#   make mepgen-revert KERNEL=heat::diffuse_step       # restore the patched file
#   make optimize MEPGEN_RUN='./app args'              # no KERNEL: the whole path, `mepgen tune -- ./app args`
#   make mepgen-tune MEPGEN_RUN='./app args'           #   (capture, optimize, patch, rebuild, check, time)
#
# Every step writes under $(MEPGEN_APP)/.mepgen/ and can be rerun alone. A step that needs a person (a size
# mepgen could not infer) stops the chain with a one-line message naming the field of mep.yaml to set; edit
# it and run `make optimize` again: the edited mep.yaml is kept.

MEPGEN ?= mepgen
MEPGEN_APP ?= $(CURDIR)
MEPGEN_EXTRACT_FLAGS ?=
MEPGEN_MEP_FLAGS ?=
MEPGEN_OPTIMIZE_FLAGS ?=
MEPGEN_PATCH_FLAGS ?=
MEPGEN_TUNE_FLAGS ?=
MEPGEN_RUN ?=
KERNEL ?=
APPLY ?=

.PHONY: optimize mepgen-tune mepgen-extract mepgen-mep mepgen-optimize mepgen-patch mepgen-revert mepgen-list mepgen-kernel

mepgen-kernel:
	@test -n "$(KERNEL)" || { echo "mepgen.mk: name the kernel: make optimize KERNEL=<name> (make mepgen-list shows them)" >&2; exit 2; }

mepgen-extract:
	$(MEPGEN) extract $(MEPGEN_APP) $(MEPGEN_EXTRACT_FLAGS)

mepgen-list: mepgen-extract
	$(MEPGEN) list -C $(MEPGEN_APP)

mepgen-mep: mepgen-kernel mepgen-extract
	$(MEPGEN) mep -C $(MEPGEN_APP) --keep-edits $(MEPGEN_MEP_FLAGS) '$(KERNEL)'

mepgen-optimize: mepgen-mep
	$(MEPGEN) optimize -C $(MEPGEN_APP) $(MEPGEN_OPTIMIZE_FLAGS) '$(KERNEL)'

mepgen-patch: mepgen-kernel
	$(MEPGEN) patch -C $(MEPGEN_APP) $(MEPGEN_PATCH_FLAGS) $(if $(APPLY),--apply) '$(KERNEL)'

mepgen-tune:
	@test -n "$(MEPGEN_RUN)" || { echo "mepgen.mk: set the application's run command: make mepgen-tune MEPGEN_RUN='./app args'" >&2; exit 2; }
	$(MEPGEN) tune -C $(MEPGEN_APP) $(MEPGEN_TUNE_FLAGS) -- $(MEPGEN_RUN)

ifeq ($(strip $(KERNEL)),)
ifneq ($(strip $(MEPGEN_RUN)),)
optimize: mepgen-tune
else
optimize: mepgen-optimize
endif
else
optimize: mepgen-optimize
	$(MEPGEN) patch -C $(MEPGEN_APP) $(MEPGEN_PATCH_FLAGS) $(if $(APPLY),--apply) '$(KERNEL)'
endif

mepgen-revert: mepgen-kernel
	$(MEPGEN) patch -C $(MEPGEN_APP) --revert '$(KERNEL)'

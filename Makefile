# fwman: the two commands a newcomer runs are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev
DEMO_STAMP := $(VENV)/.installed

# Debian packages the tests use: dkms, depmod/modinfo, run-parts, systemd-analyze, git (its daemon too, for the
# story suite), openssl, compressors; initramfs-tools, cpio and mokutil for the initramfs and Secure Boot tests,
# dpkg-dev for the local apt repository of the hold test; the Debian package build (build-essential, debhelper,
# dh-virtualenv, lintian); bsdtar (libarchive-tools) for the update-package tests; mmdebstrap for the story suite;
# podman, crun and fuse-overlayfs, docker.io, containerd and runc for the container audit tests (the units their
# packages enable are disabled again at once; the Docker tests start a private dockerd by hand); groff-base (groff
# and preconv: what `man` runs) for the man page test.
# osslsigncode: fwman verifies a board maker's Authenticode-signed update program with `osslsigncode verify`
# (fwman/firmware/ops/authenticode.py), and tests/system/test_signed_package.py signs its PE fixtures with it.
# Not listed, on purpose: the Prometheus server (only its promtool is unpacked: --promtool) and the kernel headers
# (two kernels whose pci_resize_resource() differs, chosen from what apt offers: --test-kernels, kernels.py).
# tests/support/system_deps.py: apt upgrades only what these packages need (said, one line each), nothing is left
# enabled or running that was not before.
APT_PACKAGES := dkms kmod debianutils systemd git make gcc openssl xz-utils zstd libc6-dev grub2-common 7zip \
	initramfs-tools cpio mokutil dpkg-dev build-essential debhelper dh-virtualenv lintian python3-venv \
	libarchive-tools mmdebstrap podman crun fuse-overlayfs docker.io containerd runc groff-base osslsigncode

LINT_PATHS := fwman tests fixtures bench
#: the edit loop's tests: everything but tests/system (root, Debian packages, minutes) and tests/story
CHECK_TESTS := tests/unit tests/adversarial tests/architecture tests/fixtures_selftest
PYTEST := $(VENV)/bin/pytest -q -p no:cacheprovider

.PHONY: demo test check story venv lint system-deps clean deb

#: pip's and setuptools' own chatter goes to a log (shown when the install fails), not into the newcomer's demo
$(DEMO_STAMP): pyproject.toml
	@echo "installing fwman into $(VENV) (log: $(VENV)/install.log)"
	@$(PYTHON) -m venv $(VENV)
	@{ $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q -e .; } >$(VENV)/install.log 2>&1 \
		|| { tail -n 30 $(VENV)/install.log; echo "make: the install failed (whole log: $(VENV)/install.log)"; exit 1; }
	@touch $@

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@ $(DEMO_STAMP)

## demo: install fwman in .venv and run its main job on the bundled example host (a recorded 4x RTX 3090 box)
demo: $(DEMO_STAMP)
	@bash fixtures/demo.sh $(VENV)/bin/fwman

## check: the edit loop (under 3 minutes, no root): ruff, ruff format --check, mypy, the tests outside tests/system
## and tests/story, spread over every core (pytest-xdist -n auto)
check: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy
	$(PYTEST) -n auto -m 'not system and not story' $(CHECK_TESTS)

## test: everything (what CI runs): ruff, mypy (strict), every test including tests/system and tests/story; as
## root it first installs the Debian packages the tests need (system-deps)
test: $(STAMP) system-deps
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy
	$(PYTEST)

## story: only the story suite (tests/story, root); one story: make story K=kernel_update (pytest -k)
story: $(STAMP) system-deps
	$(PYTEST) -m story tests/story $(if $(K),-k '$(K)')

## system-deps: as root, the Debian packages the tests need (upgrades only what they need, said one line each;
## nothing left enabled or running that was not before)
system-deps:
	@python3 -m tests.support.system_deps --test-kernels --promtool $(APT_PACKAGES)

## deb: build the Debian package (debian/; needs debhelper and dh-virtualenv, and PyPI for the private Python
## environment) into dist/, checked with lintian, for this machine's Debian release or RELEASE=bookworm|trixie
## (Debian 12 or 13; another release than this machine's is built as root in a root of it made with mmdebstrap
## and cached in DEB_ROOTS). The build runs in a copy of the tracked tree (build/deb/RELEASE/).
#: the Debian releases the package is built for, code name:number
DEB_RELEASES := bookworm:12 trixie:13
HOST_RELEASE := $(shell . /etc/os-release 2>/dev/null && echo $$VERSION_CODENAME)
RELEASE ?= $(HOST_RELEASE)
DEB_MAJOR = $(patsubst $(RELEASE):%,%,$(filter $(RELEASE):%,$(DEB_RELEASES)))
DEB_BUILD = build/deb/$(RELEASE)
DEB_ROOTS ?= build/deb-roots
deb:
	@test -n "$(DEB_MAJOR)" || { echo "make deb: RELEASE=$(RELEASE) is not a release the package is built for:" \
		"$(DEB_RELEASES) (make deb RELEASE=trixie)" >&2; exit 2; }
	rm -rf $(DEB_BUILD) && mkdir -p $(DEB_BUILD)/src dist
	git ls-files -co --exclude-standard | tar -cf - -T - | tar -C $(DEB_BUILD)/src -xf -
	set -o pipefail; DEB_DATE="$$(git log -1 --format=%cD)" DEB_ROOTS=$(DEB_ROOTS) \
		debian/build-release $(RELEASE) $(DEB_MAJOR) $(DEB_BUILD)/src $(DEB_BUILD) | tee $(DEB_BUILD)/log
	rm -f dist/fwman_*+deb$(DEB_MAJOR)_*.deb && cp "$$(tail -1 $(DEB_BUILD)/log)" dist/
	@echo "built dist/$$(basename "$$(tail -1 $(DEB_BUILD)/log)") for Debian $(DEB_MAJOR) ($(RELEASE))"

clean:
	rm -rf $(VENV) build/deb build/deb-roots .mypy_cache .ruff_cache .pytest_cache .hypothesis .cache/system-deps

# fwman: the two commands a newcomer runs are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev
DEMO_STAMP := $(VENV)/.installed

# Debian packages the system tests use (real kernel headers for two kernels whose pci_resize_resource()
# differs, dkms, depmod/modinfo, run-parts, systemd-analyze, sign-file, git, openssl, compressors, promtool;
# initramfs-tools, cpio and mokutil for the initramfs and Secure Boot tests, dpkg-dev for the local apt repository
# of the hold test; the Debian package build: build-essential, debhelper, dh-virtualenv, lintian).
KERNELS ?= 6.1.0-50-amd64 6.1.0-53-amd64
APT_PACKAGES := $(addprefix linux-headers-,$(KERNELS)) dkms kmod debianutils systemd git make gcc \
	openssl xz-utils zstd libc6-dev grub2-common 7zip prometheus initramfs-tools cpio mokutil dpkg-dev \
	build-essential debhelper dh-virtualenv lintian python3-venv

.PHONY: demo test venv lint typecheck pytest system-deps clean deb

$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@ $(DEMO_STAMP)

## demo: install fwman in .venv and run its main job on the bundled example host (a recorded 4x RTX 3090 box)
demo: $(DEMO_STAMP)
	@bash fixtures/demo.sh $(VENV)/bin/fwman

## test: ruff, mypy (strict) and pytest; as root it first installs the Debian packages the system tests need
test: $(STAMP) system-deps
	$(VENV)/bin/ruff check fwman tests fixtures bench
	$(VENV)/bin/ruff format --check fwman tests fixtures bench
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -q -p no:cacheprovider

system-deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
		if [ -n "$$missing" ]; then \
			echo "installing Debian packages for the system tests:$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
		fi; \
	else echo "not root (or no apt): system tests that need Debian packages will be skipped"; fi

## deb: build the Debian package (debian/; needs debhelper and dh-virtualenv, and PyPI for the private Python
## environment) into dist/, and check it with lintian. The build runs in a copy of the tracked tree (build/deb/).
DEB_BUILD := build/deb
deb:
	rm -rf $(DEB_BUILD) && mkdir -p $(DEB_BUILD)/src dist
	git ls-files -co --exclude-standard | tar -cf - -T - | tar -C $(DEB_BUILD)/src -xf -
	cd $(DEB_BUILD)/src && dpkg-buildpackage -b -us -uc
	rm -f dist/fwman_*.deb && cp $(DEB_BUILD)/fwman_*.deb dist/
	lintian --fail-on error --info dist/fwman_*.deb
	@ls -l dist/fwman_*.deb

clean:
	rm -rf $(VENV) build/deb .mypy_cache .ruff_cache .pytest_cache .hypothesis

"""Real Debian roots (Debian 12 by default, Debian 13 on request) for the story suite (tests/story/) and the
package tests: mmdebstrap, a loop-mounted ext4 root, real GRUB.

A root is an ext4 filesystem in a sparse image file, attached to a loop device numbered 10 or more and mounted
only inside a private PID and mount namespace (``unshare --pid --fork --mount``) for the length of one command:

- every mount (the image, ``/proc``, ``/sys``, ``/dev``, a tmpfs ``/run`` and ``/tmp``, apt's archive cache)
  belongs to that namespace, so the kernel takes them all down when the command ends, however it ends; the loop
  device is attached with autoclear (``mount -o loop=``) and detaches with the last unmount;
- ``/proc`` is mounted fresh in the new PID namespace, so ``/proc/1`` is the command's own shell and not
  Docker's: ``systemd-detect-virt --container`` answers "none" inside the root (``/.dockerenv`` is outside it),
  and ``/etc/kernel/postinst.d/zz-update-grub`` runs ``update-grub`` as on a real machine instead of exiting;
- ``/`` is a real block device, so ``grub-probe`` resolves it and ``grub-mkconfig`` writes the real boot menu.
  The device is ``/dev/loop10`` or higher on purpose: grub-mkconfig_lib treats ``/dev/loop[0-9]`` (one digit)
  as a file on another disk and emits ``loopback`` commands probing the disk that holds the image, which a
  container's disk is not; ``/dev/loopNN`` is probed as a disk of its own (an unpartitioned one: this machine's
  kernel has no partition-table support, ``CONFIG_MSDOS_PARTITION`` is off, and no device-mapper).

Roots start from tarballs cached in ``/var/cache/fwman-story`` (``FWMAN_STORY_CACHE``), each named by a hash of
what went into it: the base of a suite (``mmdebstrap`` from the Debian sources of this machine's own apt
configuration, with the suite changed for another release: ``base_tarball("trixie")``; the suite is part of the
key) and the Debian 12 "owner's machine" layer (base + GRUB's menu and environment + one kernel). Downloaded
packages are kept in ``archives/`` there and bound into every root as ``/var/cache/apt/archives``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("FWMAN_STORY_CACHE", "/var/cache/fwman-story"))
ARCHIVES = CACHE / "archives"
SUITE = "bookworm"  # the default suite of every root
#: the suites a base root can be made of, code name: Debian release number
SUITES = {"bookworm": "12", "trixie": "13"}
#: what the base root holds besides apt: what an owner's Debian 12 (or 13) machine with GRUB has, plus the build tools
#: fwman recommends (git, make, gcc) and python3 (fwman's package depends on it). No kernel: layers add them.
BASE_PACKAGES = (
    "systemd",
    "kmod",
    "git",
    "make",
    "gcc",
    "libc6-dev",
    "grub-pc",
    "initramfs-tools",
    "linux-base",
    "zstd",
    "xz-utils",
    "python3",
    "apt-utils",
)
#: grub-pc asks where to install the boot loader; a root in an image file has no disk to install it to
GRUB_PRESEED = "grub-pc grub-pc/install_devices_empty boolean true\ngrub-pc grub-pc/install_devices multiselect \n"
RECIPE = 3  # bump when the way a tarball is made changes (it is part of every cache key)
LOOP_CTL_ADD, LOOP_CTL_REMOVE = 0x4C80, 0x4C81
ENV = (
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "
    "DEBIAN_FRONTEND=noninteractive"
)


class RootError(AssertionError):
    """A command in a story root failed; the message carries its output (what an owner would see)."""


def host_suite(os_release: Path = Path("/etc/os-release")) -> str:
    """Return this machine's Debian code name (``VERSION_CODENAME`` of /etc/os-release), else the default SUITE."""
    try:
        text = os_release.read_text()
    except OSError:
        return SUITE
    m = re.search(r"^VERSION_CODENAME=\"?([a-z]+)\"?$", text, re.MULTILINE)
    return m.group(1) if m else SUITE


def debian_sources(suite: str = SUITE, apt: Path = Path("/etc/apt"), own: str | None = None) -> str:
    """Return this machine's Debian apt sources for ``suite`` as deb822 text (other vendors' entries dropped).

    Read from ``/etc/apt/sources.list.d/*.sources`` and ``*.list`` and ``/etc/apt/sources.list``: the
    archive's address is this machine's, never one written into the repository. For a suite other than this
    machine's own release the entries of its release are taken with the code name changed (``bookworm`` ->
    ``trixie``, ``bookworm-updates`` -> ``trixie-updates``, ``bookworm-security`` -> ``trixie-security``): Debian
    12's debian-archive-keyring verifies trixie's Release files too (docs/debian-package.md). ``apt`` and ``own``
    (this machine's release, :func:`host_suite`) are parameters for the test of this reader. Raises RootError
    when there is none.
    """
    own = own or host_suite()
    if suite not in SUITES:
        raise RootError(f"no base root for suite {suite!r}: one of {', '.join(SUITES)}")

    def renamed(suites: str) -> str:
        return " ".join(suite + s[len(own) :] for s in suites.split() if s == own or s.startswith(f"{own}-"))

    stanzas: list[str] = []
    for path in sorted((apt / "sources.list.d").glob("*.sources")):
        for stanza in re.split(r"\n\s*\n", path.read_text()):
            fields = dict(
                (m.group(1).lower(), m.group(2).strip())
                for m in re.finditer(r"^([A-Za-z-]+):[ \t]*(.*)$", stanza, re.MULTILINE)
            )
            if fields.get("enabled", "yes") == "no" or "deb" not in fields.get("types", "").split():
                continue
            debian = "debian-archive-keyring" in fields.get("signed-by", "") or _debian_uri(fields.get("uris", ""))
            if debian and renamed(fields.get("suites", "")):
                lines = []
                for ln in stanza.splitlines():
                    if not ln.strip() or ln.lstrip().startswith("#"):
                        continue
                    if re.match(r"(?i)suites:", ln.strip()):
                        ln = f"Suites: {renamed(fields['suites'])}"
                    lines.append(ln)
                stanzas.append("\n".join(lines))
    lists = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.list"))]
    for path in lists:
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            m = re.match(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)\s+(.+)$", line.strip())
            if m and _debian_uri(m.group(1)) and renamed(m.group(2)):
                stanzas.append(
                    f"Types: deb\nURIs: {m.group(1)}\nSuites: {renamed(m.group(2))}\nComponents: {m.group(3)}\n"
                    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
                )
    if not stanzas:
        raise RootError(f"no Debian {own} source in /etc/apt/sources.list.d or /etc/apt/sources.list")
    return "\n\n".join(stanzas) + "\n"


def _debian_uri(uri: str) -> bool:
    return bool(re.search(r"/debian(-security)?/?(\s|$)", uri + " "))


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps([RECIPE, *parts], sort_keys=True, default=str).encode()).hexdigest()[:16]


def _run(argv: list[str], timeout: float, input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input_text)


def base_tarball(suite: str = SUITE) -> Path:
    """Return the cached base root tarball of ``suite`` (bookworm or trixie), making it with mmdebstrap first when
    it is missing (30 s here for bookworm). Raises RootError when mmdebstrap fails."""
    hook = f'--essential-hook=printf {shlex.quote(GRUB_PRESEED)} | chroot "$1" debconf-set-selections'
    return _tarball("base", suite, debian_sources(suite), BASE_PACKAGES, (hook,))


#: a newcomer's fresh machine for the README's set-up (tests/system/test_fresh_setup.py): apt and the essential
#: packages, plus what the README asks for before `make test`: git to clone, make, python3-venv
FRESH_PACKAGES = ("git", "make", "python3-venv")


def point_release_sources(sources: str) -> str:
    """Return deb822 ``sources`` with only the release itself in Suites (no -updates, -security, ...), stanzas
    left with none dropped: a root made from them holds the last point release, behind the archive as most
    installed machines are."""
    kept = []
    for stanza in re.split(r"\n\s*\n", sources.strip()):
        m = re.search(r"(?im)^Suites:[ \t]*(.*)$", stanza)
        bare = [x for x in (m.group(1).split() if m else []) if "-" not in x]
        if bare:
            kept.append(re.sub(r"(?im)^Suites:.*$", "Suites: " + " ".join(bare), stanza))
    return "\n\n".join(kept) + "\n"


def fresh_tarball(suite: str = SUITE) -> Path:
    """Return the cached tarball of a fresh machine of ``suite`` (:data:`FRESH_PACKAGES`, the point release only;
    its apt sources are the point release's too: write the full ones before use). Raises RootError."""
    return _tarball("fresh", suite, point_release_sources(debian_sources(suite)), FRESH_PACKAGES, ())


def _tarball(kind: str, suite: str, sources: str, include: tuple[str, ...], hooks: tuple[str, ...]) -> Path:
    """Return the cached ``kind`` tarball of ``suite`` made by mmdebstrap from ``sources`` with ``include``."""
    tarball = CACHE / f"{kind}-{_key(suite, sources, include, *hooks)}.tar"
    if tarball.is_file():
        return tarball
    with _cache_lock():  # another test process may be making it now: wait, then take its result
        if tarball.is_file():
            return tarball
        CACHE.mkdir(parents=True, exist_ok=True)
        ARCHIVES.mkdir(parents=True, exist_ok=True)
        spec = CACHE / f"{tarball.stem}.sources"
        spec.write_text(sources)
        partial = tarball.with_suffix(".tar.partial")
        argv = ["mmdebstrap", "--variant=apt", "--mode=root", "--format=tar", f"--include={','.join(include)}"]
        proc = _run([*argv, *hooks, suite, str(partial), str(spec)], timeout=1800)
        if proc.returncode != 0:
            partial.unlink(missing_ok=True)
            raise RootError(f"mmdebstrap failed:\n{proc.stdout[-4000:]}{proc.stderr[-4000:]}")
        partial.rename(tarball)  # a tarball is either complete or absent
        return tarball


#: loop numbers of this process's live roots: a root's device is unbound between its commands, so the kernel
#: alone cannot tell that it is taken
_TAKEN: set[int] = set()
#: one open, flock'ed file per loop number this process holds, so that other test processes (parallel runs of the
#: suite) skip it too; the kernel drops the lock when the process dies, so a crash leaves nothing claimed
_CLAIMS: dict[int, int] = {}
CLAIMS_DIR = Path("/run/lock")


def _claim(n: int) -> bool:
    """Return True when this process now holds loop number ``n`` against every other process."""
    CLAIMS_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(CLAIMS_DIR / f"fwman-story-loop{n}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _CLAIMS[n] = fd
    return True


def _release(n: int) -> None:
    fd = _CLAIMS.pop(n, None)
    if fd is not None:
        os.close(fd)  # closing drops the flock


@contextlib.contextmanager
def _cache_lock() -> Iterator[None]:
    """Hold the cache's lock, so that two test processes never make the same tarball at once."""
    CACHE.mkdir(parents=True, exist_ok=True)
    fd = os.open(CACHE / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _loop_device() -> int:
    """Return the number of an unused loop device >= 10, creating its node through /dev/loop-control."""
    fd = os.open("/dev/loop-control", os.O_RDWR)
    try:
        for n in range(10, 64):
            if n in _TAKEN or Path(f"/sys/block/loop{n}/loop/backing_file").exists():
                continue  # ours (another live root) or bound: someone else's
            if not _claim(n):
                continue  # another test process's root
            try:
                fcntl.ioctl(fd, LOOP_CTL_ADD, n)
            except OSError as e:
                if e.errno != errno.EEXIST:
                    raise
            _TAKEN.add(n)
            return n
    finally:
        os.close(fd)
    raise RootError("no free loop device between loop10 and loop63")


@dataclass
class DebRoot:
    """A Debian root in an image file; ``run`` executes a command inside it as a booted machine would."""

    image: Path
    loop: int
    mnt: Path

    @classmethod
    def create(cls, workdir: Path, tarball: Path, size_gb: int = 12) -> DebRoot:
        """Return a new root under ``workdir`` holding ``tarball``'s files (an ext4 image of ``size_gb``)."""
        workdir.mkdir(parents=True, exist_ok=True)
        image, mnt = workdir / "root.img", workdir / "mnt"
        mnt.mkdir(exist_ok=True)
        with image.open("wb") as f:
            f.truncate(size_gb << 30)
        proc = _run(["mkfs.ext4", "-q", "-F", "-L", "storyroot", str(image)], timeout=120)
        if proc.returncode != 0:
            raise RootError(f"mkfs.ext4: {proc.stderr}")
        root = cls(image, _loop_device(), mnt)
        try:
            root._ns(f'tar -xpf {shlex.quote(str(tarball))} -C "$MNT"', chroot=False, timeout=600)
        except BaseException:
            root.close()
            raise
        return root

    @property
    def device(self) -> str:
        """Return the loop device the root is mounted from (inside a command)."""
        return f"/dev/loop{self.loop}"

    def _ns(self, inner: str, *, chroot: bool = True, timeout: float = 1800, input_text: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:  # fmt: skip
        """Run ``inner`` (shell) in a private PID+mount namespace with the root mounted at $MNT."""
        q = shlex.quote
        mounts = [f'mount -o loop={self.device} {q(str(self.image))} "$MNT"']
        if chroot:
            ARCHIVES.mkdir(parents=True, exist_ok=True)
            mounts += [
                'mount -t proc proc "$MNT/proc"',
                'mount --rbind /sys "$MNT/sys"',
                'mount --rbind /dev "$MNT/dev"',
                'mount -t tmpfs tmpfs "$MNT/run"',
                'mount -t tmpfs tmpfs "$MNT/tmp"',
                'mkdir -p "$MNT/var/cache/apt/archives"',
                f'mount --bind {q(str(ARCHIVES))} "$MNT/var/cache/apt/archives"',
            ]
            inner = f'env -i {ENV} chroot "$MNT" /bin/sh -c {q(inner)}'
        script = "set -e\n" + "\n".join(mounts) + "\nset +e\n" + inner + "\n"
        unshare = ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--propagation", "private"]
        argv = [*unshare, "env", "-i", f"MNT={self.mnt}", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "/bin/sh", "-c", script]
        try:
            proc = _run(argv, timeout=timeout, input_text=input_text)
        except subprocess.TimeoutExpired as e:
            raise RootError(f"timed out after {timeout:.0f} s in the root: {inner[:300]}") from e
        if check and proc.returncode != 0:
            raise RootError(
                f"exit {proc.returncode} in the root: {inner[:300]}\n--- stdout\n{proc.stdout[-6000:]}"
                f"\n--- stderr\n{proc.stderr[-6000:]}"
            )
        return proc

    def sh(self, script: str, *, check: bool = True, timeout: float = 1800,
           input_text: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        """Run ``script`` with /bin/sh inside the root and return the result (RootError on failure with check)."""
        return self._ns(script, timeout=timeout, input_text=input_text, check=check)

    def run(self, *argv: str, check: bool = True, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside the root and return the result (RootError on a non-zero exit with check)."""
        return self.sh(shlex.join(argv), check=check, timeout=timeout)

    def read_text(self, path: str) -> str:
        """Return the text of ``path`` in the root (RootError when it cannot be read)."""
        return self.run("cat", "--", path).stdout

    def exists(self, path: str) -> bool:
        """Return True when ``path`` exists in the root (a dangling link counts)."""
        return self.sh(f"test -e {shlex.quote(path)} || test -L {shlex.quote(path)}", check=False).returncode == 0

    def write_text(self, path: str, text: str) -> None:
        """Write ``text`` to ``path`` in the root (parents made)."""
        q = shlex.quote(path)
        self.sh(f'mkdir -p "$(dirname {q})" && cat > {q}', input_text=text)

    def put(self, host_path: Path, path: str) -> None:
        """Copy the host file or directory ``host_path`` to ``path`` in the root."""
        q = shlex.quote
        self._ns(f'mkdir -p "$(dirname "$MNT"{q(path)})" && cp -a {q(str(host_path))} "$MNT"{q(path)}',
                 chroot=False)  # fmt: skip

    def get(self, path: str, host_path: Path) -> None:
        """Copy ``path`` of the root to the host file ``host_path``."""
        q = shlex.quote
        self._ns(f'cp -a "$MNT"{q(path)} {q(str(host_path))}', chroot=False)

    def save(self, tarball: Path) -> None:
        """Write the root's files to ``tarball`` (atomically: complete or absent)."""
        partial = tarball.with_suffix(".tar.partial")
        self._ns(f'tar -C "$MNT" --numeric-owner -cpf {shlex.quote(str(partial))} .', chroot=False)
        partial.rename(tarball)

    def close(self) -> None:
        """Remove the image and the loop device node this root created (nothing is mounted between commands)."""
        self.image.unlink(missing_ok=True)
        shutil.rmtree(self.mnt, ignore_errors=True)
        try:
            fd = os.open("/dev/loop-control", os.O_RDWR)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                fcntl.ioctl(fd, LOOP_CTL_REMOVE, self.loop)
            except OSError:
                pass  # still bound (a command of another root raced us) or already gone: nothing of ours to remove
            finally:
                os.close(fd)
        _TAKEN.discard(self.loop)
        _release(self.loop)


@dataclass(frozen=True)
class Kernels:
    """The kernels a story uses, chosen from what the root's ``apt-cache`` offers (ABI names like 6.1.0-N-amd64).

    ``first`` is installed before fwman (the owner's running kernel), ``update`` is the kernel update whose
    modules build (with the object cache), ``broken`` the newer one the fork refuses.
    """

    first: str
    update: str
    broken: str

    def all(self) -> tuple[str, str, str]:
        """Return the three kernel releases, oldest first."""
        return (self.first, self.update, self.broken)


#: Debian 12's kernel releases: an ABI number (6.1.0-57-amd64)
DEB12_KERNEL = r"[0-9.]+-[0-9]+-amd64"
#: Debian 13's: no ABI number, the upstream version and the release (6.12.117+deb13-amd64; trixie-backports' too,
#: 7.3.4+deb13-amd64)
DEB13_KERNEL = r"[0-9]+\.[0-9]+\.[0-9]+\+deb13-amd64"


def offered_kernels(root: DebRoot, release: str = DEB12_KERNEL) -> list[str]:
    """Return the amd64 kernel releases (named as the regular expression ``release`` says) whose image and headers
    both have an install candidate, oldest first."""
    out = root.run("apt-cache", "search", "--names-only", rf"^linux-(image|headers)-{release}$").stdout
    images = set(re.findall(rf"^linux-image-({release}) ", out, re.MULTILINE))
    headers = set(re.findall(rf"^linux-headers-({release}) ", out, re.MULTILINE))
    both = sorted(images & headers, key=lambda k: [int(x) for x in re.findall(r"\d+", k)])
    if not both:
        return []
    policy = root.run("apt-cache", "policy", *(f"linux-image-{k}" for k in both), *(f"linux-headers-{k}" for k in both))
    candidate = dict(re.findall(r"^(\S+):\n\s+Installed: .*\n\s+Candidate: (\S+)", policy.stdout, re.MULTILINE))
    return [k for k in both if candidate.get(f"linux-image-{k}", "(none)") != "(none)"
            and candidate.get(f"linux-headers-{k}", "(none)") != "(none)"]  # fmt: skip


def kernel_packages(kver: str) -> tuple[str, str]:
    """Return the image and headers package names of kernel release ``kver``."""
    return (f"linux-image-{kver}", f"linux-headers-{kver}")


def owner_layer(workdir: Path) -> tuple[Path, Kernels]:
    """Return the cached "owner's machine" tarball and its kernels, making it first when missing.

    The layer is the base root after ``apt-get update``, with GRUB's menu and environment (what grub-install
    and the installer leave: ``/boot/grub/grub.cfg`` from update-grub, ``grubenv``) and the first kernel
    (image and headers) installed with apt. Its key is the base tarball and the day (UTC): the kernels are
    chosen from ``apt-cache`` when the layer is made, so at most a day before the test.
    """
    base = base_tarball()
    key = _key(base.name, time.strftime("%Y-%m-%d", time.gmtime()))
    with _cache_lock():  # base_tarball above takes the same lock: flock is not re-entrant across opens
        tarball, meta = CACHE / f"owner-{key}.tar", CACHE / f"owner-{key}.json"
        if tarball.is_file() and meta.is_file():
            doc = json.loads(meta.read_text())
            return tarball, Kernels(doc["first"], doc["update"], doc["broken"])
        root = DebRoot.create(workdir / "owner-layer", base)
        try:
            root.sh("apt-get update -q")
            offered = offered_kernels(root)
            if len(offered) < 3:
                raise RootError(f"the archive offers fewer than three kernels with headers: {offered}")
            kernels = Kernels(*offered[-3:])
            root.sh(
                "update-grub && grub-editenv /boot/grub/grubenv create && "
                f"apt-get install -y -q {' '.join(kernel_packages(kernels.first))}",
                timeout=1800,
            )
            root.save(tarball)
        finally:
            root.close()
        meta.write_text(json.dumps({"first": kernels.first, "update": kernels.update, "broken": kernels.broken}) + "\n")
        return tarball, kernels


def installed_packages(root: DebRoot, pattern: str = "*") -> set[str]:
    """Return the names of the packages installed in ``root`` whose name matches ``pattern`` (dpkg-query)."""
    out = root.sh(f"dpkg-query -W -f '${{Package}} ${{db:Status-Abbrev}}\\n' {shlex.quote(pattern)}", check=False)
    return {line.split()[0] for line in out.stdout.splitlines() if line.split()[1:2] == ["ii"]}


def install_deb(root: DebRoot, deb: Path) -> str:
    """Install the package file ``deb`` in ``root`` with apt (default recommends, as an owner would); return the log.

    The file is copied into the root (``/root/NAME``) and installed with ``apt-get install ./NAME``.
    """
    root.put(deb, f"/root/{deb.name}")
    proc = root.sh(f"cd /root && apt-get install -y -q ./{shlex.quote(deb.name)}", check=False, timeout=900)
    if proc.returncode != 0:
        log = proc.stdout[-5000:] + proc.stderr[-3000:]
        raise RootError(f"`apt-get install ./{deb.name}` failed in the root:\n{log}")
    return proc.stdout + proc.stderr

"""Install the Debian packages the tests need (``make system-deps``, run by ``make test`` as root), and nothing more.

Standard library only: it runs with the machine's ``python3`` before the project's virtual environment exists.

The rules, each judged by what is true on the machine rather than by reading packages' scripts:

- **Only what the install needs.** ``apt-get update``, then one ``apt-get install --no-install-recommends`` of the
  missing packages: never ``upgrade`` or ``dist-upgrade``. apt's own simulation of that very command is read first
  (with ``Debug::pkgDepCache::AutoInstall``, which names for each package the package it was pulled in for). An
  installed package apt upgrades is taken when the chain of those reasons leads to a package that was asked for
  (udev wants the exact libudev1 of its own version; the headers' linux-kbuild moves linux-libc-dev) and said in
  one line each; an upgrade apt cannot tie to the request, any removal and any downgrade are refused before
  anything is installed.
- **No service started or enabled.** The enabled units (systemd ``*.wants``/``*.requires`` and alias links under
  ``/etc/systemd/{system,user}``, SysV ``/etc/rc?.d/S*`` links) and, where systemd runs, the active units are
  recorded before the install. apt runs under a ``policy-rc.d`` that denies every start, and this process is a
  child subreaper, so a daemon a maintainer script forks anyway stays its child and is seen. Afterwards whatever
  the install newly enabled is disabled again (``deb-systemd-helper disable``, so a later upgrade keeps it
  disabled; ``update-rc.d disable`` for SysV scripts), and the run fails, naming the unit or process, if anything
  is still newly enabled or running (a process left running is stopped first). No per-package list to keep.
- ``--test-kernels``: two kernels' headers chosen from what apt offers now (tests/support/kernels.py), checked
  afterwards. ``--promtool``: Prometheus's promtool without the server (the package is only downloaded and its
  ``/usr/bin/promtool`` unpacked into ``.cache/system-deps/bin``, where tests/support/tools.py looks).

usage: python3 -m tests.support.system_deps [--plan] [--test-kernels] [--promtool] PACKAGE...
(--plan: say what would be installed and upgraded, and why; install nothing). Exit 0 done, 1 refused or failed.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import io
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CACHE = REPO / ".cache/system-deps"
#: the file invoke-rc.d and deb-systemd-invoke ask before starting anything (Debian policy 9.3.3); 101: "action
#: forbidden by policy"
POLICY_RC_D = Path("/usr/sbin/policy-rc.d")
DENY_ALL = "#!/bin/sh\n# written by fwman tests/support/system_deps.py for one apt-get run: start nothing\nexit 101\n"
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


class Refused(Exception):
    """The install was refused or left the machine other than promised; the message says what and why."""


# --- apt's plan -------------------------------------------------------------------------------------------------

#: ``Inst NAME [OLD] (NEW ORIGIN [ARCH])``: the brackets hold the installed version (an upgrade or a downgrade)
_INST = re.compile(r"^Inst (?P<name>[a-z0-9][a-z0-9+.-]*)(?::\S+)? (?:\[(?P<old>[^\]\s]+)\] )?\((?P<new>\S+)")
_REMV = re.compile(r"^Remv (?P<name>[a-z0-9][a-z0-9+.-]*)")
#: apt's AutoInstall debug lines: ``Installing kmod:amd64 as Depends of dkms:amd64``, ``Upgrading
#: passwd:amd64 < OLD | NEW @ii uH > due to libsubid4:amd64`` (apt 2.6; the name first, the reason last)
_REASON = re.compile(
    r"^\s*(?:Installing|Upgrading) (?P<name>[a-z0-9][a-z0-9+.-]*)(?::[a-z0-9-]+)?\b.*?"
    r"(?: as [A-Za-z]+ of | due to )(?P<by>[a-z0-9][a-z0-9+.-]*)(?::[a-z0-9-]+)?\s*$"
)


@dataclass(frozen=True)
class Step:
    """One package apt's plan installs: ``old`` is the installed version it replaces (None: newly installed)."""

    name: str
    new: str
    old: str | None = None


@dataclass(frozen=True)
class Plan:
    """What ``apt-get install`` of the asked packages would do, read from its simulation."""

    steps: tuple[Step, ...]
    removals: tuple[str, ...] = ()
    #: package -> the package apt pulled it in (or upgraded it) for
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def upgrades(self) -> list[Step]:
        """Return the steps that replace an installed version."""
        return [s for s in self.steps if s.old is not None]

    def chain(self, name: str, asked: Sequence[str]) -> list[str] | None:
        """Return the packages from ``name`` up to one of ``asked`` by apt's reasons, or None when none leads there."""
        path, seen = [name], {name}
        while path[-1] not in asked:
            by = self.reasons.get(path[-1])
            if by is None or by in seen:
                return None
            path.append(by)
            seen.add(by)
        return path


def parse_plan(simulation: str) -> Plan:
    """Return the plan in ``apt-get -s install -o Debug::pkgDepCache::AutoInstall=1`` output (stdout and stderr).

    Lines of other shapes are ignored (apt's notices, ``Conf`` lines); the first reason given for a package is
    kept (apt names the package that first pulled it in). Never raises.
    """
    steps: list[Step] = []
    removals: list[str] = []
    reasons: dict[str, str] = {}
    for line in simulation.splitlines():
        if m := _INST.match(line):
            steps.append(Step(m.group("name"), m.group("new"), m.group("old")))
        elif m := _REMV.match(line):
            removals.append(m.group("name"))
        elif (m := _REASON.match(line)) and m.group("name") != m.group("by"):
            reasons.setdefault(m.group("name"), m.group("by"))
    return Plan(tuple(steps), tuple(removals), reasons)


def judge(plan: Plan, asked: Sequence[str], is_newer: Callable[[str, str], bool]) -> list[str]:
    """Return one line per upgrade saying what it upgrades and why; raise Refused for what the rules forbid.

    Refused: a removal, a downgrade (``is_newer(new, old)`` false), or an upgrade apt's reasons do not tie to an
    asked package.
    """
    if plan.removals:
        raise Refused(f"installing {' '.join(asked)} would remove installed packages: {' '.join(plan.removals)}")
    lines, unrelated = [], []
    for step in plan.upgrades:
        assert step.old is not None
        if not is_newer(step.new, step.old):
            raise Refused(f"installing {' '.join(asked)} would downgrade {step.name} {step.old} -> {step.new}")
        chain = plan.chain(step.name, asked)
        if chain is None:
            unrelated.append(step.name)
            continue
        why = " <- ".join(chain[1:]) if len(chain) > 1 else "asked for"
        lines.append(f"upgrading {step.name} {step.old} -> {step.new}: needed by {why}")
    if unrelated:
        raise Refused(
            f"apt's plan upgrades packages that no package asked for needs: {' '.join(unrelated)} (nothing was"
            " installed; upgrade them yourself if you mean to, then run this again)"
        )
    return lines


# --- services: what is enabled and what runs ---------------------------------------------------------------------


def enabled_links(root: Path = Path("/")) -> frozenset[str]:
    """Return the links that enable something: systemd's under etc/systemd/{system,user} (not masks to /dev/null)
    as ``system/DIR.wants/UNIT`` (or ``system/ALIAS``), SysV start links as ``rc2.d/S01NAME``."""
    found: set[str] = set()
    for scope in ("system", "user"):
        base = root / "etc/systemd" / scope
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            for name in filenames + dirnames:
                path = Path(dirpath) / name
                if path.is_symlink() and os.readlink(path) != "/dev/null":
                    found.add(f"{scope}/{path.relative_to(base)}")
    for rc in sorted(root.glob("etc/rc[0-6S].d")):
        found.update(f"{rc.name}/{p.name}" for p in rc.glob("S[0-9][0-9]*"))
    return frozenset(found)


def unit_of(link: str, root: Path = Path("/")) -> tuple[str, str]:
    """Return (kind, name) of an :func:`enabled_links` entry: ("system"|"user", unit) or ("sysv", script)."""
    kind, _, rest = link.partition("/")
    if kind.startswith("rc"):
        return "sysv", re.sub(r"^S[0-9][0-9]", "", rest)
    path = root / "etc/systemd" / kind / rest
    if "/" not in rest:  # an alias link: the unit is what it points at
        return kind, Path(os.readlink(path)).name if path.is_symlink() else rest
    return kind, Path(rest).name


def active_units() -> frozenset[str]:
    """Return systemd's active service, socket, timer and path units, or nothing where systemd is not running."""
    if not Path("/run/systemd/system").is_dir():
        return frozenset()
    out = subprocess.run(
        ["systemctl", "list-units", "--type=service,socket,timer,path", "--state=active", "--no-legend", "--plain"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return frozenset(line.split()[0] for line in out.splitlines() if line.split())


@dataclass(frozen=True)
class Proc:
    """A process: its id, state letter, parent and command line."""

    pid: int
    state: str
    ppid: int
    cmdline: str


def processes(proc: Path = Path("/proc")) -> list[Proc]:
    """Return the processes in ``proc`` (those that vanish while read are skipped)."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        # "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses, so split at the last ")"
        head, _, tail = stat.rpartition(")")
        fields = tail.split()
        if len(fields) < 2:
            continue
        cmd = raw.replace(b"\0", b" ").decode(errors="replace").strip() or head.partition("(")[2]
        found.append(Proc(int(entry.name), fields[0], int(fields[1]), cmd))
    return found


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux prctl); return False where that failed."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def left_running(me: int | None = None) -> list[Proc]:
    """Return the live processes whose parent is this process: after apt has exited and been waited for, every
    one is a daemon the install forked (orphans come here because this process is a child subreaper)."""
    me = os.getpid() if me is None else me
    reap_zombies()
    return [p for p in processes() if p.ppid == me and p.state not in ("Z", "X")]


def reap_zombies() -> None:
    """Wait for every child that has already exited (orphans that died leave zombies with their reaper)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def stop(procs: Sequence[Proc]) -> None:
    """End ``procs`` (TERM, then KILL after 5 s) and reap them."""
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and left_running():
        time.sleep(0.1)
    for p in left_running():
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGKILL)
    time.sleep(0.1)
    reap_zombies()


@contextlib.contextmanager
def starts_denied(policy: Path = POLICY_RC_D) -> Iterator[None]:
    """Deny every service start for the block (policy-rc.d exit 101); the machine's own file is put back after."""
    saved = policy.with_name(policy.name + ".fwman-saved")
    had = policy.exists() or policy.is_symlink()
    if had:
        os.replace(policy, saved)
    try:
        policy.write_text(DENY_ALL)
        policy.chmod(0o755)
        yield
    finally:
        policy.unlink(missing_ok=True)
        if had:
            os.replace(saved, policy)


def owner_of(unit: str) -> str | None:
    """Return the package that ships systemd unit ``unit`` (dpkg -S), or None."""
    for d in ("/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/user", "/usr/lib/systemd/user"):
        r = subprocess.run(["dpkg-query", "-S", f"{d}/{unit}"], capture_output=True, text=True, check=False)
        if r.returncode == 0 and ":" in r.stdout:
            return r.stdout.split(":", 1)[0].split(",")[0].strip()
    return None


def disable(kind: str, name: str) -> None:
    """Disable ``name`` the way its package's scripts would see it later: deb-systemd-helper for systemd units
    (its state then says disabled, so an upgrade does not enable it again), update-rc.d for a SysV script."""
    if kind == "sysv":
        subprocess.run(["update-rc.d", name, "disable"], capture_output=True, check=False)
        return
    env = dict(os.environ)
    if package := owner_of(name):
        env["DPKG_MAINTSCRIPT_PACKAGE"] = package
    user = ["--user"] if kind == "user" else []
    subprocess.run(["deb-systemd-helper", *user, "disable", name], capture_output=True, env=env, check=False)
    if kind == "system":  # where deb-systemd-helper left a link (a unit it does not track), systemctl's own disable
        subprocess.run(["systemctl", "disable", name], capture_output=True, check=False)


def undo_enabling(before: frozenset[str], root: Path = Path("/")) -> list[str]:
    """Disable what was enabled since ``before``; return one line per unit disabled; raise Refused naming what is
    still newly enabled afterwards."""
    new = enabled_links(root) - before
    units = sorted({unit_of(link, root) for link in new})
    for kind, name in units:
        disable(kind, name)
    still = sorted({unit_of(link, root)[1] for link in enabled_links(root) - before})
    if still:
        raise Refused(f"the install enabled units that could not be disabled: {' '.join(still)}")
    return [f"disabled {name} ({'SysV script' if kind == 'sysv' else kind + ' unit'}): the install enabled it"
            for kind, name in units]  # fmt: skip


# --- the install -------------------------------------------------------------------------------------------------


def apt(*args: str, capture: bool = False) -> subprocess.CompletedProcess[str]:
    """Run apt-get with ``args`` non-interactively; raise Refused when it fails."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    r = subprocess.run(["apt-get", *args], capture_output=capture, text=True, env=env, check=False)
    if r.returncode != 0:
        detail = (r.stdout or "")[-3000:] + (r.stderr or "")[-3000:] if capture else ""
        raise Refused(f"apt-get {' '.join(args[:3])} ... failed (exit {r.returncode}){detail and ': ' + detail}")
    return r


INSTALL_OPTS = ("-y", "-q", "--no-install-recommends")


def installed(name: str) -> bool:
    """Return True when package ``name`` is installed (dpkg's status ``install ok installed``)."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", name], capture_output=True, text=True, check=False)
    return r.stdout.strip() == "install ok installed"


def dpkg_newer(new: str, old: str) -> bool:
    """Return True when Debian version ``new`` is greater than ``old`` (dpkg --compare-versions)."""
    return subprocess.run(["dpkg", "--compare-versions", new, "gt", old], check=False).returncode == 0


def simulate(missing: Sequence[str]) -> Plan:
    """Return apt's plan for installing ``missing`` (its simulation, with the reasons it pulls each package in)."""
    r = apt("-s", "install", *INSTALL_OPTS, "-o", "Debug::pkgDepCache::AutoInstall=1", *missing, capture=True)
    return parse_plan(r.stdout + "\n" + r.stderr)


def install(asked: Sequence[str], plan_only: bool, say: Callable[[str], None] = print) -> None:
    """Install the missing packages of ``asked`` by the module's rules; raise Refused when a rule is broken."""
    missing = [p for p in dict.fromkeys(asked) if not installed(p)]
    if not missing:
        say("the Debian packages for the tests are installed")
        return
    say(f"installing Debian packages for the tests: {' '.join(missing)}")
    plan = simulate(missing)
    for line in judge(plan, missing, dpkg_newer):
        say(line)
    if plan_only:
        new = [f"{s.name}={s.new}" for s in plan.steps if s.old is None]
        say(f"would install {len(new)} packages: {' '.join(new)}")
        return
    reaper = become_subreaper()
    links, units = enabled_links(), active_units()
    failed: Refused | None = None
    try:
        with starts_denied():
            apt("install", *INSTALL_OPTS, *missing)
    except Refused as e:  # a half-done install is cleaned up the same way, then reported
        failed = e
    for line in undo_enabling(links):
        say(line)
    time.sleep(0.5)  # a daemon's fork-and-exit settles
    problems = []
    if reaper and (procs := left_running()):
        stop(procs)
        problems += [f"process {p.pid} ({p.cmdline[:120]})" for p in procs]
    if started := sorted(active_units() - units):
        subprocess.run(["systemctl", "stop", *started], capture_output=True, check=False)
        problems += [f"unit {u}" for u in started]
    if failed is not None:
        raise failed
    if problems:
        raise Refused(f"the install started services (stopped again): {'; '.join(problems)}")


def kernel_headers_needed() -> list[str]:
    """Return the kernel header packages the module tests need that are not installed (tests/support/kernels.py)."""
    from tests.support import kernels  # only this option needs it

    return kernels.needed_now()


def unpack_promtool(say: Callable[[str], None] = print) -> None:
    """Put Prometheus's promtool into .cache/system-deps/bin without installing the server (apt-get download)."""
    target = CACHE / "bin/promtool"
    if os.access(target, os.X_OK):
        return
    say(f"promtool: unpacking /usr/bin/promtool of the prometheus package into {target.parent} (no server)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        subprocess.run(["apt-get", "download", "-qq", "-o", "APT::Sandbox::User=root", "prometheus"], cwd=tmp,
                       check=True)  # fmt: skip
        deb = next(Path(tmp).glob("prometheus_*.deb"))
        tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp, "./usr/bin/promtool"], input=tar, check=True)
        os.replace(Path(tmp) / "usr/bin/promtool", target)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the install; return the exit status (0 done or nothing to do, 1 refused or failed)."""
    parser = argparse.ArgumentParser(prog="system_deps.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--plan", action="store_true", help="say what would be installed and upgraded; install nothing")
    parser.add_argument("--test-kernels", action="store_true", help="also the two kernels' headers the tests build for")
    parser.add_argument("--promtool", action="store_true", help="also unpack promtool into .cache/system-deps/bin")
    parser.add_argument("packages", nargs="*")
    args = parser.parse_args(argv)
    if isinstance(sys.stdout, io.TextIOWrapper):  # each line at once, in order among apt's own output
        sys.stdout.reconfigure(line_buffering=True)
    if os.geteuid() != 0 or not Path("/usr/bin/apt-get").exists():
        print("not root (or no apt): tests that need Debian packages will be skipped (under CI=true: fail)")
        return 0
    try:
        print("apt-get update")
        apt("update", "-qq")
        packages = list(args.packages) + (kernel_headers_needed() if args.test_kernels else [])
        install(packages, args.plan)
        if args.plan:
            return 0
        if args.promtool:
            unpack_promtool()
        if args.test_kernels:
            return subprocess.run([sys.executable, str(HERE / "kernels.py"), "check"], check=False).returncode
    except Refused as e:
        print(f"refused: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

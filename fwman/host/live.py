"""LiveHost: the real machine, with every absolute path mapped under a root directory.

``LiveHost("/")`` is the machine itself. ``LiveHost("/tmp/x")`` treats ``/tmp/x`` as ``/``: symbolic links are
resolved inside the root (as a chroot would), so tests can build a whole host tree on a real temp filesystem.
Commands run on the real machine; ``env`` adds variables (tests put fixture tools first on ``PATH``).

The door: under a root, a command that acts on the machine itself (its GPUs, running kernel, services, boot:
:func:`fwman.host.machine.acts_on_machine`) is refused with :class:`RootDoorError`, never run here, unless
``machine_tools`` names directories whose executables stand for that root's machine (a test rig's stand-in
nvflash or update-initramfs); then the tool is taken from there and nowhere else.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from fwman.core.errors import FwmanError, HostChangeError, MissingError
from fwman.host.base import (
    OVERLAY_OPAQUE_XATTRS,
    CommandResult,
    JournalMixin,
    PendingCommand,
    UnsafeRemovalError,
    removable_path,
    resolve_links,
)
from fwman.host.machine import door

if TYPE_CHECKING:
    from fwman.host.pty import PtyResult


class LiveHost(JournalMixin):
    """A real filesystem under ``root`` and real commands."""

    def __init__(
        self, root: str = "/", env: Mapping[str, str] | None = None, machine_tools: Sequence[str] = ()
    ) -> None:
        super().__init__()
        self.root = os.path.abspath(root)
        self.env = dict(env or {})
        #: directories whose executables stand for the root's own machine (tests); see the module's docstring
        self.machine_tools = tuple(machine_tools)
        self.description = "live host" if self.root == "/" else f"live host under {self.root}"
        #: host paths seen to be directories, not links, while resolving under a root (each is one lstat less on
        #: every later path through it: an audit resolves hundreds of paths under the same image layers). Only
        #: that positive fact is kept, and it is forgotten on every change or command through this host; a
        #: directory swapped for a link behind its back is the race any resolve-then-open already has.
        self._plain_dirs: set[str] = set()

    # -- paths -------------------------------------------------------------------------------------------
    def _raw(self, path: str) -> str:
        """Return the filesystem path of host path ``path`` without resolving links."""
        if not path.startswith("/"):
            raise FwmanError(f"internal: host paths must be absolute, got {path!r}")
        if self.root == "/":
            return path
        return self.root + os.path.normpath(path) if path != "/" else self.root

    def realpath(self, path: str) -> str:
        """Return ``path`` with links resolved inside the root (absolute targets are relative to the root)."""
        if self.root == "/":
            return os.path.realpath(path)

        plain = self._plain_dirs

        def read_link(candidate: str) -> str | None:
            if candidate in plain:
                return None
            raw = self._raw(candidate)
            try:
                mode = os.lstat(raw).st_mode
            except (OSError, ValueError):  # absent (or unreadable): not a link, as os.path.islink says
                return None
            if stat.S_ISLNK(mode):
                return os.readlink(raw)
            if stat.S_ISDIR(mode):
                plain.add(candidate)
            return None

        return resolve_links(path, read_link)

    def _note(self, action: str, path: str, detail: str = "") -> None:
        """Journal a change (and forget the directories seen: the change may have replaced one)."""
        self._plain_dirs.clear()
        super()._note(action, path, detail)

    def _map(self, path: str) -> str:
        """Return the filesystem path for reading host path ``path`` (links resolved inside the root)."""
        return self._raw(self.realpath(path)) if self.root != "/" else path

    def _target(self, path: str) -> str:
        """Return the filesystem path for writing host path ``path``: its parent with links resolved inside the
        root (so a link under the root pointing at the real ``/etc`` is followed to ``ROOT/etc``, never out),
        the last component itself as named (a write replaces a link, it does not follow it)."""
        if self.root == "/":
            return path
        parent, name = os.path.split(os.path.normpath(path))
        return os.path.join(self._raw(self.realpath(parent or "/")), name)

    def local_path(self, path: str) -> str | None:
        """Return the filesystem path behind ``path``."""
        return self._map(path)

    # -- reads -------------------------------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        """Return True if ``path`` exists."""
        return os.path.exists(self._map(path))

    def is_dir(self, path: str) -> bool:
        """Return True if ``path`` is a directory."""
        return os.path.isdir(self._map(path))

    def is_link(self, path: str) -> bool:
        """Return True if ``path`` is a symbolic link."""
        parent = os.path.dirname(path.rstrip("/")) or "/"
        return os.path.islink(os.path.join(self._map(parent), os.path.basename(path.rstrip("/"))))

    def overlay_marker(self, path: str) -> str | None:
        """Return "whiteout" (a character device 0/0), "opaque" (a directory with an overlay opaque xattr) or
        None for ``path`` itself, its last component not followed; None when absent or unreadable."""
        name = os.path.basename(path.rstrip("/"))
        raw = os.path.join(self._map(os.path.dirname(path.rstrip("/")) or "/"), name) if name else self._map("/")
        try:
            st = os.lstat(raw)
        except OSError:
            return None
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
            return "whiteout"
        if stat.S_ISDIR(st.st_mode):
            for attr in OVERLAY_OPAQUE_XATTRS:
                try:
                    if os.getxattr(raw, attr, follow_symlinks=False) == b"y":
                        return "opaque"
                except OSError:  # ENODATA (not set), ENOTSUP (a filesystem without xattrs), EPERM
                    continue
        return None

    def listdir(self, path: str) -> list[str]:
        """Return sorted entries of ``path``. Raises MissingError when it is not a readable directory."""
        try:
            return sorted(os.listdir(self._map(path)))
        except OSError as e:
            raise MissingError(f"cannot list {path}: {e.strerror}") from e

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        """Return the bytes of ``path``. Raises MissingError when it cannot be read or is not a regular file.

        Only regular files are read (sysfs, procfs and efivarfs files are regular): opening a FIFO would block
        forever, and a device node would be read raw (a planted ``/dev/sda`` twin in an unpacked archive). The
        type is checked before opening (opening some devices acts) and again on the descriptor, which is opened
        non-blocking so that a FIFO swapped in between cannot hang the read.
        """
        real = self._map(path)
        try:
            if not stat.S_ISREG(os.stat(real).st_mode):
                raise MissingError(f"cannot read {path}: not a regular file")
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise MissingError(f"cannot read {path}: not a regular file")
                os.set_blocking(fd, True)  # a regular file: read it the ordinary way
                return f.read() if limit is None else f.read(limit)
        except OSError as e:
            raise MissingError(f"cannot read {path}: {e.strerror}") from e

    def read_text(self, path: str) -> str:
        """Return ``path`` decoded as UTF-8. Raises MissingError when it cannot be read."""
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def read_records(self, path: str, limit: int = 16 << 20) -> bytes:
        """Return the records a character device such as ``/dev/kmsg`` holds now (or a regular file's bytes).

        The device is opened non-blocking, so the read that finds no more records ends with EAGAIN instead of
        waiting for the next one; a record overwritten while reading is EPIPE, and the next read() goes on at
        the oldest one left (Documentation/ABI/testing/dev-kmsg). Raises MissingError when it cannot be opened
        (absent, EPERM), is neither a character device nor a regular file (a FIFO), or a read fails otherwise.
        """
        real = self._map(path)
        try:
            mode = os.stat(real).st_mode
            if stat.S_ISREG(mode):
                return self.read_bytes(path, limit)
            if not stat.S_ISCHR(mode):
                raise MissingError(f"cannot read {path}: not a character device")
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as e:
            raise MissingError(f"cannot read {path}: {e.strerror}") from e
        chunks: list[bytes] = []
        size = 0
        try:
            while size < limit:
                try:
                    # a record is at most a few KiB; a buffer smaller than the record would be EINVAL
                    chunk = os.read(fd, 65536)
                except BlockingIOError:  # EAGAIN: no more records now
                    break
                except BrokenPipeError:  # EPIPE: records overwritten meanwhile; the position moved on
                    continue
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except OSError as e:
            raise MissingError(f"cannot read {path}: {e.strerror}") from e
        finally:
            os.close(fd)
        return b"".join(chunks)[:limit]

    def readlink(self, path: str) -> str:
        """Return the stored target of link ``path``. Raises MissingError when it is not a link."""
        parent = self._map(os.path.dirname(path.rstrip("/")) or "/")
        try:
            return os.readlink(os.path.join(parent, os.path.basename(path.rstrip("/"))))
        except OSError as e:
            raise MissingError(f"cannot read link {path}: {e.strerror}") from e

    def stat_size(self, path: str) -> int:
        """Return the size of ``path``. Raises MissingError when absent."""
        try:
            return os.stat(self._map(path)).st_size
        except OSError as e:
            raise MissingError(f"cannot stat {path}: {e.strerror}") from e

    def file_mode(self, path: str) -> int | None:
        """Return the permission bits of ``path`` (following links). Raises MissingError when absent."""
        try:
            return os.stat(self._map(path)).st_mode & 0o7777
        except OSError as e:
            raise MissingError(f"cannot stat {path}: {e.strerror}") from e

    def which(self, tool: str) -> str | None:
        """Return the path of ``tool`` on this host's PATH (plus the sbin directories), or None."""
        path = self.env.get("PATH", os.environ.get("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"))
        return shutil.which(tool, path=path + ":/usr/local/sbin:/usr/sbin:/sbin")

    def _env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Return the environment of a command: fwman's, this host's ``env``, ``extra``; ``LC_ALL=C`` unless set
        (fwman parses what tools print)."""
        return {"LC_ALL": "C", **os.environ, **self.env, **(extra or {})}

    def _executable(self, argv: Sequence[str]) -> str | None:
        """Return the executable to run for ``argv`` (None: not found), through the door under a root.

        Raises RootDoorError (fwman.host.machine) when ``argv`` acts on this machine itself and the host is a
        root with no stand-in for that tool among ``machine_tools``.
        """
        standin = door(self.root, self.machine_tools, argv)
        if standin is not None:
            return standin
        return argv[0] if "/" in argv[0] else self.which(argv[0])

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = 60.0,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        input_text: str | None = None,
    ) -> CommandResult:
        """Run ``argv``; a missing executable gives ``missing=True``. Raises FwmanError on timeout, RootDoorError
        for a command that would act on this machine from under a root."""
        exe = self._executable(argv)
        if exe is None:
            return _not_found(argv)
        self._plain_dirs.clear()  # a command may change the tree (the directories seen are forgotten after it too)
        try:
            proc = subprocess.Popen(
                [exe, *argv[1:]],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env(env),
                cwd=cwd,
                stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            )
        except FileNotFoundError:
            return _not_found(argv)
        with proc:
            try:
                stdout, stderr = proc.communicate(input_text.encode() if input_text is not None else None, timeout)
            except subprocess.TimeoutExpired as e:
                kill_tree(proc)
                proc.communicate()
                raise _timed_out(argv, timeout) from e
            except BaseException:  # Ctrl-C while waiting: nothing is left running behind fwman (as subprocess.run)
                kill_tree(proc)
                proc.wait()  # reaped here: Popen's exit skips its wait on a KeyboardInterrupt
                raise
            finally:
                self._plain_dirs.clear()
        return CommandResult(
            tuple(argv),
            proc.returncode,
            stdout.decode("utf-8", errors="replace"),
            stderr.decode("utf-8", errors="replace"),
        )

    def start(self, argv: Sequence[str], *, timeout: float | None = 60.0) -> PendingCommand:
        """Start ``argv`` and return at once (see :meth:`Host.start`); a missing executable gives a finished
        ``missing=True`` result. Its output goes to unnamed temporary files, not pipes, so a long answer never
        blocks the command while fwman is busy elsewhere. Raises FwmanError (from ``result``) on timeout,
        RootDoorError (at once) for a command that would act on this machine from under a root."""
        exe = self._executable(argv)
        if exe is None:
            return PendingCommand.finished(_not_found(argv))
        # the files outlive this call: the waiter reads and closes them
        out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # noqa: SIM115
        try:
            proc = subprocess.Popen([exe, *argv[1:]], stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=self._env())
        except FileNotFoundError:
            out.close()
            err.close()
            return PendingCommand.finished(_not_found(argv))

        self._plain_dirs.clear()

        def wait() -> CommandResult:
            self._plain_dirs.clear()  # read-only by contract; forgotten anyway, as after run
            try:
                rc = _wait_exit(proc, timeout)
            except subprocess.TimeoutExpired as e:
                kill_tree(proc)
                proc.wait()
                raise _timed_out(argv, timeout) from e
            except BaseException:  # Ctrl-C while waiting: nothing is left running behind fwman, as with run
                kill_tree(proc)
                proc.wait()
                raise
            finally:
                texts = []
                for f in (out, err):
                    f.seek(0)
                    texts.append(f.read().decode("utf-8", errors="replace"))
                    f.close()
            return CommandResult(tuple(argv), rc, texts[0], texts[1])

        return PendingCommand(wait, poll=lambda: proc.poll() is not None)

    def run_interactive(
        self,
        argv: Sequence[str],
        *,
        answers: Sequence[tuple[str, str]],
        on_output: Callable[[str], None] | None = None,
        timeout: float = 600.0,
    ) -> PtyResult:
        """Run ``argv`` on a pseudo-terminal with this host's environment (see fwman.host.pty). Raises
        RootDoorError for a command that would act on this machine from under a root."""
        from fwman.host.pty import run_in_pty  # pty, termios, signal, threading: only nvflash's prompts need them

        exe = self._executable(argv)
        if exe is not None and exe != argv[0]:
            argv = [exe, *argv[1:]]

        self._note("run", argv[0], " ".join(argv[1:]))
        try:
            return run_in_pty(argv, env=self._env(), answers=answers, on_output=on_output, timeout=timeout)
        finally:
            self._plain_dirs.clear()

    # -- writes ------------------------------------------------------------------------------------------
    def write_bytes(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write atomically: temp file in the target directory, fsync, rename, fsync the directory.

        Raises FwmanError naming the host path when the filesystem refuses (a file where a directory should be,
        permissions, a full disk).
        """
        target = self._target(path)
        with _changing("write", path):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            write_atomically(target, data, mode)
        self._note("write", path, f"{len(data)} bytes")

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        """Create ``path`` with parents. Raises FwmanError when the filesystem refuses."""
        with _changing("create the directory", path):
            os.makedirs(self._map(path), mode=mode, exist_ok=True)
        self._note("mkdir", path)

    def rename(self, src: str, dst: str) -> None:
        """Rename ``src`` to ``dst``. Raises FwmanError when the filesystem refuses."""
        with _changing("rename onto", dst):
            os.replace(self._target(src), self._target(dst))
        _fsync_dir(os.path.dirname(self._target(dst)))
        self._note("rename", dst, f"from {src}")

    def unlink(self, path: str) -> None:
        """Remove ``path`` if present (absent is fine). Raises FwmanError when it is there and cannot go."""
        with _changing("remove", path, absent_ok=True):
            os.unlink(self._target(path))
        self._note("unlink", path)

    def remove_tree(self, path: str) -> None:
        """Remove directory ``path`` and everything under it, or the file or link ``path`` (absent is fine).

        The last component is taken as named (a link is removed, not followed), and links inside are removed,
        never followed, so nothing outside ``path`` goes. Raises HostChangeError when the filesystem refuses,
        UnsafeRemovalError for ``/``, an empty or relative path (:func:`~fwman.host.base.removable_path`), or a
        path that maps to the root directory itself or outside it.
        """
        path = removable_path(path)
        raw = self._target(path)
        if self.root != "/" and (raw == self.root or os.path.commonpath([self.root, raw]) != self.root):
            # never expected (links are resolved inside the root): the last line of defence of an rmtree
            raise UnsafeRemovalError(f"internal: refusing to remove {path}: it maps to {raw}, not inside {self.root}")
        with _changing("remove", path, absent_ok=True):
            if os.path.isdir(raw) and not os.path.islink(raw):
                shutil.rmtree(raw)
            else:
                os.unlink(raw)
        self._note("remove_tree", path)

    def symlink(self, target: str, path: str) -> None:
        """Create or replace link ``path`` -> ``target``. Raises FwmanError when the filesystem refuses."""
        raw = self._target(path)
        with _changing("link", path):
            os.makedirs(os.path.dirname(raw), exist_ok=True)
            tmp = raw + ".fwman-new"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            os.symlink(target, tmp)
            os.replace(tmp, raw)
        self._note("symlink", path, target)


def _not_found(argv: Sequence[str]) -> CommandResult:
    """Return the result of a command whose executable is not there (``rc`` 127, as a shell says it)."""
    return CommandResult(tuple(argv), 127, "", f"{argv[0]}: command not found", missing=True)


def _timed_out(argv: Sequence[str], timeout: float | None) -> FwmanError:
    """Return the error of a command fwman gave up on after ``timeout`` seconds (its tree already killed)."""
    return FwmanError(f"command timed out after {timeout:g}s: {' '.join(argv)}", hint="the tool hung; check it by hand")


def _children(pid: int) -> list[int]:
    """Return the pids of every process below ``pid`` (its children, theirs, ...), read from /proc. Never raises:
    a process that exits while it is read is left out."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                # the fields after the command, whose name may hold spaces and parentheses: state, then ppid (a
                # stat line is a few hundred bytes; 4096 holds it whole)
                ppid = int(f.read(4096).rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill ``proc`` and every process it started (a ``sh -c`` whose command hangs, a container entry's own
    children): killing only ``proc`` would leave them running after fwman gave up on it. The tree is read before
    any is killed, since a killed parent's children are handed to init. Never raises."""
    for pid in [*_children(proc.pid), proc.pid]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, 9)


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float | None) -> int:
    """Return ``proc``'s exit status once it exits. Raises subprocess.TimeoutExpired after ``timeout`` seconds.

    ``Popen.wait(timeout)`` polls, sleeping up to 50 ms between looks, so an exit could be seen that late: the
    process's pidfd (Linux 5.3) wakes the wait the moment it exits; without one, Popen's own wait.
    """
    if timeout is not None and proc.poll() is None:
        try:
            pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            return proc.wait(timeout=timeout)
        try:
            poller = select.poll()  # not select.select: a descriptor past 1023 is fine here
            poller.register(pidfd, select.POLLIN)
            if not poller.poll(max(0.0, timeout) * 1000):
                raise subprocess.TimeoutExpired(proc.args, timeout)
        finally:
            os.close(pidfd)
    return proc.wait()


@contextlib.contextmanager
def _changing(verb: str, path: str, absent_ok: bool = False) -> Iterator[None]:
    """Turn the OSError of a host change into a FwmanError that names the host path (not the --root one).

    With ``absent_ok`` a path that is not there is no error (removing what is gone).
    """
    try:
        yield
    except OSError as e:
        if absent_ok and isinstance(e, FileNotFoundError):
            return
        reason = e.strerror or type(e).__name__
        raise HostChangeError(
            f"cannot {verb} {path}: {reason}",
            path,
            reason,
            hint="fix that path on the host (a file where a directory belongs, permissions, a full disk); "
            "running the command again finishes what it started",
        ) from e


def write_atomically(target: str, data: bytes, mode: int = 0o644, prefix: str = ".fwman-") -> None:
    """Write ``data`` to ``target`` so that a crash leaves the old file or the new one, never half of one.

    A temporary file in the target's directory (which must exist), its mode set on the descriptor, fsync,
    rename over the target, fsync the directory. The temporary file is removed on any failure. Raises OSError.
    """
    directory = os.path.dirname(target) or "."
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            # the mode goes on the open descriptor, never by name: whoever can write the directory could swap
            # the name for a link between the write and a chmod, and root would then chmod the link's target
            os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


def _fsync_dir(directory: str) -> None:
    """Flush a directory entry so a rename survives a crash (best effort on filesystems that refuse)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

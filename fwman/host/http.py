"""The HTTP door: the only code in fwman that talks to the network (and the only importer of ``requests``).

Every request names the :class:`~fwman.host.base.Host` it is made for, and a host that does not reach the network
(a snapshot replay: ``network = False``) refuses it with a UsageError (exit 2) before anything is sent. So a
replay is safe by construction, whether or not its caller remembered ``--offline``.

``requests`` is imported inside functions: fwman's startup time is benchmarked and most commands never download.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fwman import __version__
from fwman.core import clock
from fwman.core.errors import MissingError, ParseError, UsageError, VerificationError
from fwman.core.jsontext import parse_json

if TYPE_CHECKING:
    import requests

    from fwman.host.base import Host

CHUNK = 64 * 1024
#: the most bytes one JSON answer (a forge's page of branches) may hold. A page of 100 branch objects, as the
#: forge API sends them, is tens of KB; anything near a MiB is not a branch list, and is never read whole
MAX_JSON_ANSWER = 1 << 20
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


def refuse_replay(host: Host, url: str) -> None:
    """Raise UsageError (exit 2) when ``host`` does not reach the network (a snapshot replay); return None
    otherwise."""
    if not getattr(host, "network", True):
        raise UsageError(
            f"a replay does not reach the network: {url} ({host.description})",
            hint="run on the live host, or use --offline where the command has it",
        )


#: (bytes so far, total when known)
Progress = Callable[[int, int | None], None]


@dataclass(frozen=True)
class HttpOptions:
    """How patient a download is: per-attempt connect and read timeouts, retries per URL, backoff."""

    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    retries: int = 3  # attempts after the first, per URL
    backoff_s: float = 0.5  # wait before retry n is n * backoff_s
    verify_tls: bool | str = True  # a CA bundle path for private mirrors

    @property
    def timeout(self) -> tuple[float, float]:
        """Return the (connect, read) timeout pair requests takes."""
        return (self.connect_timeout, self.read_timeout)


class DownloadError(MissingError):
    """Every attempt failed (network error, timeout, HTTP error): the file could not be obtained."""


class _Retry(Exception):
    """This attempt failed in a way another attempt may not."""


class _GiveUp(Exception):
    """This URL will not work (HTTP 404 and the like): try the next one."""


class _CapExceeded(Exception):
    """The body is larger than allowed."""


def _session() -> requests.Session:
    import requests

    s = requests.Session()
    # identity: byte counts and Range offsets must be those of the file, not of a compressed stream
    s.headers.update({"User-Agent": f"fwman/{__version__}", "Accept-Encoding": "identity"})
    return s


def http_get(
    host: Host,
    url: str,
    *,
    cap: int,
    options: HttpOptions,
    progress: Progress | None = None,
    resume: bytes = b"",
    save: Callable[[bytes], None] | None = None,
) -> bytes:
    """Return the body at ``url`` (at most ``cap`` bytes), retrying and resuming with Range requests.

    ``resume`` is data already received (a ``.part`` file); ``save`` is called with everything received so far
    whenever an attempt fails or is interrupted, so the caller can keep a ``.part`` file (images are a few MB:
    rewriting the file during a healthy download would cost more than it saves). Raises DownloadError
    when every attempt failed (the last reason in the message), VerificationError when the body exceeds ``cap``,
    UsageError when ``host`` is a replay (nothing is sent).
    """
    import requests

    refuse_replay(host, url)

    buf = bytearray(resume if len(resume) <= cap else b"")
    reasons: list[str] = []
    with _session() as session:
        for attempt in range(options.retries + 1):
            if attempt:
                clock.sleep(options.backoff_s * attempt)
            try:
                _attempt(session, url, buf, cap, options, progress)
                return bytes(buf)
            except _CapExceeded as e:
                raise VerificationError(
                    f"{url}: {e}", hint="the server sends more than the catalog says the image is; nothing was kept"
                ) from e
            except _GiveUp as e:
                raise DownloadError(f"{url}: {e}", hint="check the URL; nothing was kept") from e
            except (_Retry, requests.RequestException) as e:
                reasons.append(_reason(e))
                if save is not None and buf:
                    save(bytes(buf))
            except BaseException:  # Ctrl-C, or a bug: keep what arrived for the next run
                if save is not None and buf:
                    save(bytes(buf))
                raise
    raise DownloadError(
        f"{url}: download failed after {options.retries + 1} attempt(s): {reasons[-1]}",
        hint=f"run the command again to resume ({len(buf)} bytes kept)" if buf else "check the network and URL",
    )


def _reason(e: BaseException) -> str:
    import requests

    if isinstance(e, requests.Timeout | requests.ConnectionError) and "timed out" in str(e).lower():
        return "timed out (no data within the read timeout)"
    if isinstance(e, requests.ConnectionError | requests.exceptions.ChunkedEncodingError):
        return f"connection lost ({type(e).__name__})"
    return str(e) or type(e).__name__


def _attempt(
    session: requests.Session,
    url: str,
    buf: bytearray,
    cap: int,
    options: HttpOptions,
    progress: Progress | None,
) -> None:
    headers = {"Range": f"bytes={len(buf)}-"} if buf else {}
    with session.get(url, headers=headers, stream=True, timeout=options.timeout, verify=options.verify_tls) as r:
        status = r.status_code
        if status == 416 and buf:
            m = _CONTENT_RANGE.match(r.headers.get("Content-Range", "").replace("bytes */", "bytes 0-0/"))
            if m and m.group(3) == str(len(buf)):
                return  # the .part file already holds the whole body
            buf.clear()
            raise _Retry("the server refused the resume offset; starting over")
        if status == 206 and buf:
            m = _CONTENT_RANGE.match(r.headers.get("Content-Range", ""))
            if not m or int(m.group(1)) != len(buf):
                buf.clear()
                raise _Retry("the server resumed at a different offset; starting over")
        elif status in (200, 206):
            buf.clear()  # a full body: the server ignored (or was not sent) a Range request
        elif status in (408, 425, 429) or status >= 500:
            raise _Retry(f"HTTP {status} {r.reason}")
        else:
            raise _GiveUp(f"HTTP {status} {r.reason}")
        length = r.headers.get("Content-Length")
        total = len(buf) + int(length) if length and length.isdigit() else None
        if total is not None and total > cap:
            raise _CapExceeded(f"the server offers {total} bytes, more than the {cap}-byte limit")
        for chunk in r.iter_content(CHUNK):
            buf += chunk
            if len(buf) > cap:
                raise _CapExceeded(f"the body grew past the {cap}-byte limit")
            if progress is not None:
                progress(len(buf), total)
        if total is not None and len(buf) < total:
            raise _Retry(f"connection closed after {len(buf)} of {total} bytes")


@dataclass(frozen=True)
class JsonResponse:
    """One HTTP answer whose body was read as JSON: status, headers (case-insensitive lookup) and the body."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None


class HttpError(Exception):
    """The request did not get an answer (no connection, timeout): ``reason`` says which, in a few words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _read_capped(response: requests.Response, cap: int) -> bytes:
    """Return the body of the streamed ``response``; raises _CapExceeded as soon as it passes ``cap`` bytes."""
    length = response.headers.get("Content-Length")
    if length and length.isdigit() and int(length) > cap:
        raise _CapExceeded(f"the server offers {length} bytes, more than the {cap}-byte limit")
    buf = bytearray()
    for chunk in response.iter_content(CHUNK):
        buf += chunk
        if len(buf) > cap:
            raise _CapExceeded(f"the answer grew past the {cap}-byte limit")
    return bytes(buf)


@contextmanager
def json_getter(
    host: Host, first_url: str, *, headers: Mapping[str, str], timeout: float, cap: int = MAX_JSON_ANSWER
) -> Iterator[Callable[[str], JsonResponse]]:
    """Yield a getter for ``first_url`` and the pages after it, sharing one connection pool until the block ends.

    The getter returns a JsonResponse (``body`` None when the answer is not JSON). It reads the body streamed
    and stops at ``cap`` bytes. It raises HttpError when no answer came, and VerificationError (exit 4) when the
    answer is over ``cap`` bytes: nothing of it is returned. Raises UsageError at once (nothing sent) when
    ``host`` is a replay.
    """
    import requests

    refuse_replay(host, first_url)

    # identity encoding, as for downloads: the cap counts the bytes on the wire, never a decompressed stream
    with _session() as session:

        def get(url: str) -> JsonResponse:
            try:
                with session.get(url, headers=dict(headers), timeout=timeout, stream=True) as response:
                    raw = _read_capped(response, cap)
            except requests.RequestException as e:
                raise HttpError(type(e).__name__) from e
            except _CapExceeded as e:
                raise VerificationError(
                    f"{url}: {e}", hint="a forge's page of branches is tens of KB; nothing of this answer was kept"
                ) from e
            try:
                body: Any = parse_json(raw, url, "answer")
            except ParseError:  # not JSON, or nested past what any forge sends: the caller sees "not JSON"
                body = None
            return JsonResponse(response.status_code, response.headers, body)

        yield get

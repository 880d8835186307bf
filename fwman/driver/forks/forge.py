"""The forge's branches API (GitHub's shape), for a fork that git cannot list: the base URL, the paginated
listing and the ``Link`` header's parser.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fwman.core.config import Config
from fwman.core.errors import FwmanError
from fwman.host.base import Host

DEFAULT_API = "https://api.github.com"
API_ENV = "FWMAN_FORGE_API"
_GITHUB_RE = re.compile(r"(?:https?://|git@|ssh://git@)github\.com[/:]([^/\s]+)/([^/\s]+?)(?:\.git)?/?")
_MAX_PAGES = 50


def api_base(config: Config, variables: Mapping[str, str]) -> str:
    """Return the forge API base URL: ``$FWMAN_FORGE_API``, else ``[forks] api_url``, else GitHub's."""
    return (variables.get(API_ENV) or config.get_str("forks", "api_url") or DEFAULT_API).rstrip("/")


def forge_repo(url: str) -> tuple[str, str] | None:
    """Return (owner, repository) for a GitHub URL, None for anything else (local paths, other hosts)."""
    m = _GITHUB_RE.fullmatch(url.strip())
    return (m.group(1), m.group(2)) if m else None


def parse_link_next(header: str | None) -> str | None:
    """Return the ``rel="next"`` URL of an HTTP ``Link`` header, or None."""
    if not header:
        return None
    for part in header.split(","):
        m = re.match(r"\s*<([^>]*)>\s*;(.*)", part)
        if m and re.search(r'rel\s*=\s*"?next"?', m.group(2)):
            return m.group(1)
    return None


def list_via_api(host: Host, api: str, owner: str, repo: str, timeout: float = 20.0) -> dict[str, str]:
    """Return {branch: commit} of ``owner/repo`` from the forge's paginated branches API (commit "" where the
    answer has none).

    Follows ``Link: rel="next"``; without a Link header, asks for the next ``?page=`` while pages come back full
    (100 names). Goes through the HTTP door, so a replay ``host`` refuses it (UsageError), and each answer is
    read up to the door's cap. Raises FwmanError on a network error, an HTTP error status, a malformed answer,
    an answer over the cap (VerificationError) or a page of more names than asked for.
    """
    from fwman.host.http import HttpError, json_getter  # the door imports requests, which is slow to import

    per_page = 100
    first = f"{api}/repos/{owner}/{repo}/branches?per_page={per_page}&page=1"
    url: str | None = first
    page = 1
    names: dict[str, str] = {}
    headers = {"Accept": "application/vnd.github+json", "User-Agent": "fwman"}
    with json_getter(host, first, headers=headers, timeout=timeout) as get:
        while url is not None:
            if page > _MAX_PAGES:
                raise FwmanError(f"{owner}/{repo}: more than {_MAX_PAGES} pages of branches; stopped")
            try:
                response = get(url)
            except HttpError as e:
                raise FwmanError(f"cannot reach {api}: {e.reason}") from e
            if response.status != 200:
                raise FwmanError(f"{api} answered HTTP {response.status} for {owner}/{repo}")
            try:
                body: Any = response.body
                batch = [(str(item["name"]), _sha_of(item)) for item in body]
            except (ValueError, TypeError, KeyError) as e:
                raise FwmanError(f"{api}: unexpected answer for {owner}/{repo} (not a list of branches)") from e
            if len(batch) > per_page:  # with the page cap, this bounds a listing to _MAX_PAGES * per_page names
                raise FwmanError(f"{api}: {len(batch)} branches in one page for {owner}/{repo}, asked for {per_page}")
            names.update(batch)
            link_next = parse_link_next(response.headers.get("Link"))
            page += 1
            if link_next is not None:
                url = link_next
            elif "Link" not in response.headers and len(batch) == per_page:
                # a full page and no Link header (a forge that does not send one): ask for ?page=N until a
                # short or empty page
                url = f"{api}/repos/{owner}/{repo}/branches?per_page={per_page}&page={page}"
            else:
                url = None
    return names


def _sha_of(item: Any) -> str:
    """Return ``item["commit"]["sha"]`` of a branches-API entry when it is a commit id, else ""."""
    commit = item.get("commit") if isinstance(item, dict) else None
    sha = commit.get("sha") if isinstance(commit, dict) else None
    return sha if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha) else ""

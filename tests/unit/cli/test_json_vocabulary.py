"""docs/json.md is the contract of every ``--json`` document: each key in its vocabulary with its type and form,
each schema in its list, and the list the same as the one in the code (``fwman.cli.schemas.SCHEMAS``)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from fwman.cli.schemas import SCHEMAS
from tests.support.env import REPO
from tests.support.json_docs import Documents, collect_documents

DOC = REPO / "docs" / "json.md"
COLLECTION_UTILS = REPO / "collections/ansible_collections/fwman/p2p/plugins/module_utils/fwman.py"

#: documents the walk cannot print on the test hosts, and why (each still listed in docs/json.md and SCHEMAS)
NOT_WALKED = {
    "capture.check": "needs a captured directory checked on its own (tests/unit/app/test_capture.py)",
    "catalog-keys-sign": "needs the maintainers' root key",
    "catalog-sign": "needs a catalog signing key",
    "catalog-local": "needs a card maker's image with its published MD5",
    "catalog-propose": "needs a local entry and an owner report of it",
    "modules-build": "builds kernel modules (tests/unit/driver/build)",
    "modules-export": "needs built modules",
    "modules-forget": "needs a remembered source",
    "modules-hook": "builds for the kernel a hook names (tests/unit/cli/test_hook_commands_cli.py)",
    "modules-import": "needs a bundle",
    "p2p-nccl": "needs NCCL",
    "userspace-hold": "needs installed NVIDIA user-space packages",
}

#: names printed only in parts of documents the walk cannot make (a pre-flight's kernels need apt offering
#: kernels; a donor-patch module needs a donor build), and the tests that show them printed
NOT_WALKED_NAMES = {
    **dict.fromkeys(("cached", "failure", "label", "object_cache_hit", "offered", "phase", "plan"),
                    "modules preflight's kernels (tests/story/test_preflight.py, tests/unit/app/test_preflight.py)"),
    **dict.fromkeys(("patch", "tag"), "a donor-patch build's donor_patch (tests/system/test_donor_patch.py)"),
    **dict.fromkeys(("certificate_serial", "issuer", "package_sha256", "subject"),
                    "fetch's signed_package (tests/system/test_signed_package.py: needs osslsigncode)"),
    **dict.fromkeys(("blacklisted_by", "built_in", "config", "module"),
                    "a kernel with nova_core, and its blacklist (tests/unit/driver/test_nova_core.py)"),
    **dict.fromkeys(("fork_evidence", "tree_version"),
                    "a module registered with DKMS (tests/system/test_dkms_fork.py)"),
    **dict.fromkeys(("cause", "missing_tool", "declaration"),
                    "a failed build, a compat patch in status (tests/system/test_kernel_patches.py)"),
    **dict.fromkeys(("from_branch", "from_version", "hold_moved", "phases", "stage", "to_branch", "to_version"),
                    "a driver move's record (tests/unit/app/test_driver_move.py, tests/story/test_driver_move.py)"),
}  # fmt: skip

BUS_ID = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
SCHEMA_ROW = re.compile(r"^\| `fwman\.([a-z0-9.-]+)/(\d+)` \| `fwman [^`]+` \| (docs/[a-z0-9-]+\.md) \| ")
NAME_ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+?) \| [^|]+ \|$")


def _section(title: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    body = text.split(f"\n## {title}\n", 1)[1]
    return body.split("\n## ", 1)[0].splitlines()


def vocabulary() -> dict[str, list[str]]:
    """Return docs/json.md's vocabulary: name -> the types it allows (``string``, ``bus-id``, ``map``, ...)."""
    names: dict[str, list[str]] = {}
    for line in _section("Vocabulary"):
        m = NAME_ROW.match(line)
        if m:
            assert m.group(1) not in names, f"docs/json.md lists {m.group(1)} twice"
            names[m.group(1)] = [t.strip() for t in m.group(2).split(" or ")]
    return names


def documented_schemas() -> dict[str, tuple[int, str]]:
    """Return docs/json.md's list of schemas: kind -> (version, the page describing it)."""
    found = {}
    for line in _section("Schemas"):
        m = SCHEMA_ROW.match(line)
        if m:
            found[m.group(1)] = (int(m.group(2)), m.group(3))
    return found


def _fits(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "bus-id":
        return isinstance(value, str) and bool(BUS_ID.match(value))
    if kind == "time":
        return isinstance(value, str) and bool(TIME.match(value))
    if kind in ("object", "map"):
        return isinstance(value, dict)
    if kind == "list":
        return isinstance(value, list)
    if kind == "list of bus-id":
        return isinstance(value, list) and all(_fits(v, "bus-id") for v in value)
    raise AssertionError(f"docs/json.md: unknown type {kind!r}")


def vocabulary_errors(doc: Any, names: dict[str, list[str]], path: str = "") -> list[str]:
    """Return one line per key of ``doc`` not in ``names`` or whose value is not of a type listed for it.

    The keys of a ``map`` are data, not names: they are not looked up, their values are walked.
    """
    errors: list[str] = []
    if isinstance(doc, list):
        for value in doc:
            errors += vocabulary_errors(value, names, f"{path}[]")
    elif isinstance(doc, dict):
        for key, value in doc.items():
            here = f"{path}.{key}" if path else key
            kinds = names.get(key)
            if kinds is None:
                errors.append(f"{here}: not in docs/json.md's vocabulary")
                continue
            if not any(_fits(value, k) for k in kinds):
                errors.append(f"{here}: {str(value)[:60]!r} is not {' or '.join(kinds)}")
            if "map" in kinds and isinstance(value, dict):
                for inner_key, inner in value.items():
                    errors += vocabulary_errors(inner, names, f"{here}[{inner_key}]")
            else:
                errors += vocabulary_errors(value, names, here)
    return errors


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> Documents:
    return collect_documents(tmp_path_factory.mktemp("json-docs"))


def test_every_key_of_every_document_is_in_the_vocabulary_with_its_type(documents: Documents) -> None:
    names = vocabulary()
    errors = [
        f"{schema} ({' '.join(argv)}): {e}"
        for schema, found in sorted(documents.items())
        for argv, doc in found
        for e in vocabulary_errors(doc, names)
    ]
    assert not errors, "\n".join(sorted(set(errors)))


def test_every_document_printed_is_a_listed_schema_at_its_version(documents: Documents) -> None:
    current = {f"fwman.{k}/{v}" for k, v in SCHEMAS.items()}
    assert set(documents) <= current, sorted(set(documents) - current)
    walked = {s.removeprefix("fwman.").rsplit("/", 1)[0] for s in documents}
    # the walk prints every document but those it cannot, each with its reason
    assert set(SCHEMAS) - walked == set(NOT_WALKED), sorted((set(SCHEMAS) - walked) ^ set(NOT_WALKED))


def test_docs_list_every_schema_and_no_other() -> None:
    listed = documented_schemas()
    assert {k: v for k, (v, _) in listed.items()} == SCHEMAS
    for kind, (_, page) in listed.items():
        assert (REPO / page).is_file(), f"{kind}: {page} does not exist"


def test_every_vocabulary_name_is_used_by_some_document(documents: Documents) -> None:
    used: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            used.update(value)
            for inner in value.values():
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    for found in documents.values():
        for _, doc in found:
            walk(doc)
    # a name no document uses is stale: the vocabulary says what fwman prints, not what it might
    stale = set(vocabulary()) - used - set(NOT_WALKED_NAMES)
    assert not stale, ", ".join(sorted(stale))


def test_the_check_fails_on_an_unknown_key_a_wrong_type_and_a_wrong_form() -> None:
    names = vocabulary()
    planted = {
        "schema": "fwman.scan/2",
        "gpus": [{"bus_id": "41:00.0", "vbios_version": 94, "card": "0000:41:00.0"}],
        "cards": [],
        "evidence": {"any label": "a map's keys are data"},
        "time": "yesterday",
    }
    assert sorted(vocabulary_errors(planted, names)) == [
        "cards: not in docs/json.md's vocabulary",
        "gpus[].bus_id: '41:00.0' is not bus-id",
        "gpus[].card: '0000:41:00.0' is not object",
        "gpus[].vbios_version: '94' is not string or null",
        "time: 'yesterday' is not time",
    ]


def test_the_ansible_collection_reads_the_versions_fwman_prints() -> None:
    text = COLLECTION_UTILS.read_text(encoding="utf-8")
    block = text.split("SCHEMAS = {", 1)[1].split("}", 1)[0]
    read = {k: int(v) for k, v in re.findall(r'"([a-z0-9.-]+)": (\d+)', block)}
    assert read, "the collection names no schema versions"
    assert {k: SCHEMAS[k] for k in read} == read


def test_the_renamed_synonyms_are_gone(documents: Documents) -> None:
    # the synonyms the vocabulary retired: each concept under its one name (docs/json.md's version history)
    retired = {"cards", "current_version", "running", "board_key", "blockers", "rebar_max_bytes"}
    seen: dict[str, set[str]] = {}

    def walk(schema: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if key in retired:
                    seen.setdefault(key, set()).add(schema)
                if key != "evidence":
                    walk(schema, inner)
        elif isinstance(value, list):
            for inner in value:
                walk(schema, inner)

    for schema, found in documents.items():
        for _, doc in found:
            walk(schema, doc)
    assert not seen, seen

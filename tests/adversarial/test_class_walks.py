"""Issue 37's classes, each held by a walk over fwman's source (``ast``, nothing imported or run), as
tests/architecture/test_layers.py holds the layers: a new reader, writer or record that falls in a class without
its guard fails here, not in the next adversarial review.

- (a) **paths from records**: a function that takes kernel releases out of a parsed document checks them as
  ``--kernel`` is checked (``names.kernel_release``/``is_kernel_release``), itself or through a function of its
  module it calls; a module that unpacks what others packed reads its links only through ``host/confine``.
- (b) **bounded readers**: a Host read of a place others fill (homes, container layers and mounts, caches,
  unpacked trees) carries a bound (``limit=``, or ``host/capped.read_capped``); nobody passes ``limit=None``; in the
  doors every ``.read()`` of a file object is bounded, but the one listed.
- (c) **trust fails closed**: where a trust verifier is called, an ``except`` that falls back (neither raises nor
  returns) calls a ``require*`` check; a verifier's clock is skipped (``now=None``) only where listed.
- (d) **one-line text**: every output that keeps its newlines (``document()``, ``Line(block=True)``) is listed;
  the CLI writes to its streams only through its output door or with ``visible()``.
- (e) **one serializer per written format**: the syntax of apt preferences, Prometheus text, modprobe.d, systemd
  units, TOML strings and JSON appears only in its serializer module.

Each walk is a function over (module, source) returning what it flags; the second half of this file feeds each one
a planted case as a source string and shows it is caught, and the allowed form passes.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.counting import tried

PACKAGE = Path(__file__).resolve().parents[2] / "fwman"
Walk = Callable[[str, ast.Module], list[str]]


def _modules() -> Iterator[tuple[str, ast.Module]]:
    return iter(_parsed())


@functools.cache
def _parsed() -> tuple[tuple[str, ast.Module], ...]:
    """Return every module of fwman with its tree, parsed once for all the walks (which only read the trees)."""
    return tuple(
        (str(path.relative_to(PACKAGE.parent)), ast.parse(path.read_text(), str(path)))
        for path in sorted(PACKAGE.rglob("*.py"))
    )


def _name(node: ast.expr) -> str:
    """Return the called name of ``node`` (``host.read_bytes`` -> ``read_bytes``), '' when it has none."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _calls(node: ast.AST) -> Iterator[ast.Call]:
    return (n for n in ast.walk(node) if isinstance(n, ast.Call))


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    return (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _where(module: str, node: ast.AST, what: str) -> str:
    return f"{module}:{getattr(node, 'lineno', 0)}: {what}"


# -- (a) paths from records ----------------------------------------------------------------------------------------
KERNEL_CHECKS = {"kernel_release", "is_kernel_release"}
#: what unpacks a stranger's archive into a tree fwman then walks
UNPACKERS = re.compile(r"dpkg-deb|bsdtar|7zz|\btar\b|cpio|unsquashfs")


def _checks_kernels(fn: ast.AST, local: dict[str, ast.AST], seen: set[str]) -> bool:
    """Return True when ``fn`` calls a kernel-release check, itself or through a function of its module."""
    for call in _calls(fn):
        name = _name(call.func)
        if name in KERNEL_CHECKS:
            return True
        if name in local and name not in seen:
            seen.add(name)
            if _checks_kernels(local[name], local, seen):
                return True
    return False


def _takes_kernels(fn: ast.AST) -> bool:
    """Return True when ``fn`` parses a document and reads its "kernel" or "kernels" (a record's releases)."""
    parses = any(_name(c.func) in ("parse_json", "from_dict") for c in _calls(fn)) or getattr(fn, "name", "") in (
        "from_dict",
    )
    keys = any(
        isinstance(n, ast.Constant) and n.value in ("kernel", "kernels")
        for n in ast.walk(fn)
        if isinstance(n, ast.Constant)
    )
    return parses and keys


def walk_record_paths(module: str, tree: ast.Module) -> list[str]:
    """Flag (a): a function that takes kernel releases out of a parsed document without checking them, and a
    module that unpacks archives but reads links itself."""
    local: dict[str, ast.AST] = {f.name: f for f in _functions(tree)}
    out = [
        _where(module, fn, f"{fn.name} takes kernel releases from a record without names.kernel_release")
        for fn in _functions(tree)
        if _takes_kernels(fn) and not _checks_kernels(fn, local, {fn.name})
    ]
    unpacks = any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and UNPACKERS.search(n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.List)
        for n in n.elts
    )
    if unpacks and not module.startswith("fwman/host/"):
        out += [
            _where(module, c, f"{_name(c.func)}() in a module that unpacks archives: use host/confine")
            for c in _calls(tree)
            if _name(c.func) in ("readlink", "realpath") and isinstance(c.func, ast.Attribute)
        ]
    return out


# -- (b) bounded readers -------------------------------------------------------------------------------------------
#: identifiers of places others fill: users' homes, container layers, mounts and volumes, caches they write,
#: archives and trees unpacked from them
OUTSIDE = re.compile(r"home|HOMES|layer|merged|upper|container|rootfs|vllm|volume|mount|place|member|unpack|scratch")
#: modules whose reads are of places others fill, whatever the path's name
OUTSIDE_MODULES = re.compile(r"vllm|container|engine|unpack|cdi|userspace|preflight")
DOORS = ("fwman/host/",)
#: (b) the door's reads of a file object without a size: "module function": why
UNBOUNDED_DOOR_READS = {
    "fwman/host/live.py read_bytes": "the door's read when the caller passes no bound (its callers of places others "
    "fill pass one: this walk's first rule)",
    "fwman/host/live.py wait": "what a command printed, from fwman's own temp files (the command's timeout bounds "
    "it; a cap here would cut a tool's output silently)",
    "fwman/host/userfiles.py read_user_file": "a file the user names on the command line; callers of files that may "
    "be large pass max_bytes",
}


def _own_calls(fn: ast.AST) -> Iterator[ast.Call]:
    """Yield the calls in ``fn``'s body, not those of the functions defined inside it."""
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call):
            yield node
        todo.extend(ast.iter_child_nodes(node))


def _mentions_outside(node: ast.expr) -> bool:
    names = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
    names += [n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)]
    names += [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return any(OUTSIDE.search(x) for x in names)


def walk_readers(module: str, tree: ast.Module) -> list[str]:
    """Flag (b): an unbounded Host read of a place others fill, an explicit ``limit=None``, and an unbounded
    ``.read()`` in a door."""
    out: list[str] = []
    for call in _calls(tree):
        name = _name(call.func)
        if any(k.arg == "limit" and isinstance(k.value, ast.Constant) and k.value.value is None for k in call.keywords):
            out.append(_where(module, call, f"{name}(limit=None): a read without a bound"))
        bounded = any(k.arg == "limit" for k in call.keywords) or len(call.args) > 1
        outside = OUTSIDE_MODULES.search(module.rsplit("/", 1)[-1]) or (call.args and _mentions_outside(call.args[0]))
        if name in ("read_bytes", "read_text") and call.args and not bounded and outside:
            out.append(_where(module, call, f"{name}({ast.unparse(call.args[0])}) of a place others fill: no bound"))
    if module.startswith(DOORS):
        for fn in _functions(tree):
            for call in _own_calls(fn):
                unbounded = _name(call.func) == "read" and isinstance(call.func, ast.Attribute) and not call.args
                if unbounded and f"{module} {fn.name}" not in UNBOUNDED_DOOR_READS:
                    out.append(_where(module, call, f"{fn.name}: .read() without a size in a door"))
    return out


# -- (c) trust fails closed ----------------------------------------------------------------------------------------
VERIFIERS = {"verify_keys_document", "verify_catalog_index", "verify_catalog_signature", "verify_signature"}
#: (c) functions that report on trust rather than decide it (they may catch a failure to show it, and check the
#: expiry after the signature, with now=None): "module function": why
TRUST_REPORTERS = {
    "fwman/firmware/catalog/lint.py lint_signature": "`catalog lint` shows each failure as an error line and an "
    "expired document as one (exit 4); it installs and trusts nothing",
    "fwman/app/catalog/keys.py show_keys": "`catalog keys show` shows the document's state, expired included "
    "(exit 4); it installs and trusts nothing",
}


def walk_trust(module: str, tree: ast.Module) -> list[str]:
    """Flag (c): a fallback in an ``except`` of a function that verifies trust without a ``require*`` check, and
    a verifier told to skip its clock where that is not listed."""
    out: list[str] = []
    for fn in _functions(tree):
        verifies = [c for c in _calls(fn) if _name(c.func) in VERIFIERS]
        if not verifies or f"{module} {fn.name}" in TRUST_REPORTERS:
            continue
        for handler in (n for n in ast.walk(fn) if isinstance(n, ast.ExceptHandler)):
            exits = any(isinstance(n, (ast.Raise, ast.Return)) for n in ast.walk(handler))
            checked = any(_name(c.func).lstrip("_").startswith("require") for c in _calls(handler))
            if not exits and not checked:
                out.append(_where(module, handler, f"{fn.name}: an except that falls back without a require* check"))
        for call in verifies:
            now = call.args[3] if len(call.args) > 3 else next((k.value for k in call.keywords if k.arg == "now"), None)
            skipped = isinstance(now, ast.Constant) and now.value is None
            if skipped and _name(call.func) == "verify_keys_document":
                out.append(_where(module, call, f"{fn.name}: {_name(call.func)}(now=None) skips the expiry"))
    return out


# -- (d) one-line text ---------------------------------------------------------------------------------------------
#: (d) outputs that keep their newlines: "module": why
DOCUMENTS_ALLOWED = {
    "fwman/app/report.py": "`catalog propose` prints the board file it made (a whole TOML file) on stdout",
    "fwman/app/catalog/local.py": "`catalog add-local --export` prints the curated form of the entry (a TOML file)",
}
#: (d) the renderer of every use case's text: a line or a cell is written on one line (core/termtext.one_line)
RENDERER = "fwman/cli/render.py"
#: (d) what the CLI may write to a stream itself: text made safe by these, or fwman's own constants
SAFE_TEXT = {"visible", "one_line", "dumps"}


def walk_outputs(module: str, tree: ast.Module) -> list[str]:
    """Flag (d): an output that keeps newlines (``document()``, ``Line(block=True)``) outside the listed modules,
    and a CLI write to a stream of text that did not go through ``visible``/``one_line``."""
    out: list[str] = []
    if module == RENDERER and not any(_name(c.func) == "one_line" for c in _calls(tree)):
        out.append(_where(module, tree, "the renderer writes lines and cells without one_line()"))
    functions = {id(c): fn.name for fn in _functions(tree) for c in _own_calls(fn)}
    for call in _calls(tree):
        name = _name(call.func)
        block = name == "Line" and any(k.arg == "block" for k in call.keywords)
        if (name == "document" or block) and module not in DOCUMENTS_ALLOWED and module != "fwman/app/text.py":
            out.append(_where(module, call, f"{name}(): an output that keeps newlines, not listed"))
        if module.startswith("fwman/cli/") and module != "fwman/cli/context.py" and name in ("write", "echo"):
            if f"{module} {functions.get(id(call), '')}" in OUTPUT_ALLOWED:
                continue
            receiver = ast.unparse(call.func)
            if name == "write" and not re.search(r"stdout|stderr|stream", receiver):
                continue
            if name == "echo" and receiver not in ("click.echo", "echo"):
                continue  # app.echo: the output door
            text = call.args[0] if call.args else None
            safe = (
                text is None or isinstance(text, ast.Constant) or any(_name(c.func) in SAFE_TEXT for c in _calls(text))
            )
            if not safe:
                out.append(_where(module, call, f"{receiver}({ast.unparse(text)[:40]}): not through the output door"))
    return out


#: (d) CLI functions that write to a stream themselves: "module function": why
OUTPUT_ALLOWED = {
    "fwman/cli/app.py _error": "the error line: its message and hint go through one_line() just above the write",
    "fwman/cli/fetch.py draw": "the download's progress line: its label went through visible() where it was made",
    "fwman/cli/docgen.py main": "writes docs/cli.md from fwman's own help texts (a maintainer's tool)",
}


# -- (e) one serializer per written format -------------------------------------------------------------------------
#: format: (the one module that may spell its syntax, what spelling it)
FORMATS: dict[str, tuple[str, re.Pattern[str]]] = {
    "apt preferences": ("fwman/core/aptprefs.py", re.compile(r"Pin-Priority|^Pin: |^Package: |\nPackage: ")),
    "Prometheus text": ("fwman/reports/metrics.py", re.compile(r"^# (?:TYPE|HELP) ")),
    "modprobe.d": ("fwman/core/modprobeconf.py", re.compile(r"^(?:options|blacklist|softdep) [a-z{]")),
    "systemd unit": (
        "fwman/core/unitfile.py",
        re.compile(r"^\[(?:Unit|Service|Install|Timer)\]$|^(?:ExecStart|ExecStartPre|Environment|WantedBy)="),
    ),
}


def _string_parts(tree: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    """Yield each string constant, and each f-string's text with ``{}`` for what it interpolates."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            inside.update(id(v) for v in node.values)
            yield node, text
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside:
            yield node, node.value


def _patterns(tree: ast.Module) -> set[int]:
    """Return the ids of the string constants that are regular expressions (a reader's, not a writer's)."""
    return {
        id(c.args[0])
        for c in _calls(tree)
        if _name(c.func) in ("compile", "search", "match", "fullmatch", "findall", "finditer", "sub") and c.args
    }


def _docstrings(tree: ast.Module) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            out.add(id(body[0].value))
    return out


def walk_writers(module: str, tree: ast.Module) -> list[str]:
    """Flag (e): the syntax of a written format spelled outside its serializer, a TOML string quoted by hand, and
    JSON built by hand."""
    out: list[str] = []
    skip = _docstrings(tree) | _patterns(tree)
    for node, text in _string_parts(tree):
        if id(node) in skip:
            continue
        for fmt, (owner, syntax) in FORMATS.items():
            if module != owner and syntax.search(text):
                out.append(_where(module, node, f"{fmt} written outside {owner}: {text[:50]!r}"))
        if isinstance(node, ast.JoinedStr):
            if re.search(r'= "\{\}"', text) and module != "fwman/core/tomltext.py":
                out.append(_where(module, node, f"a TOML string quoted by hand (use toml_value): {text[:50]!r}"))
            if re.match(r'\{"\{\}"|\{"[a-z_]+": ', text):
                out.append(_where(module, node, f"JSON built by hand (use json.dumps): {text[:50]!r}"))
    return out


# -- the walks over fwman --------------------------------------------------------------------------------------------
WALKS: dict[str, Walk] = {
    "paths from records": walk_record_paths,
    "bounded readers": walk_readers,
    "trust fails closed": walk_trust,
    "one-line text": walk_outputs,
    "one serializer per format": walk_writers,
}


@pytest.mark.parametrize("walk", WALKS.values(), ids=list(WALKS))
def test_fwman_holds_to_the_class(walk: Walk) -> None:
    found = [f for module, tree in _modules() for f in walk(module, tree)]
    assert found == [], "\n".join(found)


def test_every_listed_exception_still_matches() -> None:
    names = {f"{m} {f.name}" for m, tree in _modules() for f in _functions(tree)}
    modules = {m for m, _ in _modules()}
    listed = (*UNBOUNDED_DOOR_READS, *TRUST_REPORTERS, *OUTPUT_ALLOWED)
    stale = [k for k in listed if k not in names]
    stale += [k for k in DOCUMENTS_ALLOWED if k not in modules]
    assert stale == [], f"listed exceptions that match nothing (delete them): {stale}"


# -- each walk catches its planted case ------------------------------------------------------------------------------
def _planted(name: str) -> str:
    """Return the module path a planted case pretends to be (built here: no such file exists)."""
    return f"fwman/{name}.py"


PLANTED: list[tuple[str, str, str, str]] = [
    # (walk, module, planted source, what the finding says)
    (
        "paths from records",
        _planted("driver/newrecord"),
        "def read(host):\n    doc = parse_json(host.read_bytes(STATE), STATE)\n"
        "    return [k for k in doc['kernels']]\n",
        "takes kernel releases from a record",
    ),
    (
        "paths from records",
        _planted("driver/newunpack"),
        "def unpack(host, deb, root):\n    host.run(['dpkg-deb', '-x', deb, root])\n"
        "    return root + host.readlink(root + '/lib/modules/k/build')\n",
        "readlink() in a module that unpacks archives",
    ),
    (
        "bounded readers",
        _planted("reports/doctor/newcache"),
        "def read(host, home):\n    return host.read_text(f'/home/{home}/.cache/x.json')\n",
        "of a place others fill: no bound",
    ),
    (
        "bounded readers",
        _planted("platform/new"),
        "def r(host, p):\n    return host.read_bytes(p, limit=None)\n",
        "limit=None",
    ),
    (
        "bounded readers",
        _planted("host/newdoor"),
        "def slurp(path):\n    with open(path, 'rb') as f:\n        return f.read()\n",
        ".read() without a size in a door",
    ),
    (
        "trust fails closed",
        _planted("firmware/catalog/newupdate"),
        "def update(host, now):\n    try:\n        keys = download(host)\n    except DownloadError:\n"
        "        keys = installed(host)\n    return verify_catalog_index(b'', b'', keys, [], now)\n",
        "an except that falls back without a require* check",
    ),
    (
        "trust fails closed",
        _planted("firmware/catalog/newkeys"),
        "def load(data, sig, roots):\n    return verify_keys_document(data, sig, roots, None)\n",
        "skips the expiry",
    ),
    (
        "one-line text",
        _planted("app/newaudit"),
        "def text(self):\n    return [document(self.container_env)]\n",
        "an output that keeps newlines, not listed",
    ),
    (
        "one-line text",
        _planted("cli/newcmd"),
        "def cmd(app, name):\n    app.env.stdout.write(name + '\\n')\n",
        "not through the output door",
    ),
    (
        "one-line text",
        "fwman/cli/render.py",
        "def _span(app, cell):\n    return visible(cell.text)\n",
        "the renderer writes lines and cells without one_line()",
    ),
    (
        "one serializer per format",
        _planted("driver/newpin"),
        "def pin(name):\n    return f'Package: {name}\\nPin: version *\\nPin-Priority: -1\\n'\n",
        "apt preferences written outside fwman/core/aptprefs.py",
    ),
    (
        "one serializer per format",
        _planted("reports/newmetrics"),
        "def render(name, value):\n    return f'# TYPE {name} gauge\\n{name} {value}\\n'\n",
        "Prometheus text written outside",
    ),
    (
        "one serializer per format",
        _planted("driver/newmodprobe"),
        "def conf(opts):\n    return f'options nvidia {opts}\\n'\n",
        "modprobe.d written outside",
    ),
    (
        "one serializer per format",
        _planted("driver/newunit"),
        "def unit(cmd):\n    return '\\n'.join(['[Service]', f'ExecStart={cmd}'])\n",
        "systemd unit written outside",
    ),
    (
        "one serializer per format",
        _planted("firmware/catalog/newtoml"),
        "def board(name):\n    return f'name = \"{name}\"\\n'\n",
        "a TOML string quoted by hand",
    ),
    (
        "one serializer per format",
        _planted("app/newjson"),
        'def doc(k):\n    return f\'{{"kernel": "{k}"}}\'\n',
        "JSON built by hand",
    ),
]


@pytest.mark.parametrize(("walk", "module", "source", "said"), PLANTED, ids=[f"{p[0]}: {p[1]}" for p in PLANTED])
def test_each_walk_catches_its_planted_case(walk: str, module: str, source: str, said: str) -> None:
    tried()
    found = WALKS[walk](module, ast.parse(source))
    print(f"{walk}: {found}")  # `pytest -s` shows the line each walk gives
    assert found and all(said in f for f in found), found


ALLOWED_FORMS: list[tuple[str, str, str]] = [
    (
        "paths from records",
        _planted("driver/newrecord"),
        "def read(host):\n    doc = parse_json(host.read_bytes(STATE), STATE)\n"
        "    return [_checked(k) for k in doc['kernels']]\n\n"
        "def _checked(k):\n    return names.kernel_release(k)\n",
    ),
    (
        "bounded readers",
        _planted("reports/doctor/newcache"),
        "def read(host, home):\n    return read_text_capped(host, f'/home/{home}/x.json', 1024, 'x')\n",
    ),
    (
        "trust fails closed",
        _planted("firmware/catalog/newupdate"),
        "def update(host, now):\n    try:\n        keys = download(host)\n    except DownloadError:\n"
        "        keys = installed(host)\n        _require_current(keys, now)\n"
        "    return verify_catalog_index(b'', b'', keys, [], now)\n",
    ),
    ("one-line text", _planted("cli/newcmd"), "def cmd(app, name):\n    app.env.stdout.write(visible(name))\n"),
    (
        "one serializer per format",
        _planted("driver/newpin"),
        "def pin(name):\n    return aptprefs.render([aptprefs.Pin((name,), 'version', '*', -1)])\n",
    ),
]


@pytest.mark.parametrize(("walk", "module", "source"), ALLOWED_FORMS, ids=[f"{p[0]}: {p[1]}" for p in ALLOWED_FORMS])
def test_the_guarded_form_passes(walk: str, module: str, source: str) -> None:
    tried()
    assert WALKS[walk](module, ast.parse(source)) == []


def test_the_walks_see_the_guards_fwman_has() -> None:
    """The walks are not vacuous: each finds the readers and writers it is about in fwman today."""
    trees = dict(_modules())
    assert any(_takes_kernels(f) for f in _functions(trees["fwman/driver/kernel_hold.py"]))
    assert any(_takes_kernels(f) for f in _functions(trees["fwman/driver/preflight.py"]))
    assert walk_writers(_planted("driver/dkms_copy"), trees["fwman/core/aptprefs.py"])  # its syntax, elsewhere
    assert walk_writers(_planted("x"), trees["fwman/reports/metrics.py"])
    assert any("capped" in ast.unparse(c.func) for c in _calls(trees["fwman/reports/doctor/vllm_caches.py"]))

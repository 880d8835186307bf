"""`modules catchup`, `forget`, `hook`, `keygen` and `metrics write`: --dry-run changes nothing and says what
would be done, --json reports what was done (with `changed`), and `--origin` replaced `--from` (which still works,
with a warning on stderr)."""

from __future__ import annotations

import json
from pathlib import Path

from fwman.driver.build.toolchain import BUILD_TOOLS
from tests.support.env import FwmanEnv
from tests.support.tools import tools_path

BUILD = tuple(t.command for t in BUILD_TOOLS)

KVER = "6.1.0-50-amd64"


def _root(tmp: Path) -> Path:
    """A root with one kernel and its headers, and no module source configured."""
    (tmp / "lib/modules" / KVER).mkdir(parents=True)
    (tmp / "usr/src/h/include").mkdir(parents=True)
    (tmp / "lib/modules" / KVER / "build").symlink_to("/usr/src/h")
    return tmp


def test_catchup_dry_run_says_what_it_would_do_and_writes_nothing(tmp_path: Path) -> None:
    root = _root(tmp_path)
    run = FwmanEnv(euid=1000)  # a dry run needs no root
    r = run("modules", "catchup", "--dry-run", "--root", str(root))
    assert r.code == 0, r.stderr
    want = [
        f"would mark {KVER} pending: no module source configured (run `fwman modules build` once)",
        "would check that the next boot has working patched modules",  # the run checks it after a kernel changed
        "would update the boot fast path's record of the kernels and fwman's module files "
        "(/var/lib/fwman/modules/current.stamp)",
    ]
    assert r.stdout.strip().splitlines() == want
    doc = run("modules", "catchup", "--dry-run", "--json", "--root", str(root)).json()
    assert doc["schema"] == "fwman.modules-catchup/2"
    assert (doc["dry_run"], doc["changed"], len(doc["actions"])) == (True, False, 3)
    assert not (root / "var/lib/fwman").exists()


def test_catchup_json_reports_the_change(tmp_path: Path) -> None:
    root = _root(tmp_path)
    r = FwmanEnv()("modules", "catchup", "--json", "--root", str(root))
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["schema"] == "fwman.modules-catchup/2" and doc["no_source"] is True
    assert doc["dry_run"] is False and doc["boot"]["kernel"] == KVER and doc["boot"]["safe"] is False
    assert (root / f"var/lib/fwman/modules/{KVER}.pending").exists()
    dry = FwmanEnv()("modules", "catchup", "--dry-run", "--json", "--root", str(root)).json()
    assert doc["actions"] == dry["actions"]  # what the run applied is what its dry run lists


def test_forget_dry_run_then_json_and_the_deprecated_from(tmp_path: Path) -> None:
    root = _root(tmp_path)
    state = root / "var/lib/fwman/modules"
    state.mkdir(parents=True)
    (state / f"{KVER}.pending").write_text(json.dumps({"kver": KVER, "reason": "no headers"}) + "\n")
    run = FwmanEnv()
    r = run("modules", "forget", "--kernel", KVER, "--dry-run", "--root", str(root))
    assert r.code == 0 and r.stdout.strip() == f"would drop /var/lib/fwman/modules/{KVER}.pending"
    assert (state / f"{KVER}.pending").exists()
    r = run("modules", "forget", "--kernel", KVER, "--from", "postrm", "--json", "--root", str(root))
    assert r.code == 0, r.stderr
    assert "--from is deprecated here" in r.stderr and "use --origin postrm" in r.stderr
    doc = r.json()
    assert doc["schema"] == "fwman.modules-forget/2" and doc["changed"] is True
    assert doc["actions"] == [f"drop /var/lib/fwman/modules/{KVER}.pending"]  # what the dry run listed
    assert not (state / f"{KVER}.pending").exists()
    again = run("modules", "forget", "--kernel", KVER, "--origin", "postrm", "--json", "--root", str(root))
    assert again.code == 0 and "deprecated" not in again.stderr
    assert (again.json()["changed"], again.json()["actions"]) == (False, [])


def test_hook_dry_run_and_json_without_a_source(tmp_path: Path) -> None:
    root = _root(tmp_path)
    run = FwmanEnv()
    r = run("modules", "hook", "--kernel", KVER, "--origin", "postinst", "--dry-run", "--root", str(root))
    assert r.code == 0 and "would mark" in r.stdout and not (root / "var/lib/fwman").exists()
    r = run("modules", "hook", "--kernel", KVER, "--origin", "postinst", "--json", "--root", str(root))
    assert r.code == 0, r.stderr  # a hook never fails a kernel install unless strict = true
    doc = r.json()
    assert doc["schema"] == "fwman.modules-hook/2"
    assert (doc["kernel"], doc["origin"], doc["in_place"], doc["no_source"]) == (KVER, "postinst", False, True)
    r = run("modules", "hook", "--kernel", KVER, "--origin", "postinst", "--root", str(root))
    assert r.code == 0 and f"NOT in place for {KVER}; the kernel install goes on" in r.stderr


def test_keygen_dry_run_writes_no_key_and_json_names_it(tmp_path: Path) -> None:
    run = FwmanEnv()
    r = run("modules", "keygen", "--dry-run", "--json", "--root", str(tmp_path))
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["schema"] == "fwman.modules-keygen/1" and (doc["dry_run"], doc["changed"]) == (True, False)
    assert any("mok.key" in a for a in doc["actions"]) and not (tmp_path / "etc").exists()
    r = run("modules", "keygen", "--json", "--root", str(tmp_path))
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["changed"] is True and doc["key"].endswith("/mok.key") and doc["cert"].endswith("/mok.der")
    assert (tmp_path / doc["key"].lstrip("/")).exists() and doc["enrollment_steps"]
    # a second keygen without --force is refused, in a dry run too
    assert run("modules", "keygen", "--dry-run", "--root", str(tmp_path)).code == 2


def test_metrics_write_dry_run_and_json(tmp_path: Path) -> None:
    run = FwmanEnv()
    out = "/var/lib/prometheus/node-exporter/fwman.prom"
    r = run("metrics", "write", "--dry-run", "--root", str(tmp_path))
    assert r.code == 0 and r.stdout.startswith("would write ") and r.stdout.rstrip().endswith(f"series to {out}")
    assert not (tmp_path / out.lstrip("/")).exists()
    doc = run("metrics", "write", "--json", "--root", str(tmp_path)).json()
    assert doc["schema"] == "fwman.metrics-write/1" and (doc["changed"], doc["output"]) == (True, out)
    written = (tmp_path / out.lstrip("/")).read_text()
    assert written.count("\n") >= doc["series"] > 0
    printed = run("metrics", "write", "--stdout", "--json", "--root", str(tmp_path)).json()
    assert printed["changed"] is False and printed["output"] is None and "fwman_metrics_source_up" in printed["text"]


def test_hooks_status_json_is_the_documented_shape(tmp_path: Path) -> None:
    doc = FwmanEnv()("hooks", "status", "--json", "--root", str(tmp_path)).json()
    assert doc["schema"] == "fwman.hooks-status/1" and doc["package"] is None and doc["installed"] is False
    assert all(json.dumps(f) and f["present"] is False for f in doc["files"])


def test_fork_takes_the_same_forms_in_every_command(tmp_path: Path) -> None:
    """`--fork` is read by one resolver: a bare name that is not known is the same usage error in `modules build`,
    `driver branches` and `audit`, and NAME=URL and a [forks] name are accepted by each."""
    root = _root(tmp_path)
    (root / "etc/fwman").mkdir(parents=True)
    (root / "etc/fwman/config.toml").write_text('[forks]\nlocal = "/srv/git/fork.git"\n')
    run = FwmanEnv(variables={"PATH": "/nonexistent"})
    build = ("modules", "build", "--kernel", KVER, "--branch", "570.86.16-p2p")
    for argv in (build, ("driver", "branches", "--offline"), ("audit", "--offline")):
        r = run(*argv, "--fork", "lcoal", "--root", str(root))
        assert r.code == 2, (argv, r.stderr)
        assert "--fork 'lcoal': no fork of that name (known forks: aikitoria, tinygrad, mylesgoose, local)" in r.stderr
    for spec in ("local", "mine=/srv/git/fork.git"):
        listed = run("driver", "branches", "--offline", "--json", "--fork", spec, "--root", str(root)).json()
        assert spec.partition("=")[0] in [f["fork"] for f in listed["forks"]]
        assert run("audit", "--offline", "--json", "--fork", spec, "--root", str(root)).code != 2
    help_texts = [run(*argv, "--help").stdout for argv in (("modules", "build"), ("driver", "branches"), ("audit",))]
    assert all("NAME=URL, owner/name on GitHub, or a git URL or path" in " ".join(t.split()) for t in help_texts)


def test_build_dry_run_names_kernels_and_source_and_changes_nothing(tmp_path: Path) -> None:
    root = _root(tmp_path)
    (root / "lib/modules/6.1.0-53-amd64").mkdir(parents=True)  # a second kernel, without headers
    argv = ("modules", "build", "--kernel", KVER, "--kernel", "6.1.0-53-amd64", "--source", "/src/fork")
    # without the build tools a run would refuse up front, so the dry run says that, naming them and the apt line
    bare = FwmanEnv(euid=1000, variables={"PATH": "/nonexistent"})(*argv, "--dry-run", "--root", str(root))
    assert bare.code == 0, bare.stderr
    assert bare.stdout.splitlines() == [
        "would refuse: the module build needs make, gcc, g++, as, ld, objcopy, xz, which are not installed "
        "(apt install make gcc g++ binutils xz-utils)"
    ]
    build_tools = tools_path(tmp_path / "bin", BUILD)
    run = FwmanEnv(euid=1000, variables={"PATH": build_tools})  # a dry run needs no root
    r = run(*argv, "--dry-run", "--root", str(root))
    assert r.code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"would build the patched modules for {KVER} from local tree /src/fork"
    assert lines[1] == f"would refresh the initramfs of {KVER} where it carries other NVIDIA modules"
    assert lines[2] == "would mark 6.1.0-53-amd64 pending until its headers are installed"
    assert lines[3] == "would check that the next boot has working patched modules"
    doc = run(*argv, "--dry-run", "--json", "--root", str(root)).json()
    assert (doc["dry_run"], doc["changed"], doc["kernels"], len(doc["actions"])) == (True, False, [], 4)
    assert not (root / "var").exists()
    assert run(*argv, "--root", str(root)).code == 3  # without --dry-run it needs root


def test_the_driver_version_can_be_set_in_config_toml(tmp_path: Path) -> None:
    """Issue 39, row 7: `[modules] driver-version` is what `--driver-version` is (it was refused as unknown)."""
    from tests.support.modules import make_fork_repo

    root = _root(tmp_path / "root")
    head = make_fork_repo(tmp_path / "fork.git")
    conf = root / "etc/fwman/config.toml"
    conf.parent.mkdir(parents=True)
    conf.write_text(
        f'[forks]\ndefaults = false\nlocal = "file://{tmp_path}/fork.git"\n\n'
        '[modules]\nfork = "local"\ndriver-version = "570.86.16"\n'
    )
    run = FwmanEnv(euid=1000, variables={"PATH": tools_path(tmp_path / "bin", (*BUILD, "git"))})
    r = run("modules", "build", "--kernel", KVER, "--dry-run", "--root", str(root))
    assert r.code == 0, r.stderr
    assert "driver 570.86.16: building 570.86.16-p2p of local, the newest of its revisions" in r.stderr, r.stderr
    assert (
        r.stdout.splitlines()[0] == f"would build the patched modules for {KVER} from fork local branch 570.86.16-p2p"
    )
    assert len(head) == 40
    conf.write_text(conf.read_text() + 'branch = "570.86.16-p2p"\n')  # both: which one is meant is not clear
    r = run("modules", "build", "--kernel", KVER, "--dry-run", "--root", str(root))
    assert r.code == 2 and "[modules] driver-version picks the branch itself" in r.stderr, r.stderr

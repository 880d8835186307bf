"""``fwman modules preflight``: build for the kernels apt installs next, before they land.

The use case is :mod:`fwman.app.modules.preflight`.
"""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, leaf_options


@click.command("preflight")
@click.option("--hold", is_flag=True, help="Hold back (apt pin) the kernel packages the modules will not build for.")
@click.option("--release", is_flag=True, help="Only lift every hold fwman placed; build nothing.")
@click.option(
    "--dry-run", is_flag=True, help="List the kernels and recorded verdicts; download, build, change nothing."
)
@click.option("-j", "--jobs", type=int, metavar="N", help="Parallel make jobs (default: all CPUs).")
@leaf_options
def preflight(app: AppContext, hold: bool, release: bool, dry_run: bool, jobs: int | None, as_json: bool) -> None:
    """Say, for each kernel apt would install next, whether the patched modules build for it: before it lands.

    The kernels are those a simulated upgrade (`apt-get -s dist-upgrade`) would install and that are not
    installed, and those fwman holds back. For each, its headers package and the packages its tree needs
    (`linux-headers-*-common`, `linux-kbuild-*`) are downloaded with `apt-get download` into
    /var/cache/fwman/preflight/KVER and unpacked with `dpkg-deb -x` there (nothing is installed, the image is
    not fetched), and the module source the kernel hook would build (at its cached commit) is built against
    them with the object cache and the matching /etc/fwman/patches.d patches. Each kernel gets one line:
    "safe to install", or "will not build: FILE:LINE: error". The verdict is recorded per kernel, headers
    version, source commit and patches in /var/lib/fwman/preflight.json: asked again, nothing is downloaded or
    built. `fwman modules status` and `fwman metrics` show the last result.

    --hold writes fwman's own apt pin, /etc/apt/preferences.d/fwman-kernel-preflight (Pin-Priority -1 on the
    kernel's image and headers packages), so apt keeps the kernel (and the metapackage that pulls it) back. A
    later pre-flight in which the kernel builds (a new fork commit, a patch in patches.d) lifts that kernel's
    hold by itself; --release lifts them all. Holds fwman did not place (`apt-mark hold`, other pins) are never
    touched. fwman-preflight.timer runs `fwman modules preflight --hold` daily (docs/preflight.md).

    \b
    Examples:
      fwman modules preflight
      fwman modules preflight --hold          what the daily timer runs
      fwman modules preflight --dry-run       the kernels apt offers and what is recorded, nothing built
      fwman modules preflight --release       lift fwman's holds
      fwman modules preflight --json | jq '.kernels[] | {kernel, verdict}'

    Exit status: 0 every kernel is safe to install (or apt offers none), 4 one will not build (held with
    --hold), 5 one could not be checked (its headers could not be downloaded), or no apt-get or compiler;
    2 no module source configured, or --hold with --release.
    """
    from fwman.app.modules.preflight import PreflightRequest, phase_progress, run_preflight
    from fwman.cli.render import finish

    if not dry_run:
        app.require_change("fwman modules preflight")

    def say(text: str) -> None:
        app.echo(text, err=True)

    progress = None if as_json else phase_progress(say)
    request = PreflightRequest(hold=hold, release=release, dry_run=dry_run, jobs=jobs, progress=progress)
    finish(app, "modules-preflight", run_preflight(app.host, request, say), as_json)

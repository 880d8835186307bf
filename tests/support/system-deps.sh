#!/bin/bash
# Install the Debian packages the tests need (`make system-deps`, run by `make test` as root), and nothing more:
#
#   - `apt-get update` first, then `--no-install-recommends --no-upgrade`; apt's own simulation is read before
#     anything is installed, and a plan that would upgrade an installed package (a dependency asking for a newer
#     version) is refused, naming it: the tests never upgrade the machine;
#   - no package that starts or enables a service: every package apt would newly install is downloaded first and
#     its maintainer scripts are read; one that calls deb-systemd-helper enable, deb-systemd-invoke,
#     invoke-rc.d, update-rc.d, runit's update-service or systemctl enable/start is refused, unless it is part of every Debian system (Priority required or
#     important, e.g. systemd in a bare container); the install runs under a policy-rc.d that forbids starting
#     anything (when the machine has none of its own);
#   - the man page test renders with groff-base (groff, preconv: what man runs), which ships no unit; man-db is
#     not installed for it (its package enables man-db.timer, and it is Priority important, so the check of
#     maintainer scripts below would let it through without disabling the timer);
#   - promtool without the Prometheus server: the `prometheus` package is only downloaded and its /usr/bin/promtool
#     unpacked into .cache/system-deps/bin (tests/support/tools.py looks there);
#   - two kernels' headers chosen from what apt offers now (tests/support/kernels.py), checked afterwards.
#
# usage: system-deps.sh [--plan] PACKAGE...   (--plan: check and say what would be installed, install nothing)
set -euo pipefail
PLAN=""
if [ "${1:-}" = --plan ]; then
    PLAN=1
    shift
fi
cd "$(dirname "$0")/../.."
CACHE=.cache/system-deps

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "not root (or no apt): tests that need Debian packages will be skipped (under CI=true: fail)"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-y -qq --no-install-recommends --no-upgrade)
# what a maintainer script runs to enable or start a service: systemd's and sysvinit's helpers, runit's
# (update-service, runit-helper, sv), and systemctl itself
# Packages the tests need whose Debian maintainer scripts enable units (dh_installsystemd's default): they are
# installed, and every unit they ship is disabled again at once with deb-systemd-helper (so a later upgrade keeps
# it disabled), then checked: nothing they ship is left enabled. podman: only its CLI is used (the container
# tests run it with private storage); its package enables podman.service, podman.socket, podman-restart.service
# and podman-auto-update.{service,timer} on first install. docker.io and containerd: the Docker tests start their
# own dockerd by hand (private data root, socket under the test's tmp dir, its own managed containerd), never the
# system's; docker.io enables docker.service and docker.socket (and, through update-rc.d defaults, its SysV script
# /etc/init.d/docker), containerd enables containerd.service.
DISABLED_AFTER=" podman docker.io containerd "
STARTS='deb-systemd-helper( --quiet)? (enable|reenable)|deb-systemd-invoke|invoke-rc\.d|update-rc\.d|update-service --add|runit-helper|systemctl( --[a-z-]+)* (enable|start|restart)'


echo "apt-get update"
apt-get update -qq

kernels=$(python3 tests/support/kernels.py packages)
missing=""
for p in "$@" $kernels; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done

if [ -n "$missing" ]; then
    echo "installing Debian packages for the tests:$missing"
    # shellcheck disable=SC2086
    plan=$(apt-get -s install "${APT_OPTS[@]}" $missing)
    # "Inst NAME [OLD] (NEW ...)": the brackets hold the installed version, i.e. an upgrade
    upgrades=$(printf '%s\n' "$plan" | sed -n 's/^Inst \([^ ]*\) \[.*/\1/p')
    if [ -n "$upgrades" ]; then
        echo "refused: installing$missing would upgrade installed packages:" $upgrades >&2
        echo "upgrade them yourself if you mean to (apt-get install --only-upgrade ...), then run this again" >&2
        exit 1
    fi
    new=$(printf '%s\n' "$plan" | sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) .*/\1=\2/p')
    # shellcheck disable=SC2086
    apt-get install "${APT_OPTS[@]}" --download-only $missing
    starters=""
    for item in $new; do
        name=${item%%=*} version=${item#*=}
        deb=$(ls /var/cache/apt/archives/"${name}"_"${version/:/%3a}"_*.deb 2>/dev/null | head -n1 || true)
        [ -n "$deb" ] || continue
        priority=$(dpkg-deb -f "$deb" Priority 2>/dev/null || true)
        case "$priority" in required | important) continue ;; esac
        if dpkg-deb --ctrl-tarfile "$deb" | tar -xO 2>/dev/null | \
            grep -Eq "$STARTS"; then
            case "$DISABLED_AFTER" in
                *" $name "*) ;; # installed, its units disabled right after (DISABLED_AFTER)
                *) starters="$starters $name" ;;
            esac
        fi
    done
    if [ -n "$starters" ]; then
        echo "refused: these packages start or enable a service (nothing was installed):$starters" >&2
        exit 1
    fi
    if [ -n "$PLAN" ]; then
        echo "would install:" $new
        exit 0
    fi
    policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        policy=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\n# written by fwman tests/support/system-deps.sh for one apt-get run\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        trap 'rm -f "$policy"' EXIT
    fi
    # shellcheck disable=SC2086
    apt-get install "${APT_OPTS[@]}" $missing
fi

# the units of the DISABLED_AFTER packages: disabled (also when an earlier run or a person installed them): their
# systemd units, and the SysV scripts they ship (update-rc.d disable turns the start links into stop links, which
# a later upgrade keeps; on Debian 12 it also disables the systemd unit of the same name, docker.service)
for name in $DISABLED_AFTER; do
    dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q "install ok installed" || continue
    for script in $(dpkg -L "$name" | sed -n 's#^/etc/init\.d/\([^/]*\)$#\1#p'); do
        if ls /etc/rc[2345S].d/S[0-9][0-9]"$script" >/dev/null 2>&1; then
            echo "$name: disabling the SysV script /etc/init.d/$script (the package enabled it)"
            update-rc.d "$script" disable >/dev/null
        fi
        if ls /etc/rc[2345S].d/S[0-9][0-9]"$script" >/dev/null 2>&1; then
            echo "refused: /etc/init.d/$script of $name is still enabled" >&2
            exit 1
        fi
    done
    for unit in $(dpkg -L "$name" | sed -n 's#^/lib/systemd/system/\([^/]*\.\(service\|socket\|timer\)\)$#\1#p'); do
        if [ -n "$(find /etc/systemd/system -lname "*/$unit")" ]; then
            echo "$name: disabling $unit (the package enabled it; the tests use only the command)"
            DPKG_MAINTSCRIPT_PACKAGE="$name" deb-systemd-helper disable "$unit" >/dev/null
        fi
        if [ -n "$(find /etc/systemd/system -lname "*/$unit")" ]; then
            echo "refused: $unit of $name is still enabled" >&2
            exit 1
        fi
    done
done

if [ -n "$PLAN" ]; then
    echo "nothing to install"
    exit 0
fi

if [ ! -x "$CACHE/bin/promtool" ]; then
    echo "promtool: unpacking /usr/bin/promtool of the prometheus package into $CACHE/bin (the server is not installed)"
    mkdir -p "$CACHE/deb" "$CACHE/bin"
    rm -f "$CACHE"/deb/prometheus_*.deb
    (cd "$CACHE/deb" && apt-get download -qq -o APT::Sandbox::User=root prometheus)
    dpkg-deb --fsys-tarfile "$CACHE"/deb/prometheus_*.deb | tar -x -C "$CACHE/deb" ./usr/bin/promtool
    mv "$CACHE/deb/usr/bin/promtool" "$CACHE/bin/promtool"
    rm -rf "$CACHE/deb"
fi

python3 tests/support/kernels.py check

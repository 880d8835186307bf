"""A stand-in nvidia-smi for live-host tests: prints the example host's recorded outputs (no GPU here)."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

from tests.support.env import EXAMPLE_HOST


def fake_nvidia_smi(bin_dir: Path) -> None:
    """A stand-in nvidia-smi that prints the example host's recorded outputs (no GPU here)."""
    meta = json.loads((EXAMPLE_HOST / "snapshot.json").read_text())
    table = {
        " ".join(c["argv"][1:]): (EXAMPLE_HOST / "commands" / c["stdout"]).read_text()
        for c in meta["commands"]
        if c["argv"][0] == "nvidia-smi"
    }
    bin_dir.mkdir()
    (bin_dir / "outputs.json").write_text(json.dumps(table))
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        "t = json.load(open(os.path.join(os.path.dirname(__file__), 'outputs.json')))\n"
        "k = ' '.join(sys.argv[1:])\n"
        "sys.stdout.write(t[k]) if k in t else sys.exit('nvidia-smi: unknown option')\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


#: the settable stand-in: the recorded ``-q -x`` document with each GPU's persistence mode and power limit taken
#: from ``state.json`` ({bus id: {"pm": "Enabled"|"Disabled", "pl": watts}}), which ``-i BUS -pm ENABLED|DISABLED``
#: and ``-i BUS -pl WATTS`` change (a limit outside the GPU's min/max is refused, rc 1). The messages real
#: nvidia-smi prints for a setting are not reproduced: fwman reads none of them, it reads the state back.
_SETTABLE = r"""#!/usr/bin/env python3
import json, os, re, sys
here = os.path.dirname(os.path.abspath(__file__))
table = json.load(open(os.path.join(here, "outputs.json")))
state_path = os.path.join(here, "state.json")
state = json.load(open(state_path))
args = sys.argv[1:]

def key(text):
    dom, bus, rest = text.split(":")
    return "%04x:%s:%s" % (int(dom, 16), bus.lower(), rest.lower())

def gpu(m):
    s = state[key(m.group(1))]
    block = re.sub(r"<persistence_mode>[^<]*<", "<persistence_mode>%s<" % s["pm"], m.group(0))
    return re.sub(r"<current_power_limit>[^<]*<", "<current_power_limit>%.2f W<" % s["pl"], block)

if len(args) == 4 and args[0] == "-i" and args[2] in ("-pm", "-pl"):
    s = state.get(key(args[1]))
    if s is None:
        sys.exit("stand-in nvidia-smi: no GPU " + args[1])
    if args[2] == "-pm":
        s["pm"] = {"ENABLED": "Enabled", "1": "Enabled", "DISABLED": "Disabled", "0": "Disabled"}[args[3]]
    elif not s["min"] <= float(args[3]) <= s["max"]:
        sys.exit("stand-in nvidia-smi: power limit outside %g to %g W" % (s["min"], s["max"]))
    else:
        s["pl"] = float(args[3])
    json.dump(state, open(state_path, "w"))
    sys.exit(0)
k = " ".join(args)
if k not in table:
    sys.exit("nvidia-smi: unknown option")
out = table[k]
if k == "-q -x":
    out = re.sub(r'<gpu id="([^"]+)">.*?</gpu>', gpu, out, flags=re.S)
sys.stdout.write(out)
"""


def settable_nvidia_smi(bin_dir: Path, persistence: str = "Disabled") -> Path:
    """Make ``bin_dir`` (created) hold a stand-in nvidia-smi for the example host whose persistence mode and power
    limits can be set and are read back (``-q -x``); every GPU starts with ``persistence`` and its recorded
    limit. Return the state file (JSON, bus id -> {"pm", "pl", "min", "max"})."""
    fake_nvidia_smi(bin_dir)
    xml = json.loads((bin_dir / "outputs.json").read_text())["-q -x"]
    state = {}
    for m in re.finditer(r'<gpu id="[0-9A-Fa-f]+:([^"]+)">(.*?)</gpu>', xml, flags=re.S):
        watts = {name: float(v) for name, v in re.findall(r"<(\w+_power_limit)>([\d.]+) W<", m.group(2))}
        state[f"0000:{m.group(1).lower()}"] = {
            "pm": persistence,
            "pl": watts["current_power_limit"],
            "min": watts["min_power_limit"],
            "max": watts["max_power_limit"],
        }
    (bin_dir / "state.json").write_text(json.dumps(state))
    (bin_dir / "nvidia-smi").write_text(_SETTABLE)
    return bin_dir / "state.json"

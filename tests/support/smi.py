"""A stand-in nvidia-smi for live-host tests: prints the example host's recorded outputs (no GPU here)."""

from __future__ import annotations

import json
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

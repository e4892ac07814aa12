"""Regenerate extensions/python-names.json: names a generated package must not take.

The package-name validator refuses Python keywords and standard-library module names (a
package named `json` or `logging` would shadow the stdlib for everything in the environment).
"""

from __future__ import annotations

import json
import keyword
import sys
from pathlib import Path

TARGET = Path(__file__).resolve().parent.parent / "extensions" / "python-names.json"


def build() -> str:
    version = "{}.{}".format(*sys.version_info[:2])
    data = {
        "generated_by": f"python -m tools.python_names (Python {version})",
        "stdlib": sorted(n for n in sys.stdlib_module_names if not n.startswith("_")),
        "keywords": sorted(keyword.kwlist + keyword.softkwlist),
    }
    return json.dumps(data, indent=1) + "\n"


if __name__ == "__main__":
    TARGET.write_text(build())
    print(f"wrote {TARGET}")

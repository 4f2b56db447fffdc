"""Ensure /etc/containers/containers.conf has the two settings the lab needs.

- [containers] default_ulimits: the sandbox lacks CAP_SYS_RESOURCE, so containers must
  not ask for more open files/processes than the host's hard limits allow.
- [engine] runtime = "runc": crun fails on this kernel's cgroup hybrid mode.
Other content of the file is kept; a second run changes nothing.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

WANTED = {
    "containers": {"default_ulimits": '["nofile=1024:20000", "nproc=4096:8192"]'},
    "engine": {"runtime": '"runc"'},
}


def ensure(path: Path) -> bool:
    lines = path.read_text().splitlines() if path.exists() else []
    current = tomllib.loads("\n".join(lines)) if lines else {}
    changed = False
    for table, keys in WANTED.items():
        for key, value in keys.items():
            if current.get(table, {}).get(key) == tomllib.loads(f"v = {value}")["v"]:
                continue
            changed = True
            header = next((i for i, line in enumerate(lines) if line.strip() == f"[{table}]"), None)
            if header is None:
                lines += ["", f"[{table}]", f"{key} = {value}"]
                continue
            end = next((i for i in range(header + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
            existing = next((i for i in range(header + 1, end) if lines[i].split("=")[0].strip() == key), None)
            if existing is None:
                lines.insert(header + 1, f"{key} = {value}")
            else:
                lines[existing] = f"{key} = {value}"
    if changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines).lstrip("\n") + "\n")
        tomllib.loads(path.read_text())  # still valid TOML
    return changed


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "/etc/containers/containers.conf")
    print(f"{target}: {'updated' if ensure(target) else 'already set'}")

"""Offline stand-in for pip's get-pip.py, which ansible-test uses to bootstrap pip into its venvs.

ansible-test downloads get-pip.py from https://ci-files.testing.ansible.com/ansible-test/ (see
ansible_test/_util/target/setup/requirements.py, ``bootstrap``) unless it finds it cached in
~/.ansible/test/cache/get_pip_<version>.py. That host is not reachable from every CI machine;
PyPI is. tools/sanity/run.py copies this file to that cache path when none is there. Same
contract as get-pip.py: the arguments are pip install arguments (``pip==24.2`` ...), plus
``--no-setuptools`` / ``--no-wheel``. It seeds pip from the interpreter's own ensurepip and
then lets that pip install the requested versions from the package index.
"""

from __future__ import annotations

import subprocess
import sys


def main(argv: list[str]) -> int:
    args = [a for a in argv if a not in ("--no-setuptools", "--no-wheel")]
    seeded = subprocess.run([sys.executable, "-m", "ensurepip", "--default-pip"], check=False, capture_output=True)
    if seeded.returncode != 0:
        sys.stderr.write(seeded.stderr.decode(errors="replace"))
        return seeded.returncode
    return subprocess.run([sys.executable, "-m", "pip", "install", *args], check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Check a plan's InfiniBand fabric on ibsim with the real infiniband-diags tools.

    python tools/lab/ibsim_check.py check build/plan/tier3/plan.json          # exit 1 on a mismatch
    python tools/lab/ibsim_check.py check plan.json --actual cabling.json      # simulate other cabling
    python tools/lab/ibsim_check.py start plan.json --workdir .lab/tier3/ibsim # leave ibsim running,
    python tools/lab/ibsim_check.py stop --workdir .lab/tier3/ibsim            # for fabric_check tasks

``check`` renders the plan's expected cabling (or ``--actual``, a cabling dict that a test
mutated) as an ibsim net file in a scratch folder, starts ibsim in its own session with a
unique IBSIM_SOCKNAME, runs opensm once per subnet (``-o``: one sweep, then exit) and
``ibnetdiscover -p`` once per subnet (one per rail on a rail-optimized fabric without
spines), compares what it found with the plan and ALWAYS stops ibsim by its PID, also
when something fails. Every tool call is bounded by a timeout (clients never time out by
themselves when ibsim is gone). Debian's ibsim 0.10 simulates HDR at most: an NDR plan is
simulated, and compared, at HDR.

``start`` does the same set-up and writes ``<workdir>/ibsim.json``: the PID, the
environment a client needs (LD_PRELOAD, IBSIM_SOCKNAME) and one rail per subnet with its
SIM_HOST, ready for the ``rails`` and ``environment`` options of gpucluster.tiers.fabric_check;
``stop`` ends that ibsim by its PID.

Standard library only, plus the collection's engine (module_utils/ibfabric.py,
plugin_utils/fabric/ibsim.py; PYTHONPATH=collections, added automatically when run from the
repository).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
try:
    from ansible_collections.gpucluster.tiers.plugins.module_utils import fabric_links, ibfabric
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import ibsim
except ImportError:  # run from the repository without PYTHONPATH=collections
    sys.path.insert(0, str(ROOT / "collections"))
    from ansible_collections.gpucluster.tiers.plugins.module_utils import fabric_links, ibfabric
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import ibsim

UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
READY = "Network simulator ready"


class LabError(RuntimeError):
    """The simulation could not run (not a fabric mismatch)."""


def load_fabric(path: str | Path) -> dict[str, Any]:
    """The fabric dict of a plan.json (or a file holding just the fabric dict)."""
    data = json.loads(Path(path).read_text())
    return data.get("fabric", data)


def tools_present() -> dict[str, str | None]:
    found: dict[str, str | None] = {t: shutil.which(t) for t in ("ibsim", "ibnetdiscover", "opensm")}
    found["umad2sim"] = UMAD2SIM if os.path.exists(UMAD2SIM) else None
    return found


def _run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run a client in its own session; on timeout kill the whole session and raise."""
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise LabError(f"{argv[0]} did not finish within {timeout:g} s") from None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


class Simulation:
    """ibsim running one net file, with the environment its clients need."""

    def __init__(self, cabling: dict[str, Any], workdir: Path, timeout: float = 10.0) -> None:
        self.cabling = cabling
        self.workdir = workdir
        self.timeout = timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.sockname = f"gpucluster-ibsim-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.netfile = workdir / "fabric.net"
        self.log = workdir / "ibsim.log"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def client_env(self, sim_host: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "SIM_HOST")}
        env.update({"LD_PRELOAD": UMAD2SIM, "IBSIM_SOCKNAME": self.sockname})
        env.update({"OSM_TMP_DIR": str(self.workdir), "OSM_CACHE_DIR": str(self.workdir)})
        if sim_host:
            env["SIM_HOST"] = sim_host
        return env

    def start(self) -> None:
        self.netfile.write_text(ibsim.ibsim_netfile(self.cabling))
        argv = ["ibsim", "-s", "-n"]
        limits = ibsim.ibsim_limits(self.cabling)
        for flag, key in (("-N", "nodes"), ("-S", "switches"), ("-P", "ports")):
            if limits[key] > ibsim.IBSIM_DEFAULTS[key]:
                argv += [flag, str(limits[key])]
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        env["IBSIM_SOCKNAME"] = self.sockname
        with open(self.log, "wb") as log:
            # Its own session (setsid), stdin at EOF without a console (-n): a console
            # reading EOF would spin a CPU.
            self.proc = subprocess.Popen(
                [*argv, str(self.netfile)], cwd=self.workdir, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + self.timeout
        while READY not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None:
                raise LabError(f"ibsim exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise LabError(f"ibsim not ready within {self.timeout:g} s")
            time.sleep(0.02)

    def stop(self) -> None:
        """SIGTERM by PID, SIGKILL if it lingers; reaped, so the PID is gone afterwards."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=3)

    def opensm(self, sim_host: str, name: str) -> subprocess.CompletedProcess[str]:
        log = self.workdir / f"opensm-{name}.log"
        argv = ["opensm", "-o", "-s", "0", "-f", str(log)]
        return _run(argv, self.client_env(sim_host), self.workdir, self.timeout)

    def discover(self, sim_host: str) -> subprocess.CompletedProcess[str]:
        return _run(["ibnetdiscover", "-p"], self.client_env(sim_host), self.workdir, self.timeout)


def run_check(
    fabric: dict[str, Any],
    actual: dict[str, Any] | None = None,
    *,
    workdir: str | Path | None = None,
    timeout: float = 10.0,
    subnet_manager: bool = True,
    discover_from: str | None = None,
    started: list[int] | None = None,
) -> dict[str, Any]:
    """Simulate ``actual`` (default: the planned cabling), discover it, compare with the plan.

    ``started`` (a list) receives ibsim's PID as soon as it runs, so a caller can check
    that the process is gone afterwards whatever happened.
    """
    t0 = time.monotonic()
    cabling = fabric.get("cabling", fabric)
    if not fabric_links.link_count(cabling):
        return {"ok": True, "skipped": "no switched fabric in the plan", "timings": {}}
    lab = ibsim.lab_link(cabling)
    scratch = tempfile.TemporaryDirectory(prefix="ibsim-check-") if workdir is None else None
    wd = Path(scratch.name) if scratch else Path(str(workdir))
    wd.mkdir(parents=True, exist_ok=True)
    sim = Simulation(actual or cabling, wd, timeout)
    timings: dict[str, float] = {}
    result: dict[str, Any] = {"lab_rate": lab, "workdir": str(wd) if scratch is None else None}
    try:
        t = time.monotonic()
        sim.start()
        timings["ibsim_start"] = time.monotonic() - t
        result["ibsim_pid"] = sim.pid
        if started is not None and sim.pid:
            started.append(sim.pid)
        # The subnets of the PLAN: discovery runs as it would on the real cluster, one
        # HCA per planned subnet (rail), whatever the cabling turned out to be.
        nets = ibfabric.subnets(cabling, discover_from)
        if subnet_manager:
            t = time.monotonic()
            for net in nets:
                done = sim.opensm(net["sim_host"], net["name"])
                if done.returncode:
                    raise LabError(f"opensm on {net['name']} ({net['sim_host']}) failed: {done.stderr[-1000:]}")
            timings["opensm"] = time.monotonic() - t
        t = time.monotonic()
        ports: list[dict[str, Any]] = []
        outputs = []
        for net in nets:
            done = sim.discover(net["sim_host"])
            if done.returncode:
                raise LabError(f"ibnetdiscover on {net['name']} ({net['sim_host']}) failed: {done.stderr[-1000:]}")
            (wd / f"ibnetdiscover-{net['name']}.txt").write_text(done.stdout)
            outputs.append({"name": net["name"], "sim_host": net["sim_host"], "ports": len(done.stdout.splitlines())})
            ports += ibfabric.parse_ibnetdiscover_ports(done.stdout)
        timings["discovery"] = time.monotonic() - t
        t = time.monotonic()
        report = ibfabric.compare(fabric, ports, expected_rate=lab["rate_gbps"])
        timings["compare"] = time.monotonic() - t
        result.update({"ok": report["ok"], "subnets": outputs, "report": report})
    finally:
        t = time.monotonic()
        sim.stop()
        timings["ibsim_stop"] = time.monotonic() - t
        if scratch is not None:
            scratch.cleanup()
        timings["total"] = time.monotonic() - t0
        result["timings"] = {k: round(v, 3) for k, v in timings.items()}
    return result


_LINK_STATE = re.compile(r"^LinkState:\.+(\w+)", re.M)
_PKEYS = re.compile(r"^\s*\d+:((?:\s+0x[0-9a-fA-F]{4})+)", re.M)
_SMINFO = re.compile(r"priority (\d+) state \d+ (SMINFO_\w+)")


def _pkeys(text: str) -> list[str]:
    return [k.lower() for row in _PKEYS.findall(text) for k in row.split() if int(k, 16) & 0x7FFF]


def run_sm_check(
    fabric: dict[str, Any],
    *,
    opensm_conf: str,
    partitions_conf: str,
    workdir: str | Path | None = None,
    timeout: float = 10.0,
    started: list[int] | None = None,
) -> dict[str, Any]:
    """The subnet manager as the plan renders it, on the planned fabric: every CA port ACTIVE.

    ibsim runs the planned cabling, the subnet manager's ports included (``cabling.sm_links``).
    On each planned subnet the real opensm runs on the SM host's port of that subnet (SIM_HOST =
    its node description), with ``opensm_conf`` (the head's /etc/opensm/opensm.conf; its
    ``partition_config_file`` pointed at a copy of ``partitions_conf`` in the scratch folder), as
    Debian's opensm@<port>.service runs one per port. When ``sminfo`` on that port answers
    SMINFO_MASTER (polled, no fixed wait), every CA port of the plan is asked with ``smpquery``:
    its LinkState and its P_Key table; then the IPoIB broadcast group (``saquery -g``).
    Returns ``ok``, per subnet the SM's priority and the group's P_Key and SL, the ports that
    are not ACTIVE or lack the partition, the planned ports that were not found, and timings.
    """
    t0 = time.monotonic()
    cabling = fabric.get("cabling", fabric)
    ib = fabric.get("infiniband") or {}
    pkey = int(str(ib.get("pkey") or "0x7fff"), 16) & 0x7FFF
    full = f"0x{pkey | 0x8000:04x}"
    sm_ports = {x["subnet"]: ibfabric.hca_desc(x["host"], x["hca"]) for x in cabling.get("sm_hcas") or []}
    scratch = tempfile.TemporaryDirectory(prefix="ibsim-sm-") if workdir is None else None
    wd = Path(scratch.name) if scratch else Path(str(workdir))
    wd.mkdir(parents=True, exist_ok=True)
    partitions = wd / "partitions.conf"
    partitions.write_text(partitions_conf)
    conf_lines = []
    for line in opensm_conf.splitlines():
        key = line.split(None, 1)[0] if line.strip() and not line.lstrip().startswith("#") else ""
        conf_lines.append(f"partition_config_file {partitions}" if key == "partition_config_file" else line)
    conf = wd / "opensm.conf"
    conf.write_text("\n".join(conf_lines) + "\n")
    sim = Simulation(cabling, wd, timeout)
    sms: list[subprocess.Popen[bytes]] = []
    timings: dict[str, float] = {}
    result: dict[str, Any] = {"subnets": [], "not_active": [], "no_partition": [], "missing": [], "no_sm": []}
    try:
        t = time.monotonic()
        sim.start()
        if started is not None and sim.pid:
            started.append(sim.pid)
        timings["ibsim_start"] = time.monotonic() - t
        t = time.monotonic()
        nets = ibfabric.subnets(cabling)
        for net in nets:
            port = sm_ports.get(net["name"])
            if port is None:
                result["no_sm"].append(net["name"])
                continue
            log = wd / f"opensm-{net['name']}.log"
            proc = subprocess.Popen(
                ["opensm", "-F", str(conf), "-f", str(log)], cwd=wd, env=sim.client_env(port),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
            sms.append(proc)
        for net in nets:
            port = sm_ports.get(net["name"])
            if port is None:
                continue
            env = sim.client_env(port)
            deadline = time.monotonic() + timeout
            while True:  # until this subnet's SM is master: the subnet is configured
                info = _run(["sminfo"], env, wd, timeout)
                m = _SMINFO.search(info.stdout)
                if (m and m.group(2) == "SMINFO_MASTER") or time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            entry: dict[str, Any] = {
                "name": net["name"],
                "sm_port": port,
                "sm_priority": int(m.group(1)) if m else None,
                "sm_state": m.group(2) if m else info.stdout.strip() or info.stderr.strip(),
            }
            found = ibfabric.parse_ibnetdiscover_ports(_run(["ibnetdiscover", "-p"], env, wd, timeout).stdout)
            cas = {(p["desc"], p["port"]): p["lid"] for p in found if p["type"] == "CA"}
            entry["ca_ports"] = len(cas)
            for (desc, num), lid in sorted(cas.items()):
                port_info = _run(["smpquery", "portinfo", str(lid), str(num)], env, wd, timeout).stdout
                state = _LINK_STATE.search(port_info)
                if not state or state.group(1) != "Active":
                    seen = state.group(1) if state else port_info
                    result["not_active"].append({"port": desc, "lid": lid, "state": seen})
                keys = _pkeys(_run(["smpquery", "pkeys", str(lid), str(num)], env, wd, timeout).stdout)
                if full not in keys:
                    result["no_partition"].append({"port": desc, "lid": lid, "pkeys": keys})
            group = _run(["saquery", "-g"], env, wd, timeout).stdout
            gp = re.search(r"pkey\.+(0x[0-9A-Fa-f]+)", group)
            sl = re.search(r"SL\.+(0x[0-9A-Fa-f]+)", group)
            entry["ipoib_group"] = {
                "pkey": gp.group(1).lower() if gp else None,
                "sl": int(sl.group(1), 16) if sl else None,
            }
            entry["found"] = sorted(d for d, _n in cas)
            result["subnets"].append(entry)
        hcas = [*fabric_links.hcas(cabling), *(cabling.get("sm_hcas") or [])]
        planned = [ibfabric.hca_desc(h["host"], h["hca"]) for h in hcas]
        seen = {d for e in result["subnets"] for d in e.pop("found")}
        result["missing"] = [d for d in planned if d not in seen]
        result["planned_ca_ports"] = len(planned)
        timings["opensm_and_queries"] = time.monotonic() - t
    finally:
        for proc in sms:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in sms:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        sim.stop()
        if scratch is not None:
            scratch.cleanup()
        timings["total"] = time.monotonic() - t0
        result["timings"] = {k: round(v, 3) for k, v in timings.items()}
    want_priority = ib.get("sm_priority")
    want_sl = ib.get("service_level") or 0
    result["ok"] = (
        bool(result["subnets"])
        and not (result["not_active"] or result["no_partition"] or result["missing"] or result["no_sm"])
        and all(
            e["sm_state"] == "SMINFO_MASTER"
            and (want_priority is None or e["sm_priority"] == want_priority)
            and e["ipoib_group"]["pkey"] == full
            and e["ipoib_group"]["sl"] == want_sl
            for e in result["subnets"]
        )
    )
    return result


def start(fabric: dict[str, Any], workdir: Path, actual: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
    """Start ibsim (and one opensm sweep per subnet) and leave it running; see ``stop``."""
    cabling = fabric.get("cabling", fabric)
    workdir.mkdir(parents=True, exist_ok=True)
    sim = Simulation(actual or cabling, workdir, timeout)
    try:
        sim.start()
        nets = ibfabric.subnets(cabling)
        for net in nets:
            done = sim.opensm(net["sim_host"], net["name"])
            if done.returncode:
                raise LabError(f"opensm on {net['name']} failed: {done.stderr[-1000:]}")
    except BaseException:
        sim.stop()
        raise
    state = {
        "pid": sim.pid,
        "netfile": str(sim.netfile),
        "environment": {"LD_PRELOAD": UMAD2SIM, "IBSIM_SOCKNAME": sim.sockname},
        "rails": [{"name": n["name"], "environment": {"SIM_HOST": n["sim_host"]}} for n in nets],
        "lab_rate": ibsim.lab_link(cabling),
    }
    (workdir / "ibsim.json").write_text(json.dumps(state, indent=2) + "\n")
    return state


def stop(workdir: Path) -> bool:
    """SIGTERM the ibsim that ``start`` recorded, SIGKILL after 3 s; True if one was running."""
    state_file = workdir / "ibsim.json"
    if not state_file.exists():
        return False
    pid = json.loads(state_file.read_text())["pid"]
    state_file.unlink()
    try:
        if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].rsplit(b"/", 1)[-1] != b"ibsim":
            return False  # not ours any more: the PID was reused
        os.kill(pid, signal.SIGTERM)
    except (FileNotFoundError, ProcessLookupError):
        return False
    deadline = time.monotonic() + 3
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        while _alive(pid) and time.monotonic() < deadline + 3:
            time.sleep(0.02)
    return True


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs; reaps it when it is our own child (started in-process)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended; its parent reaps it


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="simulate, discover, compare and stop (exit 1 on a mismatch)")
    begin = sub.add_parser("start", help="start ibsim for fabric_check tasks; writes <workdir>/ibsim.json")
    end = sub.add_parser("stop", help="stop the ibsim that start left running")
    for p in (check, begin):
        p.add_argument("plan", help="plan.json (or a file holding the plan's fabric dict)")
        p.add_argument("--actual", help="cabling JSON to simulate instead of the planned one")
        p.add_argument("--timeout", type=float, default=10.0, help="seconds allowed for each tool call")
    check.add_argument("--workdir", help="keep the net file, logs and discovery output here")
    check.add_argument("--no-sm", action="store_true", help="skip opensm (ibnetdiscover needs no SM in ibsim)")
    check.add_argument("--from", dest="discover_from", help="host whose HCAs discover each subnet")
    check.add_argument("--json", action="store_true", help="print the whole result as JSON")
    for p in (begin, end):
        p.add_argument("--workdir", required=True)
    args = parser.parse_args(argv)
    if args.command == "stop":
        print("stopped" if stop(Path(args.workdir)) else "no ibsim running")
        return 0
    missing = [t for t, path in tools_present().items() if not path]
    if missing:
        print(f"missing: {', '.join(missing)} (apt-get install ibsim-utils infiniband-diags opensm)", file=sys.stderr)
        return 2
    fabric = load_fabric(args.plan)
    actual = json.loads(Path(args.actual).read_text()) if args.actual else None
    if args.command == "start":
        print(json.dumps(start(fabric, Path(args.workdir), actual, args.timeout), indent=2))
        return 0
    try:
        result = run_check(
            fabric,
            actual,
            workdir=args.workdir,
            timeout=args.timeout,
            subnet_manager=not args.no_sm,
            discover_from=args.discover_from,
        )
    except LabError as exc:
        print(f"ibsim check failed to run: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        lab = result.get("lab_rate") or {}
        if result.get("skipped"):
            print(f"skipped: {result['skipped']}")
        else:
            print(f"simulated at {lab.get('width')}{lab.get('speed')} (planned {lab.get('planned')})")
            for line in result["report"]["mismatches"]:
                print(f"MISMATCH {line}")
            print("fabric matches the plan" if result["ok"] else f"{len(result['report']['mismatches'])} mismatches")
        print("timings: " + ", ".join(f"{k} {v:.2f}s" for k, v in result["timings"].items()))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

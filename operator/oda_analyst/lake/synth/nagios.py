"""Nagios check states per node every 15 minutes: mostly OK, failures on a few nodes and checks."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from oda_analyst.lake import topology
from oda_analyst.lake.synth import grid, noise

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

PERIOD_MS = 900_000
HOST_GROUP = "compute"
DESCRIPTIONS: tuple[str, ...] = (
    "alive::ping",
    "bmc::events",
    "bmc::sensors",
    "bmc::power",
    "bmc::fans",
    "bmc::temperature",
    "sys::gpfs::status",
    "sys::gpfs::mounts",
    "sys::gpfs::waiters",
    "sys::nfs::mounts",
    "sys::cvmfs::status",
    "sys::ssh::status",
    "sys::ntp::sync",
    "sys::cron::status",
    "sys::load",
    "sys::memory",
    "sys::swap",
    "sys::disk::root",
    "sys::disk::tmp",
    "sys::disk::var",
    "sys::processes::zombie",
    "sys::kernel::version",
    "sys::kernel::oops",
    "sys::uptime",
    "sys::users",
    "sys::selinux",
    "sys::rsyslog::status",
    "sys::sssd::status",
    "sys::munge::status",
    "sys::slurmd::status",
    "sys::slurmd::version",
    "sys::pbs::none",
    "net::ib::port",
    "net::ib::rate",
    "net::ib::errors",
    "net::ib::sm",
    "net::eth::link",
    "net::eth::errors",
    "net::dns::resolve",
    "nvidia::driver",
    "nvidia::persistence",
    "nvidia::memory::retirement",
    "nvidia::memory::ecc",
    "nvidia::xid",
    "nvidia::nvlink",
    "nvidia::temperature",
    "nvidia::power",
    "nvidia::clocks",
    "nvidia::count",
    "nvidia::dcgm::health",
    "cpu::count",
    "cpu::frequency",
    "cpu::smt",
    "cpu::microcode",
    "mem::total",
    "mem::dimms",
    "mem::edac",
    "hw::pci::devices",
    "hw::raid::status",
    "hw::psu::redundancy",
    "hw::firmware",
    "env::inlet::temperature",
)
assert len(DESCRIPTIONS) == 62


def _failure_state(seed: int, node: I64, desc: I64, t: I64) -> I64:
    """0 OK; on ~3 % of nodes two or three checks go WARNING/CRITICAL in multi-hour runs."""
    k = noise.keys(noise.key(seed, "nagios", "flaky"), list(range(topology.N_NODES)))
    flaky = noise.to_unit(k)[node] < 0.03
    pick = noise.to_unit(noise.hash_at(k[node], desc.astype(np.int64))) < 0.05
    pair = node.astype(np.uint64) * np.uint64(64) + desc.astype(np.uint64)
    s = noise.smooth(
        noise.splitmix(pair ^ np.uint64(noise.key(seed, "nagios-run"))), t, 2 * 3_600_000
    )
    bad = flaky & pick & (s > 0.9)
    state = np.where(bad, np.where(s > 1.6, 2, 1), 0)
    blip = noise.uniform(noise.splitmix(pair ^ np.uint64(noise.key(seed, "blip"))), t) < 3e-4
    return np.where(blip & (state == 0), 1, state).astype(np.int64)


def rows(seed: int, nodes: I64, t0: int, t1: int) -> tuple[I64, I64, I64, I64, I64]:
    """(node, description index, t, state, previous state) sorted by node, description, time."""
    pairs_node = np.repeat(nodes, len(DESCRIPTIONS))
    pairs_desc = np.tile(np.arange(len(DESCRIPTIONS), dtype=np.int64), len(nodes))
    ph = grid.phases(noise.key(seed, "nagios-phase"), list(pairs_node * 64 + pairs_desc), PERIOD_MS)
    ent, t = grid.entity_grid(t0, t1, PERIOD_MS, ph)
    node, desc = pairs_node[ent], pairs_desc[ent]
    state = _failure_state(seed, node, desc, t)
    prev = _failure_state(seed, node, desc, t - PERIOD_MS)
    return node, desc, t, state, prev

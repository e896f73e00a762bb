"""The physical layout of Marconi100 as the lake describes it.

980 compute nodes ('0'..'979') in 49 racks of 20 (rack = id // 20, slot = id % 20), three rows of
racks in one room, plus the facility devices that the vertiv, schneider and logics plugins tag
their readings with. Pure data and functions: the base knowledge graph and the synthetic lake both
use it.
"""

from __future__ import annotations

from collections.abc import Iterable

from oda_analyst.errors import UsageError

N_NODES = 980
NODES_PER_RACK = 20
N_RACKS = N_NODES // NODES_PER_RACK  # 49
GPUS_PER_NODE = 4
CPU_SOCKETS_PER_NODE = 2
CORES_PER_SOCKET = 16  # POWER9 cores; IPMI reports 24 core sensors per socket
HW_THREADS_PER_NODE = 128
MEMORY_GB_PER_NODE = 256
DIMMS_PER_NODE = 16
FANS_PER_NODE = 4
POWER_SUPPLIES_PER_NODE = 2

# IPMI numbers the four GPUs 0, 1, 3, 4 (there is no GPU 2); Ganglia numbers them 0..3.
IPMI_GPU_INDEX = (0, 1, 3, 4)

# Room layout: three rows of racks, -1 marks a gap (from the dataset description).
ROOM_ROWS: tuple[tuple[int, ...], ...] = (
    (48, 47, 46, 45, -1, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, -1),
    (32, 31, 30, 29, -1, 28, 27, 26, 25, -1, 24, 23, 22, 21, 20, 19, 18, -1),
    (17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
)

DATA_CENTER = "CINECA"
ROOM = "M100-room"
SYSTEM = "M100"

# Facility devices (tag values). Real names are not published; these are stable stand-ins.
VERTIV_DEVICES: tuple[str, ...] = tuple(f"CDZ{i:02d}" for i in range(1, 9))
SCHNEIDER_PANELS: tuple[str, ...] = ("Q101", "Q102")
# logics: (panel, device) pairs of the electrical distribution
LOGICS_DEVICES: tuple[tuple[str, str], ...] = (
    ("QGBT1", "main_ict"),
    ("QGBT1", "chiller"),
    ("QGBT2", "cdz"),
    ("QGBT2", "pumps"),
    ("QGBT3", "services"),
)


def rack_of(node: int) -> int:
    """Rack index of a node id."""
    return node // NODES_PER_RACK


def slot_of(node: int) -> int:
    """Slot of a node inside its rack."""
    return node % NODES_PER_RACK


def nodes_of_rack(rack: int) -> range:
    """Node ids of a rack."""
    if not 0 <= rack < N_RACKS:
        raise UsageError(f"rack {rack} does not exist", hint=f"racks are 0..{N_RACKS - 1}")
    return range(rack * NODES_PER_RACK, (rack + 1) * NODES_PER_RACK)


def rack_position(rack: int) -> tuple[int, int]:
    """(row, column) of a rack in the room layout."""
    for row, racks in enumerate(ROOM_ROWS):
        if rack in racks:
            return row, racks.index(rack)
    raise UsageError(f"rack {rack} does not exist", hint=f"racks are 0..{N_RACKS - 1}")


def parse_int_list(text: str, *, lo: int = 0, hi: int | None = None, what: str = "id") -> list[int]:
    """Parse a comma-separated list with ranges, e.g. ``0-9,900,920`` -> sorted unique ints.

    Raises UsageError with the offending item when an item is malformed or out of range.
    """
    values: set[int] = set()
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        try:
            if "-" in item[1:]:
                left, right = item.split("-", 1) if not item.startswith("-") else ("", item)
                start, end = int(left), int(right)
                if end < start:
                    raise ValueError
                values.update(range(start, end + 1))
            else:
                values.add(int(item))
        except ValueError:
            raise UsageError(
                f"cannot read {what} list item {item!r}",
                hint="use comma-separated ids and ranges, e.g. 0-9,900,920",
            ) from None
    bad = [v for v in values if v < lo or (hi is not None and v > hi)]
    if bad:
        upper = "" if hi is None else f"..{hi}"
        raise UsageError(
            f"{what} {sorted(bad)[0]} is out of range", hint=f"valid {what}s are {lo}{upper}"
        )
    return sorted(values)


def parse_name_list(text: str, allowed: Iterable[str], *, what: str) -> list[str]:
    """Parse a comma-separated list of names, checking each against the allowed set."""
    allowed_set = list(allowed)
    names = [item.strip() for item in text.split(",") if item.strip()]
    unknown = [n for n in names if n not in allowed_set]
    if unknown:
        raise UsageError(
            f"unknown {what} {unknown[0]!r}",
            hint=f"choose among: {', '.join(allowed_set[:12])}"
            + (" …" if len(allowed_set) > 12 else ""),
        )
    return list(dict.fromkeys(names))

"""The job table: 2-4 state-poll rows per job (PENDING, RUNNING, final), Slurm's 89 columns."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from oda_analyst.lake.schema import DICT_STRING, job_table_schema
from oda_analyst.lake.synth import jobs
from oda_analyst.lake.synth.cluster import user_id
from oda_analyst.lake.synth.jobs import JobSet

I64 = NDArray[np.int64]
PENDING, RUNNING, FINAL = 0, 1, 2
_EXIT = {
    "COMPLETED": ("0:0", "None"),
    "FAILED": ("1:0", "NonZeroExitCode"),
    "TIMEOUT": ("0:15", "TimeLimit"),
    "CANCELLED": ("0:15", "None"),
    "OUT_OF_MEMORY": ("0:125", "OutOfMemory"),
    "NODE_FAIL": ("0:0", "NodeDown"),
}


def _limit_str(minutes: int) -> str:
    d, rem = divmod(minutes, 1440)
    h, m = divmod(rem, 60)
    return f"{d}-{h:02d}:{m:02d}:00" if d else f"{h:02d}:{m:02d}:00"


def _polls(js: JobSet, order: I64) -> tuple[I64, I64]:
    """(job index, poll kind) of every row: pending polls, a running poll, the final state."""
    started = js.start[order] >= 0
    polls = js.polls[order]
    pending = np.where(started, np.maximum(polls - 2, 0), np.maximum(polls - 1, 1))
    per_job = pending + started + 1
    ri = np.repeat(order, per_job)
    pos = np.arange(len(ri)) - np.repeat(np.cumsum(per_job) - per_job, per_job)
    pend = np.repeat(pending, per_job)
    kind = np.where(
        pos < pend, PENDING, np.where(pos == per_job.repeat(per_job) - 1, FINAL, RUNNING)
    )
    return ri, kind


def table(js: JobSet, selected: I64) -> pa.Table:
    """Rows of the selected jobs, ordered by submit time, job id, then poll (last state last)."""
    order = selected[np.lexsort((js.job_id[selected], js.submit[selected]))]
    ri, kind = _polls(js, order)
    n = len(ri)
    started = js.start[ri] >= 0
    ran = started & (kind != PENDING)
    k, cpus, gpus, mem = js.num_nodes[ri], js.cpus_pn[ri], js.gpus_pn[ri], js.mem_pn[ri]
    nodes_str = {int(i): "[" + ", ".join(str(x) for x in js.nodes_of(int(i))) + "]" for i in order}
    tres = {
        int(i): f"cpu={js.cpus_pn[i] * js.num_nodes[i]},mem={js.mem_pn[i] * js.num_nodes[i]}M,"
        f"node={js.num_nodes[i]},billing={js.cpus_pn[i] * js.num_nodes[i]}"
        + (f",gres/gpu={js.gpus_pn[i] * js.num_nodes[i]}" if js.gpus_pn[i] else "")
        for i in order
    }
    state = np.array([jobs.STATES[s] for s in js.state[ri]], dtype=object)
    state = np.where(kind == PENDING, "PENDING", np.where(kind == RUNNING, "RUNNING", state))
    expected_end = js.start[ri] + js.limit_min[ri] * 60_000
    end = np.where(kind == FINAL, js.end[ri], np.where(ran, expected_end, 0))
    end_valid = (kind == FINAL) | ran
    user = np.array([user_id(int(u)) for u in js.user[ri]], dtype=np.int64)
    exit_reason = [_EXIT.get(s, ("0:0", "None")) for s in state]
    first_node = [nodes_str[int(i)][1:].split(",")[0].rstrip("]") for i in ri]

    def ts(values: I64, valid: NDArray[np.bool_] | None = None) -> pa.Array[Any]:
        arr = pa.array(values.astype(np.int64), pa.int64(), mask=None if valid is None else ~valid)
        return arr.cast(pa.timestamp("ms", tz="UTC"))

    def strings(values: list[str | None]) -> pa.Array[Any]:
        return pa.array(values, pa.string())

    def dictionary(values: list[str]) -> pa.Array[Any]:
        enc = pa.array(values, pa.string()).dictionary_encode()
        return pa.DictionaryArray.from_arrays(enc.indices.cast(pa.int16()), enc.dictionary)

    submit = js.submit[ri]
    cols: dict[str, pa.Array[Any]] = {
        "job_id": pa.array(js.job_id[ri], pa.uint32()),
        "user_id": pa.array(user, pa.uint32()),
        "group_id": pa.array(25_000 + (user - 25_000) // 4, pa.uint32()),
        "submit_time": ts(submit),
        "eligible_time": ts(submit),
        "accrue_time": ts(submit),
        "start_time": ts(np.where(ran, js.start[ri], 0), ran),
        "end_time": ts(end, end_valid),
        "last_sched_eval": ts(np.where(ran, js.start[ri], submit + 1000)),
        "nodes": strings([nodes_str[int(i)] if r else "[]" for i, r in zip(ri, ran, strict=True)]),
        "num_nodes": pa.array(k, pa.uint16()),
        "num_cpus": pa.array(cpus * k, pa.uint32()),
        "num_tasks": pa.array(k, pa.uint32()),
        "max_nodes": pa.array(k, pa.uint32()),
        "time_limit": pa.array(js.limit_min[ri], pa.uint32()),
        "time_limit_str": strings([_limit_str(int(m)) for m in js.limit_min[ri]]),
        "tres_alloc_str": strings(
            [tres[int(i)] if r else None for i, r in zip(ri, ran, strict=True)]
        ),
        "tres_req_str": strings([tres[int(i)] for i in ri]),
        "tres_per_node": strings([f"gres:gpu:{g}" if g else None for g in gpus]),
        "job_state": dictionary(list(state)),
        "partition": dictionary([jobs.PARTITIONS[p] for p in js.partition[ri]]),
        "qos": dictionary([jobs.QOS[q] for q in js.qos[ri]]),
        "priority": pa.array(100_000 + js.job_id[ri] % 9973, pa.uint32()),
        "exit_code": strings(
            [e if f == FINAL else "0:0" for (e, _), f in zip(exit_reason, kind, strict=True)]
        ),
        "state_reason": strings(
            [r if f != PENDING else "Priority" for (_, r), f in zip(exit_reason, kind, strict=True)]
        ),
        "batch_flag": pa.array(np.ones(n, np.uint16), pa.uint16()),
        "batch_host": strings([h if r else None for h, r in zip(first_node, ran, strict=True)]),
        "alloc_node": strings(["login01"] * n),
        "cpus_per_task": pa.array(np.ones(n, np.uint32), pa.uint32()),
        "threads_per_core": pa.array(np.where(cpus == 128, 4, 1), pa.uint16()),
        "contiguous": pa.array(np.zeros(n, bool), pa.bool_()),
        "requeue": pa.array(np.zeros(n, bool), pa.bool_()),
        "shared": strings(["0" if c == 128 else "OK" for c in cpus]),
        "nice": pa.array(np.zeros(n, np.int32), pa.int32()),
        "min_memory_node": pa.array(mem, pa.uint32()),
        "pn_min_memory": pa.array(mem, pa.uint32()),
        "pn_min_cpus": pa.array(np.ones(n, np.uint32), pa.uint32()),
        "mem_per_cpu": pa.array(np.zeros(n, bool), pa.bool_()),
        "mem_per_node": pa.array(np.ones(n, bool), pa.bool_()),
        "restart_cnt": pa.array(np.zeros(n, np.uint16), pa.uint16()),
        "array_job_id": pa.array(np.zeros(n, np.uint32), pa.uint32()),
        "max_cpus": pa.array(np.zeros(n, np.uint16), pa.uint16()),
        "exc_nodes": strings(["[]"] * n),
        "req_nodes": strings(["[]"] * n),
        "derived_ec": strings(["0:0"] * n),
    }
    schema = job_table_schema()
    arrays = [cols[f.name] if f.name in cols else pa.nulls(n, f.type) for f in schema]
    for f, arr in zip(schema, arrays, strict=True):
        assert f.type in (arr.type, DICT_STRING), f.name
    return pa.Table.from_arrays(arrays, schema=schema)

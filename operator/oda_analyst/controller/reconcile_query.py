"""One AnalystQuery, advanced as far as it can go now; the handlers call it again later.

Pending → (stage 1) → WaitingForClarification | Rejected | BuildingVKG → Retrieving → Analysing
→ Completed (or Failed). Every step is recorded in status before the next one starts, and every
object is created under a deterministic name (``create`` returns an existing one), so an
operator killed at any point and started again continues from the recorded step: it neither
duplicates pods nor loses the query. Waiting is ``kopf.TemporaryError`` (kopf calls again after
the delay); a bad spec is ``kopf.PermanentError``.
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
import shutil
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import kopf

from oda_analyst.controller import events, manifests, names
from oda_analyst.controller.analysis import RESULT, asked_charts, build_analysis, result_csv
from oda_analyst.controller.bucket import query_prefix
from oda_analyst.controller.context import Context
from oda_analyst.controller.kube import KubeError, path_of
from oda_analyst.controller.pods import pod_message
from oda_analyst.controller.port import Ask, ModelEndpoint, SandboxScope, Understood
from oda_analyst.controller.status import answer_fields, phase_patch

Obj = dict[str, Any]
MAX_FILES = 50  # of the coordinator's files per query put in the bucket


def _now() -> datetime:
    return datetime.now(UTC)


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def reference_time(obj: Mapping[str, Any]) -> datetime:
    """spec.referenceTime, else the creation time: a query restarted tomorrow still reads
    the windows it read today."""
    spec, meta = obj["spec"], obj["metadata"]
    return _parse_time(spec.get("referenceTime") or meta["creationTimestamp"])


def query_path(namespace: str, name: str, sub: str | None = None) -> str:
    return path_of(names.API_VERSION, names.QUERY_PLURAL, namespace, name, sub)


class QueryReconciler:
    def __init__(self, ctx: Context, obj: Obj) -> None:
        self.ctx = ctx
        self.obj = obj
        meta = obj["metadata"]
        self.ns, self.name, self.uid = meta["namespace"], meta["name"], meta["uid"]
        self.spec: Mapping[str, Any] = obj["spec"]
        self.status: dict[str, Any] = dict(obj.get("status") or {})
        self.prefix = query_prefix(self.ns, self.name, self.uid)
        self.backend = str(self.spec.get("backend") or "oda")
        model = self.spec.get("model") or None
        self.model = ModelEndpoint(str(model["baseUrl"]), str(model["name"])) if model else None
        # The coordinator plans and draws what the question asks for; a baseline answers the
        # retrieval part alone, as the paper's tools do.
        self.coordinated = self.backend == "oda" and self.spec.get("analysis", "auto") == "auto"

    # --- status and events ---------------------------------------------------------------

    async def _set(self, phase: str, reason: str, message: str, **fields: Any) -> None:
        patch = phase_patch(self.status, phase, reason=reason, message=message, now=_now(),
                            generation=self.obj["metadata"].get("generation"),
                            **fields)  # fmt: skip
        updated = await self.ctx.kube.patch(query_path(self.ns, self.name, "status"), patch)
        self.status = dict(updated.get("status") or {})

    def _event(self, reason: str, message: str, *, warning: bool = False) -> None:
        (events.warn if warning else events.info)(self.obj, reason, message)

    def _wait(self, what: str) -> kopf.TemporaryError:
        return kopf.TemporaryError(what, delay=self.ctx.settings.operator_poll_s)

    # --- the flow -------------------------------------------------------------------------

    async def run(self) -> None:
        phase = self.status.get("phase")
        if phase in names.TERMINAL:
            return
        self._check_deadline()
        answers: list[str] = list(self.spec.get("clarifications") or [])
        asked: list[dict[str, Any]] = list(self.status.get("asked") or [])
        if phase == names.WAITING and len(answers) < len(asked):
            return  # still waiting: the answer comes as a spec update
        if self.model is not None and "model" not in self.status:
            await self._check_model(self.model)
        if self.backend == "oda":
            if self.status.get("understoodFor") != len(answers):
                understood = await self._understand(answers, asked)
                if understood is None:
                    return
            await self._graphs()
        elif self.status.get("phase") is None:
            await self._set(names.PENDING, "Baseline", f"answered by the {self.backend} baseline",
                            stage="input-validation")  # fmt: skip
        if not self.status.get("answerUri") and not await self._retrieve(answers):
            return
        if self.spec.get("analysis", "auto") == "auto" and self.status.get("analysis"):
            await self._analyse()
        await self._set(names.COMPLETED, "Completed", self.status.get("answer") or "done",
                        stage="done")  # fmt: skip
        artefacts = len(self.status.get("artifacts") or [])
        self._event("Completed", f"{self.status.get('understoodAs') or ''} ({artefacts} artefacts)")

    async def _check_model(self, model: ModelEndpoint) -> None:
        """Whether the query's own model endpoint answers, said once in status (and a Warning
        event when not): the query goes on either way, its model-backed stages falling back
        to the rules with a warning in the answer."""
        problem: str | None = await self._call(self.ctx.pipeline.check_model, model)
        seen = {"baseUrl": model.base_url, "name": model.name, "reachable": problem is None,
                "message": problem or "answers and serves the model"}  # fmt: skip
        patch = {"status": {"model": seen}}
        updated = await self.ctx.kube.patch(query_path(self.ns, self.name, "status"), patch)
        self.status = dict(updated.get("status") or {})
        if problem is not None:
            self._event("ModelUnreachable", f"{model.base_url} ({model.name}): {problem}; the "
                        "model-backed stages run by the rules alone", warning=True)  # fmt: skip

    def _ask(self) -> Ask:
        model: Any = self.model
        backend: Any = self.backend
        out = self.ctx.settings.data_dir / "operator" / self.uid if self.coordinated else None
        # The code agent's scripts run in this query's user's sandbox pods, owned by the query.
        owner = {
            "apiVersion": self.obj["apiVersion"],
            "kind": self.obj["kind"],
            "metadata": {"name": self.name, "namespace": self.ns, "uid": self.uid},
        }
        sandbox = SandboxScope(query=owner, user=str(self.spec["user"]), prefix=self.prefix)
        return Ask(backend=backend, model=model, analysis=self.coordinated, out_dir=out,
                   sandbox=sandbox if self.coordinated else None)  # fmt: skip

    def _check_deadline(self) -> None:
        total = (self.spec.get("timeouts") or {}).get("totalSeconds")
        if not total:
            return
        created = _parse_time(self.obj["metadata"]["creationTimestamp"])
        if _now() - created > timedelta(seconds=int(total)):
            raise _FailError("Timeout", f"the query took longer than {total} s (spec.timeouts)")

    async def _call(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        async with self.ctx.pipeline_lock:
            return await asyncio.to_thread(fn, *args, **kwargs)

    async def _understand(self, answers: list[str], asked: list[dict[str, Any]]
                          ) -> Understood | None:  # fmt: skip
        pairs = [(str(a["field"]), text) for a, text in zip(asked, answers, strict=False)]
        if self.status.get("phase") is None:
            await self._set(names.PENDING, "Understanding", "stage 1: entities, time, metrics",
                            stage="input-validation")  # fmt: skip
        u: Understood = await self._call(
            self.ctx.pipeline.understand, self.spec["question"], user=self.spec["user"],
            as_of=reference_time(self.obj), answers=pairs,
        )  # fmt: skip
        if u.outcome == "clarification":
            ask = {"field": u.field, "question": u.question, "candidates": list(u.candidates),
                   "round": len(answers) + 1}  # fmt: skip
            await self._set(names.WAITING, "ClarificationNeeded", u.question or "",
                            clarification=ask, asked=[*asked[: len(answers)], ask],
                            stage="input-validation")  # fmt: skip
            self._event("ClarificationNeeded", f"{u.question} (answer in spec.clarifications)")
            return None
        if u.outcome == "rejected":
            message = (u.message or "rejected") + (f" ({u.hint})" if u.hint else "")
            await self._set(names.REJECTED, "Rejected", message, stage="input-validation")
            self._event("Rejected", message, warning=True)
            raise kopf.PermanentError(message)
        caches = [names.cache_name(g.key) for g in u.graphs]
        await self._set(names.BUILDING, "Understood", u.understood_as or "",
                        understoodAs=u.understood_as, understoodFor=len(answers),
                        clarification=None, vkgCache=",".join(caches) or None,
                        graphs=[{"key": g.key, "cache": c}
                                for g, c in zip(u.graphs, caches, strict=True)],
                        warnings=list(u.warnings)[:20], stage="vkg")  # fmt: skip
        self._event("Understood", u.understood_as or "")
        for g in u.graphs:
            cache = manifests.get_vkg_cache(g, namespace=self.ns, owner=self.spec["user"])
            made = await self.ctx.kube.create(cache)
            reused = made["metadata"].get("creationTimestamp") and made.get("status")
            self._event("VKGCache", f"{'reusing' if reused else 'created'} VKGCache "
                                    f"{made['metadata']['name']}")  # fmt: skip
        return u

    async def _graphs(self) -> None:
        for g in self.status.get("graphs") or []:
            if not g.get("cache"):
                continue
            path = path_of(names.API_VERSION, names.CACHE_PLURAL, self.ns, g["cache"])
            cache = await self.ctx.kube.get(path)
            if cache is None:  # evicted meanwhile: understand again, which re-creates it
                await self._set(names.BUILDING, "GraphEvicted", f"{g['cache']} is gone",
                                graphs=None, understoodFor=None)  # fmt: skip
                raise self._wait(f"VKGCache {g['cache']} was deleted; asking again")
            phase = (cache.get("status") or {}).get("phase")
            if phase == "Failed":
                message = (cache.get("status") or {}).get("message") or "the graph build failed"
                raise _FailError("GraphBuildFailed", f"{g['cache']}: {message}")
            if phase != "Ready":
                raise self._wait(f"waiting for VKGCache {g['cache']} ({phase or 'Pending'})")

    async def _retrieve(self, answers: list[str]) -> bool:
        await self._set(names.RETRIEVING, "GraphsReady", "SPARQL over the query's graphs",
                        stage="retrieval")  # fmt: skip
        self._event(
            "Retrieving",
            "the coordinator plans, retrieves and draws through MCP"
            if self.coordinated
            else "compiling, validating and running the SPARQL",
        )
        how = self._ask()
        answer: dict[str, Any] = await self._call(
            self.ctx.pipeline.retrieve, self.spec["question"], user=self.spec["user"],
            as_of=reference_time(self.obj), answers=answers, ask=how,
        )  # fmt: skip
        status = answer.get("status")
        if status == "clarification":  # retrieval asked what stage 1 did not: ask the user
            ask = dict(answer.get("clarification") or {})
            ask["round"] = len(answers) + 1
            asked = [*list(self.status.get("asked") or [])[: len(answers)], ask]
            await self._set(names.WAITING, "ClarificationNeeded", str(ask.get("question")),
                            clarification=ask, asked=asked, understoodFor=None)  # fmt: skip
            self._event("ClarificationNeeded", str(ask.get("question")))
            return False
        if status == "rejected":
            message = str(answer.get("answer") or "rejected")
            await self._set(names.REJECTED, "Rejected", message, stage="retrieval")
            self._event("Rejected", message, warning=True)
            raise kopf.PermanentError(message)
        if status != "completed":
            raise _failure(answer)
        table = _result_table(answer)
        uris = await asyncio.to_thread(self._put_answer, answer, table)
        drawn = await asyncio.to_thread(self._put_files, how.out_dir)
        uris.extend(drawn)
        fields = answer_fields(answer, table.decode() if table else None)
        unit = _unit(answer)
        # The coordinator drew what was asked: the sandbox pod adds the per-series summary only.
        charts = not any(u.endswith(".png") for u in drawn)
        analysis = build_analysis(table.decode(), title=self.spec["question"], unit=unit,
                                  charts=asked_charts(answer) if charts else ()) \
            if table and self.backend == "oda" else None  # fmt: skip
        await self._set(names.RETRIEVING, "Retrieved", fields["answer"], artifacts=uris, unit=unit,
                        answerUri=uris[0], analysis=analysis.outputs if analysis else None,
                        timings=answer.get("timings") or {}, **fields)  # fmt: skip
        self._event("Retrieved", f"{fields['rowCount']} row(s); answer in {uris[0]}")
        return True

    def _put_answer(self, answer: Mapping[str, Any], table: bytes | None) -> list[str]:
        bucket = self.ctx.bucket
        bucket.ensure()
        uris = [bucket.put(self.prefix + "answer.json",
                           json.dumps(answer, indent=1, default=str).encode(),
                           "application/json")]  # fmt: skip
        if table is not None:
            uris.append(bucket.put(self.prefix + RESULT, table, "text/csv"))
        return uris

    def _put_files(self, out_dir: Path | None) -> list[str]:
        """What the coordinator left in ``out_dir`` (its charts, the scripts that drew them, the
        tables they read) into the bucket; the folder goes once it is there."""
        if out_dir is None or not out_dir.is_dir():
            return []
        uris = []
        for path in sorted(p for p in out_dir.rglob("*") if p.is_file())[:MAX_FILES]:
            key = self.prefix + "coordinator/" + path.relative_to(out_dir).as_posix()
            kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            uris.append(self.ctx.bucket.put(key, path.read_bytes(), kind))
        shutil.rmtree(out_dir, ignore_errors=True)
        return uris

    async def _analyse(self) -> None:
        outputs: list[str] = list(self.status.get("analysis") or [])
        pod_name = names.analysis_pod_name(self.name, self.uid)
        pod = await self.ctx.kube.get(path_of("v1", "pods", self.ns, pod_name))
        if pod is None:
            await self._start_analysis(outputs)
            raise self._wait("analysis pod started")
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Failed":
            raise _FailError("AnalysisFailed", f"pod {pod_name}: {pod_message(pod)}")
        if phase != "Succeeded":
            raise self._wait(f"waiting for analysis pod {pod_name} ({phase})")
        keys = [self.prefix + name for name in outputs]
        present = await asyncio.to_thread(lambda: [k for k in keys if self.ctx.bucket.exists(k)])
        if len(present) != len(keys):
            missing = "the analysis pod succeeded but its files are not in the bucket"
            raise _FailError("AnalysisFailed", missing)
        artifacts = list(dict.fromkeys([*(self.status.get("artifacts") or []),
                                        *(self.ctx.bucket.uri(k) for k in keys)]))  # fmt: skip
        await self._set(names.ANALYSING, "Analysed", f"{len(keys)} file(s) from the sandbox",
                        artifacts=artifacts, stage="analysis")  # fmt: skip
        self._event("Analysed", ", ".join(outputs))

    async def _start_analysis(self, outputs: list[str]) -> None:
        table = await asyncio.to_thread(self._result_table_from_bucket)
        drawn = tuple(o.removesuffix(".png") for o in outputs if o.endswith(".png"))
        built = build_analysis(table, title=self.spec["question"], unit=self.status.get("unit"),
                               charts=drawn)  # fmt: skip
        if built is None:  # pragma: no cover - status.analysis says there is something
            raise _FailError("AnalysisFailed", "nothing to analyse in the result")
        stage_s = int((self.spec.get("timeouts") or {}).get("stageSeconds") or 900)
        targets = await asyncio.to_thread(
            lambda: {n: self.ctx.bucket.presigned_put(self.prefix + n,
                                                      expires=timedelta(seconds=stage_s + 600))
                     for n in outputs})  # fmt: skip
        user = self.spec["user"]
        await self.ctx.kube.create(manifests.get_input_config_map(self.obj, built.files))
        await self.ctx.kube.create(manifests.get_analysis_network_policy(
            self.obj, user=user, s3_endpoint=self.ctx.settings.s3_endpoint,
            s3_cidr=self.ctx.s3_cidr))  # fmt: skip
        await self.ctx.kube.create(manifests.get_analysis_pod(
            self.obj, self.ctx.env, user=user, targets=targets, deadline_s=stage_s))  # fmt: skip
        await self._set(names.ANALYSING, "AnalysisStarted", "the user's sandbox pod runs the "
                        "analysis", stage="analysis")  # fmt: skip
        self._event("Analysing", f"sandbox pod {names.analysis_pod_name(self.name, self.uid)} "
                                 f"(gVisor) writes {', '.join(outputs)}")  # fmt: skip

    def _result_table_from_bucket(self) -> str:
        """The full result (status holds only its head), as retrieval left it."""
        return self.ctx.bucket.get(self.prefix + RESULT).decode()


def _unit(answer: Mapping[str, Any]) -> str | None:
    results = answer.get("results") or [{}]
    unit = results[0].get("unit")
    return str(unit) if unit else None


def _result_table(answer: Mapping[str, Any]) -> bytes | None:
    """The whole result as CSV: the inline rows, or the CSV file a large result was written
    to (the pipeline runs in this process, so its path is local)."""
    if answer.get("rows") is not None and answer.get("columns"):
        return result_csv(answer["columns"], answer["rows"]).encode()
    csv_path = answer.get("csv")
    if csv_path and Path(csv_path).is_file():
        return Path(csv_path).read_bytes()
    return None


def _failure(answer: Mapping[str, Any]) -> _FailError:
    """Why a pipeline answer failed: the code agent's run (its sandbox pod, or the script in
    it) is the analysis failing; anything else is the retrieval's."""
    error = answer.get("error") or {}
    message = str(error.get("message") or answer.get("answer") or answer.get("status"))
    if error.get("hint"):
        message += f" ({error['hint']})"
    if message.startswith("codeagent "):
        return _FailError("AnalysisFailed", message)
    return _FailError("RetrievalFailed", str(answer.get("answer") or message))


# Statuses of a request the API server will refuse again if asked again (409: exists, is fine).
_REFUSED = frozenset({400, 403, 404, 422})


class _FailError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


async def reconcile_query(ctx: Context, name: str, namespace: str) -> None:
    """Advance the query ``namespace/name`` (read fresh: kopf's body may predate our patches)."""
    obj = await ctx.kube.get(query_path(namespace, name))
    if obj is None or obj["metadata"].get("deletionTimestamp"):
        return
    if obj["spec"].get("schedule"):
        return  # the schedule's own handlers run it
    rec = QueryReconciler(ctx, obj)
    try:
        try:
            await rec.run()
        except KubeError as err:
            if err.status in _REFUSED:  # the cluster will not take what we ask: say so, once
                raise _FailError("Refused", err.message) from None
            raise
    except _FailError as fail:
        await rec._set(names.FAILED, fail.reason, fail.message)
        rec._event(fail.reason, fail.message, warning=True)
        raise kopf.PermanentError(fail.message) from None

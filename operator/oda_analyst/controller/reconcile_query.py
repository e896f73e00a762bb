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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import kopf

from oda_analyst.controller import events, manifests, metrics, names
from oda_analyst.controller.analysis import (
    RESULT,
    SCRIPT,
    asked_charts,
    build_analysis,
    result_csv,
)
from oda_analyst.controller.bucket import query_prefix
from oda_analyst.controller.context import Context
from oda_analyst.controller.kube import KubeError, path_of
from oda_analyst.controller.port import (
    MAX_FILES,
    Analysis,
    Ask,
    ModelEndpoint,
    SandboxScope,
    Understood,
)
from oda_analyst.controller.port_http import AnalystCallError, AnalystUnavailableError
from oda_analyst.controller.status import answer_fields, phase_patch, stamp

Obj = dict[str, Any]
T = TypeVar("T")


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
        metrics.query_phase(self.uid, phase)
        if phase in names.TERMINAL:
            created = _parse_time(self.obj["metadata"]["creationTimestamp"])
            metrics.query_finished(phase, (_now() - created).total_seconds())

    def _event(self, reason: str, message: str, *, warning: bool = False) -> None:
        (events.warn if warning else events.info)(self.obj, reason, message)

    def _wait(self, what: str) -> kopf.TemporaryError:
        return kopf.TemporaryError(what, delay=self.ctx.settings.operator_poll_s)

    async def _admission(self, state: str, **fields: Any) -> None:
        """Say in status why the query waits for the analyst, or that it no longer does."""
        said = {"state": state, "since": stamp(_now()), **fields}
        patch = {"status": {"admission": said}}
        updated = await self.ctx.kube.patch(query_path(self.ns, self.name, "status"), patch)
        self.status = dict(updated.get("status") or {})

    async def _queued(self, why: str, ahead: int) -> None:
        await self._admission("Queued", reason=why, ahead=ahead)
        self._event("Queued", f"waits for the analyst: {why}")

    async def _analyst(self, call: Callable[[], Awaitable[T]]) -> T:
        """One call to the analyst; one it cannot take now is a wait, said in status."""
        try:
            return await call()
        except AnalystUnavailableError as err:
            await self._admission("AnalystUnavailable", reason=err.message)
            delay = max(err.retry_after_s or 0.0, self.ctx.settings.operator_poll_s)
            raise kopf.TemporaryError(err.message, delay=delay) from None

    async def _work(self, call: Callable[[], Awaitable[T]]) -> T:
        """A call that makes the analyst work on this query: within the bounds (settings per
        cluster, namespace and user), else queued, as status.admission says."""
        user = str(self.spec["user"])
        async with self.ctx.admission.slot(self.uid, self.ns, user, self._queued) as queued:
            prior = (self.status.get("admission") or {}).get("state")
            if queued or prior not in (None, "Admitted"):
                await self._admission("Admitted")
            return await self._analyst(call)

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
        problem = await self._analyst(lambda: self.ctx.pipeline.check_model(model))
        seen = {"baseUrl": model.base_url, "name": model.name, "reachable": problem is None,
                "message": problem or "answers and serves the model"}  # fmt: skip
        patch = {"status": {"model": seen}}
        updated = await self.ctx.kube.patch(query_path(self.ns, self.name, "status"), patch)
        self.status = dict(updated.get("status") or {})
        if problem is not None:
            self._event("ModelUnreachable", f"{model.base_url} ({model.name}): {problem}; the "
                        "model-backed stages run by the rules alone", warning=True)  # fmt: skip

    def _scope(self) -> SandboxScope:
        """Where this query's scripts run: its user's sandbox pods, owned by the query."""
        owner = {
            "apiVersion": self.obj["apiVersion"],
            "kind": self.obj["kind"],
            "metadata": {"name": self.name, "namespace": self.ns, "uid": self.uid},
        }
        return SandboxScope(query=owner, user=str(self.spec["user"]), prefix=self.prefix)

    def _ask(self, answers: Sequence[str]) -> Ask:
        model: Any = self.model
        backend: Any = self.backend
        # The code agent's scripts run in this query's user's sandbox pods, owned by the query.
        sandbox = self._scope()
        # One answer per query and round of clarification: an operator that restarted while
        # the analyst answered joins that answer instead of starting a second one.
        key = f"{self.uid}/{len(answers)}"
        return Ask(backend=backend, model=model, analysis=self.coordinated,
                   sandbox=sandbox if self.coordinated else None, key=key)  # fmt: skip

    def _check_deadline(self) -> None:
        total = (self.spec.get("timeouts") or {}).get("totalSeconds")
        if not total:
            return
        created = _parse_time(self.obj["metadata"]["creationTimestamp"])
        if _now() - created > timedelta(seconds=int(total)):
            raise _FailError("Timeout", f"the query took longer than {total} s (spec.timeouts)")

    async def _understand(self, answers: list[str], asked: list[dict[str, Any]]
                          ) -> Understood | None:  # fmt: skip
        pairs = [(str(a["field"]), text) for a, text in zip(asked, answers, strict=False)]
        if self.status.get("phase") is None:
            await self._set(names.PENDING, "Understanding", "stage 1: entities, time, metrics",
                            stage="input-validation")  # fmt: skip
        u: Understood = await self._work(lambda: self.ctx.pipeline.understand(
            self.spec["question"], user=self.spec["user"], as_of=reference_time(self.obj),
            answers=pairs))  # fmt: skip
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
        how = self._ask(answers)
        got = await self._work(lambda: self.ctx.pipeline.retrieve(
            self.spec["question"], user=self.spec["user"], as_of=reference_time(self.obj),
            answers=answers, ask=how))  # fmt: skip
        answer = got.answer
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
        table = _result_table(answer, got.table)
        uris = await asyncio.to_thread(self._put_answer, answer, table)
        drawn = await asyncio.to_thread(self._put_files, got.files)
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

    def _put_files(self, files: Sequence[tuple[str, bytes]]) -> list[str]:
        """What the coordinator made (its charts, the scripts that drew them, the tables they
        read), as the analyst returned it, into the bucket."""
        uris = []
        for rel, data in sorted(files)[:MAX_FILES]:
            parts = [p for p in rel.split("/") if p not in ("", ".", "..")]
            if not parts:
                continue
            kind = mimetypes.guess_type(parts[-1])[0] or "application/octet-stream"
            uris.append(self.ctx.bucket.put(self.prefix + "coordinator/" + "/".join(parts),
                                            data, kind))  # fmt: skip
        return uris

    async def _analyse(self) -> None:
        """The summary of the whole result (and the charts asked when the coordinator drew
        none), run by the analyst in the user's sandbox pod (gVisor, no network: its files move
        through the API server), owned by the query; what it wrote goes into the bucket here."""
        outputs: list[str] = list(self.status.get("analysis") or [])
        if self.status.get("phase") != names.ANALYSING:
            await self._set(names.ANALYSING, "AnalysisStarted", "the user's sandbox pod runs the "
                            "analysis", stage="analysis")  # fmt: skip
            pod = names.analysis_pod_name(self.name, self.uid)
            self._event("Analysing", f"sandbox pod {pod} (gVisor, no network) writes "
                                     f"{', '.join(outputs)}")  # fmt: skip
        table = await asyncio.to_thread(self._result_table_from_bucket)
        drawn = tuple(o.removesuffix(".png") for o in outputs if o.endswith(".png"))
        built = build_analysis(table, title=self.spec["question"], unit=self.status.get("unit"),
                               charts=drawn)  # fmt: skip
        if built is None:  # pragma: no cover - status.analysis says there is something
            raise _FailError("AnalysisFailed", "nothing to analyse in the result")
        asked = Analysis(scope=self._scope(), script=built.files[SCRIPT],
                         inputs={k: v for k, v in built.files.items() if k != SCRIPT},
                         outputs=tuple(outputs), key=f"{self.uid}/analysis")  # fmt: skip
        try:
            files = await self._work(lambda: self.ctx.pipeline.analyse(asked))
        except AnalystCallError as err:
            raise _FailError("AnalysisFailed", err.message) from None
        missing = [name for name in outputs if name not in files]
        if missing:
            raise _FailError("AnalysisFailed", f"the analysis wrote no {', '.join(missing)}")
        uris = await asyncio.to_thread(self._put_analysis, files, outputs)
        artifacts = list(dict.fromkeys([*(self.status.get("artifacts") or []), *uris]))
        await self._set(names.ANALYSING, "Analysed", f"{len(uris)} file(s) from the sandbox",
                        artifacts=artifacts, stage="analysis")  # fmt: skip
        self._event("Analysed", ", ".join(outputs))

    def _put_analysis(self, files: Mapping[str, bytes], outputs: Sequence[str]) -> list[str]:
        self.ctx.bucket.ensure()
        return [self.ctx.bucket.put(self.prefix + name, files[name],
                                    mimetypes.guess_type(name)[0] or "application/octet-stream")
                for name in outputs]  # fmt: skip

    def _result_table_from_bucket(self) -> str:
        """The full result (status holds only its head), as retrieval left it."""
        return self.ctx.bucket.get(self.prefix + RESULT).decode()


def _unit(answer: Mapping[str, Any]) -> str | None:
    results = answer.get("results") or [{}]
    unit = results[0].get("unit")
    return str(unit) if unit else None


def _result_table(answer: Mapping[str, Any], table: bytes | None) -> bytes | None:
    """The whole result as CSV: the inline rows, or the CSV file a large result was written
    to, which the analyst sent with the answer."""
    if answer.get("rows") is not None and answer.get("columns"):
        return result_csv(answer["columns"], answer["rows"]).encode()
    return table


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
    metrics.query_phase(obj["metadata"]["uid"], (obj.get("status") or {}).get("phase"))
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

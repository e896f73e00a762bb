"""Reading a pod's status: why it failed, whether it can still start; and what names a run."""

from __future__ import annotations

from oda_analyst.codeagent.limits import Limits
from oda_analyst.controller.pods import cannot_start, pod_message
from oda_analyst.pipeline.sandbox_pod import run_digest


def _waiting(reason: str) -> dict[str, object]:
    return {"status": {"phase": "Pending", "containerStatuses": [
        {"name": "sandbox", "image": "oda-analyst/sandbox:0.1.0",
         "state": {"waiting": {"reason": reason, "message": "pull access denied"}}}]}}  # fmt: skip


def test_a_pull_error_means_the_pod_will_not_start() -> None:
    assert cannot_start(_waiting("ImagePullBackOff")) == (
        "sandbox: ImagePullBackOff (pull access denied)"
    )
    assert cannot_start(_waiting("ContainerCreating")) is None
    assert cannot_start({"status": {"phase": "Pending"}}) is None


def test_the_failure_names_the_container_or_the_pods_reason() -> None:
    exited = {"status": {"phase": "Failed", "containerStatuses": [
        {"name": "sandbox", "state": {"terminated": {"exitCode": 0}}},
        {"name": "publish", "state": {"terminated": {"exitCode": 1,
                                                     "message": "error: HTTP 403"}}}]}}  # fmt: skip
    assert pod_message(exited) == "publish exited 1: error: HTTP 403"
    deadline = {
        "status": {
            "phase": "Failed",
            "reason": "DeadlineExceeded",
            "message": "Pod was active on the node longer than allowed",
        }
    }
    assert pod_message(deadline).startswith("DeadlineExceeded: Pod was active")


def test_a_run_is_named_by_its_script_inputs_and_limits() -> None:
    base = run_digest("print(1)", {"a.csv": b"1"}, Limits())
    assert base == run_digest("print(1)", {"a.csv": b"1"}, Limits())
    assert base != run_digest("print(2)", {"a.csv": b"1"}, Limits())
    assert base != run_digest("print(1)", {"a.csv": b"2"}, Limits())
    assert base != run_digest("print(1)", {"b.csv": b"1"}, Limits())
    assert base != run_digest("print(1)", {"a.csv": b"1"}, Limits(wall_s=5))

"""Backends without running them: the OCI spec, the bwrap command, the seccomp program,
the Kubernetes manifests, the choice of backend and the classification of outcomes."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from oda_analyst.codeagent import pyenv
from oda_analyst.codeagent.backends import bwrap, gvisor, seccomp, select
from oda_analyst.codeagent.backends import kubernetes as k8s
from oda_analyst.codeagent.backends.base import JOB, SITE, UID, Job
from oda_analyst.codeagent.backends.capture import Captured
from oda_analyst.codeagent.backends.ocispec import make_rootfs, spec
from oda_analyst.codeagent.limits import MIB, Limits
from oda_analyst.codeagent.pyenv import SandboxEnv
from oda_analyst.codeagent.runner import classify
from oda_analyst.errors import SandboxUnavailableError

LIMITS = Limits(
    wall_s=7, cpu_s=5, memory_bytes=300 * MIB, processes=20, open_files=40, file_bytes=3 * MIB
)


@pytest.fixture
def job(tmp_path: Path) -> Job:
    env = SandboxEnv(root=tmp_path / "env", base_prefix=Path("/opt/python3.11"))
    for d in ("job", "in", "out"):
        (tmp_path / d).mkdir()
    return Job(
        job_dir=tmp_path / "job",
        inputs=tmp_path / "in",
        outputs=tmp_path / "out",
        env=env,
        limits=LIMITS,
    )


def test_oci_spec_is_read_only_non_root_offline_and_limited(
    job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODA_SECRET_TOKEN", "s3cr3t")
    s = spec(job, cgroups=True)
    assert s["root"] == {"path": "rootfs", "readonly": True}
    proc = s["process"]
    assert proc["user"]["uid"] == UID and proc["noNewPrivileges"] is True
    assert all(v == [] for v in proc["capabilities"].values())
    assert not any("s3cr3t" in e or "ODA_SECRET" in e for e in proc["env"])
    assert {n["type"] for n in s["linux"]["namespaces"]} >= {"network", "pid", "mount"}
    mounts = {m["destination"]: m for m in s["mounts"]}
    assert "rw" in mounts["/out"]["options"] and "ro" in mounts["/in"]["options"]
    writable = {d for d, m in mounts.items() if "rw" in m.get("options", [])}
    assert writable == {"/out"}
    assert {"/usr", "/in", JOB, SITE, str(job.env.root), "/opt/python3.11"} <= set(mounts)
    rl = {r["type"]: (r["soft"], r["hard"]) for r in proc["rlimits"]}
    assert rl["RLIMIT_NPROC"] == (20, 20) and rl["RLIMIT_NOFILE"] == (40, 40)
    assert rl["RLIMIT_CPU"] == (5, 6) and rl["RLIMIT_FSIZE"] == (3 * MIB, 3 * MIB)
    assert s["linux"]["resources"]["memory"]["limit"] == 300 * MIB
    assert "resources" not in spec(job, cgroups=False)["linux"]


def test_rootfs_holds_only_mount_points(job: Job, tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    make_rootfs(root, job)
    files = [p for p in root.rglob("*") if p.is_file()]
    assert files == []
    assert (root / "bin").readlink() == Path("usr/bin")


def test_bwrap_argv_binds_only_what_it_must(job: Job) -> None:
    argv = bwrap.argv(job, seccomp_fd=9)
    assert argv[:2] == ["bwrap", "--unshare-all"]
    for flag in ("--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert argv[argv.index("--seccomp") + 1] == "9"
    pairs = [
        (a, argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a in ("--bind", "--ro-bind")
    ]
    assert [p for p in pairs if p[0] == "--bind"] == [("--bind", str(job.outputs), "/out")]
    assert ("--ro-bind", str(job.inputs), "/in") in pairs
    assert argv[argv.index("--") + 1 :] == [str(job.env.python), f"{JOB}/main.py"]


def test_seccomp_program_is_well_formed_and_denies_what_it_says() -> None:
    prog = seccomp.program()
    assert len(prog) % 8 == 0 and len(prog) // 8 < 4096
    ins = [struct.unpack("<HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    assert ins[0] == (seccomp.LD_ABS_W, 0, 0, seccomp.ARCH_OFFSET)
    assert ins[-1] == (seccomp.RET_K, 0, 0, seccomp.RET_ALLOW)
    compared = {k for code, _, _, k in ins if code == seccomp.JEQ_K}
    for name in ("ptrace", "mount", "unshare", "setns", "bpf", "keyctl", "kexec_load"):
        assert seccomp.DENIED[name] in compared
    # Every jump lands inside the program.
    for i, (code, jt, jf, _) in enumerate(ins):
        if code in (seccomp.JEQ_K, seccomp.JGE_K, seccomp.JSET_K):
            assert i + 1 + max(jt, jf) < len(ins)


def test_auto_refuses_without_any_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gvisor.GVisorBackend, "unavailable_reason", lambda self: "no runsc")
    monkeypatch.setattr(bwrap.BwrapBackend, "unavailable_reason", lambda self: "no bwrap")
    with pytest.raises(SandboxUnavailableError) as err:
        select.choose("auto")
    assert "no runsc" in err.value.message and "no bwrap" in err.value.message
    assert err.value.hint is not None and "bubblewrap" in err.value.hint


def test_auto_falls_back_to_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gvisor.GVisorBackend, "unavailable_reason", lambda self: "not root")
    monkeypatch.setattr(bwrap.BwrapBackend, "unavailable_reason", lambda self: None)
    assert select.choose("auto").name == "bwrap"
    with pytest.raises(SandboxUnavailableError, match="not root"):
        select.choose("gvisor")


@pytest.mark.parametrize(
    ("cap", "status"),
    [
        (Captured(0, "", "", 1.0), "ok"),
        (Captured(1, "", "Traceback", 1.0), "error"),
        (Captured(-9, "", "", 7.0, timed_out=True), "timeout"),
        (Captured(-9, "x" * 10, "", 1.0, output_exceeded=True), "killed"),
        (Captured(137, "", "", 1.0), "killed"),
        (Captured(128 + 24, "", "", 5.0), "killed"),
        (Captured(2, "", "", 1.0, sandbox_crashed=True), "killed"),
    ],
)
def test_outcomes_are_classified(cap: Captured, status: str) -> None:
    got, note = classify(cap, LIMITS)
    assert got == status
    assert (note is None) == (status in ("ok", "error"))


def test_kubernetes_pod_is_gvisor_non_root_read_only_and_fenced() -> None:
    policy, pod = k8s.get_manifests(
        "alice@example.org", namespace="oda", image="sandbox:1", limits=LIMITS
    )
    spec_ = pod["spec"]
    assert spec_["runtimeClassName"] == "gvisor"
    assert spec_["automountServiceAccountToken"] is False and spec_["hostNetwork"] is False
    (container,) = spec_["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] and sc["runAsNonRoot"] and sc["runAsUser"] == UID
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["allowPrivilegeEscalation"] is False
    assert container["resources"]["limits"]["memory"] == "300Mi"
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/in"]["readOnly"] is True and not mounts["/out"].get("readOnly")
    # Label values must be valid: the raw name (with '@') only in an annotation.
    label = pod["metadata"]["labels"][k8s.USER_LABEL]
    assert label.startswith("u-") and len(label) <= 63 and "@" not in label
    assert pod["metadata"]["annotations"][k8s.USER_ANNOTATION] == "alice@example.org"
    assert policy["spec"]["podSelector"]["matchLabels"] == {k8s.USER_LABEL: label}
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["ingress"] == [] and policy["spec"]["egress"] == []
    other = k8s.get_sandbox_pod("bob", namespace="oda", image="sandbox:1")
    assert other["metadata"]["name"] != pod["metadata"]["name"]


def test_a_missing_sandbox_environment_says_how_to_build_it(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailableError) as err:
        pyenv.locate(tmp_path)
    assert str(tmp_path / "sandbox-env" / pyenv.env_key()) in err.value.message
    assert err.value.hint is not None and "pyenv build" in err.value.hint
    assert "pandas==" in pyenv.requirements_text() and "statsmodels==" in pyenv.requirements_text()

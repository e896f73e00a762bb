"""The static auditor: an AST pass that refuses high-risk code before it runs.

High risk (refused): other programs and shells, sockets and network clients, native code
(ctypes, cffi), process control (fork, exec*, kill, setuid), dynamic code (eval, exec, compile,
``__import__``, importlib), unpickling, introspection escapes (``__subclasses__``,
``__globals__``, …) and files named outside ``/in``, ``/out`` and ``/tmp``. Medium risk (warned,
then run): dynamic attribute access, files whose path is computed, deleting files, signals and
threads of processes. Each finding says what to do instead, so a model can fix its code.

The auditor is the first line, not the boundary: whatever it misses still runs in the sandbox.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from oda_analyst.codeagent.result import Finding

_NO_PROGRAMS = "the sandbox runs Python only: compute it with pandas/numpy instead"
_NO_NETWORK = "the sandbox has no network: use the files uploaded to /in"
_NO_NATIVE = "native code is not allowed: use numpy/pandas/scipy"
_NO_DYNAMIC = "write the code out directly instead of building it at run time"
_NO_PICKLE = "unpickling can run arbitrary code: read CSV, Parquet, JSON or Excel instead"

HIGH_IMPORTS: dict[str, str] = {
    "subprocess": _NO_PROGRAMS,
    "pty": _NO_PROGRAMS,
    "pexpect": _NO_PROGRAMS,
    "sh": _NO_PROGRAMS,
    "socket": _NO_NETWORK,
    "ssl": _NO_NETWORK,
    "socketserver": _NO_NETWORK,
    "http": _NO_NETWORK,
    "urllib.request": _NO_NETWORK,
    "ftplib": _NO_NETWORK,
    "smtplib": _NO_NETWORK,
    "telnetlib": _NO_NETWORK,
    "poplib": _NO_NETWORK,
    "imaplib": _NO_NETWORK,
    "xmlrpc": _NO_NETWORK,
    "requests": _NO_NETWORK,
    "httpx": _NO_NETWORK,
    "aiohttp": _NO_NETWORK,
    "urllib3": _NO_NETWORK,
    "paramiko": _NO_NETWORK,
    "websocket": _NO_NETWORK,
    "websockets": _NO_NETWORK,
    "asyncio": _NO_NETWORK,
    "ctypes": _NO_NATIVE,
    "cffi": _NO_NATIVE,
    "mmap": _NO_NATIVE,
    "importlib": _NO_DYNAMIC,
    "imp": _NO_DYNAMIC,
    "runpy": _NO_DYNAMIC,
    "code": _NO_DYNAMIC,
    "codeop": _NO_DYNAMIC,
    "marshal": _NO_PICKLE,
    "pickle": _NO_PICKLE,
    "shelve": _NO_PICKLE,
    "dill": _NO_PICKLE,
    "cloudpickle": _NO_PICKLE,
    "joblib": _NO_PICKLE,
    "multiprocessing": "one process is enough: vectorise with numpy/pandas",
}
MEDIUM_IMPORTS: dict[str, str] = {
    "signal": "signals are not needed for analysis",
    "resource": "limits are set by the sandbox",
    "threading": "threads add nothing here: vectorise with numpy/pandas",
    "shutil": "only write new files to /out",
    "fcntl": "file locking is not needed",
}

# Read-only corners of otherwise refused packages.
SAFE_SUBMODULES = ("importlib.metadata", "importlib.resources", "http.HTTPStatus")
HIGH_CALLS: dict[str, str] = {
    **{
        f"os.{n}": _NO_PROGRAMS
        for n in (
            "system",
            "popen",
            "execv",
            "execve",
            "execl",
            "execle",
            "execlp",
            "execlpe",
            "execvp",
            "execvpe",
            "spawnl",
            "spawnle",
            "spawnlp",
            "spawnv",
            "spawnve",
            "spawnvp",
            "spawnvpe",
            "posix_spawn",
            "posix_spawnp",
            "fork",
            "forkpty",
            "startfile",
        )
    },
    **{
        f"os.{n}": "processes outside the script are not yours to touch"
        for n in (
            "kill",
            "killpg",
            "setuid",
            "setgid",
            "seteuid",
            "setegid",
            "setreuid",
            "setresuid",
            "chroot",
            "setsid",
            "pidfd_open",
            "tcsetpgrp",
        )
    },
    "eval": _NO_DYNAMIC,
    "exec": _NO_DYNAMIC,
    "compile": _NO_DYNAMIC,
    "__import__": _NO_DYNAMIC,
    "breakpoint": "there is no debugger in the sandbox",
    "pickle.load": _NO_PICKLE,
    "pickle.loads": _NO_PICKLE,
    "marshal.loads": _NO_PICKLE,
    "pd.read_pickle": _NO_PICKLE,
    "pandas.read_pickle": _NO_PICKLE,
}
MEDIUM_CALLS: dict[str, str] = {
    "getattr": "dynamic attribute access: name the attribute directly",
    "setattr": "dynamic attribute access: name the attribute directly",
    "globals": "read variables directly",
    "vars": "read variables directly",
    "os.remove": "only write new files to /out",
    "os.unlink": "only write new files to /out",
    "os.rmdir": "only write new files to /out",
    "os.chmod": "permissions are fixed by the sandbox",
    "input": "there is no terminal: read the inputs from /in",
}
ESCAPE_ATTRIBUTES = frozenset(
    {
        "__subclasses__",
        "__globals__",
        "__builtins__",
        "__code__",
        "__closure__",
        "__mro__",
        "__bases__",
        "__base__",
        "__loader__",
        "__spec__",
        "__getattribute__",
        "__reduce__",
        "__reduce_ex__",
        "f_globals",
        "f_locals",
        "f_back",
        "f_builtins",
        "gi_frame",
        "cr_frame",
        "tb_frame",
        "co_code",
        "func_globals",
    }
)
# Calls whose first argument is a path: a literal one must lie in /in, /out or /tmp.
PATH_CALLS = frozenset(
    {
        "open",
        "Path",
        "io.open",
        "os.open",
        "os.listdir",
        "os.scandir",
        "os.walk",
        "glob.glob",
        "np.load",
        "np.loadtxt",
        "np.genfromtxt",
        "numpy.load",
        "os.stat",
        "os.readlink",
        "os.symlink",
        "os.link",
    }
)
ALLOWED_ROOTS = ("/in", "/out", "/tmp")


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _allowed_path(text: str) -> bool:
    if ".." in text.replace("\\", "/").split("/"):
        return False
    if not text.startswith("/"):
        return True  # relative: under the working folder, /tmp
    return any(text == r or text.startswith(r + "/") for r in ALLOWED_ROOTS)


def _path_call(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return name in PATH_CALLS or last.startswith(("read_", "to_")) or last == "savefig"


class _Visitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}

    def add(self, node: ast.AST, severity: str, rule: str, message: str) -> None:
        line, col = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
        self.findings.append(
            Finding(
                severity=severity,
                line=line,
                col=col + 1,
                rule=rule,
                message=f"line {line}: {message}",
            )
        )

    def _module(self, node: ast.AST, module: str) -> None:
        if module.startswith(SAFE_SUBMODULES):
            return
        for table, severity in ((HIGH_IMPORTS, "high"), (MEDIUM_IMPORTS, "medium")):
            parts = module.split(".")
            for i in range(len(parts), 0, -1):
                prefix = ".".join(parts[:i])
                if prefix in table:
                    verb = "is not allowed" if severity == "high" else "is risky"
                    self.add(
                        node, severity, "import", f"import of {module!r} {verb}: {table[prefix]}"
                    )
                    return

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(node, alias.name)
            self.aliases[alias.asname or alias.name.split(".")[0]] = (
                alias.name if alias.asname else alias.name.split(".")[0]
            )
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.add(
                node,
                "high",
                "import",
                "relative imports are not allowed: import installed libraries by name",
            )
        self._module(node, module)
        for alias in node.names:
            full = f"{module}.{alias.name}"
            self._module(node, full)
            self.aliases[alias.asname or alias.name] = full
        self.generic_visit(node)

    def _resolve(self, name: str) -> str:
        head, _, rest = name.partition(".")
        base = self.aliases.get(head, head)
        return f"{base}.{rest}" if rest else base

    def visit_Call(self, node: ast.Call) -> None:
        raw = _dotted(node.func)
        if raw is not None:
            name = self._resolve(raw)
            for candidate in (name, raw):
                shown = f"{raw}()" if candidate == raw else f"{raw}() ({candidate})"
                if candidate in HIGH_CALLS:
                    self.add(
                        node, "high", "call", f"{shown} is not allowed: {HIGH_CALLS[candidate]}"
                    )
                    break
                if candidate in MEDIUM_CALLS:
                    self.add(node, "medium", "call", f"{shown} is risky: {MEDIUM_CALLS[candidate]}")
                    break
            if raw == "getattr" and len(node.args) > 1:
                attr = node.args[1]
                if isinstance(attr, ast.Constant) and attr.value in ESCAPE_ATTRIBUTES:
                    self.add(
                        node,
                        "high",
                        "attribute",
                        f"getattr(..., {attr.value!r}) reaches interpreter internals: not allowed",
                    )
            if _path_call(raw) or _path_call(name):
                self._check_path(node, raw)
            if name.endswith("load") and any(
                k.arg == "allow_pickle" and isinstance(k.value, ast.Constant) and k.value.value
                for k in node.keywords
            ):
                self.add(node, "high", "call", f"{raw}(allow_pickle=True) unpickles: {_NO_PICKLE}")
        self.generic_visit(node)

    def _check_path(self, node: ast.Call, raw: str) -> None:
        arg = node.args[0] if node.args else None
        if arg is None:
            return
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            if not _allowed_path(arg.value):
                self.add(
                    node,
                    "high",
                    "open",
                    f"{raw}({arg.value!r}) is outside /in, /out and "
                    "/tmp: read uploads from /in/<name>, write results to /out/<name>",
                )
        elif raw in ("open", "os.open") and not isinstance(arg, ast.JoinedStr | ast.BinOp):
            self.add(
                node,
                "medium",
                "open",
                f"{raw}() of a computed path: only /in, /out and "
                "/tmp exist, so keep paths under them",
            )

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in ESCAPE_ATTRIBUTES:
            self.add(
                node,
                "high",
                "attribute",
                f"'.{node.attr}' reaches interpreter internals: not allowed in analysis code",
            )
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in ("__builtins__", "__loader__", "__spec__"):
            self.add(node, "high", "builtin", f"'{node.id}' is not allowed in analysis code")
        self.generic_visit(node)


def audit(source: str) -> list[Finding]:
    """The findings on ``source``, in line order; a syntax error is one high finding."""
    try:
        tree = ast.parse(source, filename="main.py")
    except SyntaxError as err:
        line = err.lineno or 0
        return [
            Finding(
                severity="high",
                line=line,
                col=err.offset or 0,
                rule="syntax",
                message=f"line {line}: syntax error: {err.msg}; fix it and resend",
            )
        ]
    visitor = _Visitor()
    visitor.visit(tree)
    return sorted(visitor.findings, key=lambda f: (f.line, f.col))


def blocking(findings: Iterable[Finding]) -> list[Finding]:
    """The findings that refuse execution."""
    return [f for f in findings if f.severity == "high"]

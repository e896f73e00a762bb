"""The static auditor: what it refuses, what it only warns about, what it lets through."""

from __future__ import annotations

import pytest

from oda_analyst.codeagent import recipes
from oda_analyst.codeagent.auditor import audit, blocking

REFUSED = {
    "import subprocess": "subprocess",
    "from subprocess import run": "subprocess",
    "import socket": "socket",
    "import urllib.request": "urllib.request",
    "from http.client import HTTPConnection": "http",
    "import requests": "requests",
    "import ctypes": "ctypes",
    "import importlib\nimportlib.import_module('os')": "importlib",
    "__import__('subprocess')": "__import__",
    "import os\nos.system('id')": "os.system",
    "import os as o\no.execv('/bin/sh', ['sh'])": "os.execv",
    "from os import fork\nfork()": "os.fork",
    "import os\nos.kill(1, 9)": "os.kill",
    "eval('1+1')": "eval",
    "exec('x=1')": "exec",
    "compile('1', 'f', 'eval')": "compile",
    "import pickle\npickle.loads(b'')": "pickle",
    "import marshal": "marshal",
    "import pandas as pd\npd.read_pickle('/in/x.pkl')": "pd.read_pickle",
    "import numpy as np\nnp.load('/in/x.npy', allow_pickle=True)": "allow_pickle",
    "open('/etc/shadow').read()": "/etc/shadow",
    "open('/in/../etc/passwd')": "../etc/passwd",
    "import pandas as pd\npd.read_csv('/work/data/lake.csv')": "/work/data",
    "from pathlib import Path\nPath('/root/.ssh/id_rsa').read_text()": "/root/.ssh",
    "().__class__.__bases__[0].__subclasses__()": "__subclasses__",
    "f = lambda: 0\nf.__globals__['os']": "__globals__",
    "getattr(object, '__subclasses__')": "__subclasses__",
    "x = __builtins__": "__builtins__",
    "def f(:\n  pass": "syntax error",
}


@pytest.mark.parametrize("source", list(REFUSED))
def test_high_risk_code_is_refused_with_a_line_and_an_alternative(source: str) -> None:
    findings = blocking(audit(source))
    assert findings, f"not refused: {source!r}"
    text = " ".join(f.message for f in findings)
    assert REFUSED[source] in text
    assert all(f.message.startswith(f"line {f.line}: ") and f.line >= 1 for f in findings)


WARNED = {
    "import os\nos.remove('/out/x.png')": "os.remove",
    "name = 'x'\nopen(name)": "computed path",
    "import threading": "threading",
    "getattr(object, 'mro')": "getattr",
}


@pytest.mark.parametrize("source", list(WARNED))
def test_medium_risk_code_warns_but_runs(source: str) -> None:
    findings = audit(source)
    assert findings and not blocking(findings)
    assert WARNED[source] in " ".join(f.message for f in findings)
    assert {f.severity for f in findings} == {"medium"}


CLEAN = [
    "import pandas as pd\ndf = pd.read_csv('/in/data.csv')\ndf.describe().to_csv('/out/s.csv')",
    "import numpy as np, matplotlib.pyplot as plt\nplt.plot(np.arange(3))\n"
    "plt.savefig('/out/p.png')",
    "import os\nprint(os.path.join('/in', 'x.csv'), os.listdir('/in'))",
    "import urllib.parse\nprint(urllib.parse.quote('a b'))",
    "import json, math, statistics, datetime, scipy.stats, sklearn.linear_model, seaborn",
    "open('/tmp/scratch.txt', 'w').write('x')\nopen('relative.txt', 'w')",
    "title = '/etc/shadow is only a string here'\nprint(title)",
]


@pytest.mark.parametrize("source", CLEAN)
def test_ordinary_analysis_code_passes(source: str) -> None:
    assert audit(source) == []


@pytest.mark.parametrize("kind", sorted(recipes.KINDS))
def test_every_recipe_passes_the_auditor(kind: str) -> None:
    assert audit(recipes.script(kind, data="d.csv", title="T")) == []

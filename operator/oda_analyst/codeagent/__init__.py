"""The Deep Code Agent (paper §III-B c): analysis and plotting code run in per-user sandboxes.

Code arrives as text, passes the static auditor (``auditor``), then runs in a sandbox backend
(``backends``: gVisor's ``runsc``, bubblewrap, or a Kubernetes pod manifest) with only two folders
mounted, ``/in`` (read-only) and ``/out`` (read-write), no network and resource limits. The
sandbox's Python environment (``pyenv``) carries pandas, numpy, matplotlib, scipy, scikit-learn,
seaborn, statsmodels and openpyxl. Data arrives as uploaded files: this package never imports the
lake, the VKG or SPARQL (import-linter keeps it so).
"""

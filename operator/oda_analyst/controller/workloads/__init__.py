"""What the operator's pods run: ``python -m oda_analyst.controller.workloads.<name>``."""

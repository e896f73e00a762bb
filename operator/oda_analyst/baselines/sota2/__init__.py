"""SoTA#2, the Datalake Query Tool (see ``tool``, ``planner`` and ``datalake``)."""

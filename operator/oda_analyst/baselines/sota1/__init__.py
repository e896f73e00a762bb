"""SoTA#1, the EXASAGE Query Tool (see ``tool``, ``extract`` and ``archetypes``)."""

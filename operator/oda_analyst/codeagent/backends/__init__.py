"""Sandbox backends behind one interface (``base.Backend``); ``select.choose`` picks one."""

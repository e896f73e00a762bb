"""sparql."""

"""Thin adapters, one per outside thing; each is the only importer of its library."""

"""Checks of the whole project: imports, compiled modules, errors by kind, docs, compose stack."""

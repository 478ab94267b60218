"""Pytest plugin: the backend conformance suite's options and fixtures."""

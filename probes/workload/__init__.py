"""Prompt sources and request bodies."""

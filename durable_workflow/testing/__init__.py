"""Helpers for testing code that uses durable workflows."""

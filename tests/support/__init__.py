"""Helpers the test modules share: real ``manage.py`` processes (``process``) and scratch
databases (``database``). Fixtures live in tests/conftest.py; these are plain functions."""

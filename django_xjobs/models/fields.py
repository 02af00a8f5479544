"""The two field classes of the tables. A migration names ``PgArrayField`` by its public path,
``django_xjobs.models.PgArrayField`` (its ``deconstruct()`` says so, wherever it is defined), and
``StoredJSONField`` as Django's ``JSONField``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db import models

if TYPE_CHECKING:  # Django's Field takes no type arguments at run time; django-stubs' does
    from django.db.backends.base.schema import BaseDatabaseSchemaEditor
    from django.db.backends.ddl_references import Statement

    _Field = models.Field[Any, Any]
else:
    _Field = models.Field


class PgArrayField(_Field):
    """A PostgreSQL array of one element type (``bigint[]``, ``timestamptz[]``), read and written
    as a Python list by psycopg itself.

    Not ``django.contrib.postgres``'s ``ArrayField``: since Django 6.1 that one fails the system
    checks (postgres.E005) unless ``django.contrib.postgres`` is in ``INSTALLED_APPS``, and this app
    asks its users for one entry there, not two. The column is the same one, so the migration
    that swapped them changes nothing in the database. Served by raw SQL and read-only pages:
    no lookups, no form field beyond the default."""

    def __init__(self, base_field: _Field, **kwargs: Any) -> None:
        self.base_field = base_field
        super().__init__(**kwargs)

    def deconstruct(self) -> Any:
        name, _, args, kwargs = super().deconstruct()
        kwargs["base_field"] = self.base_field.clone()
        return name, "django_xjobs.models.PgArrayField", args, kwargs

    def db_type(self, connection: Any) -> str:
        return f"{self.base_field.db_type(connection)}[]"

    def get_prep_value(self, value: Any) -> Any:
        return None if value is None else list(value)

    def from_db_value(self, value: object, expression: object, connection: object) -> Any:
        return value


class StoredJSONField(models.JSONField):
    """A ``JSONField`` whose read of a value this process cannot decode (nested past the
    recursion limit: written by another version or by SQL) gives a short marker instead of
    failing the whole query, so the admin and ``inspect_job`` still show the row (issue 24).
    Stored exactly as a ``JSONField``; migrations see one."""

    UNDECODABLE = "(undecodable)"

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        try:
            return super().from_db_value(value, expression, connection)
        except RecursionError:
            return {self.UNDECODABLE: "the stored value is nested too deeply to decode"}

    def deconstruct(self) -> Any:
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


class GinIndex(models.Index):
    """A GIN index (``x_jobs_input_idx``: an input's containment, issue 45). Not
    ``django.contrib.postgres``'s ``GinIndex``, for ``PgArrayField``'s reason: the app asks its
    users for one entry in ``INSTALLED_APPS``. A migration names it by its public path,
    ``django_xjobs.models.GinIndex``."""

    def deconstruct(self) -> tuple[str, Sequence[object], dict[str, object]]:
        _, args, kwargs = super().deconstruct()
        return "django_xjobs.models.GinIndex", args, kwargs

    def create_sql(
        self,
        model: type[models.Model],
        schema_editor: BaseDatabaseSchemaEditor,
        using: str = "",
        **kwargs: bool,
    ) -> Statement:
        return super().create_sql(model, schema_editor, using=" USING gin", **kwargs)

"""The declarative base and the column shapes every table shares (ids, locations,
created and updated times, unique names)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import BigInteger, CheckConstraint, Identity, String, Text, func
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from sustain.service.ticks.locations import DEFAULT_LOCATION


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: TIMESTAMP(timezone=True), dict[str, Any]: JSONB,
    }


def id_column() -> Mapped[int]:
    """A bigint identity primary key."""
    return mapped_column(BigInteger, Identity(), primary_key=True)


def location_column(*, primary_key: bool = False) -> Mapped[str]:
    """Where something measures or was measured from (DEFAULT_LOCATION unless set)."""
    return mapped_column(Text, server_default=DEFAULT_LOCATION, primary_key=primary_key)


def location_check() -> CheckConstraint:
    """A location is a DNS label: lower-case letters, digits and inner hyphens."""
    return CheckConstraint("location ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'",
                           name="location_name")


def created_column() -> Mapped[datetime]:
    """When the row was inserted (the database's clock)."""
    return mapped_column(server_default=func.now())


def updated_column() -> Mapped[datetime]:
    """When the row was last changed through the ORM (the database's clock)."""
    return mapped_column(server_default=func.now(), onupdate=func.now())


class NamedResource:
    """Mixin of resources addressed by id and by a unique name (endpoints, probes)."""

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    managed_by: Mapped[str | None] = mapped_column(Text)
    """The config file that owns this object (REST writes to it answer 409); None when it
    was created over REST."""

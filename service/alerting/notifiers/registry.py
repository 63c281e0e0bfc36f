"""The one map from a notifier's kind to the object that knows it (see base.NotifierKind).
The API's and the config file's notifier body is built from it (a union discriminated by
`kind`), a PATCH is checked by it, and the delivery worker asks it for each notifier's
request; nothing else tells the kinds apart, and the database stores any kind it names."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Union, get_args

from pydantic import Discriminator, ValidationError

from sustain.service.alerting.notifiers.base import MAX_KIND_CHARS, NotifierKind
from sustain.service.errors import FieldError


class Registry:
    """Notifier kinds by name, in the order registered (the order the API documents)."""

    def __init__(self, kinds: Iterable[NotifierKind] = ()) -> None:
        self._kinds: dict[str, NotifierKind] = {}
        for kind in kinds:
            self.register(kind)

    def register(self, kind: NotifierKind) -> None:
        """Add `kind`; ValueError when its name is taken, too long to store, or not the one
        its spec's `kind` field accepts."""
        if kind.name in self._kinds:
            raise ValueError(f"notifier kind {kind.name!r} is registered already")
        if not 0 < len(kind.name) <= MAX_KIND_CHARS:
            raise ValueError(f"notifier kind {kind.name!r}: 1 to {MAX_KIND_CHARS} characters")
        if get_args(kind.spec.model_fields["kind"].annotation) != (kind.name,):
            raise ValueError(f"notifier kind {kind.name!r}: its spec's kind must be "
                             f"Literal[{kind.name!r}]")
        self._kinds[kind.name] = kind

    def unregister(self, name: str) -> None:
        """Remove a kind (a test's own kind, once the test is done)."""
        del self._kinds[name]

    def __contains__(self, name: object) -> bool:
        return name in self._kinds

    def of(self, name: str) -> NotifierKind:
        """The kind named `name`; KeyError when none is registered (a stored notifier of a
        kind this build does not know)."""
        return self._kinds[name]

    def names(self) -> tuple[str, ...]:
        return tuple(self._kinds)

    def resending(self) -> tuple[str, ...]:
        """The kinds whose firing alerts are re-sent every period."""
        return tuple(name for name, kind in self._kinds.items() if kind.resends)

    def create_type(self) -> Any:
        """The body that creates a notifier of any registered kind: the union of their specs,
        told apart by `kind` (an unknown kind is a 422 naming `kind` and the kinds known).
        Built once the kinds are registered; a kind registered later is in the next one."""
        specs = tuple(kind.spec for kind in self._kinds.values())
        if len(specs) == 1:
            return specs[0]
        return Annotated[Union[specs], Discriminator("kind")]  # noqa: UP007 - built at run time

    def check_merged(self, kind: str, values: Mapping[str, object]) -> None:
        """FieldError naming each field a notifier's stored columns merged with a PATCH's
        leave invalid for its kind: the kind's spec checks them, as it checked the create."""
        given = {k: v for k, v in values.items() if v is not None and k != "kind"}
        try:
            self.of(kind).spec.model_validate({**given, "kind": kind})
        except ValidationError as exc:
            raise FieldError.of([_problem(error) for error in exc.errors()]) from None


def _problem(error: Any) -> tuple[str, str]:
    """(field, message) of one pydantic error of a spec validated on its own."""
    field = ".".join(str(p) for p in error.get("loc", ()))
    ctx_field = (error.get("ctx") or {}).get("field")
    if ctx_field:
        field = f"{field}.{ctx_field}" if field else str(ctx_field)
    return field or "body", str(error.get("msg", "invalid")).removeprefix("Value error, ")

"""ORM models (docs/operations.md, Storage), one module per concept; every name is
re-exported here, so `from sustain.service.db.models import X` finds each and importing
this package registers every table on `Base.metadata` (Alembic's target). The schema
only changes through Alembic revisions."""

from sustain.service.db.models.access import (
    ApiKey,
    AuditEntry,
    WebSession,
)
from sustain.service.db.models.alerting import (
    DELIVERY_STATES,
    AlertEvent,
    AlertRow,
    Delivery,
    Notification,
    Notifier,
    Silence,
    Slo,
    SloRunCount,
)
from sustain.service.db.models.base import (
    Base,
    NamedResource,
)
from sustain.service.db.models.endpoints import (
    Endpoint,
    Probe,
)
from sustain.service.db.models.replicas import (
    AgentUploadPart,
    Replica,
)
from sustain.service.db.models.runs import (
    DEAD_LETTER_KINDS,
    FINAL_RUN_STATUSES,
    RUN_STATUSES,
    RUN_TRIGGERS,
    DeadLetter,
    DriftFinding,
    Rollup,
    RollupSketch,
    Run,
    RunServerSeries,
    SampleBlock,
    SampleRow,
    SketchColumns,
)

__all__ = [
    "DEAD_LETTER_KINDS",
    "DELIVERY_STATES",
    "FINAL_RUN_STATUSES",
    "RUN_STATUSES",
    "RUN_TRIGGERS",
    "AgentUploadPart",
    "AlertEvent",
    "AlertRow",
    "ApiKey",
    "AuditEntry",
    "Base",
    "DeadLetter",
    "Delivery",
    "DriftFinding",
    "Endpoint",
    "NamedResource",
    "Notification",
    "Notifier",
    "Probe",
    "Replica",
    "Rollup",
    "RollupSketch",
    "Run",
    "RunServerSeries",
    "SampleBlock",
    "SampleRow",
    "Silence",
    "SketchColumns",
    "Slo",
    "SloRunCount",
    "WebSession",
]

"""SLO arithmetic, burn-rate tiers, the alert state machine and drift detection: pure
functions over plain data, no database or network."""

"""`sustain agent`: measuring a location's probes where the database cannot be reached, with
nothing but HTTPS to the service (outbound only)."""

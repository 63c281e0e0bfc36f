"""Who may call the service, as plain values and pure functions: API keys and roles, failed
sign-ins and their audit sampling, the Host names a request may name, cross-site form posts,
and whether a bind address exposes anonymous reads. No I/O; the API, the pages, the settings,
the database and the commands above all import it."""

"""Logging setup with secret redaction (:mod:`.logging`) and the metrics/probe HTTP endpoint
(:mod:`.metrics_server`), shared by the controller and the listener processes."""

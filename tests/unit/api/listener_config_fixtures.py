"""A listener config.json exactly as ARC's AutoscalingListener controller writes it, for the tests that read one."""

from __future__ import annotations

TOKEN = "ghp_s3cr3tTOKENvalue"
PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIsecret\n-----END RSA PRIVATE KEY-----\n"

# Exactly what ARC's AutoscalingListener controller writes for a PAT, byte for byte.
ARC_WRITTEN_PAT_CONFIG = (
    '{"configure_url":"https://github.com/my-org","vault_type":"","vault_lookup_key":"","github_app_id":"",'
    '"github_app_installation_id":0,"github_app_private_key":"","github_token":"' + TOKEN + '",'
    '"ephemeral_runner_set_namespace":"arc-runners","ephemeral_runner_set_name":"arc-runners",'
    '"max_runners":10,"min_runners":1,"runner_scale_set_id":7,"runner_scale_set_name":"arc-runners",'
    '"server_root_ca":"","log_level":"debug","log_format":"text","metrics_addr":":8080",'
    '"metrics_endpoint":"/metrics","metrics":null}'
)

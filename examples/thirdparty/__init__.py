"""Stand-ins for third-party packages an MLIP depends on (distcheck cannot edit their code)."""

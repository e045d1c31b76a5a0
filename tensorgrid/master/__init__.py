"""The master: cluster state, sessions, planning and step driving (no network code)."""
